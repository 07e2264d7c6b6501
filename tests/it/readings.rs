//! Readings that can only say what is there, with the real planner model: the answer's reading over a list, asked
//! for one item of it, is an item of that list copied from the result (rule `reading-asks-the-goal`'s run-time
//! part), and `--rules-off` turns it back into free text.

use serde_json::Value;

use crate::common::real_model;
use crate::common::runs::Scratch;

const GOAL: &str = "Which of these offers is the cheapest?";

/// The rows the reading may copy, as the result shows them (agent::records).
const ROWS: [&str; 4] = [
    "name: Harbour Ferry; price: 31",
    "name: Night Coach; price: 19",
    "name: Fast Rail; price: 42",
    "name: City Bus; price: 24",
];

/// Runs the given plan (read the offers, read the answer off them) with `extra` flags; the run's JSON and events.
fn run_reading(extra: &[&str]) -> (Value, Vec<Value>) {
    real_model("qwen2.5-coder-1.5b-instruct-q4_k_m");
    real_model("qwen2.5-coder-0.5b-instruct-q4_k_m");
    let scratch = Scratch::new();
    let offers = r#"[{"name": "Harbour Ferry", "price": 31}, {"name": "Night Coach", "price": 19},
        {"name": "Fast Rail", "price": 42}, {"name": "City Bus", "price": 24}]"#;
    std::fs::write(scratch.workspace().join("offers.json"), offers).unwrap();
    let plan = scratch.write(
        "plan.json",
        r#"{"goal": "offers", "steps": [
            {"id": "s1", "description": "read the offers", "tool": "read_file", "args": {"path": "offers.json"}},
            {"id": "s2", "description": "the cheapest", "tool": "llm",
             "args": {"prompt": "Which of these offers is the cheapest?\n\n$s1$"}, "depends_on": ["s1"]}]}"#,
    );
    let workspace = scratch.workspace();
    let mut args = vec!["run", "--threads", "2", "--workspace", workspace.to_str().unwrap(), "--plan"];
    args.push(plan.to_str().unwrap());
    args.extend_from_slice(extra);
    args.push(GOAL);
    let (json, output) = scratch.tandem_json(&args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    (json, scratch.latest_events())
}

fn reading(json: &Value) -> String {
    json["outputs"]["s2"]["text"].as_str().unwrap_or_else(|| panic!("no reading: {json}")).to_string()
}

#[test]
fn a_reading_asked_for_one_item_copies_an_item_the_result_holds() {
    let (json, events) = run_reading(&[]);
    let picked = reading(&json);
    assert!(ROWS.contains(&picked.as_str()), "the reading {picked:?} is not one of the list's items");
    let purposes: Vec<&str> =
        events.iter().filter(|e| e["event"] == "executor_call").filter_map(|e| e["purpose"].as_str()).collect();
    assert_eq!(purposes, ["kind", "pick"], "{events:?}");
    eprintln!("picked: {picked}");
    // Off, the reading is the model's free text again: no item copied whole.
    let (json, _) = run_reading(&["--rules-off", "reading-asks-the-goal"]);
    let free = reading(&json);
    assert!(!ROWS.contains(&free.as_str()), "{free:?}");
}
