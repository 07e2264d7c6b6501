//! Leaves out the example values a planner writes into a model step's prompt.
//!
//! Rule `prompt-examples`, profile `general`: in a prompt of a tool the executor model runs (`llm`) that reads an
//! earlier result, a parenthesised example the goal does not give — "(e.g., 'Wednesday, January 1, 2023')",
//! "(for example …)", "(for instance …)" — is left out.
//!
//! Why: asked to put the date it had read (03/21/2025) "in the format 'Day, Month Date, Year' (e.g., 'Wednesday,
//! January 1, 2023')", the 0.5B executor answered with the example, and the joiner reported January 1, 2023 as the
//! next meetup (tasks-mcp `web-meetup-date`). Without the example it wrote the date it had read. The form asked
//! for stays; only the sample value goes.

use serde_json::Value;

use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// Words that open a parenthesised example.
const OPENINGS: &[&str] = &["e.g.", "e.g,", "eg.", "eg,", "for example", "for instance"];

/// Leaves out the examples of model prompts that read earlier results; one line per prompt changed.
pub fn drop_prompt_examples(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    let goal = plan.goal.to_lowercase();
    let mut lines = Vec::new();
    for step in &mut plan.steps {
        if !registry.spec(&step.tool).is_some_and(|spec| spec.needs_model) {
            continue;
        }
        for (name, value) in step.args.iter_mut() {
            let Some(text) = value.as_str() else { continue };
            if !text.contains("$s") {
                continue;
            }
            let (kept, dropped) = without_examples(text, &goal);
            if dropped.is_empty() {
                continue;
            }
            lines.push(format!(
                "{}: {name} without {} (an example the goal does not give)",
                step.id,
                dropped.join(", ")
            ));
            *value = Value::String(kept);
        }
    }
    lines
}

/// `text` without its parenthesised examples the goal (lowercase) does not hold, and the examples left out.
fn without_examples(text: &str, goal: &str) -> (String, Vec<String>) {
    let mut kept = String::new();
    let mut dropped = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('(') {
        let Some(close) = rest[open..].find(')').map(|c| open + c) else { break };
        let inside = &rest[open + 1..close];
        let lower = inside.trim_start().to_lowercase();
        let example = OPENINGS.iter().any(|o| lower.starts_with(o)) && !goal.contains(&lower);
        if example {
            kept.push_str(rest[..open].trim_end());
            dropped.push(rest[open..=close].to_string());
        } else {
            kept.push_str(&rest[..=close]);
        }
        rest = &rest[close + 1..];
    }
    kept.push_str(rest);
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parenthesised_example_is_left_out_of_a_prompt() {
        let prompt = "Format $s2.text$ as 'Day, Month Date, Year' (e.g., 'Wednesday, January 1, 2023').";
        let (kept, dropped) = without_examples(prompt, "what day is the next meetup?");
        assert_eq!(kept, "Format $s2.text$ as 'Day, Month Date, Year'.");
        assert_eq!(dropped, ["(e.g., 'Wednesday, January 1, 2023')"]);
        // Other brackets stay, and so does an example the goal gives.
        let note = "Summarise $s1.text$ (two lines) (for example: short)";
        let (kept, _) = without_examples(note, "summarise it (for example: short)");
        assert_eq!(kept, note);
    }
}
