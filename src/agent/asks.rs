//! Requests that name several things at once ("Adele for 20 minutes, then Coldplay for half an hour"): the model
//! first lists what the request asks for, one short line an action, then writes exactly one call for each line.
//!
//! Why: asked for "a list of calls, one for each thing the request asks for", a small model writes the first call
//! and closes the list (on benches/dev-parallel, 19 of the 0.5B's 21 misses were one call where two or three were
//! asked). Listing the actions is a short, plain-language step the model does well; the count it gives then
//! fixes the calls' grammar (exactly that many), so no action is dropped and none is invented. The rule is stated
//! in terms of the request and the functions only: one action is one use of one function with one set of values.

use serde_json::{json, Value};

use crate::agent::model_call::chat_call;
use crate::decode::constraint::ConstraintSpec;
use crate::decode::{Model, Timings};
use crate::llm::ChatMessage;
use crate::Result;

/// Token budget of the list of actions.
pub const ASKS_TOKENS: usize = 192;
/// The most actions one request is taken to ask for (and calls written for it).
pub const MAX_ASKS: usize = 8;
/// The longest line of the list, in characters.
const MAX_ASK_CHARS: usize = 160;

/// The grammar of the list: one to [`MAX_ASKS`] short lines.
fn asks_schema() -> Value {
    json!({
        "type": "array", "minItems": 1, "maxItems": MAX_ASKS,
        "items": {"type": "string", "minLength": 1, "maxLength": MAX_ASK_CHARS},
        "x-guidance": {"whitespace_flexible": false, "lenient": true}
    })
}

/// The system prompt of the listing call: what an action is, and the functions by name and purpose (their
/// parameter schemas are left out: a small model copies schema keys into the list).
fn asks_system(functions: &[(String, String)]) -> String {
    let listed: Vec<String> = functions.iter().map(|(name, what)| format!("- {name}: {what}")).collect();
    format!(
        "You read a request and list every separate action it asks for, as a JSON list of short lines in the \
         request's order. One action is one use of one function with one set of values: a request that asks the \
         same thing for several items (two cities, three numbers, two people) asks one action for each item, and \
         a request that asks two different things asks two actions. Write each action as a short instruction \
         with its values as the request writes them; list only what the request asks.\nFunctions:\n{}",
        listed.join("\n")
    )
}

/// A worked example in another domain, as one user turn and its answer: how a request of two items reads.
fn example() -> [ChatMessage; 2] {
    [
        ChatMessage::new("user", "Water the roses for 5 minutes and the tulips for 3, and check the soil of the fern."),
        ChatMessage::new(
            "assistant",
            r#"["water the roses for 5 minutes","water the tulips for 3 minutes","check the soil of the fern"]"#,
        ),
    ]
}

/// The listing call's conversation: the instructions with the functions, the worked example, then `turns` (their
/// system messages left out).
pub fn listing_messages(turns: &[ChatMessage], functions: &[(String, String)]) -> Vec<ChatMessage> {
    let mut messages = vec![ChatMessage::system(asks_system(functions))];
    messages.extend(example());
    messages.extend(turns.iter().filter(|m| m.role != "system").cloned());
    messages
}

/// The actions the user turns of `turns` ask for, listed by `model`; duplicates (as written, ignoring case) are
/// dropped. `functions` are the (name, description) of the functions the calls may use.
pub fn list_asks(
    model: &mut Model,
    role: &str,
    turns: &[ChatMessage],
    functions: &[(String, String)],
) -> Result<(Vec<String>, Timings)> {
    let messages = listing_messages(turns, functions);
    let spec = ConstraintSpec::JsonSchema(asks_schema());
    let (text, timings) = chat_call(model, role, &messages, Some(&spec), ASKS_TOKENS)?;
    Ok((parse_asks(&text), timings))
}

/// The lines of a listing answer, trimmed, empty and repeated ones dropped; nothing when it does not parse (a
/// budget cut), so the caller falls back to one pass.
pub fn parse_asks(text: &str) -> Vec<String> {
    let lines: Vec<String> = serde_json::from_str(text).unwrap_or_default();
    let mut seen = std::collections::HashSet::new();
    lines
        .into_iter()
        .map(|line| line.trim().to_string())
        .filter(|line| !line.is_empty() && seen.insert(line.to_lowercase()))
        .take(MAX_ASKS)
        .collect()
}

/// What the call prompt is told about the list: the actions, numbered, and one call for each in that order.
pub fn asks_note(asks: &[String]) -> String {
    let numbered: Vec<String> = asks.iter().enumerate().map(|(i, ask)| format!("{}. {ask}", i + 1)).collect();
    format!(
        "The request asks for {} action{}:\n{}\nWrite exactly one call for each action, in this order.",
        asks.len(),
        if asks.len() == 1 { "" } else { "s" },
        numbered.join("\n")
    )
}

/// `list_schema` (a JSON Schema of an array of calls) made to hold exactly `n` calls.
pub fn exactly(mut list_schema: Value, n: usize) -> Value {
    list_schema["minItems"] = json!(n);
    list_schema["maxItems"] = json!(n);
    list_schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_keeps_order_and_drops_repeats_and_blanks() {
        let asks = parse_asks(r#"["Play Adele for 20 minutes", " ", "play adele for 20 minutes", "Play Coldplay"]"#);
        assert_eq!(asks, vec!["Play Adele for 20 minutes", "Play Coldplay"]);
    }

    #[test]
    fn an_answer_cut_short_lists_nothing() {
        assert!(parse_asks(r#"["Play Adele for 20 min"#).is_empty());
    }

    #[test]
    fn the_note_numbers_each_action() {
        let note = asks_note(&["a".into(), "b".into()]);
        assert!(note.contains("2 actions:\n1. a\n2. b\n"), "{note}");
    }

    #[test]
    fn exactly_fixes_both_bounds() {
        let schema = exactly(json!({"type": "array", "minItems": 1}), 3);
        assert_eq!((schema["minItems"].as_u64(), schema["maxItems"].as_u64()), (Some(3), Some(3)));
    }

    #[test]
    fn the_list_grammar_bounds_count_and_length() {
        let schema = asks_schema();
        assert_eq!(schema["maxItems"], json!(MAX_ASKS));
        assert_eq!(schema["items"]["maxLength"], json!(MAX_ASK_CHARS));
    }
}
