//! Readings that can only say what is there: where the answer's reading reads one list and its question asks for
//! an item or items of that list, the model answers by copying items under a grammar whose only words are the list's
//! rows, and the reading is those rows as the result holds them. It cannot name a customer, a file or a
//! branch the result does not hold. Applied by the orchestrator as rule `reading-asks-the-goal`'s run-time part.
//!
//! Whether the question asks for items is the planner model's judgement among fixed labels ([`Asks`]), under a
//! grammar: no list of words decides it. Where the question asks for anything else (a count, a total, yes or no,
//! prose) the reading is written as before, in free text.

use crate::agent::model_call::timed_chat_call;
use crate::agent::run::executor::escape_regex;
use crate::agent::usage::ModelUsage;
use crate::decode::constraint::ConstraintSpec;
use crate::decode::Model;
use crate::llm::ChatMessage;
use crate::Result;

/// The most rows a list may have to be picked from (a longer list is read in free text, as before).
pub const MAX_ROWS: usize = 60;

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

/// The system message of the question's kind.
const KIND_SYSTEM: &str = "You tell what kind of answer a question asks for. Answer with one word.";

/// The system message of the pick.
const PICK_SYSTEM: &str = "You answer a question about a list by copying the items that answer it.";

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
