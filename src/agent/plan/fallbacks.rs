//! A value a parameter's description keeps for a user who gives none, passed where the goal does give one: the
//! planner writes the plan again without that description's sentence in view, and its value for the goal is taken.
//!
//! Rule `fallback-values`, profile `general` (a check that asks the planner, so it runs where a plan is written, not
//! in `bench rescore`): a text argument equal to a value that its parameter's description offers for when the
//! user gives none ("Use 'Etc/UTC' as local timezone if no timezone provided by the user", "Defaults to
//! 'celsius'", or the schema's `default`), which the goal does not write, is checked. The planner is told so and
//! writes the plan again; the value its new plan passes there replaces the fallback where it is written like the
//! parameter's own values (its characters), is not another argument's of that call, and names a word of the goal
//! (`Asia/Dubai` for "Dubai"). Otherwise the fallback stays: a goal that gives no timezone keeps `Etc/UTC`.
//!
//! Why: the 1.5B planner copies the one concrete value it is shown: on tasks-mcp, "My flight lands in Dubai at
//! 7:15 PM local time" was converted from `Etc/UTC`, and so were São Paulo and Tokyo. Asked about the parameter
//! alone, the model answered times ("14:15" for a timezone); writing a plan, it writes zones (`Asia/Singapore`).

use serde_json::{json, Value};

use crate::agent::plan::mend::{parameter_description, MendChange};
use crate::agent::plan::refs::references_in;
use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// The rule's name in the log and in `--mend` documentation.
pub const RULE: &str = "fallback-values";

/// Words that make a sentence of a description one about the case where no value is given.
const ABSENCE: &[&str] = &[
    "if no ",
    "if none",
    "when no ",
    "when none",
    "unless ",
    "if not ",
    "if omitted",
    "when omitted",
    "if unspecified",
    "if empty",
    "by default",
    "defaults to",
    "default is",
    "default:",
];

/// The values a parameter keeps for a user who gives none: its schema's text `default`, and every quoted value
/// (`'…'`, `"…"`, `` `…` ``) in a sentence of its description that speaks of no value being given.
pub fn fallback_values(parameter: &Value) -> Vec<String> {
    let mut values: Vec<String> =
        parameter.get("default").and_then(Value::as_str).map(str::to_string).into_iter().collect();
    values.extend(description_fallbacks(parameter.get("description").and_then(Value::as_str).unwrap_or("")));
    values.retain(|v| !v.trim().is_empty());
    values.dedup();
    values
}

/// The quoted values of a description's sentences that speak of no value being given.
pub fn description_fallbacks(description: &str) -> Vec<String> {
    sentences(description).into_iter().filter(|sentence| speaks_of_no_value(sentence)).flat_map(quoted).collect()
}

/// Whether a sentence is about the case where no value is given.
fn speaks_of_no_value(sentence: &str) -> bool {
    let lower = sentence.to_lowercase();
    ABSENCE.iter().any(|words| lower.contains(words))
}

/// A description's sentences: split at a full stop followed by a space or the end ("e.g., 'X'" stays whole).
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if matches!(b, b'.' | b';' | b'\n') && bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace()) {
            out.push(&text[start..i]);
            start = i + 1;
        }
    }
    out.push(&text[start..]);
    out
}

/// The quoted values of a sentence; a quote between two letters is an apostrophe ("user's"), not an opening one.
fn quoted(sentence: &str) -> Vec<String> {
    let chars: Vec<char> = sentence.chars().collect();
    let mut values = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let opens = matches!(c, '\'' | '"' | '`') && (i == 0 || !chars[i - 1].is_alphanumeric());
        if opens {
            if let Some(len) = chars[i + 1..].iter().position(|&d| d == c) {
                let end = i + 1 + len;
                let closes = chars.get(end + 1).is_none_or(|n| !n.is_alphanumeric());
                if closes && len > 0 {
                    values.push(chars[i + 1..end].iter().collect());
                    i = end + 1;
                    continue;
                }
            }
        }
        i += 1;
    }
    values
}

/// One argument to ask about: the step's index, the parameter's name and the fallback it was given.
#[derive(Debug, Clone, PartialEq)]
pub struct Suspect {
    pub step: usize,
    pub parameter: String,
    pub fallback: String,
}

/// The text arguments of `plan` passed a fallback value its parameter keeps for no value given, which the goal
/// does not write (a goal that writes `Etc/UTC` gave it).
pub fn suspects(plan: &Plan, registry: &ToolRegistry) -> Vec<Suspect> {
    let goal = plan.goal.to_lowercase();
    let mut found = Vec::new();
    for (index, step) in plan.steps.iter().enumerate() {
        let Some(spec) = registry.spec(&step.tool) else { continue };
        for (name, value) in &step.args {
            let Some(text) = value.as_str() else { continue };
            if !references_in(value).is_empty() || goal.contains(&text.to_lowercase()) {
                continue;
            }
            let Some(parameter) = spec.args_schema["properties"].get(name) else { continue };
            if let Some(fallback) = fallback_values(parameter).into_iter().find(|f| f.eq_ignore_ascii_case(text)) {
                found.push(Suspect { step: index, parameter: name.clone(), fallback });
            }
        }
    }
    found
}

/// A description without its sentences on no value being given (the plan is written again without them).
pub fn without_fallbacks(description: &str) -> String {
    let kept: Vec<&str> = sentences(description)
        .into_iter()
        .filter(|s| !speaks_of_no_value(s))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    match kept.is_empty() {
        true => String::new(),
        false => format!("{}.", kept.join(". ")),
    }
}

/// Takes, for each suspect, the value `revised` (the plan written again) passes to the same parameter in a step of
/// the same tool, where it is written like the parameter's own values, is not the value of another argument of that
/// call and names a word of the goal; returns one line and one change for each value taken.
pub fn take_values(
    plan: &mut Plan,
    suspects: &[Suspect],
    revised: &Plan,
    registry: &ToolRegistry,
) -> (Vec<String>, Vec<MendChange>) {
    let (mut lines, mut changes) = (Vec::new(), Vec::new());
    for Suspect { step, parameter, fallback } in suspects {
        let original = &plan.steps[*step];
        let description = registry.spec(&original.tool).map_or("", |spec| parameter_description(spec, parameter));
        let mut shown = quoted(description);
        shown.push(fallback.clone());
        let another_arguments = |value: &str| {
            let other = |(name, v): (&String, &Value)| {
                name != parameter && v.as_str().is_some_and(|v| v.eq_ignore_ascii_case(value))
            };
            original.args.iter().any(other)
        };
        // The value the plan written again passes to this parameter in a step of the same tool (its steps may be
        // laid out otherwise: a lookup dropped, a conversion split in two).
        let taken = revised.steps.iter().filter(|s| s.tool == original.tool).find_map(|again| {
            let value = again.args.get(parameter)?.as_str()?.trim();
            let fits = !value.is_empty()
                && !value.eq_ignore_ascii_case(fallback)
                && written_like(value, &shown)
                && !another_arguments(value)
                && names_a_word_of(value, &plan.goal);
            fits.then(|| value.to_string())
        });
        let Some(value) = taken else { continue };
        let id = original.id.clone();
        lines.push(format!(
            "{id}: {parameter} \"{fallback}\" → \"{value}\" (the description keeps \"{fallback}\" for a user who \
             gives none; the goal names this one)"
        ));
        changes.push(MendChange {
            rule: RULE.into(),
            step: id,
            argument: Some(parameter.clone()),
            before: json!(fallback),
            after: json!(value),
        });
        plan.steps[*step].args.insert(parameter.clone(), json!(value));
    }
    (lines, changes)
}

/// The kind of each character: letters and digits by class, anything else as itself.
fn kinds(text: &str) -> std::collections::BTreeSet<char> {
    text.chars()
        .map(|c| match c {
            c if c.is_alphabetic() => 'a',
            c if c.is_ascii_digit() => '9',
            c => c,
        })
        .collect()
}

/// Whether `value` is written with only the kinds of characters the `shown` values use (letters, digits, each
/// punctuation mark).
fn written_like(value: &str, shown: &[String]) -> bool {
    let allowed: std::collections::BTreeSet<char> = shown.iter().flat_map(|s| kinds(s)).collect();
    kinds(value).is_subset(&allowed)
}

/// `text` with its letters' accents taken off (`São` → `Sao`): the names tools key on (time zones, codes, ids) are
/// mostly written in plain ASCII, and people write them with their accents.
pub fn accents_off(text: &str) -> String {
    use unicode_normalization::char::is_combining_mark;
    use unicode_normalization::UnicodeNormalization;
    text.nfd().filter(|c| !is_combining_mark(*c)).collect()
}

/// The words of a text of three letters or more, accents dropped; with `names`, only those written with a capital
/// (the names a goal gives: "Dubai", "São Paulo", "UTC").
fn words(text: &str, names: bool) -> Vec<String> {
    text.split(|c: char| !c.is_alphabetic())
        .filter(|w| w.chars().count() >= 3 && (!names || w.starts_with(char::is_uppercase)))
        .map(|w| accents_off(w).to_lowercase())
        .collect()
}

/// Whether a word of `value` (`Asia/Sao_Paulo`: asia, sao, paulo) is a name the goal writes ("São Paulo"); a
/// common word ("local" of "local time") is not one.
fn names_a_word_of(value: &str, goal: &str) -> bool {
    let names = words(goal, true);
    words(value, false).iter().any(|w| names.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{Tool, ToolContext, ToolResult};

    /// `convert_time` with the time server's description of its source timezone (never called).
    struct Convert;

    impl Tool for Convert {
        fn name(&self) -> &str {
            "convert_time"
        }
        fn description(&self) -> &str {
            "Convert a time between timezones."
        }
        fn args_schema(&self) -> Value {
            json!({"type": "object", "properties": {"source_timezone": time_parameter(), "time": {"type": "string"}},
                   "required": ["source_timezone", "time"]})
        }
        fn call(&self, _args: &Value, _ctx: &ToolContext) -> ToolResult<Value> {
            unreachable!("the check does not call tools")
        }
    }

    fn time_parameter() -> Value {
        json!({"type": "string", "description": "Source IANA timezone name (e.g., 'America/New_York', \
               'Europe/London'). Use 'Etc/UTC' as local timezone if no source timezone provided by the user."})
    }

    #[test]
    fn a_fallback_is_a_quoted_value_of_a_sentence_on_no_value_given_or_the_default() {
        assert_eq!(fallback_values(&time_parameter()), vec!["Etc/UTC"], "the examples are not fallbacks");
        let unit = json!({"type": "string", "description": "The user's preferred unit. Defaults to \"celsius\".",
                          "default": "kelvin"});
        assert_eq!(fallback_values(&unit), vec!["kelvin", "celsius"], "the apostrophe of user's opens nothing");
        assert!(fallback_values(&json!({"description": "A name such as 'Ann'."})).is_empty());
        assert!(fallback_values(&json!({"type": "integer", "default": 3})).is_empty(), "texts only");
    }

    #[test]
    fn an_answer_is_taken_only_in_the_characters_of_the_parameters_own_values() {
        let shown = quoted("Source IANA timezone name (e.g., 'America/New_York', 'Europe/London').");
        assert!(written_like("Asia/Ho_Chi_Minh", &shown));
        assert!(written_like("UTC", &shown));
        assert!(!written_like("14:15", &shown), "digits and a colon are no timezone's");
        assert!(!written_like("2023-04-15T22:15:00+04:00", &shown));
    }

    #[test]
    fn a_value_names_a_word_of_the_goal_accents_aside() {
        assert!(names_a_word_of("America/Sao_Paulo", "I'll be online at 11 pm São Paulo time."));
        assert!(names_a_word_of("Asia/Dubai", "My flight lands in Dubai at 7:15 PM."));
        assert!(!names_a_word_of("America/New_York", "What time is it right now?"));
        assert!(!names_a_word_of("local", "It lands at 6:40 PM local time."), "a common word is no name");
    }

    #[test]
    fn only_a_fallback_the_goal_does_not_write_is_suspect() {
        let mut registry = ToolRegistry::new();
        registry.register(Convert).unwrap();
        let plan = |goal: &str, zone: &str| {
            Plan::from_json(&format!(
                r#"{{"steps":[{{"id":"s1","tool":"convert_time","args":{{"source_timezone":"{zone}","time":"19:15"}}}}]}}"#
            ))
            .map(|mut p| {
                p.goal = goal.into();
                p
            })
            .unwrap()
        };
        let dubai = suspects(&plan("It is 7:15 PM in Dubai. What time is it in Singapore?", "Etc/UTC"), &registry);
        assert_eq!(dubai, vec![Suspect { step: 0, parameter: "source_timezone".into(), fallback: "Etc/UTC".into() }]);
        assert!(suspects(&plan("Convert 19:15 Etc/UTC to Singapore time.", "Etc/UTC"), &registry).is_empty());
        assert!(suspects(&plan("It is 7:15 PM in Dubai.", "Asia/Dubai"), &registry).is_empty());
    }
}
