//! What a plan writes into files, against what the goal gives and what the files hold: checks that send a plan
//! back before it runs.
//!
//! Rule `contents-not-made-up`, profile `general` (a check, once): a step of a tool that changes things, with a
//! path argument naming a file the workspace already holds (by its file name, anywhere in the workspace) and a
//! text argument the goal does not give (no reference, not in the goal's words), would put made-up text where a
//! file's own content belongs. The plan is sent back once, naming the step, the text and the file, the move that
//! would put the file there, the plan's other steps to keep, and the tools that change things.
//!
//! Why: told "Make a folder called archive and put old.txt in it.", the 1.5B created the folder and wrote
//! `archive/old.txt` with the text "This is an old file." (tasks-mcp `fs-folder-move`): the user's file stayed where
//! it was and a made-up copy was reported as moved.
//!
//! Rule `edits-not-rewrites`, profile `general` (a check, once): a step of a tool that changes things, with a
//! path argument (a file name) that an earlier step of the plan passed to a tool as well, and another argument
//! holding a model's text made from what that earlier step gave (an `llm` step's answer that rests on it, or a
//! result computed from one), would replace the whole file with a model's answer about it. Where another tool
//! changes things too (one that may edit; with `write_file` alone a whole write is the only way), the plan is sent
//! back once, naming the step, the file and the step that read it, with the tools that change things: a part of a
//! file is changed by editing it.
//!
//! Why: told "In invite.txt, the party moved from Tuesday to Thursday. Please fix the day.", the 1.5B read the
//! file, asked the executor "What day is the party scheduled?" and wrote its answer ("The party is scheduled on
//! Tuesday at 7 PM.") over the invitation, in every one of six whole runs (tasks-mcp `fs-edit`), while the
//! filesystem server offers `edit_file`.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use crate::agent::plan::refs::references_in;
use crate::agent::plan::Plan;
use crate::tools::llm::Llm;
use crate::tools::ToolRegistry;

/// The words that open `contents-not-made-up`'s feedback.
pub const CONTENT_MARKER: &str = "Text the goal does not give";
/// Entries of the workspace looked at for file names (a large workspace is not walked whole for a check).
const MAX_ENTRIES: usize = 4000;

/// The words that open `edits-not-rewrites`' feedback.
pub const REWRITE_MARKER: &str = "A model's answer would replace a whole file";

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

/// The feedback that sends `plan` back, where a step of a tool that changes things writes a model's text, made
/// from what an earlier step gave for the same path, to that path (see the module's documentation).
pub(crate) fn model_rewrites(plan: &Plan, registry: &ToolRegistry) -> Option<String> {
    let step_of = |id: &str| plan.steps.iter().find(|s| s.id == id);
    // Whether `id`'s value is a model's text (an `llm` step's, or computed from one) resting on step `source`.
    let model_text_from = |id: &str, source: &str| {
        let (mut pending, mut seen, mut by_model, mut rests) = (vec![id.to_string()], HashSet::new(), false, false);
        while let Some(next) = pending.pop() {
            if !seen.insert(next.clone()) {
                continue;
            }
            rests |= next == source;
            let Some(step) = step_of(&next) else { continue };
            by_model |= step.tool == Llm::NAME;
            pending.extend(step.dependencies());
        }
        by_model && rests
    };
    let changing = changing_tools(registry);
    // Only where another tool changes things: with one writing tool, a whole write is the only way to change.
    let writes = |tool: &str| changing.iter().any(|t| t == tool) && changing.iter().any(|t| t != tool);
    let found = plan.steps.iter().enumerate().filter(|(_, s)| writes(&s.tool)).find_map(|(at, write)| {
        let path = write.args.values().filter_map(Value::as_str).find(|t| file_name(t).is_some())?;
        let read = plan.steps[..at]
            .iter()
            .find(|s| s.args.values().filter_map(Value::as_str).any(|t| squeeze(t) == squeeze(path)))?;
        let text = write.args.values().find_map(|value| {
            let from = references_in(value).into_iter().find(|r| model_text_from(&r.step, &read.id))?;
            Some(from.to_string())
        })?;
        Some(format!(
            "step {} writes {text} to {path}, a model's answer made from what {} ({}) gave",
            write.id, read.id, read.tool
        ))
    })?;
    Some(format!(
        "{REWRITE_MARKER}: {found}. A model's answer about a file is not the file's new content: to change part of a \
         file, edit it, giving the text to replace and its replacement as the goal says them. Tools that make \
         changes: {}.",
        changing.join(", ")
    ))
}

/// The names of the tools that say they change things.
pub(crate) fn changing_tools(registry: &ToolRegistry) -> Vec<String> {
    registry.specs().filter(|spec| spec.changes_things == Some(true)).map(|spec| spec.name.clone()).collect()
}

/// Whether `tool` says it changes things.
pub(crate) fn changes_things(registry: &ToolRegistry, tool: &str) -> bool {
    registry.spec(tool).is_some_and(|spec| spec.changes_things == Some(true))
}

/// The last part of a relative path with a file name (`name.ext`), as in `archive/old.txt` → `old.txt`.
fn file_name(text: &str) -> Option<&str> {
    if text.contains(char::is_whitespace) {
        return None;
    }
    let name = text.rsplit('/').next()?;
    let (stem, ext) = name.rsplit_once('.')?;
    let extension = (1..=5).contains(&ext.len()) && ext.chars().all(|c| c.is_ascii_alphanumeric());
    (!stem.is_empty() && extension && !ext.chars().all(|c| c.is_ascii_digit())).then_some(name)
}

/// Lowercase, with runs of white space as one space: text compared as written, not as spaced.
fn squeeze(text: &str) -> String {
    text.to_lowercase().split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolResult;
    use serde_json::json;

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

    /// A tool that says it changes things, beside the built-in `write_file`.
    struct EditFile;

    impl crate::tools::Tool for EditFile {
        fn name(&self) -> &str {
            "edit_file"
        }
        fn description(&self) -> &str {
            "Replaces text in a file."
        }
        fn args_schema(&self) -> Value {
            json!({"type": "object", "properties": {"path": {"type": "string"}, "edits": {"type": "array"}}})
        }
        fn changes_things(&self) -> Option<bool> {
            Some(true)
        }
        fn call(&self, _args: &Value, _ctx: &crate::tools::ToolContext) -> ToolResult<Value> {
            Ok(json!({}))
        }
    }

    #[test]
    fn a_model_answer_written_over_the_file_it_read_is_sent_back_where_a_tool_may_edit() {
        let mut registry = files_registry();
        let fix = "In invite.txt, the party moved from Tuesday to Thursday. Please fix the day.";
        let read = json!({"id": "s1", "tool": "read_file", "args": {"path": "invite.txt"}});
        let ask = json!({"id": "s2", "tool": "llm", "args": {"prompt": "What day is the party? $s1.content$"}});
        let over = Plan::for_goal(
            fix,
            json!([read, ask, {"id": "s3", "tool": "write_file", "args": {"path": "invite.txt", "content": "$s2.text$"}}]),
        );
        // With `write_file` the only tool that changes things, a whole write is the only way: nothing to say.
        assert_eq!(model_rewrites(&over, &registry), None);
        registry.register(EditFile).unwrap();
        let feedback = model_rewrites(&over, &registry).unwrap();
        assert!(feedback.contains("step s3 writes $s2.text$ to invite.txt") && feedback.contains("s1 (read_file)"));
        // Through a result computed from the answer, too.
        let computed = Plan::for_goal(
            fix,
            json!([read, ask,
                {"id": "s3", "tool": "calculator", "args": {"expression": "$s2.text$ + 1"}},
                {"id": "s4", "tool": "write_file", "args": {"path": "invite.txt", "content": "$s3.result$"}}]),
        );
        assert!(model_rewrites(&computed, &registry).is_some());
        // A file's text copied whole, a model's answer written elsewhere, or a model's text of nothing read: kept.
        let copied = Plan::for_goal(
            fix,
            json!([read, {"id": "s2", "tool": "write_file", "args": {"path": "invite.txt", "content": "$s1.content$"}}]),
        );
        assert_eq!(model_rewrites(&copied, &registry), None);
        let elsewhere = Plan::for_goal(
            "Summarise invite.txt into summary.txt.",
            json!([read, ask, {"id": "s3", "tool": "write_file", "args": {"path": "summary.txt", "content": "$s2.text$"}}]),
        );
        assert_eq!(model_rewrites(&elsewhere, &registry), None);
        let fresh = Plan::for_goal(
            "Write a poem to poem.txt.",
            json!([{"id": "s1", "tool": "llm", "args": {"prompt": "A poem."}},
                {"id": "s2", "tool": "write_file", "args": {"path": "poem.txt", "content": "$s1.text$"}}]),
        );
        assert_eq!(model_rewrites(&fresh, &registry), None);
    }
}
