//! Rule `edits-not-rewrites` (check, general, once): a step of a tool that says it changes things, with a path
//! argument (a file name) that an earlier step of the plan passed to a tool as well, and another argument holding a
//! model's text made from what that earlier step gave (an `llm` step's answer that rests on it, or a result
//! computed from one), would replace the whole file with a model's answer about it. Where another tool changes
//! things too (one that may edit; with `write_file` alone a whole write is the only way), the plan is sent back
//! once, naming the step, the file and the step that read it, with the tools that change things: a part of a file
//! is changed by editing it.
//!
//! Why: told "In invite.txt, the party moved from Tuesday to Thursday. Please fix the day.", the 1.5B read the
//! file, asked the executor "What day is the party scheduled?" and wrote its answer ("The party is scheduled on
//! Tuesday at 7 PM.") over the invitation, in every one of six whole runs (tasks-mcp `fs-edit`), while the
//! filesystem server offers `edit_file`.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use super::support::files::{changing_tools, file_name, squeeze};
use crate::agent::plan::refs::references_in;
use crate::agent::plan::Plan;
use crate::tools::llm::Llm;
use crate::tools::ToolRegistry;

/// The words that open the rule's feedback.
pub const REWRITE_MARKER: &str = "A model's answer would replace a whole file";

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

/// Rule `edits-not-rewrites` (check, general).
pub struct EditsNotRewrites;

impl super::Rule for EditsNotRewrites {
    fn about(&self) -> super::About {
        super::About {
            name: "edits-not-rewrites",
            stage: super::Stage::Check,
            profile: super::Profile::General,
            keys_on: "a write, by a tool declared to change things, of a model's text made from a file's content back over that file, where another changing tool exists: sent back once",
        }
    }

    fn check(&self, plan: &Plan, tools: &ToolRegistry, _workspace: &Path) -> Option<String> {
        model_rewrites(plan, tools)
    }

    fn marker(&self) -> &'static str {
        REWRITE_MARKER
    }
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
