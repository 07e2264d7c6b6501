//! The `write_file` tool: writes a text file inside the workspace, only when writes are allowed.

use std::io::Write;

use serde_json::{json, Value};

use super::error::{ToolError, ToolResult};
use super::read_file::string_arg;
use super::{Tool, ToolContext};

/// Writes `{"path", "content", "append"?}` and answers `{"path", "bytes_written"}`. Refused unless
/// [`ToolContext::allow_write`]; missing parent directories inside the workspace are created.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

impl WriteFile {
    /// The tool's name in plans.
    pub const NAME: &'static str = "write_file";
}

impl Tool for WriteFile {
    fn changes_things(&self) -> Option<bool> {
        Some(true)
    }
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        "Write text to a file in the workspace (path relative to the workspace); append=true adds to the end."
    }

    fn args_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "maxLength": 200},
                "content": {"type": "string"},
                "append": {"type": "boolean"}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }

    fn output_schema(&self) -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "bytes_written": {"type": "integer"}, "text": {"type": "string"}}
        }))
    }

    // Writing the same content again leaves the same file; appending twice does not.
    fn repeat_safe(&self, args: &Value) -> bool {
        !args.get("append").and_then(Value::as_bool).unwrap_or(false)
    }

    fn call(&self, args: &Value, ctx: &ToolContext) -> ToolResult<Value> {
        if !ctx.allow_write {
            return Err(ToolError::Refused {
                tool: Self::NAME.into(),
                reason: "writing files is off for this run (allow it with --allow-write)".into(),
            });
        }
        let path = string_arg(Self::NAME, args, "path")?;
        let content = string_arg(Self::NAME, args, "content")?;
        let append = args.get("append").and_then(Value::as_bool).unwrap_or(false);
        let mut file = ctx.workspace.open_write(Self::NAME, path, append)?;
        let io = |source| ToolError::Io { tool: Self::NAME.into(), action: "writing", path: path.into(), source };
        file.write_all(content.as_bytes()).map_err(io)?;
        let text = format!("wrote {} bytes to {path}", content.len());
        Ok(json!({"path": path, "bytes_written": content.len(), "text": text}))
    }
}
