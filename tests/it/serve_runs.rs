//! Agent runs over HTTP against a real `tandem serve` process and the real 0.5B model: SIGTERM mid-run (a graceful
//! exit 0, a chat in flight finished, the run's log ending at a whole event) and the run resumed on a restarted
//! server; plan approval (approve with an edited plan, reject, bad edits naming their field), cancel, the list,
//! named tool sets, and the 404/409 answers.

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::real_model;
use crate::serve::{agent, call, run_events, Server, KEY, MODEL};

fn post(server: &Server, path: &str, body: Value) -> (u16, Value) {
    call("POST", &server.url(path), Some(KEY), Some(&body.to_string()))
}

fn get(server: &Server, path: &str) -> (u16, Value) {
    call("GET", &server.url(path), Some(KEY), None)
}

/// Starts a run; its id.
fn start_run(server: &Server, body: Value) -> String {
    let (status, created) = post(server, "/v1/runs", body.clone());
    assert_eq!(status, 201, "{body} → {created}\n{}", server.log.lock().unwrap());
    created["id"].as_str().expect("a run id").to_string()
}

/// The run's log as JSON records.
fn log_records(runs: &Path, id: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(runs.join(id).join("events.jsonl")).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'), "a torn last line: {text}");
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

fn names(records: &[Value]) -> Vec<String> {
    records.iter().map(|r| r["event"].as_str().unwrap().to_string()).collect()
}

/// Sends SIGTERM and waits (at most two minutes) for the process to exit.
fn terminate(server: &mut Server) -> ExitStatus {
    let pid = server.child.id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status().expect("run kill");
    assert!(sent.success());
    let started = Instant::now();
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            return status;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "no exit after SIGTERM:\n{}", server.log.lock().unwrap());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigterm_stops_the_server_gracefully_and_the_interrupted_run_resumes_after_a_restart() {
    real_model(MODEL);
    // A signal while the models load (once the server says it is loading them): a clean exit too.
    let mut early = Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(["serve", "--port", "0", "--planner", MODEL, "--executor", MODEL, "--no-prefix-store"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    // Kept open until the process is gone: it still writes to stderr.
    let mut stderr = std::io::BufReader::new(early.stderr.take().unwrap());
    std::io::BufRead::read_line(&mut stderr, &mut said).unwrap();
    assert!(said.contains("loading"), "{said}");
    Command::new("kill").args(["-TERM", &early.id().to_string()]).status().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert_eq!(early.wait().unwrap().code(), Some(0), "SIGTERM during start-up: {said}{rest}");

    let scratch = tempfile::tempdir().unwrap();
    let (runs, workspace) = (scratch.path().join("runs"), scratch.path().join("ws"));
    std::fs::create_dir(&workspace).unwrap();
    let flags = [
        "--allow-runs",
        "--runs-dir",
        runs.to_str().unwrap(),
        "--workspace",
        workspace.to_str().unwrap(),
        "--api-key",
        KEY,
        "--parallel",
        "2",
        // Long enough for the chat in flight to finish on a loaded machine (the default 10 s then halts it).
        "--shutdown-grace",
        "300",
    ];
    let mut server = Server::start(&flags);
    // A streamed chat on one slot, in flight (its first chunk read) before the run starts on the other; the signal
    // comes as soon as the run has begun, while its planner still reads its prompt (a run signalled later, after
    // the chat's first chunk, had sometimes finished already on a quiet machine).
    let (first_chunk, chunk_seen) = std::sync::mpsc::channel();
    let chat = {
        let body = json!({"model": MODEL, "max_tokens": 200, "temperature": 0, "stream": true,
            "messages": [{"role": "user", "content": "Count from 1 to 100, separated by commas."}]});
        let url = server.url("/v1/chat/completions");
        std::thread::spawn(move || {
            let response = agent()
                .post(&url)
                .set("Authorization", &format!("Bearer {KEY}"))
                .set("Content-Type", "application/json")
                .send_string(&body.to_string())
                .expect("the chat request");
            let mut lines = std::io::BufReader::new(response.into_reader()).lines().map_while(Result::ok);
            let mut chunks = Vec::new();
            for line in lines.by_ref() {
                if let Some(data) = line.strip_prefix("data: ") {
                    chunks.push(data.to_string());
                    let _ = first_chunk.send(());
                }
            }
            chunks
        })
    };
    chunk_seen.recv_timeout(Duration::from_secs(180)).expect("the chat's first chunk");
    let goal = "What is 12*4+5, and what is that times 3?";
    let id = start_run(&server, json!({"goal": goal, "max_replans": 1}));
    let began = Instant::now();
    while !log_records(&runs, &id).iter().any(|r| r["event"] == "run_started") {
        assert!(began.elapsed() < Duration::from_secs(60), "the run did not start:\n{}", server.log.lock().unwrap());
        std::thread::sleep(Duration::from_millis(5));
    }
    let status = terminate(&mut server);
    let log = server.log.lock().unwrap().clone();
    assert_eq!(status.code(), Some(0), "SIGTERM must stop the server cleanly:\n{log}");
    assert!(log.contains("SIGTERM: stopping"), "{log}");
    // The chat in flight was answered to its end.
    let chunks = chat.join().unwrap();
    assert_eq!(chunks.last().map(String::as_str), Some("[DONE]"), "{chunks:?}\n{log}");
    assert!(chunks.iter().all(|c| !c.contains("\"error\"")), "{chunks:?}");
    // The run stopped at an event boundary: a whole log, without run_finished.
    let records = log_records(&runs, &id);
    let before = names(&records);
    assert_eq!(before.first().map(String::as_str), Some("run_started"), "{before:?}");
    assert!(!before.contains(&"run_finished".to_string()), "the run was not interrupted: {before:?}\n{log}");
    drop(server);

    // A new server on the same directory: the run is listed as interrupted, and resumes to its end.
    let server = Server::start(&flags);
    let (status, list) = get(&server, "/v1/runs");
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["object"], "list");
    assert_eq!(list["data"][0]["id"], id.as_str(), "{list}");
    assert_eq!(list["data"][0]["status"], "interrupted", "{list}");
    assert_eq!(list["data"][0]["goal"], goal, "{list}");
    let (status, queued) = post(&server, &format!("/v1/runs/{id}/resume"), json!({}));
    assert_eq!(status, 202, "{queued}\n{}", server.log.lock().unwrap());
    let events = run_events(&server, &id);
    let after: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(&after[..before.len()], before.iter().map(String::as_str).collect::<Vec<_>>().as_slice());
    assert_eq!(after[before.len()], "resumed", "{after:?}");
    assert_eq!(after.last(), Some(&"run_finished"), "{after:?}\n{}", server.log.lock().unwrap());
    let (_, shown) = get(&server, &format!("/v1/runs/{id}"));
    assert_eq!(shown["status"], "finished", "{shown}");
    let (status, error) = post(&server, &format!("/v1/runs/{id}/resume"), json!({}));
    assert_eq!((status, &error["error"]["code"]), (409, &json!("run_not_resumable")), "{error}");
    let (status, error) = post(&server, &format!("/v1/runs/{id}/resume"), json!({"rerun_in_doubt": "yes"}));
    assert_eq!((status, &error["error"]["param"]), (400, &json!("rerun_in_doubt")), "{error}");
}

/// Reads the run's events to their end; the last event's name and the records.
fn events_until_pause(server: &Server, id: &str) -> (String, Vec<Value>) {
    let events = run_events(server, id);
    let last = events.last().map(|(name, _)| name.clone()).unwrap_or_default();
    let records = events
        .iter()
        .filter(|(name, _)| name != "awaiting_approval")
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    (last, records)
}

#[test]
fn serve_runs_wait_for_plan_approval_take_edits_and_rejects_cancel_and_use_named_tool_sets() {
    let scratch = tempfile::tempdir().unwrap();
    let (runs, workspace) = (scratch.path().join("runs"), scratch.path().join("ws"));
    std::fs::create_dir(&workspace).unwrap();
    let tools = scratch.path().join("shout.toml");
    std::fs::write(
        &tools,
        r#"[[tool]]
name = "shout"
description = "Upper-case a text."
command = ["sh", "-c", "tr -d '{}\"' | tr a-z A-Z"]
args_schema = '{"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}'
"#,
    )
    .unwrap();
    let base = [
        "--allow-runs",
        "--runs-dir",
        runs.to_str().unwrap(),
        "--workspace",
        workspace.to_str().unwrap(),
        "--api-key",
        KEY,
    ];
    let tool_set = format!("loud={}", tools.display());
    let mut flags = base.to_vec();
    flags.extend(["--parallel", "2", "--tool-set", &tool_set]);
    let server = Server::start(&flags);

    // Tool sets are named, never paths; per-step approval is not offered.
    for (body, param) in [
        (json!({"goal": "x", "tools": "quiet"}), "tools"),
        (json!({"goal": "x", "tools": tools.to_str().unwrap()}), "tools"),
        (json!({"goal": "x", "tools": ["loud"]}), "tools"),
        (json!({"goal": "x", "mcp": "clock"}), "mcp"),
        (json!({"goal": "x", "approve": "steps"}), "approve"),
        (json!({"goal": "x", "plans": 0}), "plans"),
        (json!({"goal": "x", "plans": 17}), "plans"),
    ] {
        let (status, error) = post(&server, "/v1/runs", body.clone());
        assert_eq!((status, &error["error"]["param"]), (400, &json!(param)), "{body} → {error}");
    }
    // Three runs that stop at their plan for approval (planned meanwhile).
    let ask =
        |goal: &str| start_run(&server, json!({"goal": goal, "approve": "plan", "tools": "loud", "max_replans": 2}));
    // Ids sort by their start second: a second apart, the list's order is theirs.
    let pause = || std::thread::sleep(Duration::from_millis(1050));
    let first = ask("Shout the word hello.");
    pause();
    let second = ask("Shout the word bye.");
    pause();
    let third = ask("Shout the word no.");
    for missing in ["approve", "reject", "resume", "cancel"] {
        let (status, error) = post(&server, &format!("/v1/runs/no-such-run/{missing}"), json!({}));
        assert_eq!((status, &error["error"]["code"]), (404, &json!("run_not_found")), "{missing}: {error}");
    }

    let (last, records) = events_until_pause(&server, &first);
    assert_eq!(last, "awaiting_approval", "{records:?}\n{}", server.log.lock().unwrap());
    assert_eq!(records[0]["settings"]["approve"], "plan");
    assert_eq!(records[0]["settings"]["tools_file"], tools.to_str().unwrap(), "{}", records[0]);
    let (status, waiting) = get(&server, &format!("/v1/runs/{first}"));
    assert_eq!(status, 200);
    assert_eq!(waiting["status"], "awaiting_approval", "{waiting}");
    assert_eq!(waiting["awaiting_approval"]["plan_version"], waiting["plan"]["version"], "{waiting}");
    let (status, error) = post(&server, &format!("/v1/runs/{first}/resume"), json!({}));
    assert_eq!((status, &error["error"]["code"]), (409, &json!("run_not_resumable")), "{error}");

    // Bad edits: 400 naming the field, and the run still waits.
    let approve = |id: &str, body: Value| post(&server, &format!("/v1/runs/{id}/approve"), body);
    let step = |tool: &str, args: Value| json!({"id": "s1", "tool": tool, "args": args});
    for (body, param) in [
        (json!({"plan": {"steps": "none"}}), "plan"),
        (json!({"plan": {"steps": [step("teleport", json!({}))]}}), "plan.steps[0].tool"),
        (
            json!({"plan": {"steps": [step("write_file", json!({"path": "a.txt", "content": "x"}))]}}),
            "plan.steps[0].tool",
        ),
        (json!({"plan": {"steps": [step("shout", json!({}))]}}), "plan.steps[0].args"),
        (
            json!({"plan": {"steps": [step("shout", json!({"text": "a"})),
            {"id": "s2", "tool": "shout", "args": {"text": "b"}, "depends_on": ["s7"]}]}}),
            "plan.steps[1].depends_on",
        ),
        (json!({"plan": {"steps": []}}), "plan.steps"),
        (json!({"decision": "yes"}), "decision"),
    ] {
        let (status, error) = approve(&first, body.clone());
        assert_eq!((status, &error["error"]["param"]), (400, &json!(param)), "{body} → {error}");
        assert_eq!(error["error"]["type"], "invalid_request_error", "{error}");
    }
    assert_eq!(get(&server, &format!("/v1/runs/{first}")).1["status"], "awaiting_approval");

    // Approved with an edited plan: that plan runs, through the agent's resume, and the log records the edit.
    let (status, queued) = approve(&first, json!({"plan": {"steps": [step("shout", json!({"text": "hello"}))]}}));
    assert_eq!(status, 202, "{queued}");
    let (last, records) = events_until_pause(&server, &first);
    assert_eq!(last, "run_finished", "{records:?}\n{}", server.log.lock().unwrap());
    let resumed = records.iter().position(|r| r["event"] == "resumed").expect("a resumed event");
    let edited = records.iter().position(|r| r["event"] == "plan_written" && r["origin"] == "edited").unwrap();
    assert!(resumed < edited, "{records:?}");
    assert!(records.iter().any(|r| r["event"] == "plan_approval" && r["decision"] == "edited" && r["by"] == "http"));
    let shouted = records.iter().find(|r| r["event"] == "step_finished").expect("a step ran");
    assert_eq!(shouted["tool"], "shout");
    assert!(shouted["output"].to_string().contains("HELLO"), "{shouted}");
    let (status, error) = approve(&first, json!({}));
    assert_eq!((status, &error["error"]["code"]), (409, &json!("run_not_awaiting_approval")), "{error}");

    // Rejected: nothing runs.
    let (last, _) = events_until_pause(&server, &second);
    assert_eq!(last, "awaiting_approval");
    let (status, _) = post(&server, &format!("/v1/runs/{second}/reject"), json!({}));
    assert_eq!(status, 202);
    let (last, records) = events_until_pause(&server, &second);
    assert_eq!(last, "run_finished");
    assert_eq!(records.last().unwrap()["stop"], "rejected", "{records:?}");
    assert!(!records.iter().any(|r| r["event"] == "step_finished"), "{records:?}");

    // Cancelled as soon as it is created (queued or running): it stops and its log ends with the cancel.
    pause();
    let fourth = start_run(&server, json!({"goal": "What is 12*4+5?"}));
    let (status, cancelled) = post(&server, &format!("/v1/runs/{fourth}/cancel"), json!({}));
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!((&cancelled["status"], &cancelled["stop"]), (&json!("cancelled"), &json!("cancelled")), "{cancelled}");
    let records = log_records(&runs, &fourth);
    assert_eq!(records[0]["event"], "run_started", "{records:?}");
    assert_eq!(records.last().unwrap()["stop"], "cancelled", "{records:?}");
    let (status, error) = post(&server, &format!("/v1/runs/{fourth}/cancel"), json!({}));
    assert_eq!((status, &error["error"]["code"]), (409, &json!("run_finished")), "{error}");

    // The list: newest first, each with its status.
    let (last, _) = events_until_pause(&server, &third);
    assert_eq!(last, "awaiting_approval");
    let (_, list) = get(&server, "/v1/runs?limit=10");
    let listed: Vec<(&str, &str)> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap(), r["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        listed,
        vec![
            (fourth.as_str(), "cancelled"),
            (third.as_str(), "awaiting_approval"),
            (second.as_str(), "finished"),
            (first.as_str(), "finished")
        ],
        "{list}"
    );
    let (status, error) = get(&server, "/v1/runs?limit=0");
    assert_eq!((status, &error["error"]["param"]), (400, &json!("limit")), "{error}");
    drop(server);

    // A server without the tool set cannot go on with the waiting run that uses it, but can cancel it.
    let server = Server::start(&base);
    assert_eq!(get(&server, &format!("/v1/runs/{third}")).1["status"], "awaiting_approval");
    let (status, error) = post(&server, &format!("/v1/runs/{third}/approve"), json!({}));
    assert_eq!((status, &error["error"]["code"]), (409, &json!("run_not_resumable")), "{error}");
    let (status, cancelled) = post(&server, &format!("/v1/runs/{third}/cancel"), json!({}));
    assert_eq!((status, &cancelled["status"]), (200, &json!("cancelled")), "{cancelled}");
    let (status, error) = post(&server, &format!("/v1/runs/{third}/approve"), json!({}));
    assert_eq!((status, &error["error"]["code"]), (409, &json!("run_not_awaiting_approval")), "{error}");
}
