//! An MCP server's tool as a [`Tool`]: its schemas as the server gives them, calls sent to the server, and the
//! result turned into an output object.
//!
//! Outputs: structured content (an object) is the output as is; otherwise the text content, joined, is
//! `{"text": "..."}` (a tool that declares an output schema but answers only with text holding a JSON object gets
//! that object). An `isError` result is a [`ToolError::Reported`] with the tool's own message; an output larger
//! than the cap is [`ToolError::OutputTooLarge`].

use std::sync::Arc;

use rmcp::model::CallToolResult;
use serde_json::{json, Map, Value};

use super::server::Server;
use crate::tools::error::{ToolError, ToolResult};
use crate::tools::{Tool, ToolContext};

/// Longest error message of a tool kept, in characters.
const MAX_ERROR_CHARS: usize = 2000;

/// A tool of an MCP server.
pub struct McpTool {
    /// The name plans use: the server's name for it, or `server.tool` where two sources offer one name.
    pub(crate) name: String,
    /// The server's name for it.
    pub(crate) remote_name: String,
    pub(crate) description: String,
    pub(crate) args_schema: Value,
    pub(crate) output_schema: Option<Value>,
    /// What the server's annotations say of changes (`readOnlyHint`), where it gives annotations.
    pub(crate) changes_things: Option<bool>,
    /// Whether the annotations say a call may destroy or overwrite (`destructiveHint`, MCP's default where they
    /// say it changes things).
    pub(crate) destructive: bool,
    /// Whether a call twice leaves what a call once does, where the annotations say so (`readOnlyHint` or
    /// `idempotentHint`): a whole write of a file, not an edit or an append.
    pub(crate) repeat_safe: bool,
    pub(crate) max_output_bytes: usize,
    pub(crate) server: Arc<Server>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool").field("name", &self.name).field("server", &self.server.name).finish()
    }
}

impl McpTool {
    /// The server it belongs to (its name in the config).
    pub fn server(&self) -> &str {
        &self.server.name
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn args_schema(&self) -> Value {
        self.args_schema.clone()
    }

    fn output_schema(&self) -> Option<Value> {
        self.output_schema.clone()
    }

    fn changes_things(&self) -> Option<bool> {
        self.changes_things
    }

    fn destructive(&self) -> bool {
        self.destructive
    }

    fn repeat_safe(&self, _args: &Value) -> bool {
        self.repeat_safe
    }

    fn call(&self, args: &Value, _ctx: &ToolContext) -> ToolResult<Value> {
        let arguments = match args {
            Value::Object(map) => map.clone(),
            Value::Null => Map::new(),
            other => {
                return Err(ToolError::InvalidArgs {
                    tool: self.name.clone(),
                    message: format!("arguments must be a JSON object, not {other}"),
                })
            }
        };
        let result = self.server.call(&self.remote_name, arguments)?;
        output_of(&self.name, result, self.output_schema.is_some(), self.max_output_bytes)
    }
}

/// One content block as text: text as is, an embedded text resource by its text, anything else by its kind.
fn block_text(block: &Value) -> String {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("unknown");
    let field = |value: &Value, key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
    match kind {
        "text" => field(block, "text").unwrap_or_default(),
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            field(&resource, "text").unwrap_or_else(|| {
                format!("[resource {}]", field(&resource, "uri").unwrap_or_else(|| "(no uri)".into()))
            })
        }
        "resource_link" => format!("[resource link {}]", field(block, "uri").unwrap_or_default()),
        other => match field(block, "mimeType") {
            Some(mime) => format!("[{other} content, {mime}]"),
            None => format!("[{other} content]"),
        },
    }
}

/// The output object of a tool result (see the module docs).
pub fn output_of(
    tool: &str,
    result: CallToolResult,
    declares_output: bool,
    max_output_bytes: usize,
) -> ToolResult<Value> {
    let texts: Vec<String> =
        result.content.iter().filter_map(|block| serde_json::to_value(block).ok()).map(|b| block_text(&b)).collect();
    let text = texts.join("\n");
    if result.is_error == Some(true) {
        let message = text.trim();
        let message = if message.is_empty() {
            "(it gave no message)".to_string()
        } else if message.chars().count() > MAX_ERROR_CHARS {
            format!("{}…", message.chars().take(MAX_ERROR_CHARS).collect::<String>())
        } else {
            message.to_string()
        };
        return Err(ToolError::Reported { tool: tool.to_string(), message });
    }
    let output = match result.structured_content {
        Some(Value::Object(object)) => Value::Object(object),
        Some(Value::Null) | None => match serde_json::from_str::<Value>(text.trim()) {
            Ok(object @ Value::Object(_)) if declares_output => object,
            _ => json!({ "text": text }),
        },
        Some(other) => json!({ "result": other, "text": text }),
    };
    let size = serde_json::to_string(&output).map(|s| s.len()).unwrap_or(usize::MAX);
    if size > max_output_bytes {
        return Err(ToolError::OutputTooLarge { tool: tool.to_string(), limit: max_output_bytes });
    }
    Ok(output)
}

/// A description as one line: runs of whitespace (newlines too) become one space.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(value: Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn structured_content_is_the_output_and_text_becomes_a_text_field() {
        let structured =
            result(json!({"content": [{"type": "text", "text": "{\"sum\": 3}"}], "structuredContent": {"sum": 3}}));
        assert_eq!(output_of("t", structured, true, 1000).unwrap(), json!({"sum": 3}));
        let text = result(json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}));
        assert_eq!(output_of("t", text, false, 1000).unwrap(), json!({"text": "a\nb"}));
        let json_text = result(json!({"content": [{"type": "text", "text": "{\"sum\": 3}"}]}));
        assert_eq!(output_of("t", json_text.clone(), true, 1000).unwrap(), json!({"sum": 3}));
        assert_eq!(output_of("t", json_text, false, 1000).unwrap(), json!({"text": "{\"sum\": 3}"}));
        let image = result(json!({"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}));
        assert_eq!(output_of("t", image, false, 1000).unwrap(), json!({"text": "[image content, image/png]"}));
    }

    #[test]
    fn errors_and_oversized_outputs_are_tool_errors() {
        let failed = result(json!({"content": [{"type": "text", "text": "no such zone"}], "isError": true}));
        let error = output_of("time", failed, false, 1000).unwrap_err();
        assert_eq!(error.to_string(), "tool 'time' reported an error: no such zone");
        let big = result(json!({"content": [{"type": "text", "text": "x".repeat(2000)}]}));
        assert!(matches!(output_of("t", big, false, 1000), Err(ToolError::OutputTooLarge { limit: 1000, .. })));
    }

    #[test]
    fn descriptions_become_one_line() {
        assert_eq!(one_line("Add two numbers.\n  Returns\ttheir sum.\n"), "Add two numbers. Returns their sum.");
    }
}
