//! The rule book (`agent::rules`, docs/rules.md): `tandem rules` lists it as the docs say, a rule turns off alone,
//! and plans a user would write for the real MCP servers (filesystem, git, fetch, memory) come through
//! `tandem plan --from` unharmed: no rule changes what the user asked for or sends it back.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::runs::Scratch;
use crate::mcp::installed_program;

/// `tandem plan --from` of `plan` for `goal`, with `--json`, the scratch's workspace and `more` flags; the JSON.
fn through_rules(scratch: &Scratch, plan: &Value, goal: &str, more: &[&str]) -> Value {
    let file = scratch.write("given-plan.json", &plan.to_string());
    let ws = scratch.workspace();
    std::fs::create_dir_all(&ws).unwrap();
    let args = ["plan", "--from", file.to_str().unwrap(), "--workspace", ws.to_str().unwrap()];
    let (json, output) = scratch.tandem_json(&[&args[..], more, &[goal]].concat());
    assert!(output.status.success(), "{goal}: {}\n{json:#}", String::from_utf8_lossy(&output.stderr));
    json
}

/// The calls of a plan as `(tool, args)`, the order kept.
fn calls(plan: &Value) -> Vec<(Value, Value)> {
    let steps = plan["steps"].as_array().cloned().unwrap_or_default();
    steps.iter().map(|s| (s["tool"].clone(), s["args"].clone())).collect()
}

/// Asserts that the rules left `plan` as written, sent nothing back and found it valid.
fn unharmed(json: &Value, plan: &Value, case: &str) {
    assert_eq!(json["changes"], json!([]), "{case}: a rule changed the plan: {json:#}");
    assert_eq!(json["refusals"], json!([]), "{case}: a rule sent the plan back: {json:#}");
    assert_eq!(json["issues"], json!([]), "{case}: the plan does not validate: {json:#}");
    assert_eq!(calls(&json["plan"]), calls(plan), "{case}: {json:#}");
}

/// An MCP servers file for the named real servers, in `scratch`.
fn servers(scratch: &Scratch, entries: Value) -> PathBuf {
    scratch.write("mcp.json", &json!({ "mcpServers": entries }).to_string())
}

/// A git repository with three commits, for `git_log`.
fn repository(dir: &Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let git = |args: &[&str]| {
        let output = std::process::Command::new("git")
            .args(["-c", "user.email=t@example.com", "-c", "user.name=Tandem Test"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git runs");
        assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    };
    git(&["init", "-q"]);
    for (i, line) in ["one", "two", "three"].iter().enumerate() {
        std::fs::write(dir.join("notes.txt"), line).unwrap();
        git(&["add", "notes.txt"]);
        git(&["commit", "-q", "-m", &format!("Commit {i}")]);
    }
    std::fs::canonicalize(dir).unwrap().to_str().unwrap().to_string()
}

/// The harm cases of the rule book's issue, each a plan a user of the project's own servers would write, through
/// the real servers' schemas: every one comes through `general` as written, with nothing sent back. Each names the
/// rule that once harmed it (gone now; docs/rules.md, "Rules taken out").
#[test]
fn plans_a_user_would_write_come_through_the_rules_unharmed() {
    let scratch = Scratch::new();
    let ws = scratch.workspace();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "Meeting on 01/15/2024\n").unwrap();
    std::fs::write(ws.join("report.txt"), "Sales rose 4% in March.\n").unwrap();
    std::fs::write(ws.join("README.md"), "# Garden\nA planner for the beds.\n").unwrap();
    let ws_root = std::fs::canonicalize(&ws).unwrap();
    let ws_root = ws_root.to_str().unwrap();
    let repo = repository(&scratch.path("repo"));
    let config = servers(
        &scratch,
        json!({
            "files": {"command": installed_program("npm/node_modules/.bin/mcp-server-filesystem"), "args": [ws_root]},
            "git": {"command": installed_program("venv/bin/mcp-server-git")},
            "fetch": {"command": installed_program("venv/bin/mcp-server-fetch")},
            "memory": {"command": installed_program("npm/node_modules/.bin/mcp-server-memory"),
                       "env": {"MEMORY_FILE_PATH": ws.join("memory.jsonl")}},
        }),
    );
    let mcp = ["--mcp", config.to_str().unwrap(), "--mcp-timeout", "60"];
    let path = |name: &str| format!("{ws_root}/{name}");
    let cases = [
        // `switches-asked` turned on `edit_file`'s dry-run switch: the edit was previewed, never written.
        (
            "Fix the date format in notes.txt: write it as 2024-01-15.",
            json!([{"id": "s1", "tool": "edit_file", "args": {"path": path("notes.txt"),
                "edits": [{"oldText": "01/15/2024", "newText": "2024-01-15"}]}}]),
        ),
        // `unused-workings` dropped the step that wrote the summary ("write" read as a change request).
        (
            "Write a summary of report.txt to summary.txt",
            json!([
                {"id": "s1", "tool": "read_text_file", "args": {"path": path("report.txt")}},
                {"id": "s2", "tool": "llm", "args": {"prompt": "Summarise in one sentence: $s1.content$"}},
                {"id": "s3", "tool": "write_file", "args": {"path": path("summary.txt"), "content": "$s2.text$"}}
            ]),
        ),
        // `declared-defaults` dropped `max_count`: ten commits came back and the count was wrong.
        (
            "How many commits are there in the repository?",
            json!([{"id": "s1", "tool": "git_log", "args": {"repo_path": repo, "max_count": 1000}}]),
        ),
        // `deletions-asked` refused a delete the goal asks for without a delete word.
        (
            "Bob no longer works at Initech.",
            json!([{"id": "s1", "tool": "delete_observations", "args": {"deletions":
                [{"entityName": "Bob", "observations": ["works at Initech"]}]}}]),
        ),
        // `workspace-unasked` sent back a read of a file the goal names without the word "file".
        (
            "Summarize my README",
            json!([
                {"id": "s1", "tool": "read_text_file", "args": {"path": path("README.md")}},
                {"id": "s2", "tool": "llm", "args": {"prompt": "Summarize my README: $s1.content$"}}
            ]),
        ),
        // `switches-asked` turned on `fetch`'s `raw` for any goal that says "content".
        (
            "Get the content of http://127.0.0.1:9/page.html",
            json!([{"id": "s1", "tool": "fetch", "args": {"url": "http://127.0.0.1:9/page.html"}}]),
        ),
    ];
    for (goal, steps) in cases {
        let plan = json!({ "steps": steps });
        let json = through_rules(&scratch, &plan, goal, &mcp);
        unharmed(&json, &plan, goal);
    }
}

/// A rule that does change a plan shows the change through `tandem plan --from`, a check shows its refusal, and
/// each turns off alone with `--rules-off`; an unknown rule's name is a usage error that lists the rules.
#[test]
fn a_rule_shows_its_change_or_refusal_and_turns_off_alone() {
    let scratch = Scratch::new();
    let ws = scratch.workspace();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("old.txt"), "kept\n").unwrap();
    let repeated = json!({"steps": [
        {"id": "s1", "tool": "calculator", "args": {"expression": "12*4+5"}},
        {"id": "s2", "tool": "calculator", "args": {"expression": "12*4+5"}},
        {"id": "s3", "tool": "calculator", "args": {"expression": "$s2.result$*3"}}
    ]});
    let goal = "What is 12*4+5, and that times 3?";
    let json = through_rules(&scratch, &repeated, goal, &[]);
    assert_eq!(json["changes"][0]["rule"], "duplicates", "{json:#}");
    assert_eq!(json["plan"]["steps"].as_array().unwrap().len(), 2, "{json:#}");
    assert_eq!(json["plan"]["steps"][1]["args"]["expression"], "$s1.result$*3", "{json:#}");
    let off = through_rules(&scratch, &repeated, goal, &["--rules-off", "duplicates"]);
    assert_eq!(off["changes"], json!([]), "{off:#}");
    assert_eq!(calls(&off["plan"]), calls(&repeated));

    let made_up = json!({"steps": [{"id": "s1", "tool": "write_file",
        "args": {"path": "archive/old.txt", "content": "This is an old file."}}]});
    let goal = "Make a folder called archive and put old.txt in it.";
    let json = through_rules(&scratch, &made_up, goal, &["--allow-write"]);
    assert_eq!(json["refusals"][0]["rule"], "contents-not-made-up", "{json:#}");
    assert!(json["refusals"][0]["feedback"].as_str().unwrap().contains("old.txt to archive/old.txt"), "{json:#}");
    let off = through_rules(&scratch, &made_up, goal, &["--allow-write", "--rules-off", "contents-not-made-up"]);
    assert_eq!(off["refusals"], json!([]), "{off:#}");
    let none = through_rules(&scratch, &made_up, goal, &["--allow-write", "--mend", "off"]);
    assert_eq!(none["refusals"], json!([]), "{none:#}");

    let unknown = scratch.tandem(&["plan", "--from", "x.json", "--rules-off", "no-such-rule", goal]);
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert_eq!(unknown.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no rule is named") && stderr.contains("time-zones"), "{stderr}");
    let missing = scratch.tandem(&["plan", "--from", "no-such-plan.json", goal]);
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success() && stderr.contains("no-such-plan.json"), "{stderr}");
}

/// docs/rules.md's table is the rule book: the same rules as `tandem rules --json`, in its order, with the same
/// stage and profiles, each with a section of its own; `general` has at most 15.
#[test]
fn the_docs_table_is_the_rule_book() {
    let scratch = Scratch::new();
    let output = scratch.tandem(&["rules", "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let rules: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    let listed: Vec<(String, String, String)> = rules
        .iter()
        .map(|r| {
            let profiles: Vec<&str> = r["profiles"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
            (r["name"].as_str().unwrap().to_string(), r["stage"].as_str().unwrap().to_string(), profiles.join(", "))
        })
        .collect();
    let docs = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/rules.md")).unwrap();
    let table: Vec<(String, String, String)> = docs
        .lines()
        .skip_while(|line| !line.starts_with("| rule | stage | profiles |"))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let name = cells[1].trim_start_matches("[`").split('`').next().unwrap().to_string();
            (name, cells[2].to_string(), cells[3].to_string())
        })
        .collect();
    assert_eq!(table, listed, "docs/rules.md's table against `tandem rules --json`");
    for (name, ..) in &listed {
        assert!(docs.contains(&format!("\n### `{name}`\n")), "docs/rules.md has no section for {name}");
    }
    let general = rules.iter().filter(|r| r["profiles"].as_array().unwrap().contains(&json!("general"))).count();
    assert!(general <= 15, "{general} rules in general");
    for rule in &rules {
        let docs_link = rule["docs"].as_str().unwrap();
        assert_eq!(docs_link, format!("docs/rules.md#{}", rule["name"].as_str().unwrap()));
    }
}

/// Rule `writes-keep-data`: a plan that writes one item over a to-do list through the real filesystem server's
/// whole write (`write_file`, declared idempotent) is refused before the call, with the lines it would lose named,
/// and the file keeps them; a write that keeps the old lines goes through; with the rule off the file is replaced.
#[test]
fn a_whole_write_that_would_lose_a_files_lines_is_refused() {
    let scratch = Scratch::new();
    let ws = scratch.workspace();
    std::fs::create_dir_all(&ws).unwrap();
    let todo = ws.join("todo.txt");
    let items = "water the plants\ncall the bank\npay rent\n";
    std::fs::write(&todo, items).unwrap();
    let ws_root = std::fs::canonicalize(&ws).unwrap();
    let files = installed_program("npm/node_modules/.bin/mcp-server-filesystem");
    let config = servers(&scratch, json!({"files": {"command": files, "args": [&ws_root]}}));
    let goal = "Add buy milk to my to-do list in todo.txt.";
    let run = |content: &str, more: &[&str]| -> Value {
        let plan = json!({"goal": goal, "steps": [{"id": "s1", "tool": "write_file",
            "args": {"path": ws_root.join("todo.txt"), "content": content}}]});
        let file = scratch.write("given-plan.json", &plan.to_string());
        // `--yes`: the server marks `write_file` destructive, which a run asks about first.
        let args = ["run", "--plan", file.to_str().unwrap(), "--max-replans", "0", "--yes", "--workspace"];
        let args = [&args[..], &[ws.to_str().unwrap(), "--mcp", config.to_str().unwrap(), "--mcp-timeout", "60"], more];
        scratch.tandem_json(&args.concat()).0
    };

    let refused = run("buy milk\n", &[]);
    let error = refused["steps"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("would lose") && error.contains("\"call the bank\""), "{refused:#}");
    assert_eq!(std::fs::read_to_string(&todo).unwrap(), items, "the refused write changed the file");
    // The run's log records the rule that refused it, as the ablation reads it (scripts/rule-ablation.py).
    let events = scratch.latest_events();
    let applied = events.iter().find(|e| e["event"] == "rule_applied").expect("a rule_applied event");
    assert_eq!((applied["rule"].as_str(), applied["step"].as_str()), (Some("writes-keep-data"), Some("s1")));

    let kept = format!("{items}buy milk\n");
    let added = run(&kept, &[]);
    assert_eq!(added["steps"][0]["error"], Value::Null, "{added:#}");
    assert_eq!(std::fs::read_to_string(&todo).unwrap(), kept);

    let replaced = run("buy milk\n", &["--rules-off", "writes-keep-data"]);
    assert_eq!(replaced["steps"][0]["error"], Value::Null, "{replaced:#}");
    assert_eq!(std::fs::read_to_string(&todo).unwrap(), "buy milk\n", "with the rule off the write is made");
}
