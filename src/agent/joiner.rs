//! The joiner (as in LLMCompiler): after a plan's steps ran, one model call reads the goal and the step results
//! and either writes the answer — every part of the goal, each number as a tool produced it — or says the goal is
//! not met and why, which sends the run back to the planner.
//!
//! Small models miscopy numbers, so the answer is checked in code ([`unsupported_numbers`]): every number in it
//! must be one of the goal's or the results' (or that number rounded to the decimals written). A failed check
//! is retried once with the offending numbers named; a second failure leaves the answer to the caller's fallback.
//! A "not met" that gives no reason (no word, or the reply format's placeholder) is asked again the same way.

use std::time::Instant;

use serde::Deserialize;
use serde_json::{json, Value};

use super::events::ModelUsage;
use super::model_call::chat_call;
use crate::decode::constraint::ConstraintSpec;
use crate::decode::Model;
use crate::llm::ChatMessage;
use crate::Result;

/// The joiner's instructions.
const SYSTEM: &str = "You write the final answer of a tool-using agent. You are given the user's goal and the \
results of the steps that ran. Answer every part of the goal in one or two short sentences, and copy each number \
exactly as a result gives it: do not round, recompute or convert it. If the results cannot answer the goal (a \
part is missing, or a result is an error), reply with what is missing instead. \
Reply as JSON: {\"answer\": \"...\"} or {\"not_met\": \"what is missing\"}.\n\
Example: for the goal \"A box holds 6 eggs. How many eggs are in 7 boxes, and how many are left after 5 break?\" \
and the results \"s1 calculator with {\"expression\":\"6*7\"} -> {\"result\":42}\" and \"s2 calculator with \
{\"expression\":\"42-5\"} -> {\"result\":37}\", reply {\"answer\": \"7 boxes hold 42 eggs, and 37 are left after 5 \
break.\"}";

/// The reason's placeholder in [`SYSTEM`]'s reply format: a model that copies it gave no reason.
const NOT_MET_PLACEHOLDER: &str = "what is missing";

/// Characters of one result shown to the joiner (file contents can be long; the answer needs the gist).
const RESULT_CHARS: usize = 600;
/// Characters of the answer (the grammar's bound: a short sentence or two).
const ANSWER_CHARS: usize = 400;
/// Tries before giving up on a checked answer.
const ATTEMPTS: usize = 2;

/// One finished step as the joiner sees it.
#[derive(Debug, Clone)]
pub struct StepResult {
    /// Step id.
    pub id: String,
    /// Tool name (as the user knows it).
    pub tool: String,
    /// What the step was for.
    pub description: String,
    /// The arguments it ran with, as JSON.
    pub args: Value,
    /// Its output.
    pub output: Value,
}

/// What the joiner decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The answer, its numbers checked.
    Answer(String),
    /// The goal is not met; the reason goes to the planner.
    NotMet(String),
    /// No answer passed the number check; the rejected drafts with their unsupported numbers.
    Unchecked(Vec<String>),
}

/// The joiner's reply as the grammar allows it.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Reply {
    Answer { answer: String },
    NotMet { not_met: String },
}

/// The joiner's grammar: one of the two replies, bounded in length.
fn reply_schema() -> Value {
    json!({
        "anyOf": [
            {"type": "object", "properties": {"answer": {"type": "string", "minLength": 1, "maxLength": ANSWER_CHARS}},
             "required": ["answer"], "additionalProperties": false},
            {"type": "object", "properties": {"not_met": {"type": "string", "minLength": 1, "maxLength": 200}},
             "required": ["not_met"], "additionalProperties": false}
        ]
    })
}

/// The user message: the goal and each result on its own line.
fn prompt(goal: &str, results: &[StepResult]) -> String {
    let mut text = format!("Goal: {goal}\nResults:\n");
    for r in results {
        text.push_str(&format!("- {}\n", step_line(r)));
    }
    text
}

/// One finished step on one line: `s2 calculator (what it was for) with {args} -> output`, the output clipped.
fn step_line(r: &StepResult) -> String {
    let what = if r.description.is_empty() { String::new() } else { format!(" ({})", r.description) };
    format!("{} {}{what} with {} -> {}", r.id, r.tool, r.args, shown_output(&r.output))
}

/// A step's output as a model is shown it: a lone string as itself, anything else as compact JSON, clipped.
pub(crate) fn shown_output(output: &Value) -> String {
    clip(&result_text(output), RESULT_CHARS)
}

/// An output as the joiner reads it: a lone string as itself, anything else as compact JSON.
fn result_text(output: &Value) -> String {
    match output {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn clip(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((cut, _)) => format!("{} …", &text[..cut]),
        None => text.to_string(),
    }
}

/// Runs the joiner on `model`; returns its verdict and what the calls cost together.
/// `required`: the final results the answer must give (the caller picks them: the lone number of each last step's
/// output), so an answer can neither drop a part nor be empty words.
pub fn join(
    model: &mut Model,
    goal: &str,
    results: &[StepResult],
    required: &[Number],
) -> Result<(Verdict, ModelUsage)> {
    let started = Instant::now();
    let schema = ConstraintSpec::JsonSchema(reply_schema());
    let known = known_numbers(goal, results);
    let mut messages = vec![ChatMessage::system(SYSTEM), ChatMessage::user(prompt(goal, results))];
    let mut usage = ModelUsage { tokens_in: 0, tokens_out: 0, ms: 0 };
    let mut rejected = Vec::new();
    for _ in 0..ATTEMPTS {
        // Room for the longest reply the grammar allows, in tokens (a token is at least one character).
        let (text, timings) = chat_call(model, "joiner", &messages, Some(&schema), ANSWER_CHARS + 16)?;
        usage.tokens_in += timings.prompt_tokens;
        usage.tokens_out += timings.generated_tokens;
        let reply = match serde_json::from_str::<Reply>(&text) {
            Ok(reply) => reply,
            // Only a reply cut off by the token limit can break the grammar's shape.
            Err(e) => {
                rejected.push(format!("{text} (not a complete reply: {e})"));
                continue;
            }
        };
        match reply {
            Reply::NotMet { not_met } => {
                let reason = not_met.trim().to_string();
                if !gives_no_reason(&reason) {
                    usage.ms = started.elapsed().as_millis() as u64;
                    return Ok((Verdict::NotMet(reason), usage));
                }
                // The 1.5B wrote `}` or the format's placeholder for results that did answer the goal; taken as a
                // verdict, that sent right plans back to the planner with nothing to go on.
                let problem = "That gives no reason. Write the answer from the results, or say in words which part \
                               of the goal they do not give.";
                rejected.push(format!("not met: {reason} ({problem})"));
                messages.push(ChatMessage::assistant(text.clone()));
                messages.push(ChatMessage::user(problem.to_string()));
            }
            Reply::Answer { answer } => {
                let answer = answer.trim().to_string();
                let unsupported = unsupported_numbers(&answer, &known);
                let missing = missing_results(&answer, required);
                let says_nothing = !answer.chars().any(char::is_alphanumeric);
                if unsupported.is_empty() && missing.is_empty() && !says_nothing {
                    usage.ms = started.elapsed().as_millis() as u64;
                    return Ok((Verdict::Answer(answer), usage));
                }
                let problem = if says_nothing {
                    "That is not an answer. Write the answer as a sentence.".to_string()
                } else if !unsupported.is_empty() {
                    format!(
                        "These numbers are not in the goal or the results: {}. Write the answer again, copying \
                         each number exactly from the results.",
                        unsupported.join(", ")
                    )
                } else {
                    format!("The answer leaves out the result {}. Write the answer again with it.", missing.join(", "))
                };
                rejected.push(format!("{answer} ({problem})"));
                messages.push(ChatMessage::assistant(text.clone()));
                messages.push(ChatMessage::user(problem));
            }
        }
    }
    usage.ms = started.elapsed().as_millis() as u64;
    Ok((Verdict::Unchecked(rejected), usage))
}

/// Whether a "not met" reason says nothing: no word in it, or only the reply format's placeholder copied.
fn gives_no_reason(reason: &str) -> bool {
    let words = reason.trim_matches(|c: char| !c.is_alphanumeric());
    !reason.chars().any(char::is_alphabetic) || words.eq_ignore_ascii_case(NOT_MET_PLACEHOLDER)
}

/// Every number the answer may use: those in the goal and in each step's arguments and output.
fn known_numbers(goal: &str, results: &[StepResult]) -> Vec<Number> {
    let mut known = numbers_in(goal);
    for r in results {
        known.extend(numbers_in(&r.args.to_string()));
        collect_numbers(&r.output, &mut known);
    }
    known
}

/// Numbers in a JSON value: its numbers as they are, and the numbers written in its strings.
fn collect_numbers(value: &Value, into: &mut Vec<Number>) {
    match value {
        Value::Number(n) => {
            if let Some(v) = n.as_f64() {
                into.push(Number { value: v, text: n.to_string() });
            }
        }
        Value::String(s) => into.extend(numbers_in(s)),
        Value::Array(items) => items.iter().for_each(|v| collect_numbers(v, into)),
        Value::Object(map) => map.values().for_each(|v| collect_numbers(v, into)),
        Value::Bool(_) | Value::Null => {}
    }
}

/// A number as written and as a value.
#[derive(Debug, Clone, PartialEq)]
pub struct Number {
    /// Its value.
    pub value: f64,
    /// How it was written (thousands separators removed).
    pub text: String,
}

impl Number {
    /// Decimal places as written.
    fn decimals(&self) -> usize {
        self.text.split_once('.').map_or(0, |(_, fraction)| fraction.len())
    }
}

/// The numbers written in `text`: digits with optional `,` thousands groups and a decimal part. Signs are left
/// off (an answer may say "a loss of 5" for -5), and so are digits inside words such as `s1` or `mp3`.
pub fn numbers_in(text: &str) -> Vec<Number> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_here = chars[i].is_ascii_digit() && (i == 0 || !chars[i - 1].is_alphanumeric());
        if !starts_here {
            i += 1;
            continue;
        }
        let mut j = i;
        let mut digits = String::new();
        while j < chars.len() {
            let c = chars[j];
            let next_is_digit = chars.get(j + 1).is_some_and(char::is_ascii_digit);
            if c.is_ascii_digit() {
                digits.push(c);
            } else if c == ','
                && next_is_digit
                && chars.get(j + 1..j + 4).is_some_and(|g| g.iter().all(char::is_ascii_digit))
                && !chars.get(j + 4).is_some_and(char::is_ascii_digit)
                && !digits.contains('.')
            {
                // A thousands separator: exactly three digits follow.
            } else if c == '.' && next_is_digit && !digits.contains('.') {
                digits.push(c);
            } else {
                break;
            }
            j += 1;
        }
        let word_follows = chars.get(j).is_some_and(|c| c.is_alphabetic());
        if !word_follows {
            if let Ok(value) = digits.parse::<f64>() {
                found.push(Number { value, text: digits });
            }
        }
        i = j.max(i + 1);
    }
    found
}

/// The numbers of `answer` that are not among `known`: not equal in magnitude to one of them, nor one of them
/// rounded to the decimals the answer wrote (a whole number must match exactly: 3 is not 3.4 rounded).
pub fn unsupported_numbers(answer: &str, known: &[Number]) -> Vec<String> {
    let mut unsupported: Vec<String> = Vec::new();
    for number in numbers_in(answer) {
        let backed = known.iter().any(|k| stands_for(&number, k));
        if !backed && !unsupported.contains(&number.text) {
            unsupported.push(number.text);
        }
    }
    unsupported
}

/// Whether `written` (in an answer) is `known`: equal in magnitude, or `known` rounded to the decimals written.
fn stands_for(written: &Number, known: &Number) -> bool {
    let (a, b) = (written.value.abs(), known.value.abs());
    let exact = (a - b).abs() <= 1e-9 * a.max(1.0);
    let decimals = written.decimals();
    let rounded = decimals > 0 && {
        let scale = 10f64.powi(decimals as i32);
        ((b * scale).round() - a * scale).abs() < 0.5
    };
    exact || rounded
}

/// The final results (`required`: the lone number of each last step's output) that `answer` does not give.
pub fn missing_results(answer: &str, required: &[Number]) -> Vec<String> {
    let written = numbers_in(answer);
    required.iter().filter(|r| !written.iter().any(|w| stands_for(w, r))).map(|r| r.text.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> Vec<String> {
        numbers_in(text).into_iter().map(|n| n.text).collect()
    }

    #[test]
    fn numbers_are_read_as_written_without_ids_or_units_glued_to_words() {
        assert_eq!(texts("It costs 1,250.50 dollars, 3 each; s1 gave 48."), ["1250.50", "3", "48"]);
        assert_eq!(texts("mp3 v2 and 7th"), Vec::<String>::new());
        assert_eq!(texts("A loss of -5 at 12:30"), ["5", "12", "30"]);
        assert_eq!(texts("1,2,3 and 10,000"), ["1", "2", "3", "10000"]);
        assert_eq!(texts("The end is 15."), ["15"]);
    }

    #[test]
    fn answers_may_copy_or_round_results_but_not_invent_numbers() {
        let known = numbers_in("results 48 53 3.3333333 -5 1250");
        assert!(unsupported_numbers("The total is 53 and each pays 3.33.", &known).is_empty());
        assert!(unsupported_numbers("It fell by 5; 1,250 in all.", &known).is_empty());
        assert_eq!(unsupported_numbers("Each pays 3 and the total is 54.", &known), ["3", "54"]);
    }

    #[test]
    fn an_answer_must_give_each_final_result() {
        let required = numbers_in("99 24.75");
        assert!(missing_results("The total is 99 and each pays 24.75.", &required).is_empty());
        assert_eq!(missing_results("Each pays 24.75.", &required), ["99"]);
        assert_eq!(missing_results("}", &required), ["99", "24.75"]);
    }

    #[test]
    fn the_prompt_shows_each_result_clipped() {
        let long = "x".repeat(RESULT_CHARS + 50);
        let results = [StepResult {
            id: "s1".into(),
            tool: "read_file".into(),
            description: "read it".into(),
            args: json!({"path": "a.txt"}),
            output: json!(long),
        }];
        let text = prompt("Summarise a.txt", &results);
        assert!(text.contains("- s1 read_file (read it) with {\"path\":\"a.txt\"} -> xxx"), "{text}");
        assert!(text.contains(" …"), "{text}");
        assert!(text.len() < RESULT_CHARS + 200);
    }

    #[test]
    fn a_reason_without_words_or_copied_from_the_format_is_no_reason() {
        assert!(SYSTEM.contains(&format!("{{\"not_met\": \"{NOT_MET_PLACEHOLDER}\"}}")));
        for nothing in ["}", " ", "42.", "What is missing.", "what is missing"] {
            assert!(gives_no_reason(nothing), "{nothing:?}");
        }
        for reason in ["the price of AAPL", "no result gives the total", "What is missing is the tip"] {
            assert!(!gives_no_reason(reason), "{reason:?}");
        }
    }

    #[test]
    fn replies_of_either_shape_parse() {
        assert!(matches!(serde_json::from_str::<Reply>(r#"{"answer": "53"}"#), Ok(Reply::Answer { .. })));
        assert!(matches!(serde_json::from_str::<Reply>(r#"{"not_met": "no price"}"#), Ok(Reply::NotMet { .. })));
    }
}
