//! Mends a model-written plan where its mistake has one reading: a generic name for a step's output (`result`,
//! `output`, `value`, …) that its tool does not have, when that tool has exactly one output field
//! (`$s1.result$` on `llm`, whose only field is `text`), and a whole-output reference inside longer text
//! (`"3*$s1$"`) to such a tool. A specific name the tool lacks (`$s2.interest_earned$` on a translation tool)
//! says the plan meant another step or tool, so it is left for validation to report.
//!
//! Why: validation rejects those references, and a replan costs a whole planner call, after which the small
//! planner often writes the same reference again and the run ends on its budget (three goals of the answers dev
//! suite did). Each mend is named, so the log shows what was changed.
//!
//! It also mends a number the goal writes as a percentage and the plan passes in the other form: "a 5% interest
//! rate" planned as `interest_rate: 0.05`, against the prompt's rule that values are copied as written (20% is 20),
//! or `8` where the parameter's description asks for a decimal (`tax_rate`, "the tax rate as a decimal": 0.08).

use serde_json::Value;

use super::joiner::{numbers_in, same_value};
use super::plan::Plan;
use super::refs::{rewrite_references, Reference};
use crate::tools::ToolRegistry;

/// Names planners give a step's output when they do not know its field.
const GENERIC_NAMES: &[&str] = &["result", "results", "output", "outputs", "value", "answer", "response", "return"];

/// Rewrites the plan's references that have one reading; returns one line per mend (`s2: $s1.result$ →
/// $s1.text$`), empty when nothing changed.
pub fn mend_references(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    // Each step's only output field, where its tool declares exactly one.
    let only_field: Vec<(String, String)> = plan
        .steps
        .iter()
        .filter_map(|step| {
            let fields = registry.spec(&step.tool)?.output_fields()?;
            match fields.as_slice() {
                [one] => Some((step.id.clone(), one.name.clone())),
                _ => None,
            }
        })
        .collect();
    let mut mends = Vec::new();
    for step in &mut plan.steps {
        let id = step.id.clone();
        let mut change = |reference: &Reference, whole: bool| {
            let (_, field) = only_field.iter().find(|(target, _)| *target == reference.step)?;
            let mended = match reference.top_field() {
                // A whole output as an argument's value is meant; inside text it is its JSON.
                None if whole => return None,
                None => Reference { step: reference.step.clone(), field: Some(field.clone()) },
                Some(top) if top == field => return None,
                // A path below a field that does not exist has no reading.
                Some(_) if reference.field.as_deref() != reference.top_field() => return None,
                Some(top) if GENERIC_NAMES.contains(&top.to_ascii_lowercase().as_str()) => {
                    Reference { step: reference.step.clone(), field: Some(field.clone()) }
                }
                Some(_) => return None,
            };
            let line = format!("{id}: {reference} → {mended}");
            // The same reference twice in a step is one mend.
            if !mends.contains(&line) {
                mends.push(line);
            }
            Some(mended)
        };
        for value in step.args.values_mut() {
            rewrite_references(value, &mut change);
        }
    }
    mends
}

/// Rewrites top-level number arguments that stand for one of the goal's percentages in the form the parameter
/// does not take: the fraction (`0.05` for "5%") becomes the number as written (`5`), unless the parameter's
/// description asks for a decimal or a fraction, where the number as written becomes the fraction. A fraction the
/// goal itself writes is left alone (a goal with "5%" and "0.05" may mean either). Returns one line per mend
/// (`s1: interest_rate 0.05 → 5 (the goal's 5%)`).
pub fn mend_percentages(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    let percentages = percentages_in(&plan.goal);
    if percentages.is_empty() {
        return Vec::new();
    }
    let written: Vec<f64> = numbers_in(&plan.goal).iter().map(|n| n.value).collect();
    let mut mends = Vec::new();
    for step in &mut plan.steps {
        let Some(spec) = registry.spec(&step.tool) else { continue };
        for (name, value) in step.args.iter_mut() {
            let Some(v) = value.as_f64() else { continue };
            let description = spec.args_schema["properties"][name.as_str()]["description"].as_str().unwrap_or("");
            let description = description.to_ascii_lowercase();
            let wants_fraction = description.contains("decimal") || description.contains("fraction");
            let mended = percentages.iter().find_map(|(text, p)| {
                let fraction = p / 100.0;
                if wants_fraction && same_value(v, *p) && !same_value(v, fraction) {
                    Some((serde_json::Number::from_f64(fraction)?, text))
                } else if !wants_fraction && same_value(v, fraction) && !written.iter().any(|w| same_value(*w, v)) {
                    Some((as_written(text, *p)?, text))
                } else {
                    None
                }
            });
            if let Some((number, text)) = mended {
                mends.push(format!("{}: {name} {value} → {number} (the goal's {text}%)", step.id));
                *value = Value::Number(number);
            }
        }
    }
    mends
}

/// The goal's percentages: each number followed by `%` or the word "percent", as written and as a value.
fn percentages_in(goal: &str) -> Vec<(String, f64)> {
    let lower = goal.to_ascii_lowercase();
    let mut found: Vec<(String, f64)> = Vec::new();
    for (at, _) in lower.match_indices('%').chain(lower.match_indices("percent")) {
        let before = lower[..at].trim_end();
        // The number must end right before the sign ("5%", "5 percent"), not somewhere earlier in the text.
        if !before.ends_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let start = before.rfind(|c: char| !(c.is_ascii_digit() || c == '.' || c == ',')).map_or(0, |i| i + 1);
        if let Some(number) = numbers_in(&before[start..]).pop() {
            if !found.iter().any(|(text, _)| *text == number.text) {
                found.push((number.text, number.value));
            }
        }
    }
    found
}

/// A percentage's number as the goal wrote it: an integer where it has no decimals.
fn as_written(text: &str, value: f64) -> Option<serde_json::Number> {
    match text.parse::<i64>() {
        Ok(whole) => Some(whole.into()),
        Err(_) => serde_json::Number::from_f64(value),
    }
}

#[cfg(test)]
mod tests {
    use super::percentages_in;

    #[test]
    fn percentages_are_numbers_right_before_a_percent_sign_or_word() {
        let found = percentages_in("A 5% rate, 12.5 percent off, 8 % tax, 1,000% growth, a percentage of 10, 5% again");
        let values: Vec<(&str, f64)> = found.iter().map(|(t, v)| (t.as_str(), *v)).collect();
        assert_eq!(values, [("5", 5.0), ("8", 8.0), ("1000", 1000.0), ("12.5", 12.5)]);
        assert!(percentages_in("50 apples at a discount of a few %").is_empty());
    }
}
