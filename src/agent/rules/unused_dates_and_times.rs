//! Rule `unused-dates-and-times` (mend, general): a date or time the goal writes, and no step passes, goes to the
//! one parameter in the plan whose schema declares that kind of value and that has no value of the goal's: an
//! argument left out, or one filled by an earlier step's result. A parameter takes a time where its schema declares
//! a time form (`format: time`, `HH:MM` in its description, …), a date where it declares a date form, a date and
//! time together where it declares `date-time` or both; the value is written in that form. A parameter that
//! declares no form takes nothing (an earlier version matched the words "date", "day", "time", "hour" in names and
//! descriptions: a word list, gone). Nothing changes where two parameters could take the value, or where the goal
//! writes two values of a kind and leaves both unused: the mistake then has more than one reading.
//!
//! Why: the 1.5B planner leaves out an optional argument the user gave ("Book a table … on 01/15/2024 at 7:00 PM"
//! planned without its `time`), and plans a lookup in place of the user's value ("It's 9:30 in the morning in
//! Tokyo — what time is it in Kolkata?" planned as the current time in Tokyo, converted; the tool then answered
//! about now, not 9:30, or refused the timestamp).

use serde_json::Value;

use super::support::forms::{asked_form, find_moments, read_value, write_as, Moment};
use crate::agent::plan::refs::{parse_reference, references_in};
use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// Which kinds of value a parameter takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Date,
    Time,
    DateTime,
}

fn kind_of(moment: Moment) -> Kind {
    match moment {
        Moment::Date(_) => Kind::Date,
        Moment::Time(_) => Kind::Time,
        Moment::DateTime(..) => Kind::DateTime,
    }
}

/// Whether a string parameter takes moments of `kind`: the form its schema declares.
fn takes(property: &Value, kind: Kind) -> bool {
    let types = property["type"].as_str();
    if types.is_some_and(|t| t != "string") || property.get("enum").is_some() {
        return false;
    }
    let Some(asked) = asked_form(property) else { return false };
    match kind {
        Kind::Date => asked.date.is_some() && asked.time.is_none() && !asked.date_time,
        Kind::Time => asked.time.is_some() && asked.date.is_none() && !asked.date_time,
        Kind::DateTime => asked.date_time || (asked.date.is_some() && asked.time.is_some()),
    }
}

/// Fills the one parameter that takes each unused date or time of the goal; one line per change
/// (`s2: time "$s1.datetime$" → "09:30" (the goal's 9:30 in the morning, unused)`). A step whose result that
/// parameter read and that nothing reads any more is dropped (`s1: get_current_time dropped (…)`): it was planned
/// to stand in for the value the goal gives, and its answer (the current time) would mislead the answer's writer.
pub fn mend_unused_dates_and_times(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    let mut replaced = Vec::new();
    let mut lines = fill_unused(plan, registry, &mut replaced);
    for id in replaced {
        if plan.steps.iter().any(|s| s.dependencies().contains(&id)) {
            continue;
        }
        if let Some(at) = plan.steps.iter().position(|s| s.id == id) {
            let step = plan.steps.remove(at);
            lines.push(format!(
                "{id}: {} dropped (its reader takes the goal's value, and nothing else reads it)",
                step.tool
            ));
        }
    }
    lines
}

/// [`mend_unused_dates_and_times`]'s filling; `replaced` gets the id of each step whose result a filled parameter
/// read before.
fn fill_unused(plan: &mut Plan, registry: &ToolRegistry, replaced: &mut Vec<String>) -> Vec<String> {
    let passed: Vec<Moment> =
        plan.steps.iter().flat_map(|s| s.args.values()).filter_map(|v| v.as_str().and_then(read_value)).collect();
    let unused: Vec<(String, Moment)> =
        find_moments(&plan.goal).into_iter().filter(|(_, m)| !passed.contains(m)).collect();
    let mut lines = Vec::new();
    for (written, moment) in &unused {
        let kind = kind_of(*moment);
        if unused.iter().filter(|(_, m)| kind_of(*m) == kind).count() > 1 {
            continue;
        }
        // (step index, parameter, its property) of every parameter that could take it.
        let mut open = Vec::new();
        for (index, step) in plan.steps.iter().enumerate() {
            let Some(spec) = registry.spec(&step.tool) else { continue };
            let Some(properties) = spec.args_schema["properties"].as_object() else { continue };
            for (name, property) in properties {
                let free = match step.args.get(name) {
                    None => true,
                    Some(Value::String(text)) => parse_reference(text).is_some(),
                    Some(_) => false,
                };
                if free && takes(property, kind) {
                    open.push((index, name.clone(), property.clone()));
                }
            }
        }
        let [(index, name, property)] = open.as_slice() else { continue };
        let value = asked_form(property).and_then(|asked| write_as(*moment, asked)).unwrap_or_else(|| written.clone());
        let step = &mut plan.steps[*index];
        let before = step.args.insert(name.clone(), Value::String(value.clone()));
        // The step no longer waits on a step whose result it stopped reading (else the dependencies rule would
        // read the goal's value as a guess standing in for that result).
        if let Some(reference) = before.as_ref().and_then(Value::as_str).and_then(parse_reference) {
            let still_read = step.args.values().flat_map(references_in).any(|r| r.step == reference.step);
            if !still_read {
                step.depends_on.retain(|id| *id != reference.step);
            }
            replaced.push(reference.step.clone());
        }
        let before = before.map_or("left out".to_string(), |v| v.to_string());
        lines.push(format!("{}: {name} {before} → {value:?} (the goal's {written}, unused)", step.id));
    }
    lines
}

/// Rule `unused-dates-and-times` (mend, general).
pub struct UnusedDatesAndTimes;

impl super::Rule for UnusedDatesAndTimes {
    fn about(&self) -> super::About {
        super::About {
            name: "unused-dates-and-times",
            stage: super::Stage::Mend,
            profile: super::Profile::General,
            keys_on: "a date or time the goal writes that no step passes: to the one parameter whose schema declares that kind of form, left out or filled by an earlier result",
        }
    }

    fn mend(&self, plan: &mut Plan, tools: &ToolRegistry, _seen: &str) -> Vec<String> {
        mend_unused_dates_and_times(plan, tools)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{Tool, ToolContext, ToolResult};
    use serde_json::json;

    /// A tool with these argument properties (never called).
    struct Named(&'static str, Value);

    impl Tool for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            "A tool."
        }
        fn args_schema(&self) -> Value {
            json!({"type": "object", "properties": self.1})
        }
        fn call(&self, _args: &Value, _ctx: &ToolContext) -> ToolResult<Value> {
            unreachable!("mends do not call tools")
        }
    }

    fn time_tools() -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        registry.register(Named("now", json!({"timezone": {"type": "string"}}))).unwrap();
        let convert = json!({
            "source_timezone": {"type": "string", "description": "Source IANA timezone name"},
            "time": {"type": "string", "description": "Time to convert in 24-hour format (HH:MM)"},
            "target_timezone": {"type": "string", "description": "Target IANA timezone name"},
        });
        registry.register(Named("convert", convert)).unwrap();
        registry
    }

    #[test]
    fn the_goals_time_replaces_a_lookup_in_the_form_the_schema_asks_for() {
        let mut p = Plan::for_goal(
            "It's 9:30 in the morning in Tokyo — what time is it in Kolkata?",
            json!([
                {"id": "s1", "tool": "now", "args": {"timezone": "Asia/Tokyo"}},
                {"id": "s2", "tool": "convert", "args": {"source_timezone": "Asia/Tokyo", "time": "$s1.datetime$",
                 "target_timezone": "Asia/Kolkata"}, "depends_on": ["s1"]},
            ]),
        );
        let mut kept = p.clone();
        kept.steps.push(
            serde_json::from_value(json!({"id": "s3", "tool": "now", "args": {"timezone": "$s1.timezone$"}})).unwrap(),
        );
        let lines = mend_unused_dates_and_times(&mut p, &time_tools());
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(p.steps.len(), 1, "s1 stood in for the goal's time and nothing reads it now: {lines:?}");
        assert_eq!((p.steps[0].id.as_str(), &p.steps[0].args["time"]), ("s2", &json!("09:30")));
        assert!(p.steps[0].depends_on.is_empty(), "s2 no longer reads s1: {:?}", p.steps[0].depends_on);
        assert!(lines[1].starts_with("s1: now dropped"), "{lines:?}");
        // Once passed, it is not unused: a second run changes nothing.
        assert!(mend_unused_dates_and_times(&mut p, &time_tools()).is_empty());
        // A step that another step still reads stays.
        let lines = mend_unused_dates_and_times(&mut kept, &time_tools());
        assert_eq!((lines.len(), kept.steps.len()), (1, 3), "{lines:?}");
    }

    #[test]
    fn a_left_out_time_goes_only_where_a_schema_declares_its_form() {
        let mut registry = ToolRegistry::new();
        let book = json!({
            "day": {"type": "string", "description": "Day of the booking as YYYY-MM-DD"},
            "time": {"type": "string", "description": "Time of the booking"},
            "guests": {"type": "integer"},
        });
        registry.register(Named("book", book)).unwrap();
        let goal = "Book a table for 4 people on 01/15/2024 at 7:00 PM.";
        let mut p =
            Plan::for_goal(goal, json!([{"id": "s1", "tool": "book", "args": {"day": "2024-01-15", "guests": 4}}]));
        let lines = mend_unused_dates_and_times(&mut p, &registry);
        assert!(lines.is_empty(), "`time` declares no form, so nothing says it takes the goal's 7:00 PM: {lines:?}");
        assert_eq!(p.steps[0].args.get("time"), None);
        assert_eq!(p.steps[0].args["day"], "2024-01-15", "the date was passed: it stays");
        // Declared as 24-hour `HH:MM`, it takes the goal's time in that form.
        let mut registry = ToolRegistry::new();
        let book = json!({"time": {"type": "string", "description": "Time of the booking, HH:MM"}, "guests": {"type": "integer"}});
        registry.register(Named("book", book)).unwrap();
        let mut p = Plan::for_goal(goal, json!([{"id": "s1", "tool": "book", "args": {"guests": 4}}]));
        mend_unused_dates_and_times(&mut p, &registry);
        assert_eq!(p.steps[0].args["time"], "19:00");
    }

    #[test]
    fn nothing_changes_where_the_value_has_two_readings() {
        // Two parameters could take the time.
        let mut registry = ToolRegistry::new();
        let hh_mm = json!({"type": "string", "description": "HH:MM"});
        let props = json!({"start_time": hh_mm, "end_time": hh_mm});
        registry.register(Named("meet", props)).unwrap();
        let mut p = Plan::for_goal("Meet at 10:00", json!([{"id": "s1", "tool": "meet", "args": {}}]));
        assert!(mend_unused_dates_and_times(&mut p, &registry).is_empty());
        // Two unused times of the goal, one parameter.
        let mut p = Plan::for_goal("Meet at 10:00 or 11:00", json!([{"id": "s1", "tool": "convert", "args": {}}]));
        assert!(mend_unused_dates_and_times(&mut p, &time_tools()).is_empty());
        // A value of the planner's own (not a reference) is not replaced.
        let mut p = Plan::for_goal(
            "At 9:30 in Tokyo, what time is it in Kolkata?",
            json!([{"id": "s1", "tool": "convert", "args": {"time": "10:00"}}, {"id": "s2", "tool": "now", "args": {}}]),
        );
        assert!(mend_unused_dates_and_times(&mut p, &time_tools()).is_empty());
    }
}
