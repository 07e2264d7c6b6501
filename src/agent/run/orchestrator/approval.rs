//! Approval: who approves plans and tool calls (`--approve destructive|plan|steps`), and how decisions are logged.

use serde_json::{Map, Value};

use super::{Agent, Stop};
use crate::agent::log::events::{Event, StopReason};
use crate::agent::plan::{Plan, Step};
pub use crate::settings::Approval;
use crate::Result;

/// A human's verdict on a plan.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanDecision {
    /// Run it.
    Approve,
    /// Run this edited plan instead (it is validated first).
    Edit(Plan),
    /// Run nothing.
    Reject,
}

/// Who approves plans and tool calls when the run asks (`--approve plan|steps`).
pub trait Approver {
    /// Decides on a plan before anything runs.
    fn review_plan(&mut self, plan: &Plan) -> Result<PlanDecision>;
    /// Decides on one tool call with its resolved arguments.
    fn review_step(&mut self, step: &Step, args: &Map<String, Value>) -> Result<bool>;
    /// How decisions are recorded: `user`, or `--yes` for automatic approval.
    fn name(&self) -> &str;
}

/// Approves everything (`--yes`).
#[derive(Debug, Default, Clone, Copy)]
pub struct AutoApprove;

impl Approver for AutoApprove {
    fn review_plan(&mut self, _plan: &Plan) -> Result<PlanDecision> {
        Ok(PlanDecision::Approve)
    }
    fn review_step(&mut self, _step: &Step, _args: &Map<String, Value>) -> Result<bool> {
        Ok(true)
    }
    fn name(&self) -> &str {
        "--yes"
    }
}

impl Agent<'_> {
    pub(super) fn record_approval(&mut self, version: u32, decision: &str) -> Result<()> {
        let by = self.approver.name().to_string();
        self.emit(Event::PlanApproval { version, decision: decision.into(), by })
    }

    /// Whether a call of `tool` is asked about first: every call with `--approve steps`; with `destructive` (the
    /// default of `tandem run`), a call of a tool whose server marks it destructive.
    pub(super) fn asks_before(&self, tool: &str) -> bool {
        match self.settings.approve {
            Approval::Steps => true,
            Approval::Destructive => self.registry.get(tool).is_some_and(|t| t.destructive()),
            Approval::None | Approval::Plan => false,
        }
    }

    /// Asks for approval of one tool call; a refusal stops the run.
    pub(super) fn approve_step(
        &mut self,
        version: u32,
        step: &Step,
        args: &Map<String, Value>,
    ) -> Result<Option<Stop>> {
        let approved = self.approver.review_step(step, args)?;
        let decision = if approved { "approved" } else { "rejected" };
        self.emit(Event::StepApproval { version, step: step.id.clone(), decision: decision.into() })?;
        Ok((!approved).then(|| {
            Stop::new(StopReason::Rejected, format!("the call of {} in step {} was rejected", step.tool, step.id))
        }))
    }
}
