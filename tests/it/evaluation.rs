//! Step evaluation with the real planner model, on a given plan whose first step has the wrong sign (so only the
//! evaluation's calls and what follows from them vary): every calculator step gets a check in the log, the
//! checker's tokens count as the planner's, the wrong step is doubted and named to the planner, and a doubt sends
//! the run back to the planner once at most. And the same "work it out" call with the real executor, for a
//! calculator step whose planned expression is a file's text.

use serde_json::{json, Value};

use crate::common::runs::Scratch;

const GOAL: &str = "A dinner costs 84 dollars, plus a 15 dollar tip. What is the total, and how much does each of 4 \
                    people pay if they split it equally?";

/// A plan for [`GOAL`] whose total subtracts the tip.
const WRONG_PLAN: &str = r#"{"goal": "dinner", "steps": [
    {"id": "s1", "description": "add the tip to the dinner's cost", "tool": "calculator", "args": {"expression": "84-15"}},
    {"id": "s2", "description": "split the total in 4", "tool": "calculator", "args": {"expression": "$s1.result$/4"}}]}"#;

fn events_named<'e>(events: &'e [Value], name: &str) -> Vec<&'e Value> {
    events.iter().filter(|e| e["event"] == name).collect()
}

#[test]
fn the_planner_doubts_a_step_with_the_wrong_sign_and_the_run_goes_back_to_planning_once() {
    let scratch = Scratch::new();
    let plan = scratch.write("plan.json", WRONG_PLAN);
    let (json, output) = scratch.tandem_json(&[
        "run",
        "--plan",
        plan.to_str().unwrap(),
        "--evaluate",
        "planner",
        "--joiner",
        "off",
        "--max-replans",
        "3",
        GOAL,
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let events = scratch.latest_events();
    let evaluated = events_named(&events, "steps_evaluated");
    assert!(!evaluated.is_empty(), "no step evaluation logged: {events:?}");
    let first = evaluated[0];
    assert_eq!(first["version"], 1);
    assert_eq!(first["role"], "planner");
    let judged: Vec<&str> =
        first["judgments"].as_array().unwrap().iter().map(|j| j["step"].as_str().unwrap()).collect();
    assert_eq!(judged, ["s1", "s2"], "{first}");
    // The given plan subtracts the tip where its own description adds it: the check must doubt that step.
    assert_eq!(first["judgments"][0]["ok"], false, "the wrong step passed: {first}");
    assert_eq!(first["judgments"][0]["check_result"], 99.0, "{first}");
    assert_eq!(first["sent_back"], true, "{first}");
    let replans = events_named(&events, "replan");
    let reason = replans[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains(r#"calculator with {"expression":"84-15"} gave"#),
        "the doubted call is not named: {reason}"
    );
    assert!(!reason.contains("- s2:"), "a step that passed is named: {reason}");
    // Once a run: later doubts are logged, never sent back.
    assert_eq!(evaluated.iter().filter(|e| e["sent_back"] == true).count(), 1, "{evaluated:?}");
    assert!(first["usage"]["tokens_out"].as_u64().unwrap() > 0);
    assert!(json["planner"]["calls"].as_u64().unwrap() >= 1, "the judge's calls count as the planner's: {json}");
}

#[test]
fn a_calculator_step_fed_a_files_text_is_worked_out_again_in_numbers() {
    let scratch = Scratch::new();
    std::fs::write(scratch.workspace().join("box.txt"), "width 12\nheight 7\n").unwrap();
    let plan = scratch.write(
        "plan.json",
        r#"{"goal": "area", "steps": [
            {"id": "s1", "description": "read the box's sizes", "tool": "read_file", "args": {"path": "box.txt"}},
            {"id": "s2", "description": "multiply the width by the height", "tool": "calculator",
             "args": {"expression": "$s1.content$"}}]}"#,
    );
    let workspace = scratch.workspace();
    let (json, output) = scratch.tandem_json(&[
        "run",
        "--plan",
        plan.to_str().unwrap(),
        "--workspace",
        workspace.to_str().unwrap(),
        "--max-replans",
        "0",
        "The file box.txt gives a box's width and height. What is its area?",
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let events = scratch.latest_events();
    let finished: Vec<&Value> =
        events_named(&events, "step_finished").into_iter().filter(|e| e["step"] == "s2").collect();
    // The planned expression (the file's text) fails; an expression the planner worked out then runs.
    assert!(finished[0]["error"].as_str().unwrap_or("").contains("cannot evaluate"), "{finished:?}");
    let written = events_named(&events, "executor_call");
    let worked_out = written.iter().find(|e| e["step"] == "s2").expect("the expression was written");
    assert_eq!(
        (&worked_out["purpose"], &worked_out["role"]),
        (&json!("expression"), &json!("planner")),
        "{worked_out}"
    );
    // Its tokens count as the planner's (the plan was given; the joiner may add its own).
    let tokens = |v: &Value| v["tokens_out"].as_u64().unwrap_or(0);
    assert!(tokens(&worked_out["usage"]) > 0, "{worked_out}");
    assert!(tokens(&json["planner"]) >= tokens(&worked_out["usage"]), "{json}");
    let worked = finished.last().unwrap();
    assert_eq!(worked["via"], "executor", "{worked}");
    let expression = worked["args"]["expression"].as_str().unwrap();
    assert!(expression.chars().all(|c| c.is_ascii_digit() || "+-*/()^%. ".contains(c)), "{expression}");
    assert_eq!(json["outputs"]["s2"]["result"], 84, "{expression}: {json}");
}
