//! Sharded batches and benchmarks (`--shard K/N|auto`, `tandem batch merge`, `tandem bench merge`): the shard
//! values and the scheduler variables `auto` reads, the split by id, sharded runs merged back into what one
//! unsharded run writes (malformed lines without a model; three goals, a few BFCL and NESTFUL samples and a BFCL
//! pairs run on the real models), the merges' refusals, the Kubernetes manifest's command run per index, and a
//! read-only shared models directory left untouched.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use tandem::settings::{Shard, SHARD_COUNT_ENV};

use crate::common::runs::Scratch;
use crate::common::{gives, real_model};

const PLANNER: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m";
const EXECUTOR: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m";

fn parse(text: &str, env: &[(&str, &str)]) -> Result<Shard, String> {
    let env: HashMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Shard::parse_with(text, |name| env.get(name).cloned())
}

#[test]
fn shard_values_and_scheduler_variables() {
    assert_eq!(parse("1/3", &[]), Ok(Shard { index: 1, count: 3 }));
    assert_eq!(parse(" 0/1 ", &[]), Ok(Shard { index: 0, count: 1 }));
    for (bad, says) in [
        ("3/3", "shards count from 0"),
        ("0/0", "at least 1"),
        ("x", "expected K/N"),
        ("1", "expected K/N"),
        ("1/x", "whole number"),
        ("-1/3", "expected K/N"),
    ] {
        let error = parse(bad, &[]).unwrap_err();
        assert!(error.contains(says) && error.contains(bad), "{bad}: {error}");
    }
    // Slurm: the task id less the array's first id, the count given or from min and max (and a step).
    let slurm = [("SLURM_ARRAY_TASK_ID", "5"), ("SLURM_ARRAY_TASK_MIN", "4"), ("SLURM_ARRAY_TASK_COUNT", "3")];
    assert_eq!(parse("auto", &slurm), Ok(Shard { index: 1, count: 3 }));
    let span = [("SLURM_ARRAY_TASK_ID", "2"), ("SLURM_ARRAY_TASK_MIN", "0"), ("SLURM_ARRAY_TASK_MAX", "2")];
    assert_eq!(parse("auto", &span), Ok(Shard { index: 2, count: 3 }));
    let step = [
        ("SLURM_ARRAY_TASK_ID", "4"),
        ("SLURM_ARRAY_TASK_MIN", "0"),
        ("SLURM_ARRAY_TASK_MAX", "6"),
        ("SLURM_ARRAY_TASK_STEP", "2"),
    ];
    assert_eq!(parse("auto", &step), Ok(Shard { index: 2, count: 4 }));
    let error = parse("auto", &[("SLURM_ARRAY_TASK_ID", "1")]).unwrap_err();
    assert!(error.contains("SLURM_ARRAY_TASK_COUNT"), "{error}");
    assert_eq!(parse("auto/2", &[("SLURM_ARRAY_TASK_ID", "1")]), Ok(Shard { index: 1, count: 2 }));
    // Kubernetes: the completion index, the count from auto/N or TANDEM_SHARD_COUNT.
    let pod = [("JOB_COMPLETION_INDEX", "2"), (SHARD_COUNT_ENV, "4")];
    assert_eq!(parse("auto", &pod), Ok(Shard { index: 2, count: 4 }));
    assert_eq!(parse("auto/3", &[("JOB_COMPLETION_INDEX", "0")]), Ok(Shard { index: 0, count: 3 }));
    let error = parse("auto", &[("JOB_COMPLETION_INDEX", "0")]).unwrap_err();
    assert!(error.contains(SHARD_COUNT_ENV), "{error}");
    let error = parse("auto", &[("JOB_COMPLETION_INDEX", "3"), (SHARD_COUNT_ENV, "3")]).unwrap_err();
    assert!(error.contains("3/3"), "{error}");
    let error = parse("auto", &[("JOB_COMPLETION_INDEX", "one")]).unwrap_err();
    assert!(error.contains("JOB_COMPLETION_INDEX=\"one\""), "{error}");
    // Neither scheduler.
    let error = parse("auto", &[]).unwrap_err();
    assert!(error.contains("SLURM_ARRAY_TASK_ID") && error.contains("JOB_COMPLETION_INDEX"), "{error}");
}

#[test]
fn the_split_is_by_id_whole_balanced_and_fixed() {
    let ids: Vec<String> = (0..3000).map(|i| format!("goal-{i}")).collect();
    let shards: Vec<Shard> = (0..3).map(|index| Shard { index, count: 3 }).collect();
    let mut sizes = [0usize; 3];
    for id in &ids {
        let holders: Vec<usize> = shards.iter().filter(|s| s.contains(id)).map(|s| s.index).collect();
        assert_eq!(holders.len(), 1, "{id} is in exactly one shard: {holders:?}");
        sizes[holders[0]] += 1;
    }
    assert!(sizes.iter().all(|&n| (900..1100).contains(&n)), "about a third each: {sizes:?}");
    // The split depends on the id alone, the same in every version and on every machine: these values are the
    // SHA-256 of the ids, and a change to them would move the goals of running shards.
    let pinned: Vec<usize> = ["a", "b", "line 1", "mul"].iter().map(|id| Shard::of(id, 1000)).collect();
    assert_eq!(pinned, PINNED);
}

/// `Shard::of` of "a", "b", "line 1" and "mul" among 1000 shards.
const PINNED: [usize; 4] = [250, 946, 773, 410];

fn tandem(scratch: &Scratch, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = scratch.command(args);
    for name in [
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_COUNT",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_MAX",
        "SLURM_ARRAY_TASK_STEP",
        "JOB_COMPLETION_INDEX",
        SHARD_COUNT_ENV,
    ] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command.output().expect("run tandem")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// The lines of a results file, less the journal lines of runs started.
fn records(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lines = text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap());
    lines.filter(|value| !tandem::agent::batch::is_run_started(value)).collect()
}

/// The records of a results file by key (id, else line), less what says when and where a goal ran.
fn outcomes(path: &Path) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = records(path)
        .iter()
        .filter(|r| r.get("line").is_some())
        .map(|r| {
            let key = r["id"].as_str().map_or_else(|| format!("line {}", r["line"]), str::to_string);
            let outcome =
                serde_json::json!([r["goal"], r["stop"], r["answer"], r["error"], r["planner"]["tokens_out"]]);
            (key, outcome)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn batch(scratch: &Scratch, goals: &Path, out: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args = vec!["batch", goals.to_str().unwrap(), "--out", out.to_str().unwrap(), "--threads", "2"];
    args.extend_from_slice(extra);
    tandem(scratch, &args, env)
}

fn merge(scratch: &Scratch, files: &[&Path], out: &Path) -> Output {
    let mut args = vec!["batch", "merge"];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    tandem(scratch, &args, &[])
}

fn shard_file(scratch: &Scratch, k: usize, n: usize) -> PathBuf {
    scratch.path(&format!("results.shard-{k}-of-{n}.jsonl"))
}

#[test]
fn bad_and_unset_shards_are_usage_errors() {
    let scratch = Scratch::new();
    let goals = scratch.write("goals.jsonl", "not json\n");
    let out = scratch.path("results.jsonl");
    let unset = batch(&scratch, &goals, &out, &["--shard", "auto"], &[]);
    assert_eq!(unset.status.code(), Some(2), "{}", stderr(&unset));
    assert!(stderr(&unset).contains("SLURM_ARRAY_TASK_ID"), "{}", stderr(&unset));
    let beyond = batch(&scratch, &goals, &out, &["--shard", "2/2"], &[]);
    assert_eq!(beyond.status.code(), Some(2), "{}", stderr(&beyond));
    assert!(stderr(&beyond).contains("shards count from 0"), "{}", stderr(&beyond));
    let bench = tandem(&scratch, &["bench", "bfcl", "--shard", "x"], &[]);
    assert_eq!(bench.status.code(), Some(2), "{}", stderr(&bench));
    assert!(!out.exists(), "nothing is written for a refused shard");
}

/// Malformed lines are recorded without a model, so the whole split-run-merge path runs in a moment: shards
/// from `--shard auto` (Slurm's and Kubernetes' variables) merge into what the unsharded run wrote.
#[test]
fn malformed_lines_split_by_auto_shards_merge_into_the_unsharded_results() {
    real_model(PLANNER);
    real_model(EXECUTOR);
    let scratch = Scratch::new();
    let text: String = (1..=12).map(|i| format!("not json {i}\n")).collect();
    let goals = scratch.write("goals.jsonl", &text);
    let whole = scratch.path("whole.jsonl");
    assert_eq!(batch(&scratch, &goals, &whole, &[], &[]).status.code(), Some(3));
    let out = scratch.path("results.jsonl");
    let slurm = |id: &'static str| {
        [("SLURM_ARRAY_TASK_ID", id), ("SLURM_ARRAY_TASK_MIN", "1"), ("SLURM_ARRAY_TASK_COUNT", "3")]
    };
    for id in ["1", "2"] {
        let output = batch(&scratch, &goals, &out, &["--shard", "auto"], &slurm(id));
        assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    }
    let pod = [("JOB_COMPLETION_INDEX", "2"), (SHARD_COUNT_ENV, "3")];
    let output = batch(&scratch, &goals, &out, &["--shard", "auto"], &pod);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let shards: Vec<PathBuf> = (0..3).map(|k| shard_file(&scratch, k, 3)).collect();
    let sizes: Vec<usize> = shards.iter().map(|f| outcomes(f).len()).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 12, "{sizes:?}");
    assert!(sizes.iter().all(|&n| n > 0 && n < 12), "every shard got some lines: {sizes:?}");
    // A rerun of a shard resumes it: nothing to do.
    let again = batch(&scratch, &goals, &out, &["--shard", "0/3"], &[]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(outcomes(&shards[0]).len(), sizes[0]);

    let merged = scratch.path("merged.jsonl");
    let files: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    let output = merge(&scratch, &files, &merged);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(outcomes(&merged), outcomes(&whole));
    let lines: Vec<u64> = records(&merged).iter().map(|r| r["line"].as_u64().unwrap()).collect();
    assert_eq!(lines, (1..=12).collect::<Vec<u64>>(), "in the goal file's order, no header");

    // Refusals, each naming what is wrong.
    let refused = |files: &[&Path], says: &[&str]| {
        let target = scratch.path("refused.jsonl");
        let output = merge(&scratch, files, &target);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        for word in says {
            assert!(stderr(&output).contains(word), "{word:?} in {}", stderr(&output));
        }
        assert!(!target.exists());
    };
    refused(&files[..2], &["2/3", "missing"]);
    refused(&[files[0], files[1], files[2], files[1]], &["given twice", "results.shard-1-of-3.jsonl"]);
    refused(&[files[0], files[1], &whole], &["whole.jsonl", "--shard"]);
    let other = scratch.path("other.jsonl");
    let output = batch(&scratch, &goals, &other, &["--shard", "2/3", "--max-steps", "3"], &[]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    refused(
        &[files[0], files[1], &shard_file(&scratch, 2, 3).with_file_name("other.shard-2-of-3.jsonl")],
        &["different settings", "max_steps: 3"],
    );
    // A goal in two shards with two different results.
    let mut stolen = records(files[0]).into_iter().find(|r| r.get("line").is_some()).unwrap();
    stolen["error"] = Value::String("another error".into());
    let mut text = std::fs::read_to_string(files[1]).unwrap();
    text.push_str(&format!("{stolen}\n"));
    std::fs::write(files[1], text).unwrap();
    refused(&files, &["different results", &format!("line {}", stolen["line"])]);
    // Resuming a shard into a file of other settings is refused too.
    let output = batch(&scratch, &goals, &out, &["--shard", "0/3", "--max-steps", "3"], &[]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("other settings"), "{}", stderr(&output));
}

/// Three arithmetic goals on the real models, one batch and two shards: the merged shards hold the same
/// answers from the same numbers of generated tokens.
#[test]
fn sharded_goals_on_the_real_models_merge_into_the_unsharded_results() {
    real_model(PLANNER);
    real_model(EXECUTOR);
    let scratch = Scratch::new();
    let goals = scratch.write(
        "goals.jsonl",
        "{\"id\": \"a\", \"goal\": \"What is 12*4+5?\"}\n{\"id\": \"mul\", \"goal\": \"What is 7*8?\"}\n\
         {\"id\": \"d\", \"goal\": \"What is 100-37?\"}\n",
    );
    let whole = scratch.path("whole.jsonl");
    let output = batch(&scratch, &goals, &whole, &[], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = scratch.path("results.jsonl");
    for shard in ["0/2", "1/2"] {
        let output = batch(&scratch, &goals, &out, &["--shard", shard], &[]);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let shards = [shard_file(&scratch, 0, 2), shard_file(&scratch, 1, 2)];
    assert!(shards.iter().all(|f| !outcomes(f).is_empty()), "both shards ran a goal");
    let merged = scratch.path("merged.jsonl");
    let output = merge(&scratch, &[&shards[0], &shards[1]], &merged);
    assert!(output.status.success(), "{}", stderr(&output));
    let (whole, merged) = (outcomes(&whole), outcomes(&merged));
    assert_eq!(merged, whole);
    let answers: Vec<&str> = whole.iter().map(|(_, o)| o[2].as_str().unwrap()).collect();
    assert!(answers.iter().zip([53.0, 63.0, 56.0]).all(|(a, v)| gives(a, v)), "a, d, mul: {answers:?}");
}

fn bench(scratch: &Scratch, out: &Path, args: &[&str]) -> Output {
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--threads", "2", "--out", out.to_str().unwrap()]);
    tandem(scratch, &all, &[])
}

fn run_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root).unwrap().map(|e| e.unwrap().path()).collect();
    dirs.sort();
    dirs
}

fn summary(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

/// A summary without its timings (which differ run to run).
fn scores(summary: &Value) -> Value {
    let mut scores = summary["summary"].clone();
    scores.as_object_mut().unwrap().retain(|name, _| !name.contains("seconds") && !name.ends_with("_ms"));
    scores
}

/// One suite unsharded and in two shards on the real models; the merge reports what the single run reported.
fn sharded_bench_merges_into_the_unsharded_report(args: &[&str]) -> (Scratch, Vec<PathBuf>) {
    real_model(PLANNER);
    real_model(EXECUTOR);
    let scratch = Scratch::new();
    let whole_root = scratch.path("whole");
    let output = bench(&scratch, &whole_root, args);
    assert!(output.status.success(), "{}", stderr(&output));
    let whole = summary(&run_dirs(&whole_root)[0]);
    let shard_root = scratch.path("shards");
    for shard in ["0/2", "1/2"] {
        let mut with_shard = args.to_vec();
        with_shard.extend_from_slice(&["--shard", shard]);
        let output = bench(&scratch, &shard_root, &with_shard);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let shards = run_dirs(&shard_root);
    assert_eq!(shards.len(), 2);
    assert!(shards.iter().all(|d| d.to_str().unwrap().contains("-shard-")), "{shards:?}");
    let merged_root = scratch.path("merged");
    let mut merge_args = vec!["bench", "merge"];
    merge_args.extend(shards.iter().map(|d| d.to_str().unwrap()));
    merge_args.extend_from_slice(&["--out", merged_root.to_str().unwrap()]);
    let output = tandem(&scratch, &merge_args, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let merged = summary(&run_dirs(&merged_root)[0]);
    assert_eq!(scores(&merged), scores(&whole), "merged: {merged}\nwhole: {whole}");
    assert_eq!(merged["models"], whole["models"]);
    (scratch, shards)
}

#[test]
fn sharded_bfcl_merges_into_the_unsharded_report_and_refuses_odd_shards() {
    let (scratch, shards) = sharded_bench_merges_into_the_unsharded_report(&["bfcl", "--limit", "2"]);
    let target = scratch.path("refused");
    let refused = |dirs: &[&Path], says: &[&str]| {
        let mut args = vec!["bench", "merge"];
        args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
        args.extend_from_slice(&["--out", target.to_str().unwrap()]);
        let output = tandem(&scratch, &args, &[]);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        for word in says {
            assert!(stderr(&output).contains(word), "{word:?} in {}", stderr(&output));
        }
        assert!(!scratch.path("refused").exists());
    };
    let name = |d: &Path| d.file_name().unwrap().to_str().unwrap().to_string();
    refused(&[&shards[0]], &["missing", "1/2"]);
    refused(&[&shards[0], &shards[0], &shards[1]], &["given twice", &name(&shards[0])]);
    // A copy of shard 1 that claims other settings.
    let copy = scratch.path("copy");
    std::fs::create_dir(&copy).unwrap();
    for file in ["samples.jsonl", "summary.json"] {
        std::fs::copy(shards[1].join(file), copy.join(file)).unwrap();
    }
    let mut other = summary(&copy);
    other["settings"]["seed"] = 7.into();
    std::fs::write(copy.join("summary.json"), other.to_string()).unwrap();
    refused(&[&shards[0], &copy], &["different settings", "\"seed\":7"]);
    // A sample in both shards, with different results.
    let mut stolen: Value =
        serde_json::from_str(std::fs::read_to_string(shards[0].join("samples.jsonl")).unwrap().lines().next().unwrap())
            .unwrap();
    stolen["raw"] = "something else".into();
    let mut text = std::fs::read_to_string(shards[1].join("samples.jsonl")).unwrap();
    text.push_str(&format!("{stolen}\n"));
    std::fs::write(shards[1].join("samples.jsonl"), text).unwrap();
    refused(&[&shards[0], &shards[1]], &["different results", stolen["sample"].as_str().unwrap()]);
    // An unfinished shard (no summary yet).
    std::fs::remove_file(shards[1].join("summary.json")).unwrap();
    refused(&[&shards[0], &shards[1]], &["did not finish", "--resume"]);
}

#[test]
fn sharded_nestful_merges_into_the_unsharded_report() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nestful-dotted");
    sharded_bench_merges_into_the_unsharded_report(&["nestful", "--data", data.to_str().unwrap(), "--limit", "2"]);
}

/// Every file under a directory with its size and modification time.
fn snapshot(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut entries = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let meta = std::fs::symlink_metadata(&dir).unwrap();
        entries.push((dir.clone(), meta.len(), meta.modified().unwrap()));
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                todo.push(path);
            } else {
                entries.push((path, meta.len(), meta.modified().unwrap()));
            }
        }
    }
    entries.sort();
    entries
}

/// Many nodes, one model store: a read-only `TANDEM_MODELS` directory (a shared filesystem) is only read. The
/// verification stamp goes to the node's own cache; nothing is written, created or locked beside the models.
/// (Tests run as root, whom permissions do not stop, so the proof is the directory left exactly as it was.)
#[test]
fn a_read_only_models_directory_is_read_and_never_written() {
    use std::os::unix::fs::PermissionsExt;
    let model = real_model(EXECUTOR);
    let scratch = Scratch::new();
    let shared = scratch.path("shared-models");
    std::fs::create_dir(&shared).unwrap();
    let file = shared.join(format!("{EXECUTOR}.gguf"));
    if std::fs::hard_link(&model, &file).is_err() {
        std::fs::copy(&model, &file).unwrap();
    }
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o555)).unwrap();
    let before = snapshot(&shared);
    let cache = scratch.path("node-cache");
    let run = |args: &[&str]| {
        let mut command = scratch.command(args);
        command.env("TANDEM_MODELS", &shared).env("TANDEM_CACHE_DIR", &cache);
        let output = command.output().unwrap();
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        String::from_utf8_lossy(&output.stdout).to_string()
    };
    // First on this node: the file is hashed and the stamp kept in the node's cache; then the stamp is trusted.
    for _ in 0..2 {
        assert_eq!(run(&["models", "path", EXECUTOR]).trim(), file.to_str().unwrap());
    }
    run(&["generate", "-m", EXECUTOR, "--max-new-tokens", "2", "--threads", "2", "Hi"]);
    assert!(cache.join("external").join(format!("{EXECUTOR}.verified")).is_file(), "the stamp is the node's");
    assert!(!cache.join(format!("{EXECUTOR}.gguf")).exists(), "nothing was pulled");
    assert_eq!(snapshot(&shared), before, "the shared directory is untouched");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The Kubernetes Indexed Job of docs/scale-out.md, parsed: its container command runs here once per completion
/// index (the image's binary replaced by the built one, the data volume by a scratch directory), over a goal file
/// of malformed lines (no model work), and the shards merge into one record per line.
#[test]
fn the_kubernetes_manifest_runs_its_command_per_index() {
    real_model(PLANNER);
    real_model(EXECUTOR);
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/k8s/indexed-job.yaml");
    let job: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    assert_eq!(job["kind"].as_str(), Some("Job"));
    assert_eq!(job["spec"]["completionMode"].as_str(), Some("Indexed"));
    let completions = job["spec"]["completions"].as_u64().unwrap() as usize;
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let strings = |value: &serde_yaml::Value| -> Vec<String> {
        value.as_sequence().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
    };
    let command = strings(&container["command"]);
    let args = strings(&container["args"]);
    let env: Vec<(String, String)> = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap().to_string(), e["value"].as_str().unwrap().to_string()))
        .collect();
    assert!(env.contains(&(SHARD_COUNT_ENV.to_string(), completions.to_string())), "the count is the completions");
    let mounts = container["volumeMounts"].as_sequence().unwrap();
    let data_mount = mounts.iter().find(|m| m["name"].as_str() == Some("data")).unwrap()["mountPath"].as_str().unwrap();
    let models = mounts.iter().find(|m| m["name"].as_str() == Some("models")).unwrap();
    assert_eq!(models["readOnly"].as_bool(), Some(true), "the models volume is mounted read-only");

    let scratch = Scratch::new();
    let data = scratch.path("data");
    std::fs::create_dir(&data).unwrap();
    let text: String = (1..=8).map(|i| format!("not json {i}\n")).collect();
    std::fs::write(data.join("goals.jsonl"), text).unwrap();
    let local = |s: &str| s.replace(data_mount, data.to_str().unwrap());
    assert_eq!(Path::new(&command[0]).file_name().unwrap(), "tandem");
    for index in 0..completions {
        let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_tandem"));
        run.args(command[1..].iter().chain(&args).map(|a| local(a)));
        for (name, value) in &env {
            run.env(name, local(value));
        }
        for name in ["SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX"] {
            run.env_remove(name);
        }
        let output = run.env("JOB_COMPLETION_INDEX", index.to_string()).output().unwrap();
        // Malformed lines end as failed goals (exit 3); a shard may hold none of the 8 lines (exit 0).
        assert!(matches!(output.status.code(), Some(0 | 3)), "{}", stderr(&output));
        assert!(data.join(format!("results.shard-{index}-of-{completions}.jsonl")).is_file());
    }
    let files: Vec<PathBuf> =
        (0..completions).map(|k| data.join(format!("results.shard-{k}-of-{completions}.jsonl"))).collect();
    let merged = data.join("results.jsonl");
    let output = merge(&scratch, &files.iter().map(PathBuf::as_path).collect::<Vec<_>>(), &merged);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines: Vec<u64> = records(&merged).iter().map(|r| r["line"].as_u64().unwrap()).collect();
    assert_eq!(lines, (1..=8).collect::<Vec<u64>>());
}

/// `bench pairs --shard`: each shard writes a pairs report naming its pairs' run directories; merging the two
/// report directories finds the runs through them and reports what the unsharded pairs run reported.
#[test]
fn sharded_pairs_reports_merge_through_their_run_directories() {
    real_model(EXECUTOR);
    let scratch = Scratch::new();
    let pairs = ["pairs", "--suite", "bfcl", "--planners", EXECUTOR, "--executors", EXECUTOR, "--limit", "1"];
    let whole_root = scratch.path("whole");
    let output = bench(&scratch, &whole_root, &pairs);
    assert!(output.status.success(), "{}", stderr(&output));
    let shard_root = scratch.path("shards");
    for shard in ["0/2", "1/2"] {
        let mut args = pairs.to_vec();
        args.extend_from_slice(&["--shard", shard]);
        let output = bench(&scratch, &shard_root, &args);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let reports: Vec<PathBuf> =
        run_dirs(&shard_root).into_iter().filter(|d| d.to_str().unwrap().contains("pairs-bfcl-shard-")).collect();
    assert_eq!(reports.len(), 2, "{:?}", run_dirs(&shard_root));
    let merged_root = scratch.path("merged");
    let mut args = vec!["bench", "merge"];
    args.extend(reports.iter().map(|d| d.to_str().unwrap()));
    args.extend_from_slice(&["--out", merged_root.to_str().unwrap()]);
    let output = tandem(&scratch, &args, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let whole_run = run_dirs(&whole_root).into_iter().find(|d| !d.to_str().unwrap().contains("pairs-")).unwrap();
    let merged = run_dirs(&merged_root);
    assert_eq!(merged.len(), 1, "one pair, one merged run directory: {merged:?}");
    assert_eq!(scores(&summary(&merged[0])), scores(&summary(&whole_run)));
    assert_eq!(summary(&merged[0])["merged_from"].as_array().unwrap().len(), 2);
}

/// A benchmark shard resumes only as the same shard with the same settings (a larger --limit may extend it).
#[test]
fn a_bench_shard_resumes_only_as_itself() {
    real_model(EXECUTOR);
    let scratch = Scratch::new();
    let root = scratch.path("bench");
    let output = bench(&scratch, &root, &["bfcl", "--limit", "0", "--shard", "0/2"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let dir = run_dirs(&root).remove(0);
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("settings.json")).unwrap()).unwrap();
    assert_eq!(kept["shard"], serde_json::json!({"index": 0, "count": 2}));
    let resume = |extra: &[&str]| {
        let mut args = vec!["bfcl", "--resume", dir.to_str().unwrap()];
        args.extend_from_slice(extra);
        bench(&scratch, &root, &args)
    };
    for other in
        [&["--limit", "0", "--shard", "1/2"][..], &["--limit", "0", "--shard", "0/2", "--categories", "multiple"]]
    {
        let output = resume(other);
        assert_eq!(output.status.code(), Some(2), "{other:?}: {}", stderr(&output));
        assert!(stderr(&output).contains("other settings or another shard"), "{}", stderr(&output));
    }
    let output = resume(&["--limit", "0", "--shard", "0/2"]);
    assert!(output.status.success(), "{}", stderr(&output));
}
