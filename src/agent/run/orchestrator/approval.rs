//! Approval: who approves plans and tool calls (`--approve destructive|plan|steps`), and how decisions are logged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::{Agent, Stop};
use crate::agent::log::events::{Event, StopReason};
use crate::agent::plan::{Plan, Step};
pub use crate::settings::Approval;
use crate::{Error, Result};

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

/// Where no one can be asked while a run runs (a command with no terminal, a run over HTTP), a decision it needs
/// pauses it: the flag its log closes on is set (nothing more is logged, so the run resumes exactly there), what it
/// waits for is kept, and the approver's error stops the run.
#[derive(Debug, Clone, Default)]
pub struct Pause {
    /// Set when the run pauses; the run's log is closed on it (`EventLog::close_when`).
    pub stop: Arc<AtomicBool>,
    waits_for: Option<String>,
}

impl Pause {
    /// A pause that sets `stop` (a flag the caller already watches).
    pub fn on(stop: Arc<AtomicBool>) -> Self {
        Self { stop, waits_for: None }
    }

    /// Pauses the run on `what` (`plan v2`, `step s3, a call of …`): the error for the approver to return.
    pub fn pause(&mut self, what: String) -> Error {
        self.stop.store(true, Ordering::SeqCst);
        let error = Error::Interrupted(format!("{what} waits for approval"));
        self.waits_for = Some(what);
        error
    }

    /// What the paused run waits for; `None` while it has not paused.
    pub fn waits_for(&self) -> Option<&str> {
        self.waits_for.as_deref()
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
