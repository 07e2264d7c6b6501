//! The agent end to end on real MCP servers with the real default models (1.5B planner, 0.5B executor): a time
//! zone conversion through `mcp-server-time`, a question about a git repository the test creates through
//! `mcp-server-git`, and a file question through `@modelcontextprotocol/server-filesystem` confined to a temporary
//! directory outside the workspace. The servers are installed on first use (pinned, as in tests/it/mcp.rs); the
//! assertions check what the calls did and what the answer carries, from the fixture each test builds.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::common::real_model;
use crate::common::runs::Scratch;
use crate::mcp::installed_program;

const PLANNER: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m";
const EXECUTOR: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m";

/// `tandem run --json GOAL` with the one server of `server` (a `mcpServers` entry) added.
fn run_with_server(scratch: &Scratch, name: &str, server: Value, goal: &str) -> Value {
    real_model(PLANNER);
    real_model(EXECUTOR);
    let config = scratch.write("mcp.json", &json!({"mcpServers": {name: server}}).to_string());
    let ws = scratch.workspace();
    let args = [
        "run",
        "--threads",
        "2",
        "--workspace",
        ws.to_str().unwrap(),
        "--mcp",
        config.to_str().unwrap(),
        "--mcp-timeout",
        "60",
        "--max-run-tokens",
        "3000",
        goal,
    ];
    scratch.tandem_json(&args).0
}

/// The steps that ran with this tool and succeeded, with their arguments and outputs.
fn successful_steps<'a>(json: &'a Value, tool: &str) -> Vec<&'a Value> {
    let steps = json["steps"].as_array().map(Vec::as_slice).unwrap_or_default();
    steps.iter().filter(|s| s["tool"] == tool && s["error"].is_null() && !s["output"].is_null()).collect()
}

#[test]
fn a_time_zone_goal_plans_and_calls_the_time_servers_convert_time() {
    let scratch = Scratch::new();
    let program = installed_program("venv/bin/mcp-server-time");
    let server = json!({"command": program, "args": ["--local-timezone", "Etc/UTC"]});
    // India (+05:30) and Japan (+09:00) keep no daylight saving time, so 09:30 in Kolkata is 13:00 in Tokyo on
    // any date: +3:30.
    let goal = "Convert 09:30 from Asia/Kolkata time to Asia/Tokyo time.";
    let json = run_with_server(&scratch, "time", server, goal);
    assert_eq!(json["stop"], "done", "{json:#}");
    let calls = successful_steps(&json, "convert_time");
    let call = calls.first().unwrap_or_else(|| panic!("no convert_time step ran: {json:#}"));
    assert_eq!(call["args"]["source_timezone"], "Asia/Kolkata", "{json:#}");
    assert_eq!(call["args"]["target_timezone"], "Asia/Tokyo", "{json:#}");
    let target = call["output"]["target"]["datetime"].as_str().unwrap_or_default();
    assert!(target.ends_with("T13:00:00+09:00"), "the server converted 09:30 IST: {json:#}");
    let answer = json["answer"].as_str().unwrap_or_default();
    assert!(answer.contains("13:00") || answer.contains("1:00 PM"), "{json:#}");
}

#[test]
fn a_goal_about_a_git_repository_goes_through_the_git_server() {
    let scratch = Scratch::new();
    let repo = scratch.path("garden-repo");
    std::fs::create_dir(&repo).unwrap();
    let git = |args: &[&str]| {
        let output = Command::new("git")
            .args(["-c", "user.email=t@example.com", "-c", "user.name=Tandem Test"])
            .args(args)
            .current_dir(&repo)
            .output()
            .expect("git runs");
        assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("beds.txt"), "tomatoes\n").unwrap();
    std::fs::write(repo.join("tools.txt"), "spade\n").unwrap();
    git(&["add", "beds.txt", "tools.txt"]);
    git(&["commit", "-q", "-m", "Plant the tomato bed"]);
    // One file changed since the commit: the status must name it, and not the other.
    std::fs::write(repo.join("beds.txt"), "tomatoes\nbeans\n").unwrap();
    let program = installed_program("venv/bin/mcp-server-git");
    let repo_path = std::fs::canonicalize(&repo).unwrap();
    let goal = format!("Show the git status of the repository at {}.", repo_path.display());
    let json = run_with_server(&scratch, "git", json!({"command": program}), &goal);
    assert_eq!(json["stop"], "done", "{json:#}");
    let status = successful_steps(&json, "git_status");
    assert!(!status.is_empty(), "no git_status step ran: {json:#}");
    assert!(
        status.iter().all(|s| Path::new(s["args"]["repo_path"].as_str().unwrap_or_default()) == repo_path),
        "{json:#}"
    );
    let answer = json["answer"].as_str().unwrap_or_default();
    assert!(answer.contains("beds.txt") && !answer.contains("tools.txt"), "{json:#}");
}

#[test]
fn a_file_goal_goes_through_the_filesystem_server_inside_its_root() {
    let scratch = Scratch::new();
    // The server's root is outside the workspace, so the built-in read_file cannot do the job.
    let root = scratch.path("shared-notes");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("motto.txt"), "Measure twice, cut once.\n").unwrap();
    std::fs::write(root.join("plan.md"), "# Plan\n").unwrap();
    let root = std::fs::canonicalize(&root).unwrap();
    let program = installed_program("npm/node_modules/.bin/mcp-server-filesystem");
    let server = json!({"command": program, "args": [root]});
    let goal = format!("Search the directory {} for files whose names match *.txt.", root.display());
    let json = run_with_server(&scratch, "files", server, &goal);
    assert_eq!(json["stop"], "done", "{json:#}");
    let server_tools = ["search_files", "list_directory", "directory_tree"];
    let listed: Vec<&Value> = server_tools.iter().flat_map(|t| successful_steps(&json, t)).collect();
    assert!(!listed.is_empty(), "no filesystem-server step ran: {json:#}");
    let answer = json["answer"].as_str().unwrap_or_default();
    assert!(answer.contains("motto.txt"), "{json:#}");
}

/// A call of a tool its server marks destructive (the filesystem server's `write_file`: `destructiveHint: true`)
/// waits for approval, `tandem run`'s default: with no terminal to ask on and no `--yes`, the run pauses before the
/// call (exit 3, nothing written, its `read_text_file` call made without asking), and `tandem resume --yes` makes
/// it and finishes the run. With `--yes` from the start the run writes at once, the approval logged.
#[test]
fn a_destructive_call_waits_for_approval_and_resume_yes_makes_it() {
    real_model(PLANNER);
    real_model(EXECUTOR);
    let scratch = Scratch::new();
    let root = scratch.path("shared-notes");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("motto.txt"), "Measure twice, cut once.\n").unwrap();
    let root = std::fs::canonicalize(&root).unwrap();
    let program = installed_program("npm/node_modules/.bin/mcp-server-filesystem");
    let config =
        scratch.write("mcp.json", &json!({"mcpServers": {"files": {"command": program, "args": [root]}}}).to_string());
    let copy = root.join("copy.txt");
    let plan = json!({"goal": "Copy the motto to copy.txt", "steps": [
        {"id": "s1", "tool": "read_text_file", "args": {"path": root.join("motto.txt")}},
        {"id": "s2", "tool": "write_file", "args": {"path": copy, "content": "Measure twice."}, "depends_on": ["s1"]}
    ]});
    let plan = scratch.write("plan.json", &plan.to_string());
    let ws = scratch.workspace();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--plan", plan.to_str().unwrap(), "--workspace", ws.to_str().unwrap()];
        args.extend(["--mcp", config.to_str().unwrap(), "--mcp-timeout", "60", "--max-replans", "0"]);
        args.extend(extra);
        scratch.tandem(&args)
    };

    let paused = run(&[]);
    let stderr = String::from_utf8_lossy(&paused.stderr);
    assert_eq!(paused.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("is paused") && stderr.contains("write_file") && stderr.contains("--yes"), "{stderr}");
    assert!(!copy.exists(), "the destructive call was made without approval");
    let events = scratch.latest_events();
    assert!(events.iter().any(|e| e["event"] == "tool_call" && e["tool"] == "read_text_file"), "{events:#?}");
    assert!(!events.iter().any(|e| e["event"] == "tool_call" && e["tool"] == "write_file"), "{events:#?}");
    assert!(!events.iter().any(|e| e["event"] == "run_finished"), "a paused run is left to resume: {events:#?}");

    let resumed = scratch.tandem(&["resume", "latest", "--yes"]);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), "Measure twice.");
    let events = scratch.latest_events();
    let approval = events.iter().find(|e| e["event"] == "step_approval").expect("the approval is logged");
    assert_eq!((approval["step"].as_str(), approval["decision"].as_str()), (Some("s2"), Some("approved")));
    assert_eq!(events.last().unwrap()["stop"], "done", "{events:#?}");

    std::fs::remove_file(&copy).unwrap();
    let at_once = run(&["--yes"]);
    assert!(at_once.status.success(), "{}", String::from_utf8_lossy(&at_once.stderr));
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), "Measure twice.");
}
