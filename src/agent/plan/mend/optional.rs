//! Drops an optional argument the goal mentions neither by its value nor by the parameter's name: the planner
//! prompt says to leave those out, and the tool's default is then what the user asked for.
//!
//! Rule `optional`, profile `nestful` only: the schema says the argument may be left out, not that it should be;
//! dropping it matches NESTFUL's gold, which leaves such arguments out, while on a real tool a sensible value the
//! planner chose (a unit, a format) would be lost.
//!
//! Why: the 1.5B planner filled optional parameters with values of its own (`max_results: 10`, `format: "QR"`,
//! `mode: "driving"`, `include_lowercase: true`; docs/benchmarks.md, "Plans mended where they break the prompt's
//! rules"). On a real tool such a value changes what the tool does without the user having asked. An argument the goal names either way is kept, whatever its value ("optimize the route for time"
//! keeps `optimize_route`), and so is one that takes an earlier step's result.

use super::goal_words::GoalWords;
use super::is_required;
use crate::agent::plan::refs::references_in;
use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// Removes the optional arguments (declared by the tool, not in its `required` list) that the goal mentions
/// neither by value nor by name and that hold no reference; returns one line per argument dropped
/// (`s1: max_results 10 left out (optional, and the goal names neither it nor 10)`).
pub fn drop_unmentioned_optional(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    let goal = GoalWords::new(&plan.goal);
    let mut dropped = Vec::new();
    for step in &mut plan.steps {
        let Some(spec) = registry.spec(&step.tool) else { continue };
        let schema = &spec.args_schema;
        let required = |name: &str| is_required(schema, name);
        // Arguments the tool does not declare are validation's to report, not this mend's to drop.
        let declared = |name: &str| schema["properties"].get(name).is_some();
        let unmentioned: Vec<String> = step
            .args
            .iter()
            .filter(|(name, value)| {
                declared(name)
                    && !required(name)
                    && references_in(value).is_empty()
                    && !goal.mentions_name(name)
                    && !goal.mentions_value(value)
            })
            .map(|(name, value)| {
                dropped.push(format!(
                    "{}: {name} {value} left out (optional, and the goal names neither it nor {value})",
                    step.id
                ));
                name.clone()
            })
            .collect();
        step.args.retain(|name, _| !unmentioned.contains(name));
    }
    dropped
}
