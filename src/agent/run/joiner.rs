//! The joiner (as in LLMCompiler): after a plan's steps ran, one model call reads the goal and the step results,
//! writes the answer — every part of the goal, each number as a tool produced it — and then judges it: an answer
//! that leaves a part of the goal without a result names that part, which sends the run back to the planner.
//!
//! Results are shown as a model reads them (`agent::records`: a list counted by code, one item a line). Before the
//! joiner reads, the run checks in code that the plan called a tool where tools are connected to it (the
//! orchestrator's `no_tool_called`). Small models miscopy numbers, so the answer is checked in code
//! ([`unsupported_numbers`]): every number in it must be one of the goal's or the results' (a list's length among
//! them), or that number rounded to the decimals written, or a whole number next to it, and a number written with a
//! minus sign a negative one. A failed check is retried once with the
//! offending numbers named; a second failure leaves the answer to the caller's fallback. An incomplete answer that
//! names no missing part (no word), and an answer that is no answer (a step reference such as `$s2.result$`, the
//! goal written back, one sentence over and over: [`degenerate`]) are asked again the same way. So is an answer that
//! names a value (a capitalised name, a quoted text) found in neither the goal nor a tool's result
//! (`provenance`); written twice, it sends the run back to the planner.

use std::time::Instant;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::agent::model_call::chat_call;
use crate::agent::numbers::{numbers_in, same_value, Number};
use crate::agent::plan::refs::references_in;
use crate::agent::provenance::{sources, unsupported_names};
use crate::agent::records::{clip, list_lengths, readable};
use crate::agent::usage::ModelUsage;
use crate::decode::constraint::ConstraintSpec;
use crate::decode::Model;
use crate::llm::ChatMessage;
use crate::tools::Llm;
use crate::Result;

/// The joiner's instructions. The reply writes the answer first and judges it after: asked to choose between an
/// answer and "not met" up front, the 1.5B judged right results (`12*4+5` → 53, `9-17` then `*3` → -24) "not an
/// answer to the goal", also when asked to look again, and its replans then read files no goal named.
const SYSTEM: &str = "You write the final answer of a tool-using agent. You are given the user's goal and the \
results of the steps that ran. Answer every part of the goal in one or two short sentences, and copy each number \
exactly as a result gives it: do not round, recompute or convert it. Where the goal asks which things, name each \
of them as a result writes it; a count alone answers only how many. After the answer, \"complete\" is false only \
when a part of the goal has no result (or its result is an error), and then \"missing\" names that part. A small \
model's reading can be wrong: where it disagrees with a tool's result, the tool's result is right. \
Reply as JSON: {\"answer\": \"...\", \"complete\": true} or {\"answer\": \"...\", \"complete\": false, \"missing\": \
\"...\"}.\n\
Example: for the goal \"A box holds 6 eggs. How many eggs are in 7 boxes, and how many are left after 5 break?\" \
and the results \"s1 calculator with {\"expression\":\"6*7\"} -> {\"result\":42}\" and \"s2 calculator with \
{\"expression\":\"42-5\"} -> {\"result\":37}\", reply {\"answer\": \"7 boxes hold 42 eggs, and 37 are left after 5 \
break.\", \"complete\": true}. For the goal \"What is 6*7, and what is the weather in Oslo?\" and the result \"s1 \
calculator with {\"expression\":\"6*7\"} -> {\"result\":42}\", reply {\"answer\": \"6*7 is 42; no result gives the \
weather in Oslo.\", \"complete\": false, \"missing\": \"the weather in Oslo\"}";

/// Characters of one result shown to the joiner (file contents can be long; the answer needs the gist). A list of
/// a dozen records, one a line, fits: cut at 600, a to-do list showed 2 of its 6 items.
const RESULT_CHARS: usize = 1500;
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

/// The joiner's reply as the grammar allows it: the answer, then whether it is complete and, if not, what is
/// missing.
#[derive(Debug, Deserialize)]
struct Reply {
    answer: String,
    complete: bool,
    #[serde(default)]
    missing: String,
}

/// The joiner's grammar: the answer, the judgment, the missing part, in that order (keys in order), bounded.
fn reply_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "answer": {"type": "string", "minLength": 1, "maxLength": ANSWER_CHARS},
            "complete": {"type": "boolean"},
            "missing": {"type": "string", "minLength": 1, "maxLength": 200}
        },
        "required": ["answer", "complete"],
        "additionalProperties": false
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

/// One finished step: `s2 calculator (what it was for) with {args} -> output`, the output clipped. A model step
/// shows no arguments: its prompt holds the results it read, which the joiner is shown as they are.
fn step_line(r: &StepResult) -> String {
    let what = if r.description.is_empty() { String::new() } else { format!(" ({})", r.description) };
    if r.tool == Llm::NAME {
        return format!("{} {}{what}, a small model's reading -> {}", r.id, r.tool, shown_output(&r.output));
    }
    format!("{} {}{what} with {} -> {}", r.id, r.tool, r.args, shown_output(&r.output))
}

/// A step's output as a model is shown it ([`readable`]: a list counted and one item a line), clipped.
pub(crate) fn shown_output(output: &Value) -> String {
    clip(&readable(output), RESULT_CHARS)
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
    let sources = name_sources(goal, results);
    let mut messages = vec![ChatMessage::system(SYSTEM), ChatMessage::user(prompt(goal, results))];
    let mut usage = ModelUsage { tokens_in: 0, tokens_out: 0, ms: 0 };
    let mut rejected = Vec::new();
    let mut unsourced: Vec<String> = Vec::new();
    // What the joiner was told after a rejected reply: an answer made of its words is no answer.
    let mut told = String::new();
    for _ in 0..ATTEMPTS {
        // Room for the longest reply the grammar allows, in tokens (a token is at least one character).
        let (text, timings) = chat_call(model, "joiner", &messages, Some(&schema), ANSWER_CHARS + 16)?;
        usage.tokens_in += timings.prompt_tokens;
        usage.tokens_out += timings.generated_tokens;
        tracing::debug!(reply = %text, "joiner reply");
        let reply = match serde_json::from_str::<Reply>(&text) {
            Ok(reply) => reply,
            // Only a reply cut off by the token limit can break the grammar's shape.
            Err(e) => {
                rejected.push(format!("{text} (not a complete reply: {e})"));
                continue;
            }
        };
        if !reply.complete {
            let reason = reply.missing.trim().to_string();
            if !gives_no_reason(&reason) && !copies_the_example(&reason, goal) && !names_no_part_of(&reason, goal) {
                usage.ms = started.elapsed().as_millis() as u64;
                return Ok((Verdict::NotMet(reason), usage));
            }
            // "Not complete" without naming a part gives the planner nothing to go on (the 1.5B wrote `}` for
            // right results), nor does the instructions' own example (it named "the weather in Oslo" missing from
            // a to-do list's results, and the replan read a weather file), nor a part the goal does not ask ("the
            // date" missing from a right answer to "Who made the most recent commit?"): ask again.
            let problem = "That names no missing part of this goal. Write the answer from the results, or name in \
                           words the part of the goal they do not give.";
            rejected.push(format!("not complete: {reason:?} ({problem})"));
            told.push_str(problem);
            messages.push(ChatMessage::assistant(text.clone()));
            messages.push(ChatMessage::user(problem.to_string()));
            continue;
        }
        let answer = reply.answer.trim().to_string();
        let unsupported = unsupported_numbers(&answer, &known);
        let missing = missing_results(&answer, required);
        let says_nothing = !answer.chars().any(char::is_alphanumeric);
        let degenerate = degenerate(&answer, goal, &told);
        unsourced = sources.as_deref().map(|sources| unsupported_names(&answer, sources)).unwrap_or_default();
        if unsupported.is_empty() && missing.is_empty() && !says_nothing && degenerate.is_none() && unsourced.is_empty()
        {
            usage.ms = started.elapsed().as_millis() as u64;
            return Ok((Verdict::Answer(answer), usage));
        }
        let problem = if says_nothing {
            "That is not an answer. Write the answer as a sentence.".to_string()
        } else if let Some(problem) = degenerate {
            problem.to_string()
        } else if !unsupported.is_empty() {
            format!(
                "These numbers are not in the goal or the results: {}. Write the answer again, copying \
                 each number exactly from the results.",
                unsupported.join(", ")
            )
        } else if !missing.is_empty() {
            format!("The answer leaves out the result {}. Write the answer again with it.", missing.join(", "))
        } else {
            format!(
                "No tool result holds {}. Write the answer again from the results; where they do not give what \
                 the goal asks, say so.",
                unsourced.join(", ")
            )
        };
        rejected.push(format!("{answer} ({problem})"));
        told.push_str(&problem);
        messages.push(ChatMessage::assistant(text.clone()));
        messages.push(ChatMessage::user(problem));
    }
    usage.ms = started.elapsed().as_millis() as u64;
    // Names no result holds, written twice, are no reading of the results: the planner gets another go.
    if !unsourced.is_empty() {
        let reason = format!("the answer named {}, which no tool result holds", unsourced.join(", "));
        return Ok((Verdict::NotMet(reason), usage));
    }
    Ok((Verdict::Unchecked(rejected), usage))
}

/// The names and quoted values of `answer` that neither the goal nor any tool step's result holds (empty where no
/// tool step ran): the check the joiner's answers pass, for a plan's own answer (its last steps' output) that the
/// joiner judged not to meet the goal.
pub fn unsourced_names(goal: &str, results: &[StepResult], answer: &str) -> Vec<String> {
    name_sources(goal, results).map(|sources| unsupported_names(answer, &sources)).unwrap_or_default()
}

/// What an answer's names may come from, lower-cased: the goal and each tool step's result. A model's reading is
/// what is checked, not a source, and so are arguments, which a reading can fill (a query `WHERE signup_date = 'The
/// most recent customer to sign up was John Doe.'` vouched for that name). `None` where no tool step ran: an answer
/// from a model alone has no results to hold its names to.
fn name_sources(goal: &str, results: &[StepResult]) -> Option<String> {
    let tools: Vec<&StepResult> = results.iter().filter(|r| r.tool != Llm::NAME).collect();
    if tools.is_empty() {
        return None;
    }
    Some(sources(goal, tools.iter().map(|r| &r.output)))
}

/// Why an answer is no answer, checked in code whatever the model judged: it holds a plan reference
/// (`$s2.result$`: a placeholder, never a value), it is the goal written back, it is made of the words the joiner
/// was `told` after a rejected reply (asked to name a missing part, the 1.5B answered "No missing part of this
/// goal."), or it says one sentence over and over (a reading that looped until its token limit).
fn degenerate(answer: &str, goal: &str, told: &str) -> Option<&'static str> {
    if !references_in(&Value::String(answer.to_string())).is_empty() {
        return Some(
            "That holds a reference to a step's result, not the value. Write the answer with the values the \
             results give.",
        );
    }
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
    };
    let (said, asked) = (words(answer), words(goal));
    if !said.is_empty() && said == asked {
        return Some("That repeats the goal. Write the answer the results give.");
    }
    let feedback = words(told);
    if said.len() >= 2 && said.iter().all(|word| feedback.contains(word)) {
        return Some("That repeats what you were told, not the results. Write the answer the results give.");
    }
    let mut sentences: Vec<Vec<String>> =
        answer.split(['.', '!', '?', '\n']).map(words).filter(|w| w.len() >= 3).collect();
    let total = sentences.len();
    sentences.sort();
    sentences.dedup();
    if total >= 3 && sentences.len() * 2 <= total {
        return Some("That says the same sentence again and again. Write the answer once, from the results.");
    }
    None
}

/// The missing part the instructions' example names.
const EXAMPLE_MISSING: &str = "the weather in Oslo";

/// Whether a missing part's name is the instructions' example's, where the goal does not ask it.
fn copies_the_example(reason: &str, goal: &str) -> bool {
    let example = EXAMPLE_MISSING.to_lowercase();
    reason.to_lowercase().contains(&example) && !goal.to_lowercase().contains(&example)
}

/// Whether a missing part's name shares no word with the goal: none of its words of four letters or more begins
/// as a word of the goal does (its first four letters), so it is no part of what the goal asks. Read on the goal's
/// own words, in any language written with spaces; no list of words.
fn names_no_part_of(reason: &str, goal: &str) -> bool {
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 4)
            .map(|w| w.to_lowercase().chars().take(4).collect())
            .collect()
    };
    let asked = words(goal);
    let named = words(reason);
    !named.is_empty() && !named.iter().any(|w| asked.contains(w))
}

/// Whether a missing part's name says nothing: no word in it (the format's `...`, a `}`), or a word for nothing.
fn gives_no_reason(reason: &str) -> bool {
    let words = reason.trim_matches(|c: char| !c.is_alphanumeric()).to_ascii_lowercase();
    !reason.chars().any(char::is_alphabetic) || matches!(words.as_str(), "none" | "nothing" | "n/a" | "null" | "no")
}

/// Every number the answer may use: those in the goal and in each step's arguments and output, and the length of
/// each list an output holds (a count the code made, shown with the list).
pub(crate) fn known_numbers(goal: &str, results: &[StepResult]) -> Vec<Number> {
    let mut known = numbers_in(goal);
    for r in results {
        known.extend(numbers_in(&r.args.to_string()));
        collect_numbers(&r.output, &mut known);
        let counts = list_lengths(&r.output).into_iter();
        known.extend(counts.map(|n| Number { value: n as f64, text: n.to_string(), negative: false }));
    }
    known
}

/// Numbers in a JSON value: its numbers as they are, and the numbers written in its strings.
fn collect_numbers(value: &Value, into: &mut Vec<Number>) {
    match value {
        Value::Number(n) => {
            if let Some(v) = n.as_f64() {
                into.push(Number { value: v, text: n.to_string(), negative: v < 0.0 });
            }
        }
        Value::String(s) => into.extend(numbers_in(s)),
        Value::Array(items) => items.iter().for_each(|v| collect_numbers(v, into)),
        Value::Object(map) => map.values().for_each(|v| collect_numbers(v, into)),
        Value::Bool(_) | Value::Null => {}
    }
}

/// The numbers of `answer` that are not among `known`: not equal in magnitude to one of them, nor one of them
/// rounded to the decimals the answer wrote, nor a whole number next to one that is not whole (13 for 12.5). A number
/// the answer writes with a minus sign must be a negative one: the 1.5B wrote `-37.0` for a result of 37.
pub fn unsupported_numbers(answer: &str, known: &[Number]) -> Vec<String> {
    let mut unsupported: Vec<String> = Vec::new();
    for number in numbers_in(answer) {
        let backed = known.iter().any(|k| stands_for(&number, k) && (k.negative || !number.negative));
        let text = if number.negative { format!("-{}", number.text) } else { number.text };
        if !backed && !unsupported.contains(&text) {
            unsupported.push(text);
        }
    }
    unsupported
}

/// Whether `written` (in an answer) is `known`: equal in magnitude, `known` rounded to the decimals written, or a
/// whole number next to a `known` that is not whole (its floor or ceiling). Why the last: a goal that asks for
/// whole things gets a whole answer ("How many packs of 12 for 150 pencils?": 150/12 gave 12.5 and the joiner
/// rightly wrote 13, which the check used to reject); a whole number further off (7 for 3.33) is still invented.
fn stands_for(written: &Number, known: &Number) -> bool {
    let (a, b) = (written.value.abs(), known.value.abs());
    let decimals = written.decimals();
    let rounded = decimals > 0 && {
        let scale = 10f64.powi(decimals as i32);
        ((b * scale).round() - a * scale).abs() < 0.5
    };
    let whole_next_to =
        decimals == 0 && !same_value(b, b.round()) && (same_value(a, b.floor()) || same_value(a, b.ceil()));
    same_value(a, b) || rounded || whole_next_to
}

/// The final results (`required`: the lone number of each last step's output) that `answer` does not give.
pub fn missing_results(answer: &str, required: &[Number]) -> Vec<String> {
    let written = numbers_in(answer);
    required.iter().filter(|r| !written.iter().any(|w| stands_for(w, r))).map(|r| r.text.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_the_goal_written_back_and_loops_are_no_answers() {
        let goal = "What is the total of the order?";
        assert!(degenerate("The total is $s2.result$.", goal, "").is_some_and(|p| p.contains("reference")));
        assert!(degenerate("What is the total of the order", goal, "").is_some_and(|p| p.contains("repeats")));
        let looped = "The total is due. The total is due. The total is due. The total is due.";
        assert!(degenerate(looped, goal, "").is_some_and(|p| p.contains("again")));
        assert_eq!(degenerate("The total of the order is 53 dollars.", goal, ""), None);
        assert_eq!(degenerate("It costs $5, paid in cash.", goal, ""), None, "a dollar sign is not a reference");
        let list = "Alice lives in Paris. Bob lives in Rome. Carol lives in Oslo.";
        assert_eq!(degenerate(list, goal, ""), None, "sentences alike in shape are not a loop");
        let told = "That names no missing part of this goal. Write the answer from the results.";
        assert!(degenerate("No missing part of this goal.", goal, told).is_some_and(|p| p.contains("told")));
        assert_eq!(degenerate("The total of the order is 53 dollars.", goal, told), None);
    }

    #[test]
    fn answers_may_copy_or_round_results_but_not_invent_numbers() {
        let known = numbers_in("results 48 53 3.3333333 -5 1250");
        assert!(unsupported_numbers("The total is 53 and each pays 3.33.", &known).is_empty());
        assert!(unsupported_numbers("It fell by 5; 1,250 in all.", &known).is_empty());
        assert_eq!(unsupported_numbers("Each pays 7 and the total is 54.", &known), ["7", "54"]);
        // A whole number next to a result that is not whole: 12.5 packs are bought as 13 (or 12 filled).
        let packs = numbers_in("12.5");
        assert!(unsupported_numbers("She must buy 13 packs.", &packs).is_empty());
        assert!(unsupported_numbers("12 packs are full.", &packs).is_empty());
        assert_eq!(unsupported_numbers("She must buy 14 packs.", &packs), ["14"]);
        assert!(missing_results("She must buy 13 packs.", &numbers_in("12.5")).is_empty());
        // Next to a whole result there is nothing to round: 14 is not 13.
        assert_eq!(unsupported_numbers("She must buy 14 packs.", &numbers_in("13")), ["14"]);
    }

    #[test]
    fn a_minus_sign_of_its_own_must_stand_for_a_negative_result() {
        let signs = |text: &str| numbers_in(text).into_iter().map(|n| n.negative).collect::<Vec<_>>();
        assert_eq!(signs("-8, (-5), : -37 and x -2"), [true, true, true, true]);
        assert_eq!(signs("9-17, (F-32), f(2)-3, 1.5-2 and 4 - 1"), [false; 9]);
        let mut known = numbers_in("(98.6 - 32) * 5 / 9 gave 37 and 9-17 gave");
        collect_numbers(&json!(-8), &mut known);
        assert_eq!(unsupported_numbers(":-37.0 degrees Celsius", &known), ["-37.0"]);
        assert!(unsupported_numbers("37.0 degrees Celsius", &known).is_empty());
        assert!(unsupported_numbers("It is -8, a loss of 8; 17 less than 9.", &known).is_empty());
        assert_eq!(unsupported_numbers("It is -17.", &known), ["-17"]);
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
    fn a_listed_result_is_shown_counted_and_its_count_is_a_number_the_answer_may_give() {
        let todos =
            json!({"todos": [{"text": "Call the dentist"}, {"text": "Water the plants"}, {"text": "Pay rent"}]});
        let results = [StepResult {
            id: "s1".into(),
            tool: "list_todos".into(),
            description: String::new(),
            args: json!({}),
            output: todos,
        }];
        let text = prompt("How many things are on my list?", &results);
        assert!(text.contains("-> todos:\n1. text: Call the dentist\n2. text: Water"), "{text}");
        assert!(text.contains("3. text: Pay rent\n(3 items)"), "{text}");
        let known = known_numbers("How many things are on my list?", &results);
        assert!(unsupported_numbers("There are 3 things on your list.", &known).is_empty());
        assert_eq!(unsupported_numbers("There are 4 things on your list.", &known), ["4"]);
    }

    #[test]
    fn a_missing_part_without_words_is_no_reason() {
        for nothing in ["}", " ", "42.", "...", "None.", "nothing"] {
            assert!(gives_no_reason(nothing), "{nothing:?}");
        }
        for reason in ["the price of AAPL", "no result gives the total", "What is missing is the tip"] {
            assert!(!gives_no_reason(reason), "{reason:?}");
        }
        assert!(SYSTEM.contains(EXAMPLE_MISSING));
        assert!(copies_the_example("The weather in Oslo", "What's the most urgent thing on my to-do list?"));
        assert!(!copies_the_example("the weather in Oslo", "What is the weather in Oslo today?"));
        assert!(!copies_the_example("the price of AAPL", "What is AAPL's price?"));
        let goal = "Who made the most recent commit in the repository in this folder?";
        assert!(names_no_part_of("the date", goal));
        assert!(!names_no_part_of("the commit's author", goal), "commit: a word of the goal");
        assert!(!names_no_part_of("the number of tickets", "What do the tickets cost us in total?"), "its plural");
        assert!(!names_no_part_of("opening hours on Monday", "Is the museum open on Mondays?"), "its first letters");
        assert!(!names_no_part_of("a tip", goal), "no word long enough to tell: a part");
    }

    #[test]
    fn replies_give_the_answer_then_the_judgment() {
        let done: Reply = serde_json::from_str(r#"{"answer": "53", "complete": true}"#).unwrap();
        assert!(done.complete && done.answer == "53" && done.missing.is_empty());
        let gap: Reply =
            serde_json::from_str(r#"{"answer": "It is 53.", "complete": false, "missing": "the price"}"#).unwrap();
        assert!(!gap.complete && gap.missing == "the price");
        let schema = reply_schema();
        let keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["answer", "complete", "missing"], "the answer is written before it is judged");
        assert!(SYSTEM.contains(r#"{"answer": "...", "complete": true}"#));
    }
}
