//! Mends a step that declares it depends on an earlier step yet passes a number where that step's result belongs:
//! `create_invoice(amount: 1200)` listing `depends_on: ["s1"]`, where s1 computes the gross salary of 1000 + 200,
//! or `convert_currency(amount: 7000)` after `calculate_profit(revenue: 7000, …)`.
//!
//! Why: the 1.5B planner often knows that a step needs an earlier result (it lists the dependency) but writes a
//! number instead of the reference, either one of the earlier step's own inputs or one it worked out itself,
//! against the prompt's rule not to work out or guess a result. The mend fired in 17 of NESTFUL's 169 goals, 9 of
//! which became full matches. It has one reading only: the earlier step's tool gives exactly one field and it is a
//! number, and exactly one number argument of the step is such a copy or such a guess.

use serde_json::Value;

use super::only_output_field;
use super::percentages::percentages_in;
use crate::agent::numbers::{numbers_in, same_value};
use crate::agent::plan::Plan;
use crate::agent::refs::references_in;
use crate::tools::ToolRegistry;

/// Rewrites, in each step with a dependency it lists but does not reference, the one top-level number argument
/// that copies a number argument of that dependency or is not among the goal's numbers, into a reference to the
/// dependency's only output field, where that field is a number. Returns one line per mend
/// (`s2: amount 7000 → $s1.profit$ (s2 depends on s1 but did not use its result)`).
pub fn mend_unused_dependencies(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    // The goal's numbers, and its percentages as fractions too (a tax rate "as a decimal" is 0.05 for "5%").
    let fractions = percentages_in(&plan.goal).into_iter().map(|(_, p)| p / 100.0);
    let goal_numbers: Vec<f64> = numbers_in(&plan.goal).iter().map(|n| n.value).chain(fractions).collect();
    let in_goal = |v: f64| goal_numbers.iter().any(|g| same_value(*g, v));
    let mut mends = Vec::new();
    for k in 0..plan.steps.len() {
        let (earlier, rest) = plan.steps.split_at_mut(k);
        let step = &mut rest[0];
        let referenced: Vec<String> = step.args.values().flat_map(references_in).map(|r| r.step).collect();
        for dependency in step.depends_on.clone() {
            if referenced.contains(&dependency) {
                continue;
            }
            let Some(source) = earlier.iter().find(|s| s.id == dependency) else { continue };
            let Some(field) = only_number_field(registry, &source.tool) else { continue };
            let source_numbers: Vec<f64> = source.args.values().filter_map(Value::as_f64).collect();
            let copies_or_guesses: Vec<&String> = step
                .args
                .iter()
                .filter(|(_, value)| {
                    value.as_f64().is_some_and(|v| source_numbers.iter().any(|s| same_value(*s, v)) || !in_goal(v))
                })
                .map(|(name, _)| name)
                .collect();
            let [name] = copies_or_guesses.as_slice() else { continue };
            let name = (*name).clone();
            let reference = format!("${dependency}.{field}$");
            mends.push(format!(
                "{}: {name} {} → {reference} ({} depends on {dependency} but did not use its result)",
                step.id, step.args[&name], step.id
            ));
            step.args.insert(name, Value::String(reference));
            // One argument per dependency; the next dependency looks at the step as mended.
        }
    }
    mends
}

/// The tool's only output field, where it declares exactly one and that one is a number.
fn only_number_field(registry: &ToolRegistry, tool: &str) -> Option<String> {
    let field = only_output_field(registry, tool)?;
    matches!(field.json_type.as_deref(), Some("number" | "integer")).then_some(field.name)
}
