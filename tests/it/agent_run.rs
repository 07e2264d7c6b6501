//! The orchestrator on given plans (no model is loaded: tool steps with known arguments never need one): the
//! audit log, answers, concurrency of independent steps, budgets, approval, policy, path escape, and a run killed
//! mid-way then resumed without re-running what finished.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::runs::{event_names, read_or_empty, shell_tool, Scratch};
use serde_json::{json, Map, Value};
use tandem::agent::log::events::read_log;
use tandem::agent::run::executor::{enforce_step_tool, ExecutorCall};
use tandem::agent::{
    Agent, Approver, EventLog, NoObserver, Plan, PlanDecision, RunParts, RunSettings, RunState, RunsDir, Step,
    StopReason,
};
use tandem::progress::SilentReporter;
use tandem::tools::{ToolContext, ToolRegistry, Workspace};

fn plan(value: Value) -> Plan {
    serde_json::from_value(value).expect("plan JSON")
}

/// Approves or rejects as told, counting what it was asked.
struct Scripted {
    plan: Option<PlanDecision>,
    steps: bool,
    asked_plans: usize,
    asked_steps: usize,
}

impl Approver for Scripted {
    fn review_plan(&mut self, _plan: &Plan) -> tandem::Result<PlanDecision> {
        self.asked_plans += 1;
        Ok(self.plan.take().unwrap_or(PlanDecision::Approve))
    }
    fn review_step(&mut self, _step: &Step, _args: &Map<String, Value>) -> tandem::Result<bool> {
        self.asked_steps += 1;
        Ok(self.steps)
    }
    fn name(&self) -> &str {
        "user"
    }
}

/// Runs a given plan through the library with writes allowed and the approval mode `approve`.
fn run_with(
    scratch: &Scratch,
    given: Plan,
    approve: &str,
    approver: &mut Scripted,
) -> (tandem::agent::RunOutcome, Vec<Value>) {
    let context = ToolContext::new(Workspace::new(scratch.workspace()).unwrap()).with_write(true);
    let registry = ToolRegistry::builtins(&context);
    let mut settings = RunSettings::new("no-planner-needed", "no-executor-needed", &scratch.workspace());
    settings.allow_write = true;
    settings.approve = tandem::settings::Approval::from_name(approve).unwrap();
    settings.budgets.max_replans = 0;
    let (_, dir) = RunsDir::new(scratch.path("runs")).create_run().unwrap();
    let log = EventLog::create(&dir).unwrap();
    let mut models = tandem::engine::Engine::new(Default::default(), Default::default()).unwrap().models(
        "no-planner-needed",
        "no-executor-needed",
        &SilentReporter,
    );
    let goal = given.goal.clone();
    let agent = Agent::start(
        &goal,
        settings,
        log,
        RunParts { registry: &registry, context: &context, models: &mut models, approver, observer: &NoObserver },
    )
    .unwrap();
    let outcome = agent.run(Some(given)).unwrap();
    (outcome, scratch.latest_events())
}

fn write_plan() -> Plan {
    plan(json!({"goal": "write 6*7 to out.txt", "steps": [
        {"id": "s1", "tool": "calculator", "args": {"expression": "6*7"}},
        {"id": "s2", "tool": "write_file", "args": {"path": "out.txt", "content": "$s1.result$"}}
    ]}))
}

#[test]
fn given_plan_runs_in_dependency_order_and_logs_every_event() {
    let scratch = Scratch::new();
    let mut approver = Scripted { plan: None, steps: true, asked_plans: 0, asked_steps: 0 };
    let (outcome, events) = run_with(&scratch, write_plan(), "none", &mut approver);
    assert_eq!(outcome.stop, StopReason::Done, "{}", outcome.detail);
    assert_eq!(std::fs::read_to_string(scratch.workspace().join("out.txt")).unwrap(), "42");
    assert_eq!(approver.asked_plans + approver.asked_steps, 0, "no approval was asked for");
    let names = event_names(&events);
    assert_eq!(names.first().map(String::as_str), Some("run_started"));
    assert_eq!(names.last().map(String::as_str), Some("run_finished"));
    let calls: Vec<&Value> = events.iter().filter(|e| e["event"] == "tool_call").collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1]["args"], json!({"path": "out.txt", "content": "42"}), "the reference was resolved");
    // The logged plan lists the dependency the reference implies.
    let written = events.iter().find(|e| e["event"] == "plan_written").unwrap();
    assert_eq!(written["plan"]["steps"][1]["depends_on"], json!(["s1"]));
    // Sequence numbers are consecutive: nothing was lost or written twice.
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..events.len() as u64).collect::<Vec<_>>());
}

#[test]
fn rejected_plan_runs_no_tool() {
    let scratch = Scratch::new();
    let mut approver = Scripted { plan: Some(PlanDecision::Reject), steps: true, asked_plans: 0, asked_steps: 0 };
    let (outcome, events) = run_with(&scratch, write_plan(), "plan", &mut approver);
    assert_eq!(outcome.stop, StopReason::Rejected);
    assert_eq!(approver.asked_plans, 1);
    assert!(!scratch.workspace().join("out.txt").exists());
    let names = event_names(&events);
    assert!(!names.iter().any(|n| n == "tool_call" || n == "step_started"), "{names:?}");
    assert!(events.iter().any(|e| e["event"] == "plan_approval" && e["decision"] == "rejected"));
}

#[test]
fn edited_plan_is_validated_and_run_instead() {
    let scratch = Scratch::new();
    let mut edited = write_plan();
    edited.steps[0].args.insert("expression".into(), json!("6*8"));
    let mut approver = Scripted { plan: Some(PlanDecision::Edit(edited)), steps: true, asked_plans: 0, asked_steps: 0 };
    let (outcome, events) = run_with(&scratch, write_plan(), "plan", &mut approver);
    assert_eq!(outcome.stop, StopReason::Done, "{}", outcome.detail);
    assert_eq!(std::fs::read_to_string(scratch.workspace().join("out.txt")).unwrap(), "48");
    let origins: Vec<&Value> = events.iter().filter(|e| e["event"] == "plan_written").map(|e| &e["origin"]).collect();
    assert_eq!(origins, [&json!("given"), &json!("edited")]);
    // The edit is the approval: the user wrote that plan (it is still validated before it runs).
    assert_eq!(approver.asked_plans, 1);
    assert!(events.iter().any(|e| e["event"] == "plan_approval" && e["decision"] == "edited" && e["version"] == 2));
}

#[test]
fn rejected_step_stops_before_the_call() {
    let scratch = Scratch::new();
    let mut approver = Scripted { plan: None, steps: false, asked_plans: 0, asked_steps: 0 };
    let (outcome, events) = run_with(&scratch, write_plan(), "steps", &mut approver);
    assert_eq!(outcome.stop, StopReason::Rejected);
    assert_eq!(approver.asked_steps, 1);
    assert!(!event_names(&events).iter().any(|n| n == "tool_call"));
}

#[test]
fn executor_call_of_another_tool_is_refused() {
    let step: Step = serde_json::from_value(json!({"id": "s1", "tool": "calculator", "args": {}})).unwrap();
    let other = ExecutorCall { tool: "write_file".into(), args: Map::new() };
    let err = enforce_step_tool(&step, &other).unwrap_err().to_string();
    assert!(err.contains("may only call 'calculator'"), "{err}");
    let same = ExecutorCall { tool: "calculator".into(), args: Map::new() };
    assert!(enforce_step_tool(&step, &same).is_ok());
}

#[test]
fn plan_with_a_tool_policy_does_not_offer_is_refused_before_anything_runs() {
    let scratch = Scratch::new();
    let plan_path = scratch.write("plan.json", &write_plan_json());
    let output = scratch.tandem(&[
        "run",
        "--plan",
        plan_path.to_str().unwrap(),
        "--workspace",
        scratch.workspace().to_str().unwrap(),
        "--max-replans",
        "0",
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("write_file"), "{stderr}");
    assert!(!event_names(&scratch.latest_events()).iter().any(|n| n == "tool_call"));
    assert!(!scratch.workspace().join("out.txt").exists());
}

fn write_plan_json() -> String {
    serde_json::to_string(&write_plan()).unwrap()
}

#[test]
fn approval_without_a_terminal_needs_yes() {
    let scratch = Scratch::new();
    let plan_path = scratch.write("plan.json", &write_plan_json());
    let ws = scratch.workspace();
    let args = [
        "run",
        "--plan",
        plan_path.to_str().unwrap(),
        "--workspace",
        ws.to_str().unwrap(),
        "--allow-write",
        "--approve",
        "plan",
    ];
    let refused = scratch.tandem(&args);
    assert_eq!(refused.status.code(), Some(2), "a usage error exits 2");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--yes") && stderr.contains("terminal"), "{stderr}");
    assert!(!ws.join("out.txt").exists());
    let mut with_yes = args.to_vec();
    with_yes.push("--yes");
    let (json, output) = scratch.tandem_json(&with_yes);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(json["stop"], "done");
    assert!(scratch.latest_events().iter().any(|e| e["event"] == "plan_approval" && e["by"] == "--yes"));
}

#[test]
fn path_escape_is_refused_and_recorded() {
    let scratch = Scratch::new();
    scratch.write("secret.txt", "do not read");
    let plan_path = scratch.write(
        "plan.json",
        r#"{"goal": "read the secret", "steps": [{"id": "s1", "tool": "read_file", "args": {"path": "../secret.txt"}}]}"#,
    );
    let (json, output) = scratch.tandem_json(&[
        "run",
        "--plan",
        plan_path.to_str().unwrap(),
        "--workspace",
        scratch.workspace().to_str().unwrap(),
        "--max-replans",
        "0",
    ]);
    assert_eq!(output.status.code(), Some(3), "a run that stops before finishing exits 3");
    assert_eq!(json["stop"], "budget", "no replans were allowed: {json}");
    let error = json["steps"][0]["error"].as_str().unwrap();
    assert!(error.contains("outside the workspace"), "{error}");
    assert!(json["steps"][0]["output"].is_null());
}

#[test]
fn step_budget_stops_with_the_reason() {
    let scratch = Scratch::new();
    let plan_path = scratch.write(
        "plan.json",
        r#"{"goal": "three sums", "steps": [
            {"id": "s1", "tool": "calculator", "args": {"expression": "1+1"}},
            {"id": "s2", "tool": "calculator", "args": {"expression": "$s1.result$+1"}},
            {"id": "s3", "tool": "calculator", "args": {"expression": "3+3"}}]}"#,
    );
    let (json, output) = scratch.tandem_json(&["run", "--plan", plan_path.to_str().unwrap(), "--max-steps", "2"]);
    assert_eq!(output.status.code(), Some(3), "a run that stops on its budget exits 3");
    assert_eq!(json["stop"], "budget");
    assert!(json["detail"].as_str().unwrap().contains("--max-steps"), "{json}");
    // s1 and s3 are independent and ran in the first round; s2 would have been the third step.
    let ran: Vec<&str> = json["steps"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ran, ["s1", "s3"]);
}

/// "What is 12*4+5?" planned as `12*4+5` and then `calculator("$s1.result$")`: the second step recomputes a known
/// result, so it is dropped (logged, no tool call) and takes the first one's output; a step that does compute
/// (`$s1.result$ + 1`) still runs.
#[test]
fn a_step_that_recomputes_a_known_result_is_dropped_and_logged() {
    let scratch = Scratch::new();
    let plan_path = scratch.write(
        "plan.json",
        r#"{"goal": "What is 12*4+5?", "steps": [
            {"id": "s1", "tool": "calculator", "args": {"expression": "12*4+5"}},
            {"id": "s2", "tool": "calculator", "args": {"expression": "$s1.result$"}},
            {"id": "s3", "tool": "calculator", "args": {"expression": "$s2.result$ + 1"}}]}"#,
    );
    let (json, output) = scratch.tandem_json(&["run", "--plan", plan_path.to_str().unwrap(), "--joiner", "off"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let steps = json["steps"].as_array().unwrap();
    let via: Vec<&str> = steps.iter().map(|s| s["via"].as_str().unwrap()).collect();
    assert_eq!(via, ["tool", "dropped", "tool"], "{json}");
    assert_eq!(steps[1]["output"], steps[0]["output"], "the dropped step takes the known result");
    assert_eq!(steps[2]["output"]["result"], 54, "{json}");
    let calls: Vec<Value> = scratch.latest_events().into_iter().filter(|e| e["event"] == "tool_call").collect();
    let called: Vec<&str> = calls.iter().map(|c| c["step"].as_str().unwrap()).collect();
    assert_eq!(called, ["s1", "s3"], "no call for the dropped step");
}

#[test]
fn independent_tool_steps_run_concurrently() {
    let scratch = Scratch::new();
    let tools = shell_tool("pause", "Wait a second.", "{}", "sleep 1; echo '{\"slept\": 1}'");
    let tools_path = scratch.write("tools.toml", &tools);
    let plan_path = scratch.write(
        "plan.json",
        r#"{"goal": "wait twice", "steps": [
            {"id": "s1", "tool": "pause", "args": {}}, {"id": "s2", "tool": "pause", "args": {}}]}"#,
    );
    let started = Instant::now();
    let (json, output) =
        scratch.tandem_json(&["run", "--plan", plan_path.to_str().unwrap(), "--tools", tools_path.to_str().unwrap()]);
    let elapsed = started.elapsed();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(json["steps"].as_array().unwrap().len(), 2);
    // Two one-second steps one after the other would take at least 2 s.
    assert!(elapsed < Duration::from_millis(1900), "took {elapsed:?}");
}

fn wait_for(path: &Path, needle: &str, limit: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        let text = std::fs::read_dir(path)
            .ok()
            .and_then(|mut entries| entries.next())
            .and_then(|entry| std::fs::read_to_string(entry.ok()?.path().join("events.jsonl")).ok())
            .unwrap_or_default();
        if text.contains(needle) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn killed_run_resumes_without_rerunning_completed_steps() {
    let scratch = Scratch::new();
    // In the workspace: tool programs may write only there.
    let counter = scratch.workspace().join("counter.log");
    let block = scratch.write("block", "");
    let mut tools = shell_tool(
        "count",
        "Count a call.",
        "{}",
        &format!("echo ran >> '{}'; echo '{{\"calls\": 1}}'", counter.display()),
    );
    tools += &shell_tool(
        "gate",
        "Wait until the gate opens.",
        "{}",
        &format!("while [ -e '{}' ]; do sleep 0.05; done; echo '{{\"open\": true}}'", block.display()),
    );
    // Waiting has no effect: the gate call the kill interrupts may run again on resume.
    tools += "idempotent = true\n";
    let tools_path = scratch.write("tools.toml", &tools);
    let plan_path = scratch.write(
        "plan.json",
        r#"{"goal": "count, wait, add", "steps": [
            {"id": "s1", "tool": "count", "args": {}},
            {"id": "s2", "tool": "gate", "args": {}, "depends_on": ["s1"]},
            {"id": "s3", "tool": "calculator", "args": {"expression": "2+2"}, "depends_on": ["s2"]}]}"#,
    );
    let workspace = scratch.workspace();
    let mut child = scratch
        .command(&[
            "run",
            "--plan",
            plan_path.to_str().unwrap(),
            "--tools",
            tools_path.to_str().unwrap(),
            "--workspace",
            workspace.to_str().unwrap(),
        ])
        .spawn()
        .unwrap();
    let reached =
        wait_for(&scratch.path("runs"), r#""event":"tool_call","version":1,"step":"s2""#, Duration::from_secs(30));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(reached, "the run never reached s2");
    assert_eq!(read_or_empty(&counter).lines().count(), 1);

    let list = scratch.tandem(&["runs", "list"]);
    assert!(String::from_utf8_lossy(&list.stdout).contains("interrupted"));

    // A resume that holds the run (waiting at the gate again) keeps a second resume out.
    let mut first = scratch.command(&["resume", "latest"]).spawn().unwrap();
    let holding = wait_for(&scratch.path("runs"), r#""event":"resumed""#, Duration::from_secs(30));
    let second = scratch.tandem(&["resume", "latest"]);
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(holding, "the first resume never started");
    assert_eq!(second.status.code(), Some(1), "{}", String::from_utf8_lossy(&second.stderr));
    assert!(String::from_utf8_lossy(&second.stderr).contains("another process"));
    assert_eq!(read_or_empty(&counter).lines().count(), 1, "s1 did not run again");

    std::fs::remove_file(&block).unwrap();
    let (json, output) = scratch.tandem_json(&["resume", "latest"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(json["stop"], "done");
    assert_eq!(json["answer"], "4");
    assert_eq!(read_or_empty(&counter).lines().count(), 1, "s1 ran once in all");
    let events = scratch.latest_events();
    let resumed = events.iter().find(|e| e["event"] == "resumed").expect("a resumed event");
    assert_eq!(resumed["completed"], json!(["s1"]));
    assert_eq!(resumed["rerun"], json!(["s2"]), "the interrupted gate call runs again");
    let s1_runs = events.iter().filter(|e| e["event"] == "step_finished" && e["step"] == "s1").count();
    assert_eq!(s1_runs, 1);

    // A finished run is not resumed again.
    let again = scratch.tandem(&["resume", "latest"]);
    assert_eq!(again.status.code(), Some(1), "an error exits 1");
    assert!(String::from_utf8_lossy(&again.stderr).contains("already finished"));
}

#[test]
fn torn_last_line_is_reported_and_skipped() {
    let scratch = Scratch::new();
    let mut approver = Scripted { plan: None, steps: true, asked_plans: 0, asked_steps: 0 };
    run_with(&scratch, write_plan(), "none", &mut approver);
    let runs = RunsDir::new(scratch.path("runs"));
    let (_, dir) = runs.find("latest").unwrap();
    let log_path = dir.join(EventLog::FILE);
    let mut text = std::fs::read_to_string(&log_path).unwrap();
    text.push_str(r#"{"seq": 99, "at_ms": 1, "event": "step_fin"#);
    std::fs::write(&log_path, text).unwrap();
    let contents = read_log(&log_path).unwrap();
    assert!(contents.torn_tail);
    assert_eq!(contents.bad_lines.len(), 1);
    assert!(contents.bad_lines[0].contains("events.jsonl:"), "{:?}", contents.bad_lines);
    let state = RunState::replay(&contents.records);
    assert_eq!(state.status(), "done");
    assert_eq!(state.steps_run, 2);
}

#[test]
fn a_run_without_a_goal_or_plan_is_a_usage_error() {
    let scratch = Scratch::new();
    let output = scratch.tandem(&["run"]);
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--plan FILE"));
    let unknown = scratch.tandem(&["run", "goal", "--no-such-flag"]);
    assert_eq!(unknown.status.code(), Some(2), "clap's own usage errors exit 2 as well");
}

#[test]
fn run_settings_keep_their_log_format() {
    // A log line written before the settings were typed (mode and approval as names, budgets as top-level keys)
    // reads back, and writing it again gives the same keys and values.
    let line = json!({
        "planner": "p", "executor": "e", "mode": "step", "workspace": "/w", "allow_write": true,
        "allow_shell": ["wc"], "shell_timeout_s": 7, "tools_file": null, "max_replans": 1, "max_steps": 9,
        "max_tokens": 100, "max_seconds": 60, "plan_tokens": 50, "executor_tokens": 20, "seed": 0,
        "approve": "steps"
    });
    let settings: RunSettings = serde_json::from_value(line.clone()).unwrap();
    assert_eq!(settings.pair.mode, tandem::settings::Mode::Step);
    assert_eq!(settings.approve, tandem::settings::Approval::Steps);
    assert_eq!(settings.pair.joiner, tandem::settings::Joiner::Off, "runs logged before the joiner answer as they did");
    assert_eq!((settings.budgets.max_steps, settings.budgets.executor_tokens), (9, 20));
    assert_eq!(serde_json::to_value(&settings).unwrap(), line);
}
