//! The `list_dir` tool: lists a directory inside the workspace.

use serde_json::{json, Value};

use super::error::ToolResult;
use super::{Tool, ToolContext};

/// Most entries returned; the rest are counted in `truncated`.
const MAX_ENTRIES: usize = 1000;
/// Levels of subdirectories a recursive listing enters.
const MAX_DEPTH: usize = 8;

/// Lists `{"path": "."}` as `{"path", "entries": [{"name", "kind", "size"}], "truncated"}`, sorted by name.
/// `kind` is `file`, `dir` or `symlink` (symlinks are not followed). With `"recursive": true` the subdirectories'
/// entries follow, named by their path below `path` (`docs/usage.md`), to [`MAX_DEPTH`] levels; hidden
/// directories (`.git`) are listed but not entered.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDir;

impl ListDir {
    /// The tool's name in plans.
    pub const NAME: &'static str = "list_dir";
}

impl Tool for ListDir {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        "List the files and directories in a workspace directory (path relative to the workspace, '.' for its root); \
         recursive also lists what its subdirectories hold."
    }

    fn args_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "maxLength": 200},
                "recursive": {"type": "boolean", "default": false,
                              "description": "Also list the entries of every subdirectory, as paths below path"}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn output_schema(&self) -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": {
                "entries": {"type": "array"},
                "path": {"type": "string"},
                "truncated": {"type": "boolean"}
            }
        }))
    }

    fn repeat_safe(&self, _args: &Value) -> bool {
        true
    }

    fn call(&self, args: &Value, ctx: &ToolContext) -> ToolResult<Value> {
        let path = args.get("path").and_then(Value::as_str).unwrap_or(".");
        let path = if path.is_empty() { "." } else { path };
        let recursive = args.get("recursive").and_then(Value::as_bool).unwrap_or(false);
        let mut entries: Vec<(String, &str, u64)> = Vec::new();
        // (directory below `path`, its depth); "" is `path` itself.
        let mut pending = vec![(String::new(), 0)];
        while let Some((below, depth)) = pending.pop() {
            let at = if below.is_empty() { path.to_string() } else { format!("{path}/{below}") };
            for entry in ctx.workspace.list(Self::NAME, &at)? {
                let name = entry.name.to_string_lossy().into_owned();
                let shown = if below.is_empty() { name.clone() } else { format!("{below}/{name}") };
                if recursive && entry.kind == "dir" && depth + 1 < MAX_DEPTH && !name.starts_with('.') {
                    pending.push((shown.clone(), depth + 1));
                }
                entries.push((shown, entry.kind, entry.size));
            }
            // Enough to fill the answer and to say it was cut.
            if entries.len() > MAX_ENTRIES {
                break;
            }
        }
        entries.sort();
        let truncated = entries.len() > MAX_ENTRIES;
        let listed: Vec<Value> = entries
            .iter()
            .take(MAX_ENTRIES)
            .map(|(name, kind, size)| {
                if *kind == "file" {
                    json!({"name": name, "kind": kind, "size": size})
                } else {
                    json!({"name": name, "kind": kind})
                }
            })
            .collect();
        Ok(json!({"path": path, "entries": listed, "truncated": truncated}))
    }
}
