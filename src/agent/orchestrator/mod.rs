//! The orchestrator: plans, asks for approval, runs ready steps in dependency order (tool steps concurrently),
//! judges each observation, replans with the execution record on failure, and stops for an explicit reason —
//! logging every event to the run's `events.jsonl` as it goes, so a run can be audited and resumed.
//!
//! This module holds the run's types and its main loop; [`approval`] asks for approval, `planning` runs
//! plan-ahead mode (planning and replanning), `step_mode` proposes one step at a time, `execution` runs ready
//! steps, and `judging` judges observations and writes the answer.

mod approval;
mod execution;
mod judging;
mod planning;
mod step_mode;

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

pub use self::approval::{Approval, Approver, AutoApprove, PlanDecision};
pub use self::judging::final_answer;
use super::events::{Event, EventLog, Record, RunSettings, StopReason};
use super::models::ModelSource;
use super::plan::Plan;
use super::runs::RunState;
pub use crate::settings::Mode;
use crate::tools::retrieval::planning_selection;
use crate::tools::{ToolContext, ToolRegistry};
use crate::Result;

/// Sees every event as it is logged (the terminal's live view).
pub trait Observer {
    /// Called after the event is on disk.
    fn on_event(&self, record: &Record);
}

/// An observer that shows nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl Observer for NoObserver {
    fn on_event(&self, _record: &Record) {}
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Why it stopped.
    pub stop: StopReason,
    /// In words.
    pub detail: String,
    /// The answer, when it got that far.
    pub answer: Option<String>,
    /// Everything the log says, replayed.
    pub state: RunState,
    /// Wall time of this invocation.
    pub wall: Duration,
}

/// A stop decided during the run.
struct Stop {
    reason: StopReason,
    detail: String,
}

impl Stop {
    fn new(reason: StopReason, detail: impl Into<String>) -> Self {
        Self { reason, detail: detail.into() }
    }
}

/// What running a plan came to.
enum Execution {
    /// Every step finished.
    Complete,
    /// A step failed; the text is the execution record for the planner.
    Failed(String),
    /// The run must stop.
    Stopped(Stop),
}

/// A step ready to run, after its references were resolved.
enum Prepared {
    /// Arguments fit the tool: call it, no model.
    Direct(Map<String, Value>),
    /// The same call already succeeded in this run.
    Cached(Map<String, Value>, Value),
    /// An `llm` step: the executor writes text for this prompt.
    Text(Map<String, Value>),
    /// Arguments do not fit (the problem in words): the executor fills them.
    Fill(Map<String, Value>, String),
}

/// One run: the registry and policy, the models, the log, and the budgets.
pub struct Agent<'a> {
    /// Tools the plan may call.
    pub registry: &'a ToolRegistry,
    /// Workspace and policy for tool calls.
    pub context: &'a ToolContext,
    /// Planner and executor.
    pub models: &'a mut dyn ModelSource,
    /// Who approves (consulted only when the settings ask for approval).
    pub approver: &'a mut dyn Approver,
    /// Live view.
    pub observer: &'a dyn Observer,
    /// The tools the planner sees when retrieval chose some (`--tools-top-k`); `None`: all of `registry`.
    planning: Option<ToolRegistry>,
    log: EventLog,
    state: RunState,
    settings: RunSettings,
    started: Instant,
}

impl<'a> Agent<'a> {
    /// Starts a new run in `log` (a fresh `events.jsonl`).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        goal: &str,
        settings: RunSettings,
        log: EventLog,
        registry: &'a ToolRegistry,
        context: &'a ToolContext,
        models: &'a mut dyn ModelSource,
        approver: &'a mut dyn Approver,
        observer: &'a dyn Observer,
    ) -> Result<Self> {
        let mut agent = Self {
            registry,
            context,
            models,
            approver,
            observer,
            planning: None,
            log,
            state: RunState::default(),
            settings: settings.clone(),
            started: Instant::now(),
        };
        let top_k = settings.tools_top_k;
        agent.emit(Event::RunStarted { goal: goal.to_string(), settings })?;
        if let Some(selection) = planning_selection(goal, registry, top_k)? {
            tracing::debug!(tools = ?selection.tools, "tool retrieval");
            agent.emit(Event::ToolsSelected { top_k, offered: registry.len(), tools: selection.tools })?;
            agent.planning = Some(selection.registry);
        }
        Ok(agent)
    }

    /// Picks up a run from its log: completed steps of the current plan are not run again.
    #[allow(clippy::too_many_arguments)]
    pub fn resume(
        log: EventLog,
        records: &[Record],
        registry: &'a ToolRegistry,
        context: &'a ToolContext,
        models: &'a mut dyn ModelSource,
        approver: &'a mut dyn Approver,
        observer: &'a dyn Observer,
    ) -> Result<Self> {
        let state = RunState::replay(records);
        let settings = state
            .settings
            .clone()
            .ok_or_else(|| crate::Error::Run("the run's log has no settings (no run_started event)".into()))?;
        // The same goal, catalogue and k select the same tools the run started with.
        let planning = planning_selection(&state.goal, registry, settings.tools_top_k)?.map(|s| s.registry);
        let mut agent = Self {
            registry,
            context,
            models,
            approver,
            observer,
            planning,
            log,
            state,
            settings,
            started: Instant::now(),
        };
        let mut completed: Vec<String> = agent.state.outputs.keys().cloned().collect();
        completed.sort();
        agent.emit(Event::Resumed { completed })?;
        Ok(agent)
    }

    /// The run's state as logged so far.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// Runs to the end: from a given plan, from the plan in the log (resume), or from the planner.
    pub fn run(mut self, given_plan: Option<Plan>) -> Result<RunOutcome> {
        let ended = match self.settings.mode {
            Mode::PlanAhead => self.plan_ahead(given_plan),
            Mode::Step => self.step_mode(given_plan),
        };
        // Even an error leaves a closed log behind: the reason is the last event.
        let stop = match ended {
            Ok(stop) => stop,
            Err(e) => Stop::new(StopReason::Error, e.to_string()),
        };
        self.emit(Event::RunFinished { stop: stop.reason, detail: stop.detail.clone() })?;
        Ok(RunOutcome {
            stop: stop.reason,
            detail: stop.detail,
            answer: self.state.answer.clone(),
            state: self.state,
            wall: self.started.elapsed(),
        })
    }

    fn emit(&mut self, event: Event) -> Result<()> {
        let record = self.log.append(event)?;
        self.state.apply(&record);
        self.observer.on_event(&record);
        Ok(())
    }

    fn log_model_loads(&mut self) -> Result<()> {
        for event in self.models.take_load_events() {
            self.emit(event)?;
        }
        Ok(())
    }

    /// A budget that is spent, if any; `more_steps` is how many step executions are about to start.
    fn spent_budget(&self, more_steps: usize) -> Option<Stop> {
        let s = &self.settings.budgets;
        if self.state.steps_run + more_steps > s.max_steps {
            return Some(Stop::new(
                StopReason::Budget,
                format!("step budget spent ({} steps, --max-steps)", s.max_steps),
            ));
        }
        if self.state.tokens_out() >= s.max_tokens {
            return Some(Stop::new(
                StopReason::Budget,
                format!("token budget spent ({} of {} tokens, --max-tokens)", self.state.tokens_out(), s.max_tokens),
            ));
        }
        if self.started.elapsed() >= Duration::from_secs(s.max_seconds) {
            return Some(Stop::new(StopReason::Budget, format!("time budget spent ({} s, --max-time)", s.max_seconds)));
        }
        None
    }
}
