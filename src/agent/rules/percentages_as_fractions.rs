//! Mends a number the goal writes as a percentage and the plan passes in the form the parameter does not take.
//!
//! Two directions, two rules, both in the `nestful` profile (they key on words of a parameter's description, which
//! `general` does not): where the description asks for a decimal or a fraction, the number as written (`8` for
//! "8%") becomes the fraction (`0.08`, `percentages-as-fractions`); where it says neither, the fraction (`0.05` for
//! "5%") becomes the number as written (`5`, `percentages-as-written`): NESTFUL's gold convention.

use serde_json::Value;

use super::rewrite_arguments;
use crate::agent::numbers::{numbers_in, same_value};
use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// Both directions ([`mend_percentages_to_fractions`] and [`mend_percentages_as_written`]). Returns one line per
/// mend (`s1: interest_rate 0.05 → 5 (the goal's 5%)`).
pub fn mend_percentages(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    rewrite_percentages(plan, registry, None)
}

/// The `general` direction: a percentage of the goal passed as written (`8` for "8%") to a parameter whose
/// description asks for a decimal or a fraction becomes the fraction (`0.08`).
pub fn mend_percentages_to_fractions(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    rewrite_percentages(plan, registry, Some(true))
}

/// The `nestful` direction: a percentage of the goal passed as its fraction (`0.05` for "5%") to a parameter whose
/// description says neither "decimal" nor "fraction" becomes the number as written (`5`). A fraction the goal
/// itself writes is left alone (a goal with "5%" and "0.05" may mean either).
pub fn mend_percentages_as_written(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    rewrite_percentages(plan, registry, Some(false))
}

/// Rewrites top-level number arguments that stand for one of the goal's percentages in the form the parameter
/// does not take; `to_fraction` limits it to one direction (`Some(true)`: only into fractions).
fn rewrite_percentages(plan: &mut Plan, registry: &ToolRegistry, to_fraction: Option<bool>) -> Vec<String> {
    let percentages = percentages_in(&plan.goal);
    if percentages.is_empty() {
        return Vec::new();
    }
    let written: Vec<f64> = numbers_in(&plan.goal).iter().map(|n| n.value).collect();
    rewrite_arguments(plan, registry, |_, value, description| {
        let v = value.as_f64()?;
        let wants_fraction = description.contains("decimal") || description.contains("fraction");
        if to_fraction.is_some_and(|direction| direction != wants_fraction) {
            return None;
        }
        percentages.iter().find_map(|(text, p)| {
            let fraction = p / 100.0;
            let number = if wants_fraction && same_value(v, *p) && !same_value(v, fraction) {
                serde_json::Number::from_f64(fraction)?
            } else if !wants_fraction && same_value(v, fraction) && !written.iter().any(|w| same_value(*w, v)) {
                as_written(text, *p)?
            } else {
                return None;
            };
            Some((Value::Number(number), format!("the goal's {text}%")))
        })
    })
}

/// The goal's percentages: each number followed by `%` or the word "percent", as written and as a value.
pub(super) fn percentages_in(goal: &str) -> Vec<(String, f64)> {
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

/// Rule `percentages-as-fractions` (mend, nestful).
pub struct PercentagesAsFractions;

impl super::Rule for PercentagesAsFractions {
    fn about(&self) -> super::About {
        super::About {
            name: "percentages-as-fractions",
            stage: super::Stage::Mend,
            profile: super::Profile::Nestful,
            keys_on: "a percentage the goal writes, passed as written to a parameter whose description says decimal or fraction: the fraction",
        }
    }

    fn mend(&self, plan: &mut Plan, tools: &ToolRegistry, _seen: &str) -> Vec<String> {
        mend_percentages_to_fractions(plan, tools)
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
