//! Rule `dates-and-times` (mend, general): a date or time the plan passes in another form than the one its
//! parameter's schema declares (`format` `date`/`time`/`date-time`, a `pattern`, or a form its description shows,
//! like `HH:MM` or `MM/DD/YYYY`) is written in that form by code (`9:30 AM` → `09:30` for "24-hour format
//! (HH:MM)", `01/15/2024` → `2024-01-15` for `format: date`; a `pattern` takes the first common form it accepts).
//! Where the schema declares no form, the value is left as the plan writes it: a correct `2024-01-15` for a
//! parameter that says only "ISO 8601" is not rewritten to the goal's `01/15/2024` (an earlier version did).
//!
//! Why: models fail to reformat the values they copy where a tool asks (a real MCP time server answers "Expected
//! HH:MM" to `9:30 AM`). Code reads both forms without guessing.

use serde_json::Value;

use super::support::forms::{asked_form, every_form, find_moments, read_value, write_as};
use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// Rewrites top-level string arguments that write a date or time in the form the parameter's schema declares; returns one line per change (`s1: time "9:30 AM" → "09:30" (the parameter asks for HH:MM)`).
pub fn mend_dates_and_times(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    let in_goal = find_moments(&plan.goal);
    let mut lines = Vec::new();
    for step in &mut plan.steps {
        let Some(spec) = registry.spec(&step.tool) else { continue };
        for (name, value) in step.args.iter_mut() {
            let Some(text) = value.as_str() else { continue };
            let Some(moment) = read_value(text) else { continue };
            let property = &spec.args_schema["properties"][name.as_str()];
            if property.get("enum").is_some() {
                continue;
            }
            let as_written = in_goal.iter().find(|(_, m)| *m == moment).map(|(w, _)| w.clone());
            let (new, why) = if let Some(asked) = asked_form(property) {
                match write_as(moment, asked) {
                    Some(new) => (new, "the parameter's schema asks for this form".to_string()),
                    None => continue,
                }
            } else if let Some(pattern) = property.get("pattern").and_then(Value::as_str) {
                if fits(property, text) {
                    continue;
                }
                let mut candidates: Vec<String> = as_written.iter().cloned().collect();
                candidates.extend(every_form(moment));
                match candidates.into_iter().find(|c| fits(property, c)) {
                    Some(new) => (new, format!("the parameter's pattern {pattern} takes this form")),
                    None => continue,
                }
            } else {
                continue;
            };
            if new != text {
                lines.push(format!("{}: {name} {value} → {:?} ({why})", step.id, new));
                *value = Value::String(new);
            }
        }
    }
    lines
}

/// Whether `text` is valid for the parameter's schema (its pattern; formats are not checked by default).
fn fits(property: &Value, text: &str) -> bool {
    // A schema the validator cannot read (a broken pattern) fits nothing: the value is left as written.
    jsonschema::validator_for(property).is_ok_and(|v| v.is_valid(&Value::String(text.to_string())))
}

/// Rule `dates-and-times` (mend, general).
pub struct DatesAndTimes;

impl super::Rule for DatesAndTimes {
    fn about(&self) -> super::About {
        super::About {
            name: "dates-and-times",
            stage: super::Stage::Mend,
            profile: super::Profile::General,
            keys_on: "a date or time passed in another form than its schema declares (format, pattern, a form shown as HH:MM or YYYY-MM-DD): written in that form",
        }
    }

    fn mend(&self, plan: &mut Plan, tools: &ToolRegistry, _seen: &str) -> Vec<String> {
        mend_dates_and_times(plan, tools)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{Tool, ToolContext, ToolResult};
    use serde_json::json;

    /// A tool with these argument properties (never called).
    struct Book(Value);

    impl Tool for Book {
        fn name(&self) -> &str {
            "book"
        }
        fn description(&self) -> &str {
            "Books something."
        }
        fn args_schema(&self) -> Value {
            json!({"type": "object", "properties": self.0})
        }
        fn call(&self, _args: &Value, _ctx: &ToolContext) -> ToolResult<Value> {
            unreachable!("mends do not call tools")
        }
    }

    fn registry(properties: Value) -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        registry.register(Book(properties)).unwrap();
        registry
    }

    fn plan(goal: &str, args: Value) -> Plan {
        let mut plan =
            Plan::from_json(&json!({"steps": [{"id": "s1", "tool": "book", "args": args}]}).to_string()).unwrap();
        plan.goal = goal.into();
        plan
    }

    #[test]
    fn a_form_the_schema_asks_for_is_written_by_code() {
        let tools = registry(json!({"time": {"type": "string", "description": "Time in 24-hour format (HH:MM)"}}));
        let mut p = plan("It's 9:30 in the morning in Tokyo", json!({"time": "9:30"}));
        let lines = mend_dates_and_times(&mut p, &tools);
        assert_eq!(p.steps[0].args["time"], "09:30", "{lines:?}");
        let mut p = plan("The webinar is at 6:45 pm", json!({"time": "6:45 PM"}));
        mend_dates_and_times(&mut p, &tools);
        assert_eq!(p.steps[0].args["time"], "18:45");
        let dates = registry(json!({"day": {"type": "string", "format": "date"}}));
        let mut p = plan("Book it for 01/15/2024", json!({"day": "01/15/2024"}));
        mend_dates_and_times(&mut p, &dates);
        assert_eq!(p.steps[0].args["day"], "2024-01-15");
    }

    #[test]
    fn without_a_declared_form_the_plans_value_is_left_as_written() {
        // "ISO 8601" in words declares no form the rule reads: a correct 2024-01-15 is not rewritten to the goal's
        // 01/15/2024, nor 07:00 to 7:00 AM.
        let tools =
            registry(json!({"day": {"type": "string", "description": "The day, ISO 8601"}, "at": {"type": "string"}}));
        let mut p = plan("Book a table on 01/15/2024 at 7:00 AM", json!({"day": "2024-01-15", "at": "07:00"}));
        let lines = mend_dates_and_times(&mut p, &tools);
        assert!(lines.is_empty(), "{lines:?}");
        assert_eq!(p.steps[0].args["day"], "2024-01-15");
        assert_eq!(p.steps[0].args["at"], "07:00");
    }

    #[test]
    fn a_pattern_takes_the_first_form_it_accepts() {
        let tools = registry(json!({"day": {"type": "string", "pattern": "^\\d{2}\\.\\d{2}\\.\\d{4}$"}}));
        let mut p = plan("Book it for January 15, 2024", json!({"day": "2024-01-15"}));
        mend_dates_and_times(&mut p, &tools);
        assert_eq!(p.steps[0].args["day"], "15.01.2024");
        // A value that already fits stays.
        let mut p = plan("Book it for 15.01.2024", json!({"day": "15.01.2024"}));
        assert!(mend_dates_and_times(&mut p, &tools).is_empty());
    }
}
