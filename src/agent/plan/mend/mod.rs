//! Mends a model-written plan where its mistake has one reading, before validation: each mend is a rule the
//! planner prompt already states and the small planner breaks often enough to cost runs and scores. Every mend is
//! named in one line (`s2: $s1.result$ → $s1.text$`), so the log and the plan's reason show what was changed.
//!
//! - [`drop_repeated_calls`]: a step with the same tool and arguments as an earlier one is dropped and references
//!   to it point to the earlier step (the orchestrator would answer it from the earlier result anyway).
//! - [`mend_references`]: a generic name for a step's output (`$s1.result$` on `llm`, whose only field is `text`),
//!   a whole-output reference inside longer text to such a tool, and a list of one reference to a field that is a
//!   list already (`["$s1.results$"]`). A specific name the tool lacks says the plan meant another step or tool,
//!   so it is left for validation to report. Why: a replan costs a whole planner call, after which the small
//!   planner often wrote the same reference again (three goals of the answers dev suite ran out of budget so).
//! - [`mend_percentages`]: "a 5% interest rate" planned as `interest_rate: 0.05`, against the rule that numbers are
//!   copied as written (20% is 20), or `8` where the parameter asks for a decimal (`tax_rate`: 0.08).
//! - [`mend_durations`]: "record 5 minutes" planned as `duration: 5` where the parameter takes seconds.
//! - [`mend_languages`]: "from English to French" planned as `en` and `fr`, where the parameter does not ask for a
//!   code; a language name where it does.
//! - [`drop_unmentioned_optional`]: an optional argument the goal names neither by its value nor by the
//!   parameter's name (`max_results: 10` for "search for books about adventure"), against the rule "leave out
//!   optional ones it does not mention": the tool's default is what the user asked for.
//! - [`mend_unused_dependencies`]: a step that lists an earlier step as a dependency but passes a number where its
//!   result belongs (one of that step's own inputs, or a number the planner worked out), against the rule to
//!   reference a result rather than work it out.
//! - [`drop_invented_steps`]: a call of a tool the goal does not name with values the goal does not write, put
//!   between two parts of the goal; whoever read it reads the result it stood in front of.

mod dependencies;
mod duplicates;
mod durations;
mod goal_words;
mod invented;
mod languages;
mod optional;
mod percentages;
mod references;

pub use dependencies::mend_unused_dependencies;
pub use duplicates::drop_repeated_calls;
pub use durations::mend_durations;
pub use invented::drop_invented_steps;
pub use languages::mend_languages;
pub use optional::drop_unmentioned_optional;
pub use percentages::mend_percentages;
pub use references::mend_references;

use serde_json::Value;

use crate::agent::plan::Plan;
use crate::tools::{OutputField, ToolRegistry, ToolSpec};

/// Every mend in turn: repeated calls, references, percentages, durations, languages, unmentioned optional
/// arguments (judged on the values as mended), unused dependencies (judged on the arguments left), then invented
/// steps (last, so a step that listed one as a dependency and now references it is pointed on); returns their
/// lines in that order.
pub fn mend_plan(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    let mut mended = drop_repeated_calls(plan);
    mended.extend(mend_references(plan, registry));
    mended.extend(mend_percentages(plan, registry));
    mended.extend(mend_durations(plan, registry));
    mended.extend(mend_languages(plan, registry));
    mended.extend(drop_unmentioned_optional(plan, registry));
    mended.extend(mend_unused_dependencies(plan, registry));
    mended.extend(drop_invented_steps(plan, registry));
    mended
}

/// Offers each top-level argument of each step whose tool the registry knows to `rewrite(name, value,
/// description)` (the parameter's description in lowercase), which gives the new value and why, or `None` to keep
/// it. Returns one line per rewrite: `s1: interest_rate 0.05 → 5 (the goal's 5%)`.
fn rewrite_arguments(
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

/// The description a tool gives its parameter `name`, or "" where it gives none.
fn parameter_description<'a>(spec: &'a ToolSpec, name: &str) -> &'a str {
    spec.args_schema["properties"][name]["description"].as_str().unwrap_or("")
}

/// The only output field of `tool`, where the registry knows it and it declares exactly one.
fn only_output_field(registry: &ToolRegistry, tool: &str) -> Option<OutputField> {
    let mut fields = registry.spec(tool)?.output_fields()?;
    (fields.len() == 1).then(|| fields.remove(0))
}
