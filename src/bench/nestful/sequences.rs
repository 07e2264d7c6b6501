//! NESTFUL call sequences to and from [`Plan`]s.

use super::data::{Call, VAR_RESULT};
use crate::agent::{Plan, Step};

/// Why a call sequence cannot become a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    /// A call (other than `var_result`) has no label to become its step id.
    #[error("call {position} ('{name}') has no label to become a step id")]
    MissingLabel {
        /// The call's position in the sequence.
        position: usize,
        /// Its function name.
        name: String,
    },
    /// Two calls share a label, so step ids would not be unique.
    #[error("the label '{label}' is used by more than one call")]
    DuplicateLabel {
        /// The label.
        label: String,
    },
}

/// A plan for `goal` from a call sequence: each call becomes a step in order, its label (without `$`) the step id,
/// its name the tool, its arguments the arguments unchanged (NESTFUL references are our references). `var_result`
/// is left out: it names the answer and is no tool call (the scorer drops it too). `depends_on` stays empty because
/// references imply dependencies.
pub fn calls_to_plan(goal: &str, calls: &[Call]) -> Result<Plan, ConversionError> {
    let mut steps: Vec<Step> = Vec::with_capacity(calls.len());
    for (position, call) in calls.iter().enumerate().filter(|(_, c)| c.name != VAR_RESULT) {
        let id = call
            .label
            .as_deref()
            .map(|l| l.replace('$', ""))
            .filter(|l| !l.is_empty())
            .ok_or_else(|| ConversionError::MissingLabel { position, name: call.name.clone() })?;
        if steps.iter().any(|s| s.id == id) {
            return Err(ConversionError::DuplicateLabel { label: id });
        }
        steps.push(Step {
            id,
            description: String::new(),
            tool: call.name.clone(),
            args: call.arguments.clone(),
            depends_on: Vec::new(),
        });
    }
    Ok(Plan { goal: goal.to_string(), version: 1, steps })
}

/// The call sequence of a plan, in step order: the tool is the name, the step id the label, the arguments as they
/// are. Descriptions and explicit `depends_on` have no NESTFUL counterpart and are not carried.
pub fn plan_to_calls(plan: &Plan) -> Vec<Call> {
    plan.steps
        .iter()
        .map(|s| Call { name: s.tool.clone(), arguments: s.args.clone(), label: Some(s.id.clone()) })
        .collect()
}
