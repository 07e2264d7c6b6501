//! A switch the goal asks for by its description's words is turned on.
//!
//! Rule `switches-asked`, profile `general`: an optional boolean parameter, off in the step (left out, or
//! `false`) and not declared on by default, whose description has a word of six letters or more that the tool's
//! own description does not use (so the word says what this switch does, not what the tool does) and that the goal
//! uses, is set to `true`, unless the goal says no, not, never, without or except anywhere. `list_dir`'s
//! `recursive` ("also list what the subfolders hold") for "Which of my files are Markdown files? Look in the
//! subfolders too."
//!
//! Why: the planner is told to leave out optional arguments the goal does not mention (NESTFUL's gold leaves them
//! out, and a 1.5B model sets them to values of its own), so it leaves out the one the goal does mention in other
//! words than the parameter's name: the folder was listed alone and the Markdown files below it never named.

use serde_json::Value;

use super::goal_words::{words, GoalWords};
use super::{is_required, parameter_description};
use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// Words of a goal that take back what it asks: a goal that says one of them is left as written.
const NEGATIONS: &[&str] = &["no", "not", "never", "without", "except", "don", "doesn", "didn", "isn", "won"];

/// Shortest word of a switch's description that can ask for it (shorter ones, "file", "page", "list", are any
/// goal's words).
const TELLING_LETTERS: usize = 6;

/// Sets each asked switch on; one line per switch (`s1: recursive → true (the goal says "subfolders", which
/// recursive's description uses)`).
pub fn set_asked_switches(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    let lower = plan.goal.to_lowercase();
    if words(&lower).any(|w| NEGATIONS.contains(&w)) {
        return Vec::new();
    }
    let goal = GoalWords::new(&plan.goal);
    let mut lines = Vec::new();
    for step in &mut plan.steps {
        let Some(spec) = registry.spec(&step.tool) else { continue };
        let schema = &spec.args_schema;
        let Some(properties) = schema["properties"].as_object() else { continue };
        let tool_words: Vec<String> = words(&spec.description.to_lowercase()).map(str::to_string).collect();
        for (name, parameter) in properties {
            let off = matches!(step.args.get(name), None | Some(Value::Bool(false)));
            let switch = parameter["type"] == "boolean" && parameter.get("default") != Some(&Value::Bool(true));
            if !switch || !off || is_required(schema, name) {
                continue;
            }
            let description = parameter_description(spec, name).to_lowercase();
            let asked = words(&description).find(|w| {
                w.chars().count() >= TELLING_LETTERS && !tool_words.iter().any(|t| t == w) && goal.has_word(w)
            });
            if let Some(word) = asked {
                lines.push(format!(
                    "{}: {name} → true (the goal says \"{word}\", which {name}'s description uses)",
                    step.id
                ));
                step.args.insert(name.clone(), Value::Bool(true));
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::ToolRegistry;

    fn plan(goal: &str, args: Value) -> Plan {
        Plan::for_goal(goal, json!([{"id": "s1", "tool": "list_dir", "args": args, "depends_on": []}]))
    }

    fn registry() -> ToolRegistry {
        ToolRegistry::builtins(&crate::tools::ToolContext::new(
            crate::tools::Workspace::new(std::env::temp_dir()).unwrap(),
        ))
    }

    #[test]
    fn a_switch_the_goal_asks_for_in_its_descriptions_words_is_turned_on() {
        let mut p = plan("Which of my files are Markdown files? Look in the subfolders too.", json!({"path": "."}));
        let lines = set_asked_switches(&mut p, &registry());
        assert_eq!(p.steps[0].args["recursive"], true, "{lines:?}");
        assert!(lines[0].contains("subfolders"), "{lines:?}");
        // Written off by the planner: turned on too.
        let mut p = plan("List everything here, subfolders included.", json!({"path": ".", "recursive": false}));
        set_asked_switches(&mut p, &registry());
        assert_eq!(p.steps[0].args["recursive"], true);
    }

    #[test]
    fn a_switch_the_goal_does_not_ask_for_or_refuses_stays_off() {
        for goal in ["Which files are in this folder?", "List the files here, not the subfolders."] {
            let mut p = plan(goal, json!({"path": "."}));
            assert!(set_asked_switches(&mut p, &registry()).is_empty(), "{goal}");
            assert!(p.steps[0].args.get("recursive").is_none(), "{goal}");
        }
    }
}
