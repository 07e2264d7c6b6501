//! The `read_file` tool: reads a text file inside the workspace.

use std::io::Read;

use serde_json::{json, Value};

use super::error::{ToolError, ToolResult};
use super::{Tool, ToolContext};

/// Reads `{"path": "notes.txt"}` to `{"path", "content", "bytes", "truncated"}`; at most
/// [`ToolContext::max_read_bytes`] are returned, invalid UTF-8 is replaced.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

impl ReadFile {
    /// The tool's name in plans.
    pub const NAME: &'static str = "read_file";
}

/// The string argument `name`, or an argument error.
pub(crate) fn string_arg<'a>(tool: &str, args: &'a Value, name: &str) -> ToolResult<&'a str> {
    args.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::InvalidArgs { tool: tool.to_string(), message: format!("'{name}' must be a string") })
}

impl Tool for ReadFile {
    fn changes_things(&self) -> Option<bool> {
        Some(false)
    }
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        "Read a text file in the workspace (path relative to the workspace)."
    }

    fn args_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"path": {"type": "string", "minLength": 1, "maxLength": 200}},
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn output_schema(&self) -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": {
                "content": {"type": "string"},
                "path": {"type": "string"},
                "bytes": {"type": "integer"},
                "truncated": {"type": "boolean"}
            }
        }))
    }

    fn repeat_safe(&self, _args: &Value) -> bool {
        true
    }

    fn call(&self, args: &Value, ctx: &ToolContext) -> ToolResult<Value> {
        let path = string_arg(Self::NAME, args, "path")?;
        let file = ctx.workspace.open_read(Self::NAME, path)?;
        let io = |source| ToolError::Io { tool: Self::NAME.into(), action: "reading", path: path.into(), source };
        let size = file.metadata().map_err(io)?.len();
        let mut bytes = Vec::new();
        file.take(ctx.max_read_bytes as u64).read_to_end(&mut bytes).map_err(io)?;
        let truncated = size > bytes.len() as u64;
        Ok(json!({
            "path": path,
            "content": String::from_utf8_lossy(&bytes),
            "bytes": size,
            "truncated": truncated
        }))
    }
}
