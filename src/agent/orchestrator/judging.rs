//! Judging observations (empty or off-schema output fails), logging finished steps, and turning outputs into
//! text and the run's answer.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::Agent;
use crate::agent::events::Event;
use crate::agent::plan::{Plan, Step};
use crate::agent::refs::value_text;
use crate::agent::runs::RunState;
use crate::tools::ToolError;
use crate::Result;

impl Agent<'_> {
    /// Judges an observation: empty output, or output that breaks the tool's declared schema, is a failure.
    pub(super) fn judge(&self, tool: &str, output: Value) -> std::result::Result<Value, ToolError> {
        let empty = match &output {
            Value::Null => true,
            Value::String(s) => s.trim().is_empty(),
            Value::Object(map) => {
                map.is_empty() || map.values().all(|v| v.as_str().is_some_and(|s| s.trim().is_empty()))
            }
            Value::Array(items) => items.is_empty(),
            _ => false,
        };
        if empty {
            return Err(ToolError::Refused {
                tool: tool.into(),
                reason: format!("it returned empty output ({output})"),
            });
        }
        let problems = self.registry.output_errors(tool, &output)?;
        if !problems.is_empty() {
            return Err(ToolError::Refused {
                tool: tool.into(),
                reason: format!("its output does not match its declared schema: {}", problems.join("; ")),
            });
        }
        Ok(output)
    }

    pub(super) fn finish_step(
        &mut self,
        version: u32,
        step: &Step,
        args: Map<String, Value>,
        result: std::result::Result<Value, String>,
        ms: u64,
        via: &str,
    ) -> Result<()> {
        let (output, error) = match result {
            Ok(output) => (Some(output), None),
            Err(error) => (None, Some(error)),
        };
        self.emit(Event::StepFinished {
            version,
            step: step.id.clone(),
            tool: step.tool.clone(),
            args,
            output,
            error,
            ms,
            via: via.into(),
        })
    }
}

/// The answer from the outputs: the output of the step(s) nothing else depends on, as text.
pub fn final_answer(plan: &Plan, state: &RunState) -> String {
    let needed: HashSet<String> = plan.steps.iter().flat_map(|s| s.dependencies()).collect();
    let sinks: Vec<&Step> = plan.steps.iter().filter(|s| !needed.contains(&s.id)).collect();
    let text_of = |step: &Step| state.outputs.get(&step.id).map(output_text).unwrap_or_default();
    match sinks.as_slice() {
        [one] => text_of(one),
        many => many.iter().map(|s| format!("{}: {}", s.id, text_of(s))).collect::<Vec<_>>().join("\n"),
    }
}

/// An output as text: a single field's value, else its `text`, `result` or `content` field, else compact JSON.
pub(super) fn output_text(output: &Value) -> String {
    match output {
        Value::Object(map) if map.len() == 1 => value_text(map.values().next().expect("one value")),
        Value::Object(map) => match map.get("text").or_else(|| map.get("result")).or_else(|| map.get("content")) {
            Some(value) => value_text(value),
            None => value_text(output),
        },
        other => value_text(other),
    }
}
