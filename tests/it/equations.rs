//! Equations across steps, with the real models: a split with two unknowns planned as two calculator steps of one
//! equation each (as the 1.5B planned it) is solved as one system (rule `dependencies`' run-time part), and the
//! answer gives both shares; with the rule off, each step alone is underdetermined.

use serde_json::Value;

use crate::common::real_model;
use crate::common::runs::Scratch;

const GOAL: &str = "Ann and Ben share 60 dollars; Ann gets 10 more than Ben. How much does each get?";

/// Runs the plan of one equation a step with `extra` flags; the run's JSON.
fn run_split(extra: &[&str]) -> Value {
    real_model("qwen2.5-coder-1.5b-instruct-q4_k_m");
    real_model("qwen2.5-coder-0.5b-instruct-q4_k_m");
    let scratch = Scratch::new();
    let plan = scratch.write(
        "plan.json",
        r#"{"goal": "split", "steps": [
            {"id": "s1", "description": "the two shares add up", "tool": "calculator",
             "args": {"expression": "ann + ben = 60"}},
            {"id": "s2", "description": "Ann gets 10 more", "tool": "calculator",
             "args": {"expression": "ann - ben = 10"}}]}"#,
    );
    let mut args = vec!["run", "--threads", "2", "--max-replans", "0", "--plan", plan.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push(GOAL);
    let (json, _) = scratch.tandem_json(&args);
    json
}

#[test]
fn a_split_planned_one_equation_a_step_is_solved_as_one_system() {
    let json = run_split(&[]);
    assert_eq!(json["stop"], "done", "{json}");
    for step in ["s1", "s2"] {
        let values = &json["outputs"][step]["values"];
        assert_eq!((values["ann"].as_i64(), values["ben"].as_i64()), (Some(35), Some(25)), "{step}: {json}");
    }
    let answer = json["answer"].as_str().unwrap_or_default();
    assert!(answer.contains("35") && answer.contains("25"), "{json}");
    // Off, each step is one equation in two unknowns: the calculator says so, and no share is found.
    let json = run_split(&["--rules-off", "dependencies"]);
    assert_ne!(json["stop"], "done", "{json}");
    assert!(json["outputs"]["s1"].is_null(), "{json}");
}
