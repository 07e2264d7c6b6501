//! Mends a step that declares it depends on an earlier step yet passes a value where that step's result belongs:
//! `create_invoice(amount: 1200)` listing `depends_on: ["s1"]`, where s1 computes the gross salary of 1000 + 200,
//! `convert_currency(amount: 7000)` after `calculate_profit(revenue: 7000, …)`, or `translate_text(text: "I'm not
//! good at english")` after `check_grammar(sentence: "I'm not good at english")`.
//!
//! Why: the 1.5B planner often knows that a step needs an earlier result (it lists the dependency) but writes a
//! value instead of the reference, either one of the earlier step's own inputs or one it worked out itself
//! (`word: "Hello"` after translating "Hallo"), against the prompt's rule not to work out or guess a result. For
//! numbers the mend fired in 17 of NESTFUL's 169 goals, 9 of which became full matches. It has one reading only:
//! the earlier step's tool gives exactly one field, a number or a text, and exactly one argument of that kind is
//! such a copy or such a guess (a number not among the goal's, a text the goal does not write). A language name is
//! no guess: it is a setting the planner picks (or the language mend wrote for a code), not a result it worked
//! out, and taking it for one sent a joke's encryption to a translation as its source language.

use serde_json::Value;

use super::goal_words::GoalWords;
use super::languages::is_language_name;
use super::only_output_field;
use super::percentages::percentages_in;
use crate::agent::numbers::{numbers_in, same_value};
use crate::agent::plan::Plan;
use crate::agent::refs::references_in;
use crate::tools::ToolRegistry;

/// Rewrites, in each step with a dependency it lists but does not reference, the one top-level argument that
/// copies an argument of that dependency or that the goal does not give, into a reference to the dependency's only
/// output field: a number argument where that field is a number, a text where it is a text (or a file, or of no
/// declared type). Returns one line per mend
/// (`s2: amount 7000 → $s1.profit$ (s2 depends on s1 but did not use its result)`).
pub fn mend_unused_dependencies(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    // The goal's numbers, and its percentages as fractions too (a tax rate "as a decimal" is 0.05 for "5%").
    let fractions = percentages_in(&plan.goal).into_iter().map(|(_, p)| p / 100.0);
    let goal_numbers: Vec<f64> = numbers_in(&plan.goal).iter().map(|n| n.value).chain(fractions).collect();
    let in_goal = |v: f64| goal_numbers.iter().any(|g| same_value(*g, v));
    let goal = GoalWords::new(&plan.goal);
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
            let Some(field) = only_output_field(registry, &source.tool) else { continue };
            let stands_in: Box<dyn Fn(&Value) -> bool> = match field.json_type.as_deref() {
                Some("number" | "integer") => {
                    let inputs: Vec<f64> = source.args.values().filter_map(Value::as_f64).collect();
                    Box::new(move |value: &Value| {
                        value.as_f64().is_some_and(|v| inputs.iter().any(|s| same_value(*s, v)) || !in_goal(v))
                    })
                }
                Some("boolean" | "array" | "object") => continue,
                // A text, a file, or a field of no declared type: a text argument may stand in for it.
                _ => {
                    let inputs: Vec<&str> = source.args.values().filter_map(Value::as_str).collect();
                    let goal = &goal;
                    Box::new(move |value: &Value| {
                        value.as_str().is_some_and(|text| {
                            let guessed = !goal.mentions_value(value) && !is_language_name(text);
                            references_in(value).is_empty() && (inputs.contains(&text) || guessed)
                        })
                    })
                }
            };
            let copies_or_guesses: Vec<&String> =
                step.args.iter().filter(|(_, value)| stands_in(value)).map(|(name, _)| name).collect();
            let [name] = copies_or_guesses.as_slice() else { continue };
            let name = (*name).clone();
            let reference = format!("${dependency}.{}$", field.name);
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
