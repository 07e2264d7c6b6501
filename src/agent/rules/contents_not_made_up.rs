//! Rule `contents-not-made-up` (check, general, once): a step of a tool that says it changes things (MCP
//! `readOnlyHint: false`, the built-in `write_file`), with a path argument naming a file the workspace already holds
//! (by its file name, anywhere in the workspace) and a text argument the goal does not give (no reference, not in
//! the goal's text), would put made-up text where a file's own content belongs. The plan is sent back once, naming
//! the step, the text and the file, the move that would put the file there, the plan's other steps to keep, and the
//! tools that change things.
//!
//! Why: told "Make a folder called archive and put old.txt in it.", the 1.5B created the folder and wrote
//! `archive/old.txt` with the text "This is an old file." (tasks-mcp `fs-folder-move`): the user's file stayed where
//! it was and a made-up copy was reported as moved.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use super::support::files::{changes_things, changing_tools, file_name, squeeze};
use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// The words that open `contents-not-made-up`'s feedback.
pub const CONTENT_MARKER: &str = "Text the goal does not give";
/// Entries of the workspace looked at for file names (a large workspace is not walked whole for a check).
const MAX_ENTRIES: usize = 4000;

/// The names of the files in `root`, down to a few levels, `.git` left out.
pub(crate) fn file_names(root: &Path) -> HashSet<String> {
    let mut names = HashSet::new();
    let mut folders = vec![(root.to_path_buf(), 0)];
    let mut seen = 0;
    while let Some((folder, depth)) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                return names;
            }
            let name = entry.file_name().to_string_lossy().to_string();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() && name != ".git" && depth < 4 => folders.push((entry.path(), depth + 1)),
                Ok(kind) if kind.is_file() => {
                    names.insert(name);
                }
                _ => {}
            }
        }
    }
    names
}

/// The feedback that sends `plan` back, where a step of a tool that changes things writes text the goal does not
/// give to a path named like a file of the workspace (`existing` gives the workspace's file names; it is asked only
/// where a step writes such text beside a file name at all, so most plans cost no walk of the workspace).
pub(crate) fn made_up_contents(
    plan: &Plan,
    registry: &ToolRegistry,
    existing: impl FnOnce() -> HashSet<String>,
) -> Option<String> {
    let goal = squeeze(&plan.goal);
    // Each step that writes made-up text beside paths with file names: its id, the text, those paths.
    let writes: Vec<(&str, &str, Vec<&str>)> = plan
        .steps
        .iter()
        .filter(|s| s.references().is_empty() && changes_things(registry, &s.tool))
        .filter_map(|s| {
            let texts: Vec<&str> = s.args.values().filter_map(Value::as_str).collect();
            let paths: Vec<&str> = texts.iter().copied().filter(|t| file_name(t).is_some()).collect();
            let made_up = texts.iter().find(|t| file_name(t).is_none() && !goal.contains(&squeeze(t)))?;
            (!paths.is_empty()).then_some((s.id.as_str(), *made_up, paths))
        })
        .collect();
    if writes.is_empty() {
        return None;
    }
    let existing = existing();
    // Each such write over a file the workspace holds: its step, the text, the path and the file's name.
    let found: Vec<(&str, &str, &str, &str)> = writes
        .iter()
        .filter_map(|(id, made_up, paths)| {
            let (file, name) =
                paths.iter().find_map(|p| Some((*p, file_name(p).filter(|n| existing.contains(*n))?)))?;
            Some((*id, *made_up, file, name))
        })
        .collect();
    if found.is_empty() {
        return None;
    }
    let changing = changing_tools(registry);
    let wrote: Vec<String> =
        found.iter().map(|(id, made_up, file, _)| format!("step {id} writes \"{made_up}\" to {file}")).collect();
    let put: Vec<String> = found.iter().map(|(_, _, file, name)| format!("{name} to {file}")).collect();
    // The steps that were right stay: a replan told only what was wrong dropped the folder it had made.
    let others: Vec<String> = plan
        .steps
        .iter()
        .filter(|s| !found.iter().any(|(id, ..)| *id == s.id))
        .map(|s| format!("{} {}", s.id, s.tool))
        .collect();
    let keep = match others.is_empty() {
        true => String::new(),
        false => format!(" Keep the plan's other steps ({}).", others.join(", ")),
    };
    Some(format!(
        "{CONTENT_MARKER} would be written where a file of the workspace belongs: {}. A file's own content is never \
         made up: to put a file somewhere, move or copy it there ({}); to change part of it, edit it.{keep} Tools \
         that make changes: {}.",
        wrote.join("; "),
        put.join(", "),
        changing.join(", ")
    ))
}

/// Rule `contents-not-made-up` (check, general).
pub struct ContentsNotMadeUp;

impl super::Rule for ContentsNotMadeUp {
    fn about(&self) -> super::About {
        super::About {
            name: "contents-not-made-up",
            stage: super::Stage::Check,
            profile: super::Profile::General,
            keys_on: "a step of a tool declared to change things writing text the goal does not give beside the name of a file the workspace holds: sent back once",
        }
    }

    fn check(&self, plan: &Plan, tools: &ToolRegistry, workspace: &Path) -> Option<String> {
        made_up_contents(plan, tools, || file_names(workspace))
    }

    fn marker(&self) -> &'static str {
        CONTENT_MARKER
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files_registry() -> ToolRegistry {
        let workspace = crate::tools::workspace::Workspace::new(std::env::temp_dir()).unwrap();
        ToolRegistry::builtins(&crate::tools::ToolContext::new(workspace).with_write(true))
    }

    #[test]
    fn made_up_text_for_a_file_the_workspace_holds_is_sent_back() {
        let registry = files_registry();
        let existing: HashSet<String> = ["old.txt".to_string()].into();
        let move_it = "Make a folder called archive and put old.txt in it.";
        let written = Plan::for_goal(
            move_it,
            serde_json::json!([
                {"id": "s1", "tool": "create_directory", "args": {"path": "archive"}},
                {"id": "s2", "tool": "write_file", "args": {"path": "archive/old.txt", "content": "This is an old file."}}
            ]),
        );
        let feedback = made_up_contents(&written, &registry, || existing.clone()).unwrap();
        assert!(feedback.contains("step s2 writes \"This is an old file.\" to archive/old.txt"), "{feedback}");
        assert!(feedback.contains("move or copy it there (old.txt to archive/old.txt)"), "{feedback}");
        assert!(feedback.contains("Keep the plan's other steps (s1 create_directory)"), "{feedback}");
        // Text the goal gives, or a file the workspace does not hold, is no made-up copy.
        let list = "Save milk, eggs to list.txt";
        let given = Plan::for_goal(
            list,
            serde_json::json!([{"id": "s1", "tool": "write_file", "args": {"path": "list.txt", "content": "milk, eggs"}}]),
        );
        assert_eq!(made_up_contents(&given, &registry, || existing.clone()), None);
        let new_file = Plan::for_goal(
            move_it,
            serde_json::json!([{"id": "s1", "tool": "write_file", "args": {"path": "new.txt", "content": "x y"}}]),
        );
        assert_eq!(made_up_contents(&new_file, &registry, || existing.clone()), None);
    }
}
