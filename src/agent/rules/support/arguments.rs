//! What several mend rules share about a step's arguments: rewriting them one by one, leaving out those the goal
//! does not ask for, and reading a parameter's description or a tool's one output field.

use serde_json::Value;

use super::goal_words;
use crate::agent::plan::Plan;
use crate::tools::{OutputField, ToolRegistry, ToolSpec};

/// Offers each top-level argument of each step whose tool the registry knows to `rewrite(name, value,
/// description)` (the parameter's description in lowercase), which gives the new value and why, or `None` to keep
/// it. Returns one line per rewrite: `s1: interest_rate 0.05 → 5 (the goal's 5%)`.
pub(crate) fn rewrite_arguments(
    plan: &mut Plan,
    registry: &ToolRegistry,
    mut rewrite: impl FnMut(&str, &Value, &str) -> Option<(Value, String)>,
) -> Vec<String> {
    let mut lines = Vec::new();
    for step in &mut plan.steps {
        let Some(spec) = registry.spec(&step.tool) else { continue };
        for (name, value) in step.args.iter_mut() {
            if let Some((new, why)) = rewrite(name, value, &parameter_description(spec, name).to_lowercase()) {
                lines.push(format!("{}: {name} {value} → {new} ({why})", step.id));
                *value = new;
            }
        }
    }
    lines
}

/// Whether an argument schema lists `name` among its `required` parameters.
pub(crate) fn is_required(schema: &Value, name: &str) -> bool {
    schema["required"].as_array().is_some_and(|names| names.iter().any(|n| n.as_str() == Some(name)))
}

/// Leaves out each argument of an optional parameter (declared by the tool, not in its `required` list: an
/// undeclared one is validation's to report) that holds no reference, that the goal names neither by value nor by
/// the parameter's name, and for which `reason(parameter schema, value)` gives a reason (`""` or `"default 0, "`);
/// returns one line per argument (`s1: max_results 10 left out (optional, and the goal names neither it nor 10)`).
pub(crate) fn leave_out_unasked(
    plan: &mut Plan,
    registry: &ToolRegistry,
    reason: impl Fn(&Value, &Value) -> Option<String>,
) -> Vec<String> {
    let goal = goal_words::GoalWords::new(&plan.goal);
    let mut lines = Vec::new();
    for step in &mut plan.steps {
        let Some(spec) = registry.spec(&step.tool) else { continue };
        let schema = &spec.args_schema;
        let unasked: Vec<String> = step
            .args
            .iter()
            .filter_map(|(name, value)| {
                let parameter = schema["properties"].get(name)?;
                if is_required(schema, name)
                    || !crate::agent::plan::refs::references_in(value).is_empty()
                    || goal.mentions_name(name)
                    || goal.mentions_value(value)
                {
                    return None;
                }
                let why = reason(parameter, value)?;
                lines.push(format!(
                    "{}: {name} {value} left out (optional, {why}and the goal names neither it nor {value})",
                    step.id
                ));
                Some(name.clone())
            })
            .collect();
        step.args.retain(|name, _| !unasked.contains(name));
    }
    lines
}

/// The description a tool gives its parameter `name`, or "" where it gives none.
pub(crate) fn parameter_description<'a>(spec: &'a ToolSpec, name: &str) -> &'a str {
    spec.args_schema["properties"][name]["description"].as_str().unwrap_or("")
}

/// The only output field of `tool`, where the registry knows it and it declares exactly one.
pub(crate) fn only_output_field(registry: &ToolRegistry, tool: &str) -> Option<OutputField> {
    let mut fields = registry.spec(tool)?.output_fields()?;
    (fields.len() == 1).then(|| fields.remove(0))
}
