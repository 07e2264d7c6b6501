//! What a constraint is (JSON Schema, Lark, regex), how it becomes an llguidance grammar (with bounded
//! whitespace for JSON).

use llguidance::api::TopLevelGrammar;
use serde_json::{json, Value};

/// Free whitespace allowed between JSON tokens when a schema opts into flexible whitespace through
/// `x-guidance` without giving its own pattern: enough for pretty-printing, never a runaway loop.
pub const BOUNDED_JSON_WHITESPACE: &str = r"[\x20\x0A\x0D\x09]{1,24}";

/// Magnitude bound given to JSON `number`s that have no bound of their own (2^53 − 1, the largest integer a
/// double holds exactly). llguidance's unbounded number allows any exponent (`4e512294`), which is valid JSON
/// but not a finite double: `serde_json` and most parsers reject it. A bounded number is written in plain
/// decimal notation; every output is still valid against the original schema, whose set of values only narrows.
pub const UNBOUNDED_NUMBER_LIMIT: f64 = 9_007_199_254_740_991.0;

/// `multipleOf` given to JSON `number`s that have none, which llguidance enforces as at most nine fraction
/// digits. Without it a number's fraction is unbounded, and a greedy model can loop on `0.000000…` until the
/// token budget ends (seen on NESTFUL). As with the magnitude bound, the set of values only narrows.
pub const NUMBER_RESOLUTION: f64 = 1e-9;

/// A constraint on the output.
#[derive(Debug, Clone, PartialEq)]
pub enum ConstraintSpec {
    /// JSON matching this schema. Compact JSON (no whitespace between tokens) unless the schema's
    /// `x-guidance` object asks for flexible whitespace, which is then bounded by [`BOUNDED_JSON_WHITESPACE`]
    /// unless it also gives a `whitespace_pattern`. Numbers without bounds are kept finite
    /// ([`UNBOUNDED_NUMBER_LIMIT`]) and their fractions short ([`NUMBER_RESOLUTION`]).
    JsonSchema(Value),
    /// A Lark grammar (llguidance dialect; `%json { … }` embeds a schema, whose whitespace the grammar controls).
    Lark(String),
    /// A regular expression the whole output must match.
    Regex(String),
}

/// Which kind of constraint, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConstraintKind {
    /// A JSON Schema.
    JsonSchema,
    /// A Lark grammar.
    Lark,
    /// A regular expression.
    Regex,
}

impl std::fmt::Display for ConstraintKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConstraintKind::JsonSchema => "JSON Schema",
            ConstraintKind::Lark => "Lark grammar",
            ConstraintKind::Regex => "regular expression",
        })
    }
}

impl ConstraintSpec {
    /// Which kind of constraint this is.
    pub fn kind(&self) -> ConstraintKind {
        match self {
            ConstraintSpec::JsonSchema(_) => ConstraintKind::JsonSchema,
            ConstraintSpec::Lark(_) => ConstraintKind::Lark,
            ConstraintSpec::Regex(_) => ConstraintKind::Regex,
        }
    }

    /// This constraint after a thinking block, as thinking models (Qwen3, SmolLM3) open an answer when their chat
    /// template renders thinking mode: `<think>`, at most `max_tokens` tokens of text without `<`, `</think>`, one
    /// to four spaces or line breaks, then what `self` admits. The thought may not hold `<`, so it ends only at its
    /// closing tag, and the answer starts right after it ([`split_thinking`] reads the two apart). `None` for a
    /// Lark grammar, whose start rule cannot be nested here.
    pub fn after_thinking(&self, max_tokens: usize) -> Option<ConstraintSpec> {
        let answer = match self {
            ConstraintSpec::JsonSchema(schema) => format!("%json {}", prepare_json_schema(schema)),
            ConstraintSpec::Regex(rx) => format!("/{}/", rx.replace('/', "\\/")),
            ConstraintSpec::Lark(_) => return None,
        };
        Some(ConstraintSpec::Lark(format!(
            "start: \"<think>\" thought \"</think>\" /[ \\n]{{1,4}}/ answer\nthought[max_tokens={max_tokens}]: /[^<]*/\nanswer: {answer}\n"
        )))
    }

    /// The llguidance grammar for this constraint.
    pub(crate) fn to_grammar(&self) -> TopLevelGrammar {
        match self {
            ConstraintSpec::JsonSchema(schema) => TopLevelGrammar::from_json_schema(prepare_json_schema(schema)),
            ConstraintSpec::Lark(grammar) => TopLevelGrammar::from_lark(grammar.clone()),
            ConstraintSpec::Regex(rx) => TopLevelGrammar::from_regex(rx),
        }
    }
}

/// The schema as llguidance gets it: whitespace bounded and unbounded numbers given finite bounds.
///
/// llguidance's default is unlimited whitespace between tokens, which small models fall into at temperature 0
/// ("\n\n\n…" until the token budget runs out); compact JSON is also fewer tokens.
pub(crate) fn prepare_json_schema(schema: &Value) -> Value {
    // `true` is the schema "anything"; as an object it can carry the options.
    let mut schema = if schema == &Value::Bool(true) { json!({}) } else { schema.clone() };
    bound_numbers(&mut schema);
    if let Some(object) = schema.as_object_mut() {
        match object.get_mut("x-guidance") {
            None => {
                object.insert("x-guidance".into(), json!({"whitespace_flexible": false}));
            }
            Some(Value::Object(options)) => {
                let flexible = options.get("whitespace_flexible").and_then(Value::as_bool).unwrap_or(true);
                if flexible && !options.contains_key("whitespace_pattern") {
                    options.insert("whitespace_pattern".into(), json!(BOUNDED_JSON_WHITESPACE));
                }
            }
            // Not an object: llguidance rejects it with a compile error naming `x-guidance`.
            Some(_) => {}
        }
    }
    schema
}

/// Gives every `"type": "number"` subschema without any bound `±UNBOUNDED_NUMBER_LIMIT`, and without a
/// `multipleOf` a resolution of `NUMBER_RESOLUTION` (a bounded count of fraction digits). Walks only the
/// keywords that hold subschemas, so `const`, `enum`, `default` and `examples` data is never touched.
fn bound_numbers(schema: &mut Value) {
    let Value::Object(object) = schema else {
        return;
    };
    let is_number = match object.get("type") {
        Some(Value::String(t)) => t == "number",
        Some(Value::Array(types)) => types.iter().any(|t| t == "number"),
        _ => false,
    };
    let bounded =
        ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"].iter().any(|k| object.contains_key(*k));
    if is_number && !bounded {
        object.insert("minimum".into(), json!(-UNBOUNDED_NUMBER_LIMIT));
        object.insert("maximum".into(), json!(UNBOUNDED_NUMBER_LIMIT));
    }
    if is_number && !object.contains_key("multipleOf") {
        object.insert("multipleOf".into(), json!(NUMBER_RESOLUTION));
    }
    for (key, value) in object.iter_mut() {
        match key.as_str() {
            "additionalProperties"
            | "additionalItems"
            | "not"
            | "if"
            | "then"
            | "else"
            | "contains"
            | "propertyNames"
            | "unevaluatedItems"
            | "unevaluatedProperties" => bound_numbers(value),
            "items" | "anyOf" | "allOf" | "oneOf" | "prefixItems" => match value {
                Value::Array(items) => items.iter_mut().for_each(bound_numbers),
                other => bound_numbers(other),
            },
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                if let Value::Object(map) = value {
                    map.values_mut().for_each(bound_numbers);
                }
            }
            _ => {}
        }
    }
}

/// A generation written under [`ConstraintSpec::after_thinking`] read apart: the thought (trimmed) and the answer
/// after `</think>`; a text that opens with no thinking block is all answer.
pub fn split_thinking(text: &str) -> (Option<String>, &str) {
    let Some(rest) = text.strip_prefix("<think>") else { return (None, text) };
    match rest.split_once("</think>") {
        Some((thought, answer)) => (Some(thought.trim().to_string()), answer.trim_start()),
        None => (Some(rest.trim().to_string()), ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thought_is_read_apart_from_the_answer() {
        assert_eq!(split_thinking("<think>\nWhy.\n</think>\n\n{}"), (Some("Why.".to_string()), "{}"));
        assert_eq!(split_thinking("{}"), (None, "{}"));
        assert_eq!(split_thinking("<think>cut off"), (Some("cut off".to_string()), ""));
    }
}
