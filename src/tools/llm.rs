//! The `llm` tool: free text from the executor model (summarise, extract, answer). Declared here so plans can
//! name it; the executor runs it, because it needs the model.

use serde_json::{json, Value};

use super::error::{ToolError, ToolResult};
use super::{Tool, ToolContext};

/// `{"prompt": "..."}` → `{"text": "..."}`, produced by the executor model.
#[derive(Debug, Clone, Copy, Default)]
pub struct Llm;

impl Llm {
    /// The tool's name in plans.
    pub const NAME: &'static str = "llm";
}

impl Tool for Llm {
    fn changes_things(&self) -> Option<bool> {
        Some(false)
    }
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        "Ask the language model to write, summarise, extract or answer in text; put earlier results in the prompt."
    }

    fn args_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"prompt": {"type": "string", "minLength": 1}},
            "required": ["prompt"],
            "additionalProperties": false
        })
    }

    fn output_schema(&self) -> Option<Value> {
        Some(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))
    }

    fn repeat_safe(&self, _args: &Value) -> bool {
        true
    }

    fn needs_model(&self) -> bool {
        true
    }

    fn call(&self, _args: &Value, _ctx: &ToolContext) -> ToolResult<Value> {
        Err(ToolError::NeedsModel { tool: Self::NAME.into() })
    }
}
