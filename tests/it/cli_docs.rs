//! docs/cli.md is checked against the binary's `--help`: every subcommand has its `## tandem …` section, and every
//! long flag its `--help` lists appears in that section.

use std::collections::BTreeSet;
use std::process::Command;

fn help(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_tandem")).args(args).arg("--help").output().expect("run tandem");
    assert!(output.status.success(), "tandem {args:?} --help failed");
    String::from_utf8(output.stdout).expect("help is UTF-8")
}

/// The subcommand names listed under `Commands:` in a help text (`help` left out).
fn subcommands(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("Commands:") {
            inside = true;
            continue;
        }
        if inside {
            if !line.starts_with("  ") {
                break;
            }
            // A name sits at two spaces' indent; wrapped description lines are indented further.
            if line.starts_with("   ") {
                continue;
            }
            if let Some(name) = line.split_whitespace().next().filter(|n| *n != "help") {
                names.push(name.to_string());
            }
        }
    }
    names
}

/// Every `--long-flag` a help text names in its option list.
fn long_flags(text: &str) -> BTreeSet<String> {
    text.lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with('-'))
        // `-v, --verbose...` marks a flag that counts: the dots are not part of its name.
        .flat_map(|line| {
            line.split([' ', ',', '=', '<', '['])
                .filter(|w| w.starts_with("--"))
                .map(|w| w.trim_end_matches('.').to_string())
        })
        .collect()
}

/// The text of docs/cli.md's `## heading` section.
fn section<'a>(doc: &'a str, heading: &str) -> Option<&'a str> {
    let start = doc.find(&format!("\n## {heading}\n"))? + 1;
    let body = &doc[start..];
    let end = body[3..].find("\n## ").map_or(body.len(), |i| i + 3);
    Some(&body[..end])
}

/// What is missing from the docs: subcommands without a section, flags without a mention.
fn missing(doc: &str, prefix: &[&str]) -> Vec<String> {
    let mut gaps = Vec::new();
    for name in subcommands(&help(prefix)) {
        let mut path: Vec<&str> = prefix.to_vec();
        path.push(&name);
        let text = help(&path);
        let nested = subcommands(&text);
        let heading = format!("tandem {}", path.join(" "));
        if !nested.is_empty() {
            gaps.extend(missing(doc, &path));
            // A command that runs on its own as well as through subcommands (`tandem batch`, `tandem batch
            // merge`) has a section for its own flags.
            let usage = text.lines().find(|line| line.starts_with("Usage:")).unwrap_or_default();
            if usage.trim_end().ends_with("<COMMAND>") {
                continue;
            }
        }
        match section(doc, &heading) {
            None => gaps.push(format!("no section '## {heading}'")),
            Some(body) => {
                for flag in long_flags(&text) {
                    if !body.contains(&flag) {
                        gaps.push(format!("{heading}: {flag}"));
                    }
                }
            }
        }
    }
    gaps
}

#[test]
fn docs_cli_md_covers_every_subcommand_and_flag_of_the_help() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md")).unwrap();
    let gaps = missing(&doc, &[]);
    assert!(gaps.is_empty(), "docs/cli.md is behind `--help` (update it):\n{}", gaps.join("\n"));
}

#[test]
fn the_check_sees_a_missing_flag_and_a_missing_section() {
    let run_help = help(&["run"]);
    assert!(long_flags(&run_help).contains("--max-replans"), "{run_help}");
    assert!(long_flags(&run_help).contains("--verbose"), "a counted flag's dots are not its name: {run_help}");
    assert!(subcommands(&help(&[])).contains(&"bench".to_string()));
    let doc = "# x\n\n## tandem run\n\n`--plan` only\n\n## tandem plan\n\n`--json`\n";
    let body = section(doc, "tandem run").unwrap();
    assert!(body.contains("--plan") && !body.contains("--json"), "sections end at the next heading");
    assert!(section(doc, "tandem resume").is_none());
}

#[test]
fn docs_cli_md_names_every_environment_variable_and_config_key() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md")).unwrap();
    let environment = section(&doc, "Environment").expect("an Environment section");
    let unnamed: Vec<&str> =
        tandem::settings::env::VARIABLES.iter().copied().filter(|v| !environment.contains(&format!("`{v}"))).collect();
    assert!(unnamed.is_empty(), "docs/cli.md, Environment, lacks {unnamed:?}");
    let file = section(&doc, "Configuration file").expect("a Configuration file section");
    let keys = tandem::settings::file::keys();
    let unlisted: Vec<&String> =
        keys.iter().filter(|k| !file.contains(&format!("`{}`", k.rsplit('.').next().unwrap()))).collect();
    assert!(unlisted.is_empty(), "docs/cli.md, Configuration file, lacks {unlisted:?}");
}
