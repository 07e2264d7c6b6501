//! Mends a duration the goal gives in one unit and the plan passes unconverted to a parameter whose description
//! names another: "record audio for 5 minutes" planned as `duration: 5` where the description says "in seconds"
//! (300), "a loan term of 36 months" as `time_period: 36` "in years" (3).
//!
//! Rule `durations`, profile `nestful` (it keys on unit words of a description): the parameter's description names the unit, the goal the number and its
//! unit.
//!
//! Why: the rule to copy numbers as written meets a tool that states its own unit, and the 1.5B planner copies
//! the number and leaves the unit behind (a recording of 5 seconds for 5 minutes). The conversion has one reading
//! only where the description names exactly one unit, the goal gives that number with one other unit of the same
//! kind and never with the parameter's, and the result is whole (seconds to weeks convert among themselves, and
//! months to years; days to months do not).

use serde_json::Value;

use super::rewrite_arguments;
use crate::agent::numbers::same_value;
use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// A unit of time: its name, its size in the smallest unit of its kind, and its kind (a month is no fixed number
/// of days, so months and years are a kind of their own).
struct Unit {
    name: &'static str,
    size: f64,
    kind: u8,
}

const UNITS: &[Unit] = &[
    Unit { name: "second", size: 1.0, kind: 0 },
    Unit { name: "minute", size: 60.0, kind: 0 },
    Unit { name: "hour", size: 3600.0, kind: 0 },
    Unit { name: "day", size: 86_400.0, kind: 0 },
    Unit { name: "week", size: 604_800.0, kind: 0 },
    Unit { name: "month", size: 1.0, kind: 1 },
    Unit { name: "year", size: 12.0, kind: 1 },
];

/// Short forms a goal may write after a number ("5 mins", "2 hrs"); a description's "min" may be a minimum.
const SHORT_FORMS: &[(&str, &str)] =
    &[("sec", "second"), ("secs", "second"), ("min", "minute"), ("mins", "minute"), ("hr", "hour"), ("hrs", "hour")];

/// Rewrites top-level number arguments that copy a duration of the goal into the unit the parameter's
/// description names; returns one line per mend (`s1: duration 5 → 300 (the goal's 5 minutes, in seconds)`).
pub fn mend_durations(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    let durations = durations_in(&plan.goal);
    if durations.is_empty() {
        return Vec::new();
    }
    rewrite_arguments(plan, registry, |_, value, description| {
        let v = value.as_f64()?;
        let named = units_named(description);
        let [wanted] = named.as_slice() else { return None };
        let given: Vec<&Unit> = durations.iter().filter(|(n, _)| same_value(*n, v)).map(|(_, u)| *u).collect();
        let [unit] = given.as_slice() else { return None };
        if unit.name == wanted.name || unit.kind != wanted.kind {
            return None;
        }
        let converted = v * unit.size / wanted.size;
        if converted.fract() != 0.0 || converted.abs() > 1e15 {
            return None;
        }
        let why = format!("the goal's {} {}s, in {}s", value, unit.name, wanted.name);
        Some((Value::Number((converted as i64).into()), why))
    })
}

/// The goal's durations: each number followed by a unit of time ("5 minutes", "36-month", "2 hrs").
fn durations_in(goal: &str) -> Vec<(f64, &'static Unit)> {
    let lower = goal.to_lowercase();
    let tokens: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == '-')
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric() && c != '.'))
        .map(|t| t.trim_end_matches('.'))
        .filter(|t| !t.is_empty())
        .collect();
    tokens
        .windows(2)
        .filter_map(|pair| {
            let number: f64 = pair[0].replace(',', "").parse().ok()?;
            Some((number, unit_of(pair[1], true)?))
        })
        .collect()
}

/// The units of time a parameter's description names (in full words), each once.
fn units_named(description: &str) -> Vec<&'static Unit> {
    let mut named: Vec<&'static Unit> = Vec::new();
    for word in description.split(|c: char| !c.is_alphanumeric()) {
        if let Some(unit) = unit_of(word, false) {
            if !named.iter().any(|u| u.name == unit.name) {
                named.push(unit);
            }
        }
    }
    named
}

/// The unit a word names: singular or plural, and short forms where `short` allows them.
fn unit_of(word: &str, short: bool) -> Option<&'static Unit> {
    let full = if short { SHORT_FORMS.iter().find(|(s, _)| *s == word).map_or(word, |(_, f)| *f) } else { word };
    let singular = full.strip_suffix('s').unwrap_or(full);
    UNITS.iter().find(|u| u.name == singular)
}

/// Rule `durations` (mend, nestful).
pub struct Durations;

impl super::Rule for Durations {
    fn about(&self) -> super::About {
        super::About {
            name: "durations",
            stage: super::Stage::Mend,
            profile: super::Profile::Nestful,
            keys_on: "a duration the goal writes in one unit, passed unconverted to a parameter whose description names one other unit: converted",
        }
    }

    fn mend(&self, plan: &mut Plan, tools: &ToolRegistry, _seen: &str) -> Vec<String> {
        mend_durations(plan, tools)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(goal: &str) -> Vec<(f64, &str)> {
        durations_in(goal).into_iter().map(|(n, u)| (n, u.name)).collect()
    }

    #[test]
    fn durations_are_numbers_before_a_unit_of_time() {
        assert_eq!(
            read("Record 5 minutes, a 36-month loan, 2 hrs. and 1.5 days, 1,000 seconds; not 3 apples or minutes."),
            [(5.0, "minute"), (36.0, "month"), (2.0, "hour"), (1.5, "day"), (1000.0, "second")]
        );
        let names = |d: &str| units_named(d).iter().map(|u| u.name).collect::<Vec<_>>();
        assert_eq!(names("the duration of the recording in seconds"), ["second"]);
        assert_eq!(names("the min price, the minimum time"), Vec::<&str>::new());
        assert_eq!(names("hours or minutes, in hours"), ["hour", "minute"]);
    }
}
