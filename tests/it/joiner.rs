//! The joiner with the real planner model, on given plans (so only the joiner's model call varies): a goal with two
//! parts gets both in the answer, each number as a tool produced it, and the log keeps the verdict and the answer
//! the steps alone give; results that answer the goal are answered, a part no step gives is judged not met; `--joiner
//! off` answers with the last step's output.

use serde_json::Value;
use tandem::bench::tasks::{mentions, normalise};

use crate::common::runs::Scratch;

const GOAL: &str =
    "A dinner costs 84 dollars for 4 people, plus a 15 dollar tip. What is the total, and how much does \
                    each person pay if they split it equally?";

/// The two-step plan for [`GOAL`]: the total, then each person's share.
fn dinner_plan(scratch: &Scratch) -> String {
    let path = scratch.write(
        "plan.json",
        r#"{"goal": "dinner", "steps": [
            {"id": "s1", "description": "the total", "tool": "calculator", "args": {"expression": "84+15"}},
            {"id": "s2", "description": "each share", "tool": "calculator", "args": {"expression": "$s1.result$/4"}}]}"#,
    );
    path.to_str().unwrap().to_string()
}

fn output_text(json: &Value, step: &str) -> String {
    json["outputs"][step]["text"].as_str().unwrap_or_else(|| panic!("no text output of {step}: {json}")).to_string()
}

#[test]
fn the_joiner_answers_every_part_with_the_tools_numbers() {
    let scratch = Scratch::new();
    let plan = dinner_plan(&scratch);
    let (json, output) = scratch.tandem_json(&["run", "--plan", &plan, "--joiner", "planner", GOAL]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let answer = normalise(json["answer"].as_str().expect("an answer"));
    for step in ["s1", "s2"] {
        let number = output_text(&json, step);
        assert!(mentions(&answer, &number), "the answer {answer:?} lacks {step}'s result {number}");
    }
    let events = scratch.latest_events();
    let joined: Vec<&Value> = events.iter().filter(|e| e["event"] == "joined").collect();
    assert_eq!(joined.len(), 1, "{events:?}");
    assert_eq!(joined[0]["verdict"], "answer", "{:?}", joined[0]);
    assert_eq!(joined[0]["role"], "planner");
    assert_eq!(joined[0]["from_steps"].as_str(), Some(output_text(&json, "s2").as_str()));
    assert!(joined[0]["usage"]["tokens_out"].as_u64().unwrap() > 0);
    // The joiner's tokens count as the planner's.
    assert!(json["planner"]["calls"].as_u64().unwrap() >= 1, "{json}");
}

#[test]
fn without_the_joiner_the_answer_is_the_last_steps_output() {
    let scratch = Scratch::new();
    let plan = dinner_plan(&scratch);
    let (json, output) = scratch.tandem_json(&["run", "--plan", &plan, "--joiner", "off", GOAL]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(json["answer"].as_str(), Some(output_text(&json, "s2").as_str()));
    assert_eq!(output_text(&json, "s1"), "99");
    // Neither the joiner nor step evaluation (off unless asked for) ran.
    assert!(scratch.latest_events().iter().all(|e| e["event"] != "joined" && e["event"] != "steps_evaluated"));
}

/// A run whose plan ran to the end, was judged not met by the joiner, and whose revision then failed with no
/// replans left (the log of such a run on the answers suite, cut after the revision was written): it answers with
/// the doubted plan's result and says so, instead of ending without an answer. No model is needed: the revision's
/// first step fails before anything asks one. (The goal names the file the revision reads: a read for a goal that
/// names no file would be sent back before it ran, rule `workspace-unasked`.)
#[test]
fn a_run_whose_replans_run_out_after_a_doubt_answers_with_the_doubted_results() {
    let scratch = Scratch::new();
    let workspace = scratch.workspace();
    std::fs::create_dir_all(&workspace).unwrap();
    let goal = "Take 17 away from 9 and multiply the result by 3, as example.txt asks.";
    let settings = serde_json::json!({
        "planner": "qwen2.5-coder-1.5b-instruct-q4_k_m", "executor": "qwen2.5-coder-0.5b-instruct-q4_k_m",
        "mode": "plan-ahead", "joiner": "planner", "workspace": workspace, "allow_write": false, "allow_shell": [],
        "shell_timeout_s": 10, "tools_file": null, "max_replans": 1, "max_steps": 24, "max_tokens": 6000,
        "max_seconds": 300, "plan_tokens": 768, "executor_tokens": 256, "seed": 0, "approve": "none"
    });
    let calc = |id: &str, expression: &str, result: i64| {
        serde_json::json!({"event": "step_finished", "version": 1, "step": id, "tool": "calculator",
            "args": {"expression": expression}, "output": {"result": result, "text": result.to_string()},
            "error": null, "ms": 0, "via": "tool"})
    };
    let usage = serde_json::json!({"tokens_in": 1, "tokens_out": 1, "ms": 1});
    let doubt = "The goal does not provide the necessary information to compute the answer.";
    let events = [
        serde_json::json!({"event": "run_started", "goal": goal, "settings": settings}),
        serde_json::json!({"event": "plan_written", "version": 1, "origin": "initial", "reason": "first plan",
            "plan": {"goal": goal, "version": 1, "steps": [
                {"id": "s1", "description": "subtract 17 from 9", "tool": "calculator",
                 "args": {"expression": "9-17"}, "depends_on": []},
                {"id": "s2", "description": "multiply the result by 3", "tool": "calculator",
                 "args": {"expression": "$s1.result$*3"}, "depends_on": ["s1"]}]},
            "issues": [], "usage": usage}),
        calc("s1", "9-17", -8),
        calc("s2", "-8*3", -24),
        serde_json::json!({"event": "joined", "version": 1, "verdict": "not_met", "text": doubt, "role": "planner",
            "from_steps": "-24", "usage": usage}),
        serde_json::json!({"event": "replan", "from_version": 1, "reason": doubt}),
        serde_json::json!({"event": "plan_written", "version": 2, "origin": "replan", "reason": doubt,
            "plan": {"goal": goal, "version": 2, "steps": [
                {"id": "s1", "description": "read the file", "tool": "read_file", "args": {"path": "example.txt"},
                 "depends_on": []}]},
            "issues": [], "usage": usage}),
    ];
    let dir = scratch.path("runs").join("20261127-150000-doubted");
    std::fs::create_dir_all(&dir).unwrap();
    write_log(&dir, &events);

    let (json, output) = scratch.tandem_json(&["resume", "latest"]);
    assert_eq!(json["stop"], "budget", "{json}");
    assert_eq!(json["answer"], "-24", "{json}");
    let detail = json["detail"].as_str().unwrap();
    assert!(detail.contains("plan v1") && detail.contains("joiner"), "{detail}");
    assert!(!output.status.success(), "a spent budget still fails the command");
    let events = scratch.latest_events();
    let answer = events.iter().position(|e| e["event"] == "answer").expect("an answer event");
    let failed = events.iter().position(|e| e["event"] == "step_finished" && e["version"] == 2).unwrap();
    assert!(failed < answer, "the answer comes after the revision failed");
}

/// A plan whose answer names what no tool result holds (a reading that says who wrote a folder's files, over a
/// listing of their names), judged not met with no replans left, ends with no answer rather than with that one:
/// stop `budget`, the detail naming the name, the `joined` event's `from_steps` empty. With the real models: the
/// 0.5B writes the sentence it is told to; the 1.5B joiner, whatever it judges, cannot pass a name no result holds.
#[test]
fn a_doubted_answer_that_names_what_no_result_holds_is_no_answer() {
    let scratch = Scratch::new();
    let workspace = scratch.workspace();
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("groceries.txt"), "milk\neggs\n").unwrap();
    std::fs::write(workspace.join("garden.txt"), "water the roses\n").unwrap();
    let plan = scratch.write(
        "plan.json",
        r#"{"goal": "owner", "steps": [
            {"id": "s1", "description": "list the notes", "tool": "list_dir", "args": {"path": "."}},
            {"id": "s2", "description": "say who wrote them", "tool": "llm", "depends_on": ["s1"],
             "args": {"prompt": "Write exactly this sentence and nothing else: The notes were written by John Doe."}}]}"#,
    );
    let goal = "Tell me who wrote the notes in this folder.";
    let ws = workspace.to_str().unwrap();
    let args = ["run", "--workspace", ws, "--plan", plan.to_str().unwrap(), "--joiner", "planner"];
    let (json, _) = scratch.tandem_json(&[&args[..], &["--max-replans", "0", goal]].concat());
    assert!(output_text(&json, "s2").contains("John Doe"), "the reading: {json}");
    assert_eq!(json["stop"], "budget", "{json}");
    assert!(json["answer"].is_null(), "{json}");
    let detail = json["detail"].as_str().unwrap();
    assert!(detail.contains("no answer") && detail.contains("John Doe"), "{detail}");
    let events = scratch.latest_events();
    let joined = events.iter().find(|e| e["event"] == "joined").expect("a joined event");
    assert_eq!(joined["verdict"], "not_met", "{joined}");
    assert_eq!(joined["from_steps"], "", "{joined}");
    assert!(events.iter().all(|e| e["event"] != "answer"), "{events:?}");
}

/// Writes `events` as the run log in `dir`, numbered in order (a time given to those without one).
fn write_log(dir: &std::path::Path, events: &[Value]) {
    let log: Vec<String> = events
        .iter()
        .enumerate()
        .map(|(seq, event)| {
            let mut record = event.clone();
            record["seq"] = seq.into();
            if record.get("at_ms").is_none() {
                record["at_ms"] = (1_795_791_521_140u64 + seq as u64).into();
            }
            record.to_string()
        })
        .collect();
    std::fs::write(dir.join("events.jsonl"), log.join("\n") + "\n").unwrap();
}

/// A goal with a part no tool gives, and a plan that computes the other part.
const AAPL_GOAL: &str = "What is 12*4+5, and what is the price of the AAPL stock right now?";
const AAPL_STEPS: &str =
    r#"[{"id": "s1", "description": "compute 12*4+5", "tool": "calculator", "args": {"expression": "12*4+5"}}]"#;

/// The events of `tandem run --plan` for `goal`, with no replans allowed, and the run's JSON.
fn joined_on(scratch: &Scratch, goal: &str, steps: &str) -> (Value, Value) {
    let plan = scratch.write("plan.json", &format!(r#"{{"goal": "g", "steps": {steps}}}"#));
    let (json, _) = scratch.tandem_json(&[
        "run",
        "--plan",
        plan.to_str().unwrap(),
        "--joiner",
        "planner",
        "--max-replans",
        "0",
        goal,
    ]);
    let joined = scratch.latest_events().into_iter().find(|e| e["event"] == "joined").expect("a joined event");
    (json, joined)
}

/// Results that answer the goal get an answer, not a replan: asked to choose between an answer and "not met"
/// first, the 1.5B judged both of these "not met" in words ("The result is not an answer to the goal"), and its
/// replans then read files no goal named. Writing the answer first and judging it after, it answers.
#[test]
fn results_that_answer_the_goal_are_answered_not_sent_back() {
    let cases = [
        (
            "What is 12*4+5?",
            r#"[{"id": "s1", "description": "compute it", "tool": "calculator", "args": {"expression": "12*4+5"}}]"#,
            "53",
        ),
        (
            "Take 17 away from 9 and multiply the result by 3.",
            r#"[{"id": "s1", "description": "subtract 17 from 9", "tool": "calculator", "args": {"expression": "9-17"}},
                {"id": "s2", "description": "multiply the result by 3", "tool": "calculator",
                 "args": {"expression": "$s1.result$*3"}}]"#,
            "-24",
        ),
    ];
    for (goal, steps, number) in cases {
        let scratch = Scratch::new();
        let (json, joined) = joined_on(&scratch, goal, steps);
        assert_eq!(joined["verdict"], "answer", "{goal}: {joined}");
        let answer = normalise(json["answer"].as_str().expect("an answer"));
        assert!(mentions(&answer, number), "{goal}: {answer:?} lacks {number}");
        assert_eq!(json["stop"], "done", "{json}");
    }
}

/// The judgment after the answer still finds a real gap: a goal with a part no step gives (a share price, with only
/// a calculator step) is judged not met, naming the part, and with no replans left the run answers from the steps.
#[test]
fn a_part_of_the_goal_no_step_gives_is_judged_not_met() {
    let scratch = Scratch::new();
    let (json, joined) = joined_on(&scratch, AAPL_GOAL, AAPL_STEPS);
    assert_eq!(joined["verdict"], "not_met", "{joined}");
    assert!(joined["text"].as_str().unwrap().chars().any(char::is_alphabetic), "{joined}");
    assert_eq!(json["answer"], "53", "{json}");
}

/// A plan that calls none of the tools connected to the run (here a tool file's), answered by a model step alone,
/// is sent back once before any model reads its results, naming those tools; without such tools the same plan is
/// answered.
#[test]
fn a_plan_that_calls_no_connected_tool_is_sent_back_once() {
    let scratch = Scratch::new();
    let tools = crate::common::runs::shell_tool(
        "list_chores",
        "List the chores on the household list.",
        "{}",
        "echo '{\"chores\": [\"water the plants\", \"take out the bins\"]}'",
    );
    let tools_path = scratch.write("tools.toml", &tools);
    let plan = scratch.write(
        "plan.json",
        r#"{"goal": "chores", "steps": [
            {"id": "s1", "description": "answer", "tool": "llm", "args": {"prompt": "Name a household chore."}}]}"#,
    );
    let goal = "Which chores are on my household list?";
    let args = ["run", "--plan", plan.to_str().unwrap(), "--joiner", "planner", "--max-replans", "1"];
    let (_, output) = scratch.tandem_json(&[&args[..], &["--tools", tools_path.to_str().unwrap(), goal]].concat());
    assert!(output.status.code().is_some(), "{}", String::from_utf8_lossy(&output.stderr));
    let events = scratch.latest_events();
    let sent_back: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "joined" && e["text"].as_str().is_some_and(|t| t.contains("No step called")))
        .collect();
    assert_eq!(sent_back.len(), 1, "sent back once: {events:?}");
    assert_eq!(sent_back[0]["verdict"], "not_met");
    assert!(sent_back[0]["text"].as_str().unwrap().contains("list_chores"), "{:?}", sent_back[0]);
    let from_steps = sent_back[0]["from_steps"].as_str().unwrap_or_default();
    assert!(from_steps.is_empty(), "an answer resting on no tool is none to fall back on: {:?}", sent_back[0]);
    let replan = events.iter().find(|e| e["event"] == "replan").expect("a replan");
    assert!(replan["reason"].as_str().unwrap().contains("list_chores"), "{replan}");

    let (json, output) = scratch.tandem_json(&[&args[..], &[goal]].concat());
    assert!(output.status.code().is_some(), "{}", String::from_utf8_lossy(&output.stderr));
    let said = |e: &Value| e["text"].as_str().is_some_and(|t| t.contains("No step called"));
    assert!(!scratch.latest_events().iter().any(said), "no tool is connected: {json}");
}
