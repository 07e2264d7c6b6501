//! The executor: the small model's two jobs in a run — writing the text of an `llm` step, and filling a tool's
//! arguments when a step's resolved arguments do not fit the tool (a number buried in an earlier step's prose).
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
