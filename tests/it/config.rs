//! Settings resolved once from flags, the environment and the configuration file, in child processes: the file's
//! values take effect in a real command, a flag and an environment variable beat the file, and a bad file is a
//! usage error (exit 2) naming the file and the key. Then the renamed flags: the new names work without a warning,
//! the old ones still work and warn, and `bench bfcl --help` lists only its own flags.

use std::process::Output;

use serde_json::Value;

use crate::common::runs::{shell_tool, Scratch};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `tandem ARGS` with these environment variables set (no TANDEM_CONFIG from the test's own environment).
fn tandem_with(scratch: &Scratch, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = scratch.command(args);
    command.env_remove("TANDEM_CONFIG").env_remove("TANDEM_PLANS").env_remove("TANDEM_EVALUATE");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("run tandem")
}

/// `tandem ARGS` whose stdout is JSON.
fn json_of(scratch: &Scratch, args: &[&str], env: &[(&str, &str)]) -> Value {
    let output = tandem_with(scratch, args, env);
    assert!(output.status.success(), "tandem {args:?} failed: {}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(&output)))
}

/// The setting `key` of a `config show --json` report.
fn setting<'a>(report: &'a Value, key: &str) -> &'a Value {
    report["settings"].as_array().unwrap().iter().find(|s| s["key"] == key).unwrap_or_else(|| panic!("no {key}"))
}

#[test]
fn config_show_reports_the_file_env_and_default_sources() {
    let scratch = Scratch::new();
    let file = scratch.write("team.toml", "planner = \"team-planner\"\nthreads = 3\nplans = 2\n[serve]\nport = 9001\n");
    let path = file.to_str().unwrap();
    let report = json_of(&scratch, &["--config", path, "config", "show", "--json"], &[("TANDEM_PLANS", "4")]);
    assert_eq!(report["config_file"], path);
    let planner = setting(&report, "planner");
    assert_eq!((planner["value"].as_str(), planner["source"].as_str()), (Some("team-planner"), Some("config")));
    assert_eq!(planner["origin"], path);
    assert_eq!(setting(&report, "threads")["value"], "3");
    assert_eq!(setting(&report, "serve.port")["value"], "9001");
    // The environment beats the file.
    let plans = setting(&report, "plans");
    assert_eq!((plans["value"].as_str(), plans["source"].as_str()), (Some("4"), Some("env")), "{plans}");
    assert_eq!(plans["origin"], "TANDEM_PLANS");
    let steps = setting(&report, "max_steps");
    assert_eq!((steps["value"].as_str(), steps["source"].as_str()), (Some("24"), Some("default")));
    // The text report names the same sources.
    let text = stdout(&tandem_with(&scratch, &["--config", path, "config", "show"], &[]));
    assert!(text.contains("planner = team-planner") && text.contains(&format!("# config file {path}")), "{text}");
    assert!(text.contains("max_steps = 24") && text.contains("# default"), "{text}");
}

#[test]
fn a_flag_beats_the_file_for_the_command_it_is_given_to() {
    let scratch = Scratch::new();
    let file = scratch.write("c.toml", "threads = 3\nplans = 2\nmax_run_tokens = 5000\n");
    let path = file.to_str().unwrap();
    let args = ["--config", path, "config", "show", "--json", "--", "run", "--threads", "5", "What is 2+2?"];
    let report = json_of(&scratch, &args, &[]);
    let threads = setting(&report, "threads");
    assert_eq!((threads["value"].as_str(), threads["source"].as_str()), (Some("5"), Some("flag")), "{threads}");
    assert_eq!(threads["origin"], "--threads");
    let budget = setting(&report, "max_run_tokens");
    assert_eq!((budget["value"].as_str(), budget["source"].as_str()), (Some("5000"), Some("config")));
    // Keys of other commands are left out: `run` has no --port.
    assert!(report["settings"].as_array().unwrap().iter().all(|s| s["key"] != "serve.port"));
    let with_env = json_of(&scratch, &args, &[("TANDEM_PLANS", "4")]);
    assert_eq!(setting(&with_env, "plans")["source"], "env");
}

#[test]
fn the_files_tools_file_takes_effect_and_the_flag_beats_it() {
    let scratch = Scratch::new();
    let from_file = scratch.write("file-tools.toml", &shell_tool("from_file", "Says hi.", "{}", "echo hi"));
    let from_flag = scratch.write("flag-tools.toml", &shell_tool("from_flag", "Says ho.", "{}", "echo ho"));
    // The default location: $XDG_CONFIG_HOME/tandem/config.toml (the scratch's config directory).
    std::fs::create_dir_all(scratch.path("config/tandem")).unwrap();
    let config = scratch.path("config/tandem/config.toml");
    std::fs::write(&config, format!("tools_file = {:?}\n", from_file.to_str().unwrap())).unwrap();
    let names = |json: &Value| -> Vec<String> {
        json["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
    };
    let listed = json_of(&scratch, &["tools", "list", "--json"], &[]);
    assert!(names(&listed).contains(&"from_file".to_string()), "{listed}");
    let flagged = json_of(&scratch, &["tools", "list", "--json", "--tools", from_flag.to_str().unwrap()], &[]);
    assert!(names(&flagged).contains(&"from_flag".to_string()) && !names(&flagged).contains(&"from_file".into()));
    let path = tandem_with(&scratch, &["config", "path"], &[]);
    assert_eq!(stdout(&path).trim(), config.to_str().unwrap());
}

/// A bad file exits 2 with one message naming the file and the key.
fn refused(contents: &str, key: &str) -> String {
    let scratch = Scratch::new();
    let file = scratch.write("bad.toml", contents);
    let output = tandem_with(&scratch, &["--config", file.to_str().unwrap(), "tools", "list"], &[]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{contents:?}: {text}");
    assert!(text.contains(file.to_str().unwrap()) && text.contains(&format!("`{key}`")), "{contents:?}: {text}");
    text
}

#[test]
fn a_bad_file_is_a_usage_error_naming_the_file_and_the_key() {
    refused("threads = 2\nplannr = \"x\"\n", "plannr");
    let wrong_type = refused("threads = \"four\"\n", "threads");
    assert!(wrong_type.contains("line 1"), "{wrong_type}");
    refused("[serve]\nport = \"eighty\"\n", "serve.port");
    refused("[serve]\nhots = \"0.0.0.0\"\n", "serve.hots");
    let range = refused("plans = 20\n", "plans");
    assert!(range.contains("--plans"), "{range}");
    let variant = refused("mode = \"sideways\"\n", "mode");
    assert!(variant.contains("plan-ahead"), "{variant}");
}

#[test]
fn a_missing_config_file_given_by_flag_or_env_is_an_error_and_a_missing_default_is_not() {
    let scratch = Scratch::new();
    let missing = scratch.path("nowhere.toml");
    let missing = missing.to_str().unwrap();
    let by_flag = tandem_with(&scratch, &["--config", missing, "tools", "list"], &[]);
    assert_eq!(by_flag.status.code(), Some(2));
    assert!(stderr(&by_flag).contains(missing) && stderr(&by_flag).contains("--config"), "{}", stderr(&by_flag));
    let by_env = tandem_with(&scratch, &["tools", "list"], &[("TANDEM_CONFIG", missing)]);
    assert_eq!(by_env.status.code(), Some(2));
    assert!(stderr(&by_env).contains("TANDEM_CONFIG"), "{}", stderr(&by_env));
    let default = tandem_with(&scratch, &["tools", "list"], &[]);
    assert!(default.status.success(), "no file at the default location is fine: {}", stderr(&default));
}

/// The old flag spellings are gone (0.1 has no users to keep them for): each is a usage error naming the flag,
/// and the new spelling works.
#[test]
fn old_flag_spellings_are_usage_errors_and_new_ones_work() {
    let scratch = Scratch::new();
    let missing = scratch.path("no-such-planner.gguf");
    let missing = missing.to_str().unwrap();
    let old: [&[&str]; 6] = [
        &["plan", "-m", missing, "Hi"],
        &["plan", "--max-tokens", "100", "Hi"],
        &["generate", "--max-tokens", "4", "Hi"],
        &["run", "--max-tokens", "9", "Hi"],
        &["serve", "--max-tokens", "9"],
        &["bench", "nestful", "--tools", "all", "--retrieval-recall", "3"],
    ];
    for args in old {
        let output = tandem_with(&scratch, args, &[]);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains("unexpected argument"), "{args:?}: {}", stderr(&output));
    }
    let new = tandem_with(&scratch, &["plan", "--planner", missing, "--plan-tokens", "100", "What is 2+2?"], &[]);
    assert!(stderr(&new).contains(missing) && !stderr(&new).contains("unexpected"), "{}", stderr(&new));
}

#[test]
fn each_bench_suite_lists_only_its_own_flags() {
    let scratch = Scratch::new();
    let help = |suite: &str| stdout(&tandem_with(&scratch, &["bench", suite, "--help"], &[]));
    let bfcl = help("bfcl");
    for flag in ["--mode", "--joiner", "--evaluate", "--catalogue", "--no-grammar", "--retrieval-recall", "--plans"] {
        assert!(!bfcl.contains(flag), "bench bfcl --help lists {flag}:\n{bfcl}");
    }
    assert!(bfcl.contains("--categories") && bfcl.contains("--limit"), "{bfcl}");
    let nestful = help("nestful");
    assert!(nestful.contains("--catalogue") && !nestful.contains("--mode") && !nestful.contains("--categories"));
    assert!(!nestful.contains("--tools ") && !nestful.contains("--tools <"), "the old spelling is hidden: {nestful}");
    let tasks = help("tasks");
    assert!(tasks.contains("--mode") && tasks.contains("--evaluate") && !tasks.contains("--catalogue"), "{tasks}");
    for (command, old) in [("generate", "--max-tokens"), ("plan", "--model"), ("serve", "--max-tokens")] {
        let text = stdout(&tandem_with(&scratch, &[command, "--help"], &[]));
        assert!(!text.contains(old), "tandem {command} --help still lists {old}");
    }
}
