//! The `list_dir` tool: lists a directory inside the workspace.

use serde_json::{json, Value};

use super::error::ToolResult;
use super::{Tool, ToolContext};

/// Most entries returned; the rest are counted in `truncated`.
const MAX_ENTRIES: usize = 1000;

/// Lists `{"path": "."}` as `{"path", "entries": [{"name", "kind", "size"}], "truncated"}`, sorted by name.
/// `kind` is `file`, `dir` or `symlink` (symlinks are not followed). With `"recursive": true` the subfolders'
/// entries follow too, named by their path below `path` (`docs/usage.md`); hidden folders (`.git`) are listed but
/// not entered, since what they hold is a program's, not the user's. Why an option and not another tool: a goal
/// that says "look in the subfolders too" names the same operation, and the planner finds it on the tool it picks.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDir;

impl ListDir {
    /// The tool's name in plans.
    pub const NAME: &'static str = "list_dir";
}

impl Tool for ListDir {
    fn changes_things(&self) -> Option<bool> {
        Some(false)
    }
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        "List the files and directories in a workspace directory (path relative to the workspace, '.' for its root)."
    }

    fn args_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "maxLength": 200},
                "recursive": {"type": "boolean", "description": "also list what the subfolders hold, at any depth"}
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
        // Folders still to list, as paths below `path` ("" for `path` itself); the walk stops once more entries
        // than can be returned are known.
        let mut pending = vec![String::new()];
        while let Some(below) = pending.pop() {
            let at =
                if below.is_empty() { path.to_string() } else { format!("{}/{below}", path.trim_end_matches('/')) };
            for entry in ctx.workspace.list(Self::NAME, &at)? {
                let own = entry.name.to_string_lossy().into_owned();
                let hidden = own.starts_with('.');
                let name = if below.is_empty() { own } else { format!("{below}/{own}") };
                if recursive && entry.kind == "dir" && !hidden {
                    pending.push(name.clone());
                }
                entries.push((name, entry.kind, entry.size));
            }
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
