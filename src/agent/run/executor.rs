//! Model jobs inside a run's steps: writing the text of an `llm` step and filling a tool's arguments when a step's
//! resolved arguments do not fit the tool (a number buried in an earlier step's prose), the small executor's two
//! jobs, and reading a value out of a tool's text output (which the run gives the planner's model).
//!
//! Arguments are written under a grammar whose `tool` is the step's tool as a constant, and the call is checked
//! against the step in code as well ([`enforce_step_tool`]): the executor can only ever call the tool the step
//! names.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::agent::model_call::timed_chat_call;
use crate::agent::plan::Step;
use crate::agent::usage::ModelUsage;
use crate::decode::constraint::ConstraintSpec;
use crate::decode::Model;
use crate::llm::ChatMessage;
use crate::tools::{ToolError, ToolSpec};
use crate::{Error, Result};

/// The system message of `llm` steps.
const TEXT_SYSTEM: &str =
    "You are a precise assistant inside a tool-using agent. Answer the request directly and briefly, \
using only the information given. Do not explain your steps.";

/// A tool call as the executor writes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ExecutorCall {
    /// The tool it calls.
    pub tool: String,
    /// Its arguments.
    pub args: Map<String, Value>,
}

/// Refuses a call of any tool but the one the step names.
pub fn enforce_step_tool(step: &Step, call: &ExecutorCall) -> std::result::Result<(), ToolError> {
    if call.tool == step.tool {
        Ok(())
    } else {
        Err(ToolError::Refused {
            tool: call.tool.clone(),
            reason: format!("step '{}' may only call '{}'", step.id, step.tool),
        })
    }
}

/// Runs an `llm` step: the prompt (references already resolved) answered in free text.
pub fn write_text(model: &mut Model, prompt: &str, max_tokens: usize) -> Result<(String, ModelUsage)> {
    let messages = [ChatMessage::system(TEXT_SYSTEM), ChatMessage::user(prompt)];
    let (text, usage) = timed_chat_call(model, "executor", &messages, None, max_tokens)?;
    Ok((text.trim().to_string(), usage))
}

/// The grammar of an executor call for this step: `{"tool": <the step's tool>, "args": <its argument schema>}`.
pub fn call_schema(spec: &ToolSpec) -> Value {
    json!({
        "type": "object",
        "properties": {"tool": {"const": spec.name}, "args": spec.args_schema},
        "required": ["tool", "args"],
        "additionalProperties": false
    })
}

/// Has the executor write the arguments of `step`'s tool from what is known: the planned arguments with
/// references resolved, and why they did not fit. Returns the call (already checked to name the step's tool).
pub fn fill_arguments(
    model: &mut Model,
    step: &Step,
    spec: &ToolSpec,
    resolved: &Map<String, Value>,
    problem: &str,
    max_tokens: usize,
) -> Result<(ExecutorCall, ModelUsage)> {
    let system = format!(
        "You fill in the arguments of one tool call as JSON. The tool is `{}`: {}\nIts arguments: {}\n\
         Take the values from the information given; write plain values, not references.",
        spec.name,
        spec.description,
        spec.args_schema.get("properties").cloned().unwrap_or(json!({}))
    );
    let user = format!(
        "Step: {}\nArguments as planned, with earlier results filled in: {}\nThey cannot be used as they are: {}",
        if step.description.is_empty() { &step.id } else { &step.description },
        Value::Object(resolved.clone()),
        problem
    );
    let messages = [ChatMessage::system(system), ChatMessage::user(user)];
    let schema = ConstraintSpec::JsonSchema(call_schema(spec));
    let (text, usage) = timed_chat_call(model, "executor", &messages, Some(&schema), max_tokens)?;
    let call: ExecutorCall = serde_json::from_str(&text).map_err(|e| {
        Error::Agent(format!("the executor's call for step '{}' is not valid JSON ({e}): {text}", step.id))
    })?;
    enforce_step_tool(step, &call)?;
    Ok((call, usage))
}

/// The system message of reading a value out of a text.
const READ_SYSTEM: &str = "You copy one value out of a text. Answer with the value exactly as the text writes it.";

/// Reads the value `wanted` names (in words: "the commit id") out of `text`, a tool's text output, for a step that
/// referenced it as a field the output does not have (`purpose`: the goal and the step, which say which of several
/// such values is meant). The answer is constrained to a piece of the text (a line,
/// what follows a line's label, or a word), so the small model can neither copy the whole text nor invent a value;
/// a text with too many pieces for one grammar is answered in one line.
pub fn read_value(
    model: &mut Model,
    text: &str,
    wanted: &str,
    purpose: &str,
    max_tokens: usize,
) -> Result<(String, ModelUsage)> {
    let user = format!("Text:\n{text}\n\n{purpose}\nWrite {wanted} that this text gives, and nothing else.");
    let messages = [ChatMessage::system(READ_SYSTEM), ChatMessage::user(user)];
    let pieces = text_pieces(text);
    let pattern = if pieces.is_empty() || pieces.len() > MAX_PIECES {
        "[^\\n]{1,200}".to_string()
    } else {
        pieces.iter().map(|p| escape_regex(p)).collect::<Vec<_>>().join("|")
    };
    let (value, usage) =
        timed_chat_call(model, "executor", &messages, Some(&ConstraintSpec::Regex(pattern)), max_tokens)?;
    Ok((value.trim().to_string(), usage))
}

/// The most pieces a text's answer grammar lists.
const MAX_PIECES: usize = 2000;

/// The values a text offers, each once, in order: every line, what follows a `Label:` on a line, and every word
/// (with the punctuation around it taken off).
pub fn text_pieces(text: &str) -> Vec<String> {
    let mut pieces: Vec<String> = Vec::new();
    let mut add = |piece: &str| {
        let piece = piece.trim();
        if !piece.is_empty() && piece.chars().count() <= 200 && !pieces.iter().any(|p| p == piece) {
            pieces.push(piece.to_string());
        }
    };
    for line in text.lines() {
        add(line);
        if let Some((_, value)) = line.split_once(": ") {
            add(value);
        }
        for word in line.split_whitespace() {
            add(word.trim_matches(|c: char| ",.;:()[]{}\"'`".contains(c)));
        }
    }
    pieces
}

/// `text` as a regular expression that matches exactly it.
pub(crate) fn escape_regex(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
