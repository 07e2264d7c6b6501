//! Rule `errors-in-results` (run, general): a tool result that is only an error report, sent as a successful
//! result, is the tool failing. MCP has a flag for a failed call (`isError`), and many servers do not set it: the
//! SQLite server answers `Database error: no such column: signup_date` and `Error: Only SELECT queries are allowed
//! for read_query` as plain text, a to-do server `{"error": "Todo with ID '[]' not found", "todo_id": "[]"}`.
//! Taken as results, they were read as data: the reading that answered "Who was the most recent customer?" over
//! "no such column" made up "John Doe", and a run answered with the to-do server's error object itself. As
//! failures they go where a failed call goes: the repair of its arguments, or a replan told the tool's message.
//!
//! What counts is the result's shape, never its subject: a text whose first line opens with an error label (`Error:`
//! or one word before it, `Database error:`), or an object whose `error` field holds a message and whose other
//! fields only say the call failed (`success: false`) or repeat the call's own arguments. A result with any other
//! data beside an error field (a page, rows, a list) is a result.

use serde_json::{Map, Value};

use crate::agent::plan::refs::output_as_text;
use crate::agent::records::clip;

/// The longest error message kept (the rest is cut, an ellipsis marking the cut), as long as an MCP error's.
const MAX_MESSAGE_CHARS: usize = 400;

/// The error `output` (the result of a call with `args`) reports instead of a result, where it is only an error
/// report; `None` for a result.
pub fn reported_error(output: &Value, args: &Map<String, Value>) -> Option<String> {
    let message = match output {
        Value::Object(map) if map.contains_key("error") => error_object(map, args)?,
        _ => error_text(output_as_text(output)?)?,
    };
    let message = message.trim();
    if message.is_empty() {
        return None;
    }
    Some(clip(message, MAX_MESSAGE_CHARS))
}

/// The message of an object whose `error` field is its point: every other field says the call failed or repeats
/// one of the call's arguments.
fn error_object(map: &Map<String, Value>, args: &Map<String, Value>) -> Option<String> {
    let message = match map.get("error")? {
        Value::String(text) => text.clone(),
        Value::Object(inner) => inner.get("message").and_then(Value::as_str).map(str::to_string)?,
        _ => return None,
    };
    let only_failure = map.iter().filter(|(key, _)| *key != "error").all(|(key, value)| {
        let failed_flag = value == &Value::Bool(false);
        let echoed = args.get(key) == Some(value);
        failed_flag || echoed || value.is_null()
    });
    only_failure.then_some(message)
}

/// The text itself where its first line opens with an error label: `error:`, or one word and `error:`
/// (case aside).
fn error_text(text: &str) -> Option<String> {
    let first = text.trim_start().lines().next()?;
    let (label, _) = first.split_once(':')?;
    let words: Vec<&str> = label.split_whitespace().collect();
    let labelled = match words.as_slice() {
        [word] | [_, word] => word.eq_ignore_ascii_case("error"),
        _ => false,
    };
    labelled.then(|| text.trim().to_string())
}

/// Rule `errors-in-results` (run, general).
pub struct ErrorsInResults;

impl super::Rule for ErrorsInResults {
    fn about(&self) -> super::About {
        super::About {
            name: "errors-in-results",
            stage: super::Stage::Run,
            profile: super::Profile::General,
            keys_on: "a tool result that is only an error report (a text opening with an error label, `Error:` or `Database error:`; an object whose `error` field holds a message and whose other fields only repeat the call's arguments or say it failed): the call failed with that message",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn error_texts_are_failures_and_texts_about_errors_are_not() {
        let none = Map::new();
        let failed = |text: &str| reported_error(&json!({ "text": text }), &none);
        assert_eq!(
            failed("Database error: no such column: signup_date").as_deref(),
            Some("Database error: no such column: signup_date")
        );
        assert!(failed("Error: Only SELECT queries are allowed for read_query").is_some());
        assert!(failed("  error: table customers already exists\n").is_some());
        // Text that speaks of errors, or opens with more words before a colon, is a result.
        assert_eq!(failed("Error handling in Rust: a guide"), None);
        assert_eq!(failed("Three errors were found: none of them fatal"), None);
        assert_eq!(failed("The last error: none"), None);
        assert_eq!(failed("name,city\nAna,Lisbon"), None);
        assert_eq!(reported_error(&json!("Error: bad request"), &none).as_deref(), Some("Error: bad request"));
    }

    #[test]
    fn an_error_object_is_a_failure_only_where_it_holds_nothing_else() {
        let call = args(json!({ "todo_id": "[]" }));
        let echoed = json!({ "error": "Todo with ID '[]' not found", "todo_id": "[]" });
        assert_eq!(reported_error(&echoed, &call).as_deref(), Some("Todo with ID '[]' not found"));
        let flagged = json!({ "success": false, "error": { "message": "no such list" } });
        assert_eq!(reported_error(&flagged, &Map::new()).as_deref(), Some("no such list"));
        // Data beside the error field, an argument it does not repeat, or an empty message: a result.
        assert_eq!(reported_error(&json!({ "error": "partial", "rows": [1, 2] }), &Map::new()), None);
        assert_eq!(reported_error(&json!({ "error": "not found", "todo_id": "7" }), &call), None);
        assert_eq!(reported_error(&json!({ "error": "" }), &Map::new()), None);
        assert_eq!(reported_error(&json!({ "error": null, "items": [] }), &Map::new()), None);
    }
}
