//! The plan artifact: a goal and steps, each a call of one tool with arguments and dependencies.
//!
//! Step ids are free-form when a plan is read (NESTFUL uses `var1`, `var2`, …), but the planner's grammar writes
//! `s1`, `s2`, … in order (see [`schema`]). Dependencies point to earlier steps; references in arguments
//! (see [`refs`]) count as dependencies.

pub mod catalogue;
pub mod issues;
pub mod pipeline;
pub mod planner;
pub mod refs;
pub mod schema;
pub mod search;
pub mod tool_lines;
pub mod validate;

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use crate::agent::plan::issues::PlanError;
use crate::agent::plan::refs::{references_in, resolve_value_with, Reference, Resolution};
use crate::tools::ToolRegistry;

/// A plan: what the planner writes, versioned when revised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The user's goal (the planner does not write it; the orchestrator fills it in).
    #[serde(default)]
    pub goal: String,
    /// Revision number, 1 for the first plan (the orchestrator sets it; the planner need not write it).
    #[serde(default = "first_version")]
    pub version: u32,
    /// Steps in the order written.
    pub steps: Vec<Step>,
}

fn first_version() -> u32 {
    1
}

/// One step: a call of one tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Unique id (`s1`, `s2`, … from the planner; any name of letters, digits, `_`, `-` is accepted).
    pub id: String,
    /// What the step is for, in words.
    #[serde(default)]
    pub description: String,
    /// The tool's name.
    pub tool: String,
    /// Arguments; strings may hold references such as `"$s1.result$"`.
    #[serde(default)]
    pub args: Map<String, Value>,
    /// Ids of steps that must finish first (references add theirs implicitly).
    #[serde(default)]
    pub depends_on: Vec<String>,
}

impl Step {
    /// The references in the arguments, in document order.
    pub fn references(&self) -> Vec<Reference> {
        refs_in(self)
    }

    /// Steps this one waits for: `depends_on`, then every referenced step not already listed.
    pub fn dependencies(&self) -> Vec<String> {
        let mut deps: Vec<String> = Vec::with_capacity(self.depends_on.len());
        for dep in self.depends_on.iter().cloned().chain(self.references().into_iter().map(|r| r.step)) {
            if !deps.contains(&dep) {
                deps.push(dep);
            }
        }
        deps
    }
}

impl Plan {
    /// A plan for `goal` of these steps (JSON), for the unit tests of the checks and mends.
    #[cfg(test)]
    pub(crate) fn for_goal(goal: &str, steps: serde_json::Value) -> Self {
        let mut plan = Self::from_json(&serde_json::json!({ "steps": steps }).to_string()).unwrap();
        plan.goal = goal.into();
        plan
    }

    /// Parses a plan from JSON text.
    pub fn from_json(text: &str) -> Result<Self, PlanError> {
        Ok(serde_json::from_str(text)?)
    }

    /// The step with that id.
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id == id)
    }

    /// Validates against the registry and turns any problems into [`PlanError::Invalid`].
    pub fn check(&self, registry: &ToolRegistry) -> Result<(), PlanError> {
        let issues = self.validate(registry);
        if issues.is_empty() {
            Ok(())
        } else {
            Err(PlanError::Invalid(issues))
        }
    }

    /// Steps not in `done` whose dependencies (explicit and implied by references) are all in `done`, in plan
    /// order. They may run concurrently. A step whose dependency does not exist never becomes ready: validate
    /// first.
    pub fn ready_steps(&self, done: &HashSet<String>) -> Vec<&Step> {
        self.steps
            .iter()
            .filter(|s| !done.contains(&s.id) && s.dependencies().iter().all(|d| done.contains(d)))
            .collect()
    }

    /// Copies references into `depends_on`, so the stored plan shows every dependency explicitly.
    pub fn with_explicit_dependencies(mut self) -> Self {
        for step in &mut self.steps {
            step.depends_on = step.dependencies();
        }
        self
    }
}

/// Every reference in a step's arguments, in document order.
pub fn refs_in(step: &Step) -> Vec<Reference> {
    step.args.values().flat_map(references_in).collect()
}

/// The step's arguments with every reference replaced by the referenced output (`outputs` maps step ids to
/// their outputs). Whole-string references keep the value's JSON type; embedded ones become text; `$$` becomes
/// `$`.
pub fn resolve_args(step: &Step, outputs: &HashMap<String, Value>) -> Result<Map<String, Value>, PlanError> {
    resolve_args_with(step, outputs, &mut Resolution::default())
}

/// [`resolve_args`], resolving as `how` says (see [`Resolution`]) and noting there what it did.
pub fn resolve_args_with(
    step: &Step,
    outputs: &HashMap<String, Value>,
    how: &mut Resolution,
) -> Result<Map<String, Value>, PlanError> {
    step.args.iter().map(|(k, v)| Ok((k.clone(), resolve_value_with(&step.id, v, outputs, how)?))).collect()
}
