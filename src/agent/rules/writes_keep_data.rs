//! Rule `writes-keep-data` (run, general, once a run): just before a call of a tool that says it changes things
//! and says a call twice does what a call once does (MCP's `idempotentHint`, or a built-in's whole write: a whole
//! write, not an edit or an append), where the call names a file the workspace holds and passes text, the file's
//! lines are compared with that text. A write that would keep fewer than half of the file's lines is not made: the
//! step fails with feedback naming the lines it would lose and the tools that change things, and the planner
//! writes the plan again. The goal may mean to replace the file, so a run refuses this once: a second whole write
//! that loses lines goes through.
//!
//! Why: asked to add one item to a to-do list file, plans wrote the file anew with that one line, and the user's
//! other items were lost; told that a party moved to Thursday, the 1.5B wrote its model's sentence about the
//! invitation over the invitation. Stated on annotations and files: what the tool declares, what the file holds,
//! what the call would write; no word of the goal is read.
//!
//! Applied by the orchestrator as it prepares a tool step (`agent::run::orchestrator::execution`); the run state
//! counts earlier refusals by [`LOSES_DATA`] (`agent::log::runs::RunState::lost_data_refused`), so a resumed run
//! keeps the count.

use std::io::Read;

use serde_json::{Map, Value};

use super::support::files::{changes_things, changing_tools, file_name, squeeze};
use crate::tools::{ToolContext, ToolRegistry};

/// The words that open the rule's feedback (the run state counts refusals by them).
pub const LOSES_DATA: &str = "This write would lose what the file holds";
/// The largest file compared (a bigger one is not a file a plan writes whole from a model's text).
const MAX_BYTES: u64 = 1 << 20;
/// Lost lines quoted in the feedback.
const QUOTED: usize = 3;

/// The feedback refusing `tool`'s call with `args` where it would replace a file of the workspace with text that
/// keeps fewer than half of its lines (see the module's documentation).
pub(crate) fn lost_data(
    registry: &ToolRegistry,
    context: &ToolContext,
    tool: &str,
    args: &Map<String, Value>,
) -> Option<String> {
    // Most steps change nothing: asked first, before the arguments are copied for the repeat check.
    if !changes_things(registry, tool) || !registry.repeat_safe(tool, &Value::Object(args.clone())) {
        return None;
    }
    let texts: Vec<&str> = args.values().filter_map(Value::as_str).collect();
    let path = *texts.iter().find(|text| file_name(text).is_some())?;
    // The text written: the longest other text argument (none: a move, a delete, a folder).
    let written = texts.iter().filter(|text| **text != path).max_by_key(|text| text.len())?;
    let old = workspace_text(context, path)?;
    let lines: Vec<&str> = old.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
    let new = squeeze(written);
    let lost: Vec<&str> = lines.iter().copied().filter(|line| !new.contains(&squeeze(line))).collect();
    if lines.is_empty() || (lines.len() - lost.len()) * 2 >= lines.len() {
        return None;
    }
    let quoted: Vec<String> = lost.iter().take(QUOTED).map(|line| format!("{line:?}")).collect();
    let more = if lost.len() > QUOTED { format!(" and {} more", lost.len() - QUOTED) } else { String::new() };
    Some(format!(
        "{LOSES_DATA}: {path} holds {} line(s), and this {tool} call would keep {} of them (it would lose {}{more}). \
         To add to a file or change a part of it, keep what it holds: write its old content with the change, or \
         use a tool that edits. Tools that make changes: {}. If the goal asks to replace the whole file, plan the \
         same write again",
        lines.len(),
        lines.len() - lost.len(),
        quoted.join(", "),
        changing_tools(registry).join(", ")
    ))
}

/// The text of `path` where it names a file inside the workspace (relative, or absolute beneath its root).
fn workspace_text(context: &ToolContext, path: &str) -> Option<String> {
    let workspace = &context.workspace;
    let relative = match std::path::Path::new(path).strip_prefix(workspace.root()) {
        Ok(inside) => inside.to_str()?.to_string(),
        Err(_) => path.to_string(),
    };
    // Opened as the workspace's own tools open files: confined to it, symlinks included.
    let file = workspace.open_read("writes-keep-data", &relative).ok()?;
    let mut text = String::new();
    file.take(MAX_BYTES + 1).read_to_string(&mut text).ok()?;
    (text.len() as u64 <= MAX_BYTES).then_some(text)
}

/// Rule `writes-keep-data` (run, general).
pub struct WritesKeepData;

impl super::Rule for WritesKeepData {
    fn about(&self) -> super::About {
        super::About {
            name: "writes-keep-data",
            stage: super::Stage::Run,
            profile: super::Profile::General,
            keys_on: "a whole write (a tool declared to change things and idempotent) of text over a file the workspace holds that keeps under half of its lines: refused once a run, naming the lines it would lose",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{Workspace, WriteFile};

    fn setup(old: &str) -> (tempfile::TempDir, ToolRegistry, ToolContext) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("todo.txt"), old).unwrap();
        let mut registry = ToolRegistry::new();
        registry.register(WriteFile).unwrap();
        let context = ToolContext::new(Workspace::new(dir.path()).unwrap());
        (dir, registry, context)
    }

    fn write(path: &str, content: &str, append: bool) -> Map<String, Value> {
        let Value::Object(args) = serde_json::json!({"path": path, "content": content, "append": append}) else {
            unreachable!()
        };
        args
    }

    #[test]
    fn a_whole_write_that_drops_most_lines_is_refused_and_one_that_keeps_them_is_not() {
        let (dir, registry, context) = setup("water the plants\ncall the bank\npay rent\n");
        let lost = lost_data(&registry, &context, "write_file", &write("todo.txt", "buy milk", false)).unwrap();
        assert!(
            lost.starts_with(LOSES_DATA) && lost.contains("\"call the bank\"") && lost.contains("keep 0"),
            "{lost}"
        );
        // The same file by its absolute path.
        let absolute = dir.path().canonicalize().unwrap().join("todo.txt");
        assert!(lost_data(&registry, &context, "write_file", &write(absolute.to_str().unwrap(), "x", false)).is_some());
        // Kept: the old lines with one added, one line of three changed, an append, a new file.
        let kept = "water the plants\ncall the bank\npay rent\nbuy milk\n";
        assert_eq!(lost_data(&registry, &context, "write_file", &write("todo.txt", kept, false)), None);
        let changed = "water the plants\ncall the bank\npay the rent on Friday\n";
        assert_eq!(lost_data(&registry, &context, "write_file", &write("todo.txt", changed, false)), None);
        assert_eq!(lost_data(&registry, &context, "write_file", &write("todo.txt", "buy milk", true)), None);
        assert_eq!(lost_data(&registry, &context, "write_file", &write("new.txt", "buy milk", false)), None);
        // Outside the workspace: never read.
        assert_eq!(lost_data(&registry, &context, "write_file", &write("../todo.txt", "x", false)), None);
    }
}
