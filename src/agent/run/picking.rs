//! Readings that can only say what is there: where the answer's reading reads one list and its question asks for
//! items of it, a count or a total, the reading is worked out from the list's items rather than written freely.
//! Applied by the orchestrator as rule `reading-asks-the-goal`'s run-time part ([`read_list`]).
//!
//! - Over a list of records, the planner model writes the question as one Python expression over `items`, which
//!   code reads and works out (agent::run::list_query: the cheapest, the newest, the second, those that meet a
//!   condition, how many, the sum of a field). Asked for the cheapest of four offers, the 1.5B copying rows copied a
//!   dearer one; writing `min(items, key=lambda x: x['price'])` it does not.
//! - Otherwise (no expression of those forms, or a list of plain values) the planner judges whether the question
//!   asks for one item, several or anything else, and copies items under a grammar whose only words are the list's
//!   rows, so a reading cannot name a customer, a file or a branch the result does not hold.
//!
//! Every judgement is the planner model's: code it writes and code reads, or a label among fixed ones under a
//! grammar; no list of words decides. Where the question asks for anything else (yes or no, prose) the reading is
//! written as before, in free text.

use serde_json::Value;

use crate::agent::model_call::timed_chat_call;
use crate::agent::records::{clip, row};
use crate::agent::run::executor::escape_regex;
use crate::agent::run::list_query::{answer, parse, Worked};
use crate::agent::usage::ModelUsage;
use crate::decode::constraint::ConstraintSpec;
use crate::decode::Model;
use crate::llm::ChatMessage;
use crate::Result;

/// The most rows a list may have to be read from (a longer list is read in free text, as before).
pub const MAX_ROWS: usize = 60;

/// The most tokens of the expression the planner writes (the forms are one line).
const QUERY_TOKENS: usize = 64;

/// The characters of the list the expression's prompt shows.
const LIST_CHARS: usize = 4000;

/// How the expression opens (a call of a function the forms use, a comprehension, or `items`), then one line.
const QUERY_OPENING: &str = r"(min\(|max\(|sorted\(|sum\(|len\(|next\(|any\(|all\(|\[|items)[^\n`]{0,200}";

/// What a question about a list asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asks {
    /// One item of the list.
    Item,
    /// Several items of the list.
    Items,
    /// Something else: a number, a yes or no, words.
    Other,
}

/// A reading worked out from a list: its text (`None`: the question asks for something else, and the reading is
/// written freely), how it was found, for the log, and the planner calls it took, each with its purpose.
#[derive(Debug)]
pub struct ListReading {
    /// The reading: items of the list, one a line, or a count or total worked out by code.
    pub text: Option<String>,
    /// How: `min(items, key=lambda x: x['price']) worked out by code: 1 of 4 items`.
    pub how: String,
    /// The planner calls, each with its purpose in the `executor_call` event (`query`, `kind`, `pick`).
    pub calls: Vec<(&'static str, ModelUsage)>,
}

/// The `how` of a reading copied after an expression code could not work out.
fn copied_after(written: &Option<String>, how: String) -> String {
    match written {
        Some(code) => format!("{how} (`{code}` is no query code works out)"),
        None => how,
    }
}

/// The system message of the expression.
const QUERY_SYSTEM: &str = "You write Python expressions.";

/// The system message of the question's kind.
const KIND_SYSTEM: &str = "You tell what kind of answer a question asks for. Answer with one word.";

/// The system message of the pick.
const PICK_SYSTEM: &str = "You answer a question about a list by copying the items that answer it.";

/// The reading of `question` over a list of `items` (2 to [`MAX_ROWS`]): see the module's documentation.
/// `least_tokens`: the least room a copy of rows gets (an executor call's budget).
pub fn read_list(model: &mut Model, question: &str, items: &[Value], least_tokens: usize) -> Result<ListReading> {
    let rows: Vec<String> = items.iter().map(row).collect();
    let n = rows.len();
    // Room for every row copied (a token holds two characters or more), 2048 at most.
    let copy_tokens = rows.iter().map(|row| row.len() / 2 + 2).sum::<usize>().min(2048).max(least_tokens);
    let mut reading = ListReading { text: None, how: String::new(), calls: Vec::new() };
    let mut written_code = None;
    if items.iter().any(Value::is_object) {
        let (written, usage) = write_query(model, question, items)?;
        reading.calls.push(("query", usage));
        // One line, by the grammar; `parse` reads past blank space and code fences.
        let code = written.trim();
        if let Some(worked) = parse(code).and_then(|query| answer(&query, items)) {
            let (text, what) = match worked {
                Worked::Items(indexes) if indexes.is_empty() => ("none".to_string(), format!("none of {n} items")),
                Worked::Items(indexes) => {
                    let picked: Vec<&str> = indexes.iter().map(|&i| rows[i].as_str()).collect();
                    (picked.join("\n"), format!("{} of {n} items", picked.len()))
                }
                Worked::Number(number) => (number.clone(), format!("{number}, over {n} items")),
                Worked::Truth(yes, shown) => {
                    let said = if yes { "yes" } else { "no" };
                    let lines = std::iter::once(said).chain(shown.iter().map(|&i| rows[i].as_str()));
                    (lines.collect::<Vec<_>>().join("\n"), format!("{said}, over {n} items"))
                }
            };
            reading.text = Some(text);
            reading.how = format!("`{code}` worked out by code: {what}");
            return Ok(reading);
        }
        written_code = Some(code.to_string());
    }
    let (asks, usage) = what_it_asks(model, question, n)?;
    reading.calls.push(("kind", usage));
    if asks == Asks::Other {
        return Ok(reading);
    }
    let (picked, usage) = pick_rows(model, question, &rows, asks, copy_tokens)?;
    reading.calls.push(("pick", usage));
    if !picked.is_empty() {
        let how = format!("{} of the {n} items, copied under a grammar of its rows", picked.len());
        reading.how = copied_after(&written_code, how);
        reading.text = Some(picked.join("\n"));
    }
    Ok(reading)
}

/// The planner's Python expression over `items` whose value answers `question`, as it writes it: under a grammar
/// that has it open with code (a call, a comprehension or `items`; unconstrained, the 1.5B wrote prose first), the
/// rest of one line free (agent::run::list_query reads what it can). The model is shown the items as a Python list
/// (JSON writes the same literals), clipped where long.
fn write_query(model: &mut Model, question: &str, items: &[Value]) -> Result<(String, ModelUsage)> {
    let user = format!(
        "items = {}\n\nWrite one Python expression over `items` whose value answers: {question}\nWrite only the \
         expression.",
        clip(&Value::Array(items.to_vec()).to_string(), LIST_CHARS)
    );
    let messages = [ChatMessage::system(QUERY_SYSTEM), ChatMessage::user(user)];
    let opening = ConstraintSpec::Regex(QUERY_OPENING.into());
    timed_chat_call(model, "planner", &messages, Some(&opening), QUERY_TOKENS)
}

/// What `question`, asked of a list of `rows` items, asks for: the planner's judgement under a grammar of the three
/// labels.
pub fn what_it_asks(model: &mut Model, question: &str, rows: usize) -> Result<(Asks, ModelUsage)> {
    let user = format!(
        "A question about a list of {rows} items: {question}\n\nWhat does it ask for?\nitem: one item of the list\n\
         items: several items of the list\nother: anything else (a number, a count, a total, yes or no, words)\n\
         Answer item, items or other."
    );
    let messages = [ChatMessage::system(KIND_SYSTEM), ChatMessage::user(user)];
    let labels = ConstraintSpec::Regex("item|items|other".into());
    let (label, usage) = timed_chat_call(model, "planner", &messages, Some(&labels), 4)?;
    let asks = match label.trim() {
        "item" => Asks::Item,
        "items" => Asks::Items,
        _ => Asks::Other,
    };
    Ok((asks, usage))
}

/// The rows of `rows` that answer `question` (one, or several where `asks` says so), copied by the model under a
/// grammar whose only words are the rows themselves (one a line); each row once, in the list's order. The model
/// copies rows rather than numbering them: asked for the number of the cheapest of four offers, the 1.5B gave the
/// dearest one's, the item numbers beside the prices being one more column of numbers to mix up.
pub fn pick_rows(
    model: &mut Model,
    question: &str,
    rows: &[String],
    asks: Asks,
    max_tokens: usize,
) -> Result<(Vec<String>, ModelUsage)> {
    let listed: Vec<String> = rows.iter().map(|row| format!("- {row}")).collect();
    let ask = match asks {
        Asks::Item => "Copy the one item that answers the question, exactly as the list writes it.",
        _ => "Copy every item that answers the question, one a line, exactly as the list writes them.",
    };
    let user = format!("List:\n{}\n\nQuestion: {question}\n{ask}", listed.join("\n"));
    let messages = [ChatMessage::system(PICK_SYSTEM), ChatMessage::user(user)];
    let grammar = rows_grammar(rows, asks);
    let (text, usage) = timed_chat_call(model, "planner", &messages, Some(&grammar), max_tokens)?;
    let written: Vec<&str> = text.lines().map(str::trim).collect();
    let picked = rows.iter().filter(|row| written.contains(&row.trim())).cloned().collect();
    Ok((picked, usage))
}

/// The rows, each as written: one of them, or (for [`Asks::Items`]) several, one a line.
fn rows_grammar(rows: &[String], asks: Asks) -> ConstraintSpec {
    let one = format!("({})", rows.iter().map(|row| escape_regex(row.trim())).collect::<Vec<_>>().join("|"));
    match asks {
        Asks::Item => ConstraintSpec::Regex(one),
        _ => ConstraintSpec::Regex(format!("{one}(\\n{one}){{0,{}}}", rows.len().saturating_sub(1))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pick_grammar_admits_the_lists_rows_only() {
        let rows = ["name: Bo; price: 2".to_string(), "x (y)".to_string()];
        let ConstraintSpec::Regex(one) = rows_grammar(&rows, Asks::Item) else { unreachable!() };
        assert_eq!(one, "(name: Bo; price: 2|x \\(y\\))");
        let ConstraintSpec::Regex(many) = rows_grammar(&rows, Asks::Items) else { unreachable!() };
        assert_eq!(many, format!("{one}(\\n{one}){{0,1}}"));
    }
}
