//! The joiner with the real planner model, on given plans (so only the joiner's model call varies): a goal with two
//! parts gets both in the answer, each number as a tool produced it, and the log keeps the verdict and the answer
//! the steps alone give; `--joiner off` answers with the last step's output.

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
