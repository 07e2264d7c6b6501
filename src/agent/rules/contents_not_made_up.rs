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
//!
//! At run time (stated on the same ground: nothing made up goes into the user's data), just before a call of a
//! tool that is not declared read-only (it says it changes things, or says nothing), the text the planner wrote
//! into its arguments, references cut out, is read for values: the runs of capitalised words that do not merely
//! open a sentence and the quoted values (`agent::provenance`, as the joiner reads an answer's names). A value that
//! neither the goal nor an earlier tool's result holds is made up: the call is not made, and the step fails with
//! feedback ([`MADE_UP`]) naming the values and where values may come from, so that the step is repaired or the
//! plan written again. Asked which customers live in a city, the 1.5B had inserted invented customers into the
//! user's database (`INSERT INTO customers VALUES ('John Doe', …)`). A model's reading (an `llm` step's text) is no
//! source, and a value reached by a reference is the earlier result's, not checked here. Applied by the
//! orchestrator as it prepares a tool step (`agent::run::orchestrator::execution`).

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use super::support::files::{changes_things, changing_tools, file_name, squeeze};
use crate::agent::plan::refs::literal_texts;
use crate::agent::plan::{Plan, Step};
use crate::agent::provenance::unsupported_names;
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

/// The words that open the feedback of the rule's run-time part.
pub const MADE_UP: &str = "This call would put values into the user's data that nothing gave";

/// The feedback refusing `step`'s call where the text its arguments were written with holds values that `sources`
/// (the goal and the earlier tools' results, lower-cased: `agent::provenance::sources`; built only for a call that
/// may change things) does not.
pub(crate) fn made_up_values(registry: &ToolRegistry, step: &Step, sources: impl FnOnce() -> String) -> Option<String> {
    let spec = registry.spec(&step.tool)?;
    if spec.needs_model || spec.changes_things == Some(false) {
        return None;
    }
    let texts = literal_texts(&step.args);
    if texts.is_empty() {
        return None;
    }
    let sources = sources();
    let mut made_up: Vec<String> = Vec::new();
    for text in texts {
        for value in unsupported_names(&text, &sources) {
            if !made_up.contains(&value) {
                made_up.push(value);
            }
        }
    }
    if made_up.is_empty() {
        return None;
    }
    let quoted: Vec<String> = made_up.iter().map(|value| format!("{value:?}")).collect();
    Some(format!(
        "{MADE_UP}: step {} passes {} to {}, and neither the goal nor any tool's result so far holds {}. A tool \
         that may change the user's data gets only values the goal gives or a tool returned: take them from the \
         goal, call the tool that shows them first and pass its result (a reference to that step), or leave them out",
        step.id,
        quoted.join(", "),
        step.tool,
        if made_up.len() == 1 { "it" } else { "them" },
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
            keys_on: "a step of a tool declared to change things writing text the goal does not give beside the name of a file the workspace holds: sent back once; at run time, a call of a tool not declared read-only whose planned arguments write a name or a quoted value that neither the goal nor an earlier tool result holds: refused",
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
    use crate::tools::{Tool, ToolContext, ToolError};

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

    /// A tool that declares what it does to the user's data.
    struct Query(Option<bool>);

    impl Tool for Query {
        fn name(&self) -> &str {
            if self.0 == Some(false) {
                "read_query"
            } else {
                "write_query"
            }
        }
        fn description(&self) -> &str {
            "Runs a query"
        }
        fn args_schema(&self) -> Value {
            serde_json::json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]})
        }
        fn changes_things(&self) -> Option<bool> {
            self.0
        }
        fn call(&self, _args: &Value, _context: &ToolContext) -> Result<Value, ToolError> {
            Ok(Value::Null)
        }
    }

    fn step(tool: &str, query: &str) -> Step {
        serde_json::from_value(serde_json::json!({
            "id": "s2", "description": "", "tool": tool, "args": {"query": query}, "depends_on": []
        }))
        .unwrap()
    }

    #[test]
    fn values_no_source_holds_are_refused_and_values_the_goal_or_a_result_gives_are_not() {
        let mut registry = ToolRegistry::new();
        registry.register(Query(None)).unwrap();
        registry.register(Query(Some(false))).unwrap();
        let goal = "Add Hugo Weber from Zurich as a customer.";
        let results = [serde_json::json!({"text": "[{'name': 'Ben Carter', 'city': 'Leeds'}]"})];
        let sources = crate::agent::provenance::sources(goal, results.iter());
        let invented = step("write_query", "INSERT INTO customers (name, city) VALUES ('John Doe', 'Leeds')");
        let refused = made_up_values(&registry, &invented, || sources.clone()).expect("John Doe comes from nowhere");
        assert!(
            refused.starts_with(MADE_UP) && refused.contains("\"John Doe\"") && !refused.contains("Leeds"),
            "{refused}"
        );
        // From the goal, from a result, or through a reference: the call is made.
        let asked = step("write_query", "INSERT INTO customers (name, city) VALUES ('Hugo Weber', 'Zurich')");
        assert_eq!(made_up_values(&registry, &asked, || sources.clone()), None);
        let found = step("write_query", "UPDATE customers SET city = 'Leeds' WHERE name = 'Ben Carter'");
        assert_eq!(made_up_values(&registry, &found, || sources.clone()), None);
        let referenced = step("write_query", "DELETE FROM customers WHERE name = '$s1.text$'");
        assert_eq!(made_up_values(&registry, &referenced, || sources.clone()), None);
        // SQL's own capitals are no names; a tool declared read-only is not checked.
        let keywords = step("write_query", "CREATE TABLE IF NOT EXISTS notes (body TEXT)");
        assert_eq!(made_up_values(&registry, &keywords, || sources.clone()), None);
        let read = step("read_query", "SELECT * FROM customers WHERE name = 'John Doe'");
        assert_eq!(made_up_values(&registry, &read, || sources.clone()), None);
    }
}
