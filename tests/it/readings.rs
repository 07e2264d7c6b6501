//! Readings that can only say what is there, with the real planner model (rule `reading-asks-the-goal`'s run-time
//! part): the answer's reading over a list, asked for the cheapest item of it, a total or a count, is worked out by
//! code from the Python expression the planner writes; where no expression of the forms code reads is written, items
//! are copied from the result. `--rules-off` turns it back into free text. A free-text reading is read again by the
//! planner (rule `readings-agree`).

use serde_json::Value;

use crate::common::real_model;
use crate::common::runs::Scratch;

const CHEAPEST: &str = "Which of these offers is the cheapest?";

/// The rows the reading may copy, as the result shows them (agent::records).
const ROWS: [&str; 4] = [
    "name: Harbour Ferry; price: 31",
    "name: Night Coach; price: 19",
    "name: Fast Rail; price: 42",
    "name: City Bus; price: 24",
];

/// Runs the given plan (read the offers, read the answer to `question` off them) with `extra` flags; the run's JSON
/// and events.
fn run_reading(question: &str, extra: &[&str]) -> (Value, Vec<Value>) {
    let offers = r#"[{"name": "Harbour Ferry", "price": 31}, {"name": "Night Coach", "price": 19},
        {"name": "Fast Rail", "price": 42}, {"name": "City Bus", "price": 24}]"#;
    run_on_file("offers.json", offers, question, extra)
}

/// Runs the given plan (read `file`, holding `content`, then read the answer to `question` off it) with `extra`
/// flags; the run's JSON and events.
fn run_on_file(file: &str, content: &str, question: &str, extra: &[&str]) -> (Value, Vec<Value>) {
    real_model("qwen2.5-coder-1.5b-instruct-q4_k_m");
    real_model("qwen2.5-coder-0.5b-instruct-q4_k_m");
    let scratch = Scratch::new();
    std::fs::write(scratch.workspace().join(file), content).unwrap();
    let plan = serde_json::json!({"goal": "offers", "steps": [
        {"id": "s1", "description": "read the file", "tool": "read_file", "args": {"path": file}},
        {"id": "s2", "description": "the answer", "tool": "llm",
         "args": {"prompt": format!("{question}\n\n$s1$")}, "depends_on": ["s1"]}]});
    let plan = scratch.write("plan.json", &plan.to_string());
    let workspace = scratch.workspace();
    let mut args = vec!["run", "--threads", "2", "--workspace", workspace.to_str().unwrap(), "--plan"];
    args.push(plan.to_str().unwrap());
    args.extend_from_slice(extra);
    args.push(question);
    let (json, output) = scratch.tandem_json(&args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    (json, scratch.latest_events())
}

fn reading(json: &Value) -> String {
    json["outputs"]["s2"]["text"].as_str().unwrap_or_else(|| panic!("no reading: {json}")).to_string()
}

/// The purposes of the run's planner calls for the reading, in order.
fn purposes(events: &[Value]) -> Vec<&str> {
    events.iter().filter(|e| e["event"] == "executor_call").filter_map(|e| e["purpose"].as_str()).collect()
}

#[test]
fn the_cheapest_of_a_list_is_found_by_code() {
    let (json, events) = run_reading(CHEAPEST, &[]);
    assert_eq!(reading(&json), ROWS[1], "{json}");
    assert_eq!(purposes(&events), ["query"], "{events:?}");
    // Off, the reading is the model's free text again: no item copied whole.
    let (json, _) = run_reading(CHEAPEST, &["--rules-off", "reading-asks-the-goal"]);
    let free = reading(&json);
    assert!(!ROWS.contains(&free.as_str()), "{free:?}");
}

#[test]
fn a_total_and_a_count_are_worked_out_by_code() {
    let (json, events) = run_reading("How much do all of these offers cost together?", &[]);
    assert_eq!(reading(&json), "116", "{json}");
    assert_eq!(purposes(&events), ["query"], "{events:?}");
    let (json, _) = run_reading("How many of these offers cost more than 30?", &[]);
    assert_eq!(reading(&json), "2", "{json}");
}

#[test]
fn a_reading_no_expression_answers_copies_items_the_result_holds() {
    let (json, events) = run_reading("Which of these offers travel by road?", &[]);
    let picked = reading(&json);
    assert!(picked.lines().all(|line| ROWS.contains(&line)), "the reading {picked:?} is not the list's items");
    assert!(purposes(&events).contains(&"pick"), "{events:?}");
    eprintln!("picked: {picked}");
}

/// Rule `readings-agree` (item 3 of #71): a question no list code answers is read in free text by the executor and
/// again by the planner's model; the log records which path answered, and the answer is one of the two readings.
#[test]
fn a_free_reading_is_read_again_by_the_planner_and_its_path_logged() {
    let notes = "The ferry leaves from pier 3 at 7:40. The night coach leaves from the bus station at 21:15.";
    let question = "Where does the night coach leave from?";
    let (json, events) = run_on_file("notes.txt", notes, question, &[]);
    let calls = purposes(&events);
    assert!(calls.contains(&"text") && calls.contains(&"reading"), "{calls:?}");
    let path: Vec<&Value> =
        events.iter().filter(|e| e["event"] == "rule_applied" && e["rule"] == "readings-agree").collect();
    let [path] = path.as_slice() else { panic!("one path logged: {events:?}") };
    let detail = path["detail"].as_str().unwrap();
    assert!(detail.contains("agrees") || detail.contains("chose"), "{detail}");
    assert_eq!(calls.contains(&"choice"), detail.contains("chose"), "{calls:?} {detail}");
    assert!(detail.contains(&format!("{:?}", reading(&json))), "the answer is a logged reading: {detail}");
    // Off, the executor's reading answers alone.
    let (_, events) = run_on_file("notes.txt", notes, question, &["--rules-off", "readings-agree"]);
    assert!(!purposes(&events).contains(&"reading"), "{events:?}");
}

/// Rule `fields-read-from-text`'s part for readings (item 1 of #71): a reading a tool step passes whole as an
/// argument is a piece of the results it reads (here a file name of the listing), not a sentence around it.
#[test]
fn a_reading_passed_as_an_argument_is_a_value_the_result_holds() {
    real_model("qwen2.5-coder-1.5b-instruct-q4_k_m");
    real_model("qwen2.5-coder-0.5b-instruct-q4_k_m");
    let scratch = Scratch::new();
    for (file, content) in [("expenses.csv", "item,amount\nrent,900\nfood,310\n"), ("notes.txt", "call Ana\n")] {
        std::fs::write(scratch.workspace().join(file), content).unwrap();
    }
    let plan = serde_json::json!({"goal": "expenses", "steps": [
        {"id": "s1", "tool": "list_dir", "args": {"path": "."}},
        {"id": "s2", "tool": "llm", "args": {"prompt": "What is the path to the expenses file?\n\n$s1$"},
         "depends_on": ["s1"]},
        {"id": "s3", "tool": "read_file", "args": {"path": "$s2.text$"}, "depends_on": ["s2"]}]});
    let plan = scratch.write("plan.json", &plan.to_string());
    let workspace = scratch.workspace();
    let args = ["run", "--threads", "2", "--workspace", workspace.to_str().unwrap(), "--plan", plan.to_str().unwrap()];
    let (json, output) = scratch.tandem_json(&[&args[..], &["What did I spend on food?"]].concat());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(json["outputs"]["s2"]["text"], "expenses.csv", "{json}");
    assert!(json["outputs"]["s3"]["content"].as_str().is_some_and(|c| c.contains("food,310")), "{json}");
    assert!(purposes(&scratch.latest_events()).contains(&"value"));
    // New text passed whole (a summary to write, a parameter its schema leaves open) is written freely.
    let plan = serde_json::json!({"goal": "summary", "steps": [
        {"id": "s1", "tool": "read_file", "args": {"path": "expenses.csv"}},
        {"id": "s2", "tool": "llm", "args": {"prompt": "Write a one-sentence summary of these expenses.\n\n$s1$"},
         "depends_on": ["s1"]},
        {"id": "s3", "tool": "write_file", "args": {"path": "summary.txt", "content": "$s2.text$"}, "depends_on": ["s2"]}]});
    let plan = scratch.write("summary.json", &plan.to_string());
    let args = ["run", "--threads", "2", "--allow-write", "--workspace", workspace.to_str().unwrap(), "--plan"];
    let (json, output) = scratch
        .tandem_json(&[&args[..], &[plan.to_str().unwrap(), "Summarise my expenses into summary.txt."]].concat());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let events = scratch.latest_events();
    let calls = purposes(&events);
    assert_eq!(calls, ["text"], "{json}");
}
