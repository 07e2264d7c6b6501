//! Repairing one failed step: the planner rewrites only that step's arguments, from the goal, the results so far,
//! the tool's error and the tool's parameters (descriptions and schema), under the tool's argument grammar; the
//! rest of the plan stays as it was. Also the text that puts a failed step's error and parameters next to it in the
//! replan prompt.

use serde_json::{Map, Value};

use std::time::Instant;

use crate::agent::model_call::chat_candidates;
use crate::agent::plan::Step;
use crate::agent::run::executor::{call_schema, enforce_step_tool, ExecutorCall};
use crate::agent::usage::ModelUsage;
use crate::decode::constraint::ConstraintSpec;
use crate::decode::{Model, Sampling};
use crate::llm::ChatMessage;
use crate::tools::ToolSpec;
use crate::{Error, Result};

/// The system message of a repair.
const REPAIR_SYSTEM: &str = "You repair one failed tool call of a plan. Write the call again as JSON with \
arguments the tool accepts: take the values from the goal and the results so far, and write each in the form its \
parameter's description asks for. Never repeat arguments that already failed.";

/// One line per parameter of the tool: name, type, whether required, description, and the schema's constraints
/// (`format`, `pattern`, `enum`).
pub fn parameters_text(spec: &ToolSpec) -> String {
    let required: Vec<&str> = spec.args_schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = spec.args_schema["properties"].as_object() else { return "(no parameters)".into() };
    properties
        .iter()
        .map(|(name, property)| {
            let kind = property["type"].as_str().unwrap_or("any");
            let need = if required.contains(&name.as_str()) { "required" } else { "optional" };
            let mut line = format!("- {name} ({kind}, {need})");
            if let Some(description) = property["description"].as_str() {
                line.push_str(&format!(": {description}"));
            }
            for key in ["format", "pattern", "enum"] {
                if let Some(value) = property.get(key) {
                    line.push_str(&format!("; {key} {value}"));
                }
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A failed step as the planner sees it: the call, the tool's error, and the tool's parameters and schema.
pub fn failed_step_text(step: &str, spec: &ToolSpec, args: &Map<String, Value>, error: &str) -> String {
    format!(
        "Step {step} called {} with {} and the tool answered: {error}\nThe parameters of {}:\n{}\nIts argument \
         schema: {}",
        spec.name,
        Value::Object(args.clone()),
        spec.name,
        parameters_text(spec),
        spec.args_schema
    )
}

/// What a repair is given: the goal, the failed step and its call, and the results so far.
pub struct RepairRequest<'a> {
    /// The user's goal.
    pub goal: &'a str,
    /// The step that failed (as planned).
    pub step: &'a Step,
    /// Its tool.
    pub spec: &'a ToolSpec,
    /// The arguments it was called with.
    pub args: &'a Map<String, Value>,
    /// What the tool answered.
    pub error: &'a str,
    /// Other argument sets of this tool that failed in the run.
    pub failed_before: &'a [Map<String, Value>],
    /// Earlier steps' results, one line each.
    pub results: &'a [String],
}

/// Has `model` rewrite the failed step's call under the tool's argument grammar, once for each of `samplings`
/// (greedy first; sampled ones are the retries when the greedy call repeats one that failed), side by side from one
/// prefill. Returns the calls that parsed and name the step's tool, in the order of `samplings`, and what they
/// cost; an error where none did (the first candidate's).
pub fn repair_arguments(
    model: &mut Model,
    request: &RepairRequest,
    max_tokens: usize,
    samplings: &[(Sampling, u64)],
) -> Result<(Vec<ExecutorCall>, ModelUsage)> {
    let step = request.step;
    let mut user = format!(
        "Goal: {}\nStep {}: {}\n{}",
        request.goal,
        step.id,
        step.description,
        failed_step_text(&step.id, request.spec, request.args, request.error)
    );
    if !request.failed_before.is_empty() {
        let before: Vec<String> = request.failed_before.iter().map(|a| Value::Object(a.clone()).to_string()).collect();
        user.push_str(&format!("\nArguments that failed before: {}", before.join("; ")));
    }
    if !request.results.is_empty() {
        user.push_str(&format!("\nResults so far:\n{}", request.results.join("\n")));
    }
    user.push_str("\nWrite the corrected call.");
    let messages = [ChatMessage::system(REPAIR_SYSTEM), ChatMessage::user(user)];
    let schema = ConstraintSpec::JsonSchema(call_schema(request.spec));
    let started = Instant::now();
    let outputs = chat_candidates(model, "planner", &messages, Some(&schema), max_tokens, samplings, false)?;
    let mut usage = ModelUsage { tokens_in: 0, tokens_out: 0, ms: 0 };
    let mut calls = Vec::new();
    let mut first_error = None;
    for output in outputs {
        let parsed = output.and_then(|(text, timings)| {
            usage.tokens_in = timings.prompt_tokens;
            usage.tokens_out += timings.generated_tokens;
            let call: ExecutorCall = serde_json::from_str(&text).map_err(|e| {
                Error::Agent(format!("the repair of step '{}' is not valid JSON ({e}): {text}", step.id))
            })?;
            enforce_step_tool(step, &call)?;
            Ok(call)
        });
        match parsed {
            Ok(call) => calls.push(call),
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    usage.ms = started.elapsed().as_millis() as u64;
    match (calls.is_empty(), first_error) {
        (true, Some(e)) => Err(e),
        _ => Ok((calls, usage)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parameters_show_their_descriptions_and_constraints() {
        let spec = ToolSpec {
            name: "convert_time".into(),
            description: "Convert time between timezones".into(),
            args_schema: json!({"type": "object", "required": ["time"], "properties": {
                "time": {"type": "string", "description": "Time to convert in 24-hour format (HH:MM)"},
                "unit": {"type": "string", "enum": ["a", "b"]}}}),
            output_schema: None,
            needs_model: false,
            changes_things: None,
        };
        let text = parameters_text(&spec);
        assert!(text.contains("- time (string, required): Time to convert in 24-hour format (HH:MM)"), "{text}");
        assert!(text.contains("- unit (string, optional); enum [\"a\",\"b\"]"), "{text}");
        let args = json!({"time": "2026-11-29T09:30:00+09:00"}).as_object().cloned().unwrap();
        let failed = failed_step_text("s2", &spec, &args, "Invalid time format. Expected HH:MM");
        assert!(failed.starts_with("Step s2 called convert_time with {\"time\":\"2026-11-29T09:30:00+09:00\"}"));
        assert!(failed.contains("Expected HH:MM") && failed.contains("Its argument schema: {"), "{failed}");
    }
}
