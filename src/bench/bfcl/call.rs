//! What the model is asked for a BFCL question and how its answer is read: the grammar of its calls (one call,
//! one or more, or any number with `[]` for "no call", by the category's [`CallShape`]), the system prompt that
//! documents the functions, the chat, and the predicted calls read back from the text.

use serde_json::{json, Value};

use super::category::CallShape;
use super::data::BfclQuestion;
use super::verdict::BfclCall;
use crate::llm::ChatMessage;
use crate::tools::schema_fit::fit;

/// Token budget of one call; a list of calls gets [`LIST_TOKENS`].
pub const CALL_TOKENS: usize = 256;
/// Token budget of a list of calls.
pub const LIST_TOKENS: usize = 768;

/// The token budget of an answer of this shape.
pub fn token_budget(shape: CallShape) -> usize {
    match shape {
        CallShape::One => CALL_TOKENS,
        CallShape::Several | CallShape::AnyNumber => LIST_TOKENS,
    }
}

/// The grammar of one call: one of the question's functions with its parameters (closed objects). Parameter docs
/// are taken as real functions ship them: what admits no value is loosened (`tools::schema_fit`), and keywords the
/// grammar engine does not support are ignored (`lenient`; a schema it supports compiles the same either way), so
/// one odd function does not abort its question.
fn one_call(question: &BfclQuestion) -> Value {
    let shapes: Vec<Value> = question
        .functions
        .iter()
        .map(|f| {
            let (arguments, _notes) = fit(&f.tool_spec().args_schema);
            json!({"type": "object", "properties": {"name": {"const": f.name}, "arguments": arguments},
                   "required": ["name", "arguments"], "additionalProperties": false})
        })
        .collect();
    json!({"anyOf": shapes})
}

/// The grammar of an answer of this shape: a call; a list of at least one call; or a list of any length, whose
/// empty form `[]` is how the model says that no function fits. A question without functions admits only `[]`.
pub fn call_schema(question: &BfclQuestion, shape: CallShape) -> Value {
    let options = json!({"whitespace_flexible": false, "lenient": true});
    let mut schema = match shape {
        CallShape::One => one_call(question),
        CallShape::Several => json!({"type": "array", "items": one_call(question), "minItems": 1}),
        CallShape::AnyNumber if question.functions.is_empty() => json!({"type": "array", "maxItems": 0}),
        CallShape::AnyNumber => json!({"type": "array", "items": one_call(question)}),
    };
    schema["x-guidance"] = options;
    schema
}

/// The question's functions documented as JSON Schema, one JSON list.
pub fn functions_doc(question: &BfclQuestion) -> String {
    let docs: Vec<Value> = question
        .functions
        .iter()
        .map(|f| json!({"name": f.name, "description": f.description, "parameters": f.json_schema()}))
        .collect();
    serde_json::to_string(&docs).unwrap_or_default()
}

/// The system prompt: what to write, then the functions' docs as JSON Schema.
pub fn system_prompt(question: &BfclQuestion, shape: CallShape) -> String {
    let task = match shape {
        CallShape::One => {
            "Answer the user's request with one function call as JSON: {\"name\": <function>, \"arguments\": {...}}."
        }
        CallShape::Several => {
            "Answer the user's request with a JSON list of function calls, one call for each thing the request \
             asks for: [{\"name\": <function>, \"arguments\": {...}}, ...]."
        }
        CallShape::AnyNumber => {
            "Answer the user's request with a JSON list of the function calls it needs: [{\"name\": <function>, \
             \"arguments\": {...}}, ...]. If none of the functions can do what the request asks, or the request \
             does not give what a call needs, answer with the empty list []."
        }
    };
    format!("You call functions. {task} Use the values the request gives.\nFunctions:\n{}", functions_doc(question))
}

/// The chat: the system prompt, then the question's turns in order; a system message of the question (live
/// questions have some) is added to the system prompt, since chat templates take one system message, first.
pub fn messages(question: &BfclQuestion, shape: CallShape) -> Vec<ChatMessage> {
    let mut system = system_prompt(question, shape);
    let mut rest = Vec::new();
    for message in question.turns.iter().flatten() {
        if message.role == "system" {
            system.push_str("\n\n");
            system.push_str(&message.content);
        } else {
            rest.push(ChatMessage::new(message.role.clone(), message.content.clone()));
        }
    }
    let mut all = vec![ChatMessage::system(system)];
    all.extend(rest);
    all
}

/// The calls a recorded prediction holds: a call object is one call, a list is its calls, anything else (text that
/// did not parse, recorded as `null`) is no call, as BFCL counts an answer it cannot decode.
pub fn predicted_calls(prediction: &Value) -> Vec<BfclCall> {
    match prediction {
        Value::Array(items) => items.iter().filter_map(|item| serde_json::from_value(item.clone()).ok()).collect(),
        Value::Object(_) => serde_json::from_value(prediction.clone()).into_iter().collect(),
        _ => Vec::new(),
    }
}
