//! The `read_file` tool: reads a text file inside the workspace. A file that is not text (a NUL byte in its first
//! 8 KiB, as git tells binary files) is an error that names its kind where its first bytes say it (a SQLite
//! database, a ZIP archive such as a spreadsheet, a PDF, an image): shown a SQLite database's pages as text, the
//! 1.5B answered "What did Chloé Martin order?" with "The order file for Chloé Martin is `shop.db`" instead of
//! turning to the database tools the run had.

use std::io::Read;

use serde_json::{json, Value};

use super::error::{ToolError, ToolResult};
use super::{Tool, ToolContext};

/// Reads `{"path": "notes.txt"}` to `{"path", "content", "bytes", "truncated"}`; at most
/// [`ToolContext::max_read_bytes`] are returned, invalid UTF-8 is replaced; a file that is not text is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

/// The bytes looked at for a NUL, as git does to tell a binary file.
const BINARY_PROBE: usize = 8192;

/// The first bytes of common kinds of file that are not text, and the kind's name.
const MAGIC: [(&[u8], &str); 6] = [
    (b"SQLite format 3\0", "a SQLite database"),
    (b"PK\x03\x04", "a ZIP archive, as .xlsx, .docx and .odt files are"),
    (b"%PDF", "a PDF document"),
    (b"\x89PNG", "a PNG image"),
    (b"\xFF\xD8\xFF", "a JPEG image"),
    (b"GIF8", "a GIF image"),
];

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
        if bytes.iter().take(BINARY_PROBE).any(|&b| b == 0) {
            let kind = MAGIC.iter().find(|(magic, _)| bytes.starts_with(magic)).map_or("binary data", |(_, kind)| kind);
            return Err(ToolError::InvalidArgs {
                tool: Self::NAME.into(),
                message: format!(
                    "'{path}' is not a text file ({kind}, {size} bytes): read_file reads text; a tool made for \
                     this kind of file reads it, where the run has one"
                ),
            });
        }
        Ok(json!({
            "path": path,
            "content": String::from_utf8_lossy(&bytes),
            "bytes": size,
            "truncated": truncated
        }))
    }
}
