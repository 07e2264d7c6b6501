//! Tandem as an MCP server, driven by real MCP clients: the MCP Python SDK (installed with the MCP test servers by
//! scripts/install-mcp-test-servers.sh) over stdio against `tandem mcp`, and over Streamable HTTP against `/mcp` on
//! `tandem serve`; Tandem's own MCP client (`tandem run --mcp`) against `tandem mcp`. The models are real: a goal
//! is planned, approved, run and answered.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::common::{gives, real_model};
use crate::mcp::installed_program;
use crate::serve::{call, Server, KEY};

const PLANNER: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m";
const EXECUTOR: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m";

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_server/client.py")
}

/// Runs the SDK client with `script` against `target` (the client's arguments after the script); its report.
fn sdk_client(script: &Value, mode: &str, target: &[&str]) -> Value {
    let python = installed_program("venv/bin/python");
    let output = Command::new(python)
        .arg(client_script())
        .arg(mode)
        .arg(script.to_string())
        .args(target)
        .output()
        .expect("run the MCP Python SDK client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the MCP client failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("the client's report is not JSON ({e}): {stdout}"))
}

fn tandem_mcp_command(runs_dir: &Path, extra: &[&str]) -> Vec<String> {
    let mut command = vec![
        env!("CARGO_BIN_EXE_tandem").to_string(),
        "--quiet".into(),
        "mcp".into(),
        "--planner".into(),
        PLANNER.into(),
        "--executor".into(),
        EXECUTOR.into(),
        "--no-prefix-store".into(),
        "--runs-dir".into(),
        runs_dir.display().to_string(),
    ];
    command.extend(extra.iter().map(|s| s.to_string()));
    command
}

#[test]
fn an_mcp_client_plans_approves_and_runs_goals_over_stdio() {
    real_model(PLANNER);
    real_model(EXECUTOR);
    let runs = tempfile::tempdir().unwrap();
    let script = json!([
        {"tool": "plan_goal", "args": {"goal": "What is 12*4+5?", "max_replans": 0}},
        {"tool": "approve_plan", "args": {"run_id": "$run_id"}},
        {"tool": "get_run", "args": {"run_id": "$run_id"}},
        {"tool": "run_goal", "args": {"goal": "What is 12*4+5?", "max_replans": 1}},
        {"tool": "get_run", "args": {"run_id": "no-such-run"}},
        {"tool": "run_goal", "args": {"goal": "What is 2+2?", "tools": "shell"}},
        {"tool": "run_goal", "args": {"goal": "What is 2+2?", "max_steps": 1_000_000}},
        {"tool": "approve_plan", "args": {"run_id": "no-such-run"}},
    ]);
    let command = tandem_mcp_command(runs.path(), &[]);
    let mut target = vec!["--"];
    target.extend(command.iter().map(String::as_str));
    let report = sdk_client(&script, "stdio", &target);

    assert_eq!(report["server"], "tandem", "{report}");
    let tools = report["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["run_goal", "plan_goal", "get_run", "resume_run", "approve_plan"], "{report}");
    for tool in tools {
        assert_eq!(tool["output_schema"], true, "{tool}");
    }
    assert_eq!(tools[2]["annotations"]["readOnlyHint"], true, "get_run reads only: {}", tools[2]);
    assert_eq!(tools[0]["annotations"]["destructiveHint"], true, "run_goal runs tools: {}", tools[0]);
    assert_eq!(tools[0]["required"], json!(["goal"]));

    let calls = report["calls"].as_array().unwrap();
    // plan_goal: a plan, nothing run; the run waits for approval.
    let planned = &calls[0];
    assert_eq!(planned["is_error"], false, "{planned}");
    assert_eq!(planned["structured"]["status"], "awaiting_approval", "{planned}");
    assert!(planned["structured"]["plan"]["steps"].as_array().is_some_and(|s| !s.is_empty()), "{planned}");
    assert_eq!(planned["structured"]["steps"], json!([]), "plan_goal ran a step: {planned}");
    assert!(planned["text"].as_str().unwrap().contains("approve_plan"), "{planned}");
    let run_id = planned["structured"]["run_id"].as_str().unwrap();
    // approve_plan runs it to its answer, with progress on the way.
    let approved = &calls[1];
    assert_eq!(approved["structured"]["run_id"], run_id, "{approved}");
    assert_eq!(approved["structured"]["status"], "finished", "{approved}");
    assert_eq!(approved["structured"]["stop"], "done", "{approved}");
    assert!(gives(approved["text"].as_str().unwrap(), 53.0), "{approved}");
    assert!(!approved["progress"].as_array().unwrap().is_empty(), "no progress notifications: {approved}");
    // get_run: the same run with its timeline.
    let shown = &calls[2];
    assert_eq!(shown["structured"]["status"], "finished", "{shown}");
    let timeline: Vec<&str> =
        shown["structured"]["timeline"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert!(timeline.iter().any(|l| l.starts_with("plan v1")), "{timeline:?}");
    assert!(timeline.iter().any(|l| l.contains("approved")), "{timeline:?}");
    assert!(timeline.last().is_some_and(|l| l.starts_with("run finished (done)")), "{timeline:?}");
    // run_goal: planned, run and answered in one call.
    let ran = &calls[3];
    assert_eq!(ran["is_error"], false, "{ran}");
    assert!(gives(ran["text"].as_str().unwrap(), 53.0), "{ran}");
    assert_eq!(ran["structured"]["answer"], ran["text"], "{ran}");
    assert!(ran["progress"].as_array().unwrap().iter().any(|m| m.as_str().unwrap().starts_with("plan v1")), "{ran}");
    assert!(ran["structured"]["usage"]["planner"].is_object(), "{ran}");
    // Refusals are tool errors a caller reads, and leave no run behind.
    let refused = |i: usize, says: &str| {
        let call = &calls[i];
        assert_eq!(call["is_error"], true, "{call}");
        assert!(call["text"].as_str().unwrap().contains(says), "{call}");
    };
    refused(4, "no run \"no-such-run\"");
    refused(5, "unknown argument \"tools\"");
    refused(6, "never raise");
    refused(7, "no run \"no-such-run\"");
    let logged = std::fs::read_dir(runs.path()).unwrap().count();
    assert_eq!(logged, 2, "the two runs asked for, and none for the refused calls");
}

#[test]
fn tandems_own_client_hands_a_goal_to_tandem_mcp() {
    real_model(PLANNER);
    real_model(EXECUTOR);
    let dir = tempfile::tempdir().unwrap();
    let inner_runs = dir.path().join("inner-runs");
    let command = tandem_mcp_command(&inner_runs, &[]);
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"tandem": {"command": command[0], "args": &command[1..]}}}).to_string(),
    )
    .unwrap();
    // Listed as any MCP server's tools are.
    let listed = Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(["tools", "list", "--json", "--mcp"])
        .arg(&config)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{text}\n{}", String::from_utf8_lossy(&listed.stderr));
    assert!(text.contains("run_goal") && text.contains("plan_goal"), "{text}");
    // A fully specified step goes straight to the tool: the outer run hands the goal to the inner Tandem.
    let plan = dir.path().join("plan.json");
    let tool = if text.contains("tandem__run_goal") { "tandem__run_goal" } else { "run_goal" };
    std::fs::write(
        &plan,
        json!({"goal": "Ask the local agent what 12*4+5 is.",
               "steps": [{"id": "s1", "tool": tool, "args": {"goal": "What is 12*4+5?"}}]})
        .to_string(),
    )
    .unwrap();
    let outer_runs = dir.path().join("outer-runs");
    let ran = Command::new(env!("CARGO_BIN_EXE_tandem"))
        // `--yes`: `run_goal` is marked destructive (the inner run may change things), which a run asks about.
        .args(["--quiet", "run", "--json", "--yes", "--no-prefix-store", "--planner", PLANNER, "--executor", EXECUTOR])
        .arg("--mcp")
        .arg(&config)
        .arg("--plan")
        .arg(&plan)
        // The inner Tandem loads its models, plans and runs within the call.
        .args(["--mcp-timeout", "600"])
        .arg("--runs-dir")
        .arg(&outer_runs)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(ran.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&ran.stderr));
    let summary: Value = serde_json::from_str(&stdout).unwrap();
    let step = &summary["steps"][0];
    assert_eq!(step["error"], Value::Null, "{summary}");
    assert!(gives(&step["output"].to_string(), 53.0), "the inner Tandem's answer: {summary}");
    assert_eq!(std::fs::read_dir(&inner_runs).unwrap().count(), 1, "the inner run is logged where it was told");
}

#[test]
fn serve_offers_mcp_at_slash_mcp_behind_its_key_and_allow_runs() {
    let runs = tempfile::tempdir().unwrap();
    let runs_dir = runs.path().to_str().unwrap();
    let closed = Server::start(&["--runs-dir", runs_dir]);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (status, error) = call("POST", &closed.url("/mcp"), None, Some(&initialize.to_string()));
    assert_eq!(status, 403, "/mcp runs tools: off without --allow-runs: {error}");
    drop(closed);

    let server = Server::start(&["--runs-dir", runs_dir, "--api-key", KEY, "--allow-runs"]);
    let (status, _) = call("POST", &server.url("/mcp"), None, Some(&initialize.to_string()));
    assert_eq!(status, 401, "/mcp needs the key");
    let url = server.url("/mcp");
    let script = json!([
        {"tool": "get_run", "args": {"run_id": "no-such-run"}},
        {"tool": "plan_goal", "args": {"goal": "What is 7*6?", "max_replans": 0}},
        {"tool": "approve_plan", "args": {"run_id": "$run_id", "approve": false}},
        {"tool": "run_goal", "args": {"goal": "What is 7*6?", "approve": "plan", "max_replans": 0}},
    ]);
    // The client's user says yes to every plan shown: over HTTP the question comes on the request's stream.
    let report = sdk_client(&script, "http", &["--answer", "approve", &url, KEY]);
    let names: Vec<&str> = report["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"run_goal") && names.contains(&"plan_goal"), "{report}");
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls[0]["is_error"], true, "{report}");
    assert_eq!(calls[1]["structured"]["status"], "awaiting_approval", "{report}\n{}", server.log.lock().unwrap());
    let rejected = &calls[2]["structured"];
    assert_eq!(rejected["status"], "finished", "{report}");
    assert_eq!(rejected["stop"], "rejected", "{report}");
    assert_eq!(rejected["steps"], json!([]), "a rejected plan ran: {report}");
    // The run is one of the server's runs, as /v1/runs shows it.
    let id = rejected["run_id"].as_str().unwrap();
    let (status, shown) = call("GET", &server.url(&format!("/v1/runs/{id}")), Some(KEY), None);
    assert_eq!((status, shown["stop"].as_str()), (200, Some("rejected")), "{shown}");
    // run_goal asking for approval: the user is asked once (plan_goal asked no one), says yes, and the plan runs.
    assert_eq!(report["elicited"].as_array().unwrap().len(), 1, "{report}");
    let approved = &calls[3]["structured"];
    assert_eq!(approved["status"], "finished", "{report}");
    assert!(approved["steps"].as_array().is_some_and(|s| !s.is_empty()), "the approved plan did not run: {report}");
}

#[test]
fn the_clients_user_approves_or_rejects_the_plan_through_elicitation() {
    real_model(PLANNER);
    real_model(EXECUTOR);
    let runs = tempfile::tempdir().unwrap();
    let goal = "What is 12*4+5?";
    let ask = |script: &Value, client: &[&str], server: &[&str]| {
        let command = tandem_mcp_command(runs.path(), server);
        let mut target: Vec<&str> = client.to_vec();
        target.push("--");
        target.extend(command.iter().map(String::as_str));
        sdk_client(script, "stdio", &target)
    };

    // The handshake of protocols before 2026-07-28: the server asks by an elicitation/create request.
    let script = json!([
        {"tool": "run_goal", "args": {"goal": goal, "approve": "plan", "max_replans": 0}},
        {"tool": "get_run", "args": {"run_id": "$run_id"}},
    ]);
    let report = ask(&script, &["--answer", "approve"], &[]);
    assert!(report["protocol"].as_str().is_some_and(|v| v < "2026-07-28"), "{report}");
    let elicited = report["elicited"].as_array().unwrap();
    assert_eq!(elicited.len(), 1, "{report}");
    let shown = elicited[0]["message"].as_str().unwrap();
    assert!(shown.contains(goal) && shown.contains("calculator"), "the form shows the goal and its plan: {shown}");
    assert_eq!(elicited[0]["schema"]["required"], json!(["approve"]), "{report}");
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls[0]["structured"]["status"], "finished", "{report}");
    assert!(gives(calls[0]["text"].as_str().unwrap(), 53.0), "{report}");
    let timeline = calls[1]["structured"]["timeline"].to_string();
    assert!(timeline.contains("approved by mcp client's user"), "the log names who approved: {timeline}");

    // Protocol 2026-07-28: the call returns input_required, the client asks its user and calls again with the
    // answer. The server asks for every plan (--approve plan); the user says no, so nothing runs.
    let script = json!([
        {"tool": "run_goal", "args": {"goal": goal, "max_replans": 0}},
        {"tool": "plan_goal", "args": {"goal": goal, "max_replans": 0}},
    ]);
    let report = ask(&script, &["--answer", "reject", "--modern"], &["--approve", "plan"]);
    assert_eq!(report["protocol"], "2026-07-28", "{report}");
    assert_eq!(report["elicited"].as_array().unwrap().len(), 1, "plan_goal returns its plan, asking no one: {report}");
    let calls = report["calls"].as_array().unwrap();
    let rejected = &calls[0]["structured"];
    assert_eq!((&rejected["status"], &rejected["stop"]), (&json!("finished"), &json!("rejected")), "{report}");
    assert_eq!(rejected["steps"], json!([]), "a rejected plan ran: {report}");
    assert_eq!(calls[1]["structured"]["status"], "awaiting_approval", "{report}");

    // A client without elicitation gets the plan back, as before.
    let script = json!([{"tool": "run_goal", "args": {"goal": goal, "approve": "plan", "max_replans": 0}}]);
    let report = ask(&script, &["--modern"], &[]);
    assert_eq!(report["calls"][0]["structured"]["status"], "awaiting_approval", "{report}");
    assert!(report["calls"][0]["text"].as_str().unwrap().contains("approve_plan"), "{report}");
}

#[test]
fn a_cancelled_request_interrupts_its_run_and_resume_run_finishes_it() {
    real_model(PLANNER);
    real_model(EXECUTOR);
    let runs = tempfile::tempdir().unwrap();
    // The goal's writing step keeps the executor busy after the plan, so the cancel lands mid-run.
    let goal = "Compute 12*4+5, then write one sentence saying what the result is.";
    let script = json!([
        {"tool": "run_goal", "args": {"goal": goal, "max_replans": 0}, "cancel_after": "plan v1"},
        {"tool": "get_run", "args": {"run_id": "$run_id"}, "until_settled": true},
        {"tool": "resume_run", "args": {"run_id": "$run_id"}},
    ]);
    let command = tandem_mcp_command(runs.path(), &[]);
    let mut target = vec!["--"];
    target.extend(command.iter().map(String::as_str));
    let report = sdk_client(&script, "stdio", &target);
    let calls = report["calls"].as_array().unwrap();
    let cancelled = &calls[0];
    let run_id = cancelled["run_id"].as_str().unwrap();
    assert!(cancelled["progress"][0].as_str().unwrap().starts_with("run "), "the run's id comes first: {cancelled}");
    let stopped = &calls[1]["structured"];
    assert_eq!(stopped["run_id"], run_id, "{report}");
    assert_eq!(stopped["status"], "interrupted", "the cancel stops the run before its end: {report}");
    let resumed = &calls[2];
    assert_eq!(resumed["is_error"], false, "{resumed}");
    assert_eq!(resumed["structured"]["status"], "finished", "{resumed}");
    assert_eq!(resumed["structured"]["stop"], "done", "{resumed}");
    assert!(gives(resumed["text"].as_str().unwrap(), 53.0), "{resumed}");
}

#[test]
fn the_mcp_inspector_cli_lists_and_calls_tandems_tools() {
    let model = crate::serve::MODEL;
    real_model(model);
    let inspector = installed_program("npm/node_modules/.bin/mcp-inspector");
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let inspect = |method: &[&str]| -> Value {
        let output = Command::new(&inspector)
            // The Inspector keeps a catalog under HOME: a scratch one, not the user's.
            .env("HOME", dir.path())
            .args(["--cli", "--connect-timeout", "600000", env!("CARGO_BIN_EXE_tandem"), "--quiet", "mcp"])
            .args(["--planner", model, "--executor", model, "--no-prefix-store", "--runs-dir"])
            .arg(&runs)
            .args(method)
            .output()
            .expect("run the MCP Inspector");
        let stdout = String::from_utf8_lossy(&output.stdout);
        // The Inspector prints the result as JSON (and a line of its own after a tool error).
        let json_end = stdout.rfind("\n}").map_or(stdout.len(), |i| i + 2);
        serde_json::from_str(&stdout[..json_end]).unwrap_or_else(|e| {
            panic!("the Inspector's answer is not JSON ({e}):\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr))
        })
    };
    let listed = inspect(&["--method", "tools/list"]);
    let names: Vec<&str> = listed["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"run_goal") && names.contains(&"plan_goal"), "{listed}");
    assert!(listed["tools"][0]["outputSchema"].is_object(), "{listed}");
    let planned = inspect(&["--method", "tools/call", "--tool-name", "plan_goal", "--tool-arg", "goal=What is 7*6?"]);
    assert_eq!(planned["structuredContent"]["status"], "awaiting_approval", "{planned}");
    assert!(planned["structuredContent"]["plan"]["steps"].is_array(), "{planned}");
    let missing = inspect(&["--method", "tools/call", "--tool-name", "get_run", "--tool-arg", "run_id=nope"]);
    assert_eq!(missing["isError"], true, "{missing}");
}
