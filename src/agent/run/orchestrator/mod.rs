//! The orchestrator: plans, asks for approval, runs ready steps in dependency order (tool steps concurrently),
//! judges each observation, replans with the execution record on failure, and stops for an explicit reason —
//! logging every event to the run's `events.jsonl` as it goes, so a run can be audited and resumed.
//!
//! This module holds the run's types and its main loop; [`approval`] asks for approval, `planning` runs
//! plan-ahead mode (planning and replanning), `step_mode` proposes one step at a time, `execution` runs ready
//! steps, `repair` rewrites a failed step's arguments and refuses calls that already failed, and `judging` judges
//! observations and writes the answer.

mod approval;
mod execution;
mod judging;
mod planning;
mod readings;
mod repair;
mod step_mode;

use std::cell::RefCell;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

pub use self::approval::{Approval, Approver, AutoApprove, Pause, PlanDecision};
pub use self::judging::final_answer;
use crate::agent::log::events::{Event, EventLog, Record, RunSettings, StopReason};
use crate::agent::log::runs::RunState;
use crate::agent::models::ModelSource;
use crate::agent::plan::pipeline::PlanPipeline;
use crate::agent::plan::refs::Reference;
use crate::agent::plan::search::SearchReport;
use crate::agent::plan::Plan;
use crate::agent::rules::{log_run_change, MendChange, Rule, RuleSet};
use crate::agent::usage::ModelUsage;
pub use crate::settings::Mode;
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

/// The steps a crash left in doubt (called, no result logged) that resuming will run again, in order; an error
/// naming them when one of them is not safe to repeat and the user has not said to.
pub fn in_doubt_steps(state: &RunState, registry: &ToolRegistry, rerun_anyway: bool) -> Result<Vec<String>> {
    let unsafe_calls: Vec<String> = state
        .in_flight
        .iter()
        .filter(|(_, (tool, args))| !registry.repeat_safe(tool, &Value::Object(args.clone())))
        .map(|(step, (tool, args))| format!("{step} ({tool} {})", Value::Object(args.clone())))
        .collect();
    if !unsafe_calls.is_empty() && !rerun_anyway {
        return Err(crate::Error::Run(format!(
            "the run was interrupted after calling {} and before logging the result, so it may or may not have \
             taken effect, and the tool is not safe to repeat. Check its effect; then `tandem resume --rerun-in-doubt \
             ID` runs it again (or start a new run if it already took effect)",
            unsafe_calls.join(", ")
        )));
    }
    Ok(state.in_flight.keys().cloned().collect())
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
    /// Steps ran that later steps wait for without reading them (rule `dependencies`, at run time): the feedback that
    /// has the plan written again with their results in view.
    Rewrite(String),
}

/// A step ready to run, after its references were resolved.
enum Prepared {
    /// Arguments fit the tool: call it, no model.
    Direct(Map<String, Value>),
    /// The same call already succeeded in this run.
    Cached(Map<String, Value>, Value),
    /// The step only recomputes a result already known (see `known_result`): dropped, not run.
    Known(Map<String, Value>, Value),
    /// An `llm` step: the executor writes text for this prompt.
    Text(Map<String, Value>),
    /// Arguments do not fit (the problem in words): the executor fills them.
    Fill(Map<String, Value>, String),
    /// References to fields a text output lacks (the arguments hold the whole texts meanwhile): a model reads each
    /// value out of its text, then the tool is called.
    Read(Map<String, Value>, Vec<Reference>),
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
    /// How plans are written for the goal: the tools the planner is shown, its grammar, the rules.
    pipeline: PlanPipeline<'a>,
    /// The goal of a fresh run until its first event is logged.
    pending_goal: Option<String>,
    log: EventLog,
    state: RunState,
    settings: RunSettings,
    started: Instant,
    /// What the rule book did since the last event, logged before the next one: rules act where the run only
    /// reads its state.
    rule_notes: RefCell<Vec<Event>>,
}

/// What a run works with besides its settings and log: the tools and their policy, the models, who approves and who
/// watches. The caller owns them; the run borrows them for its length.
pub struct RunParts<'a> {
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
}

/// A run's plan pipeline for `goal`: the tools its settings show the planner, and the rules they turn on, resolved
/// once (a log naming a rule this version lacks warns once).
fn run_pipeline<'a>(goal: &str, registry: &'a ToolRegistry, settings: &RunSettings) -> Result<PlanPipeline<'a>> {
    let rules = RuleSet::from_log(settings.pair.mend, &settings.pair.rules_off);
    Ok(PlanPipeline::new(goal, registry, settings.tools_top_k, rules)?.thinking(settings.pair.think))
}

impl<'a> Agent<'a> {
    /// Starts a new run in `log` (a fresh `events.jsonl`); the first events are logged when [`Agent::run`]
    /// begins, so that a given plan is part of the run's first event.
    pub fn start(goal: &str, settings: RunSettings, log: EventLog, parts: RunParts<'a>) -> Result<Self> {
        let RunParts { registry, context, models, approver, observer } = parts;
        let pipeline = run_pipeline(goal, registry, &settings)?;
        Ok(Self {
            registry,
            context,
            models,
            approver,
            observer,
            pipeline,
            pending_goal: Some(goal.to_string()),
            log,
            state: RunState::default(),
            settings,
            started: Instant::now(),
            rule_notes: RefCell::default(),
        })
    }

    /// Logs the start of a fresh run (with the given plan, if any) and the planner's tool selection.
    fn log_start(&mut self, goal: String, given_plan: Option<&Plan>) -> Result<()> {
        let top_k = self.settings.tools_top_k;
        let settings = self.settings.clone();
        self.emit(Event::RunStarted { goal, settings, plan: given_plan.cloned() })?;
        if self.pipeline.narrowed() {
            let shown = || self.pipeline.shown().names().iter().map(|n| n.to_string()).collect();
            let tools = self.pipeline.selected().map_or_else(shown, <[String]>::to_vec);
            tracing::debug!(?tools, "the planner's tools");
            let offered = self.registry.len();
            self.emit(Event::ToolsSelected { top_k, offered, tools, left_out: Vec::new() })?;
        }
        Ok(())
    }

    /// Picks up a run from its log: completed steps of the current plan are not run again. A step whose tool was
    /// called but whose result was never logged is in doubt: it runs again when its call is safe to repeat (or
    /// `rerun_in_doubt` says so), else resuming is refused with the step named, before anything is logged.
    pub fn resume(log: EventLog, records: &[Record], rerun_in_doubt: bool, parts: RunParts<'a>) -> Result<Self> {
        let RunParts { registry, context, models, approver, observer } = parts;
        let state = RunState::replay(records);
        let settings = state
            .settings
            .clone()
            .ok_or_else(|| crate::Error::Run("the run's log has no settings (no run_started event)".into()))?;
        // The same goal, catalogue and k select the same tools the run started with.
        let pipeline = run_pipeline(&state.goal, registry, &settings)?;
        let rerun = in_doubt_steps(&state, registry, rerun_in_doubt)?;
        let mut agent = Self {
            registry,
            context,
            models,
            approver,
            observer,
            pipeline,
            pending_goal: None,
            log,
            state,
            settings,
            started: Instant::now(),
            rule_notes: RefCell::default(),
        };
        let mut completed: Vec<String> = agent.state.outputs.keys().cloned().collect();
        completed.sort();
        agent.emit(Event::Resumed { completed, rerun })?;
        Ok(agent)
    }

    /// The rules of the rule book this run turns on (its profile, less the rules its settings turn off).
    fn rules(&self) -> RuleSet {
        self.pipeline.rules()
    }

    /// The run's state as logged so far.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// Runs to the end: from a given plan, from the plan in the log (resume), or from the planner.
    pub fn run(mut self, given_plan: Option<Plan>) -> Result<RunOutcome> {
        if let Some(goal) = self.pending_goal.take() {
            self.log_start(goal, given_plan.as_ref())?;
        }
        // A resumed run that was given a plan but crashed before logging it takes it from its first event.
        let given_plan = given_plan.or_else(|| self.state.given_plan.clone());
        let ended = match self.settings.pair.mode {
            Mode::PlanAhead => self.plan_ahead(given_plan),
            Mode::Step => self.step_mode(given_plan),
        };
        // Even an error leaves a closed log behind: the reason is the last event.
        let mut stop = match ended {
            Ok(stop) => stop,
            Err(e) => Stop::new(StopReason::Error, e.to_string()),
        };
        self.answer_doubted_results(&mut stop)?;
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
        for note in self.rule_notes.take() {
            let record = self.log.append(note)?;
            self.state.apply(&record);
            self.observer.on_event(&record);
        }
        let record = self.log.append(event)?;
        self.state.apply(&record);
        self.observer.on_event(&record);
        Ok(())
    }

    /// A run whose budget ran out after the joiner doubted a plan whose steps all ran answers with that plan's
    /// results, saying so in the stop's detail: they are the best the run found, and the revisions asked for by
    /// the doubt (often a wrong one: the 1.5B judged right arithmetic not met) may have done worse.
    fn answer_doubted_results(&mut self, stop: &mut Stop) -> Result<()> {
        if stop.reason != StopReason::Budget || self.state.answer.is_some() {
            return Ok(());
        }
        let Some((version, answer)) = self.state.doubted.clone() else { return Ok(()) };
        stop.detail.push_str(&format!(
            "; the answer is the result of plan v{version}, whose steps all ran but which the joiner judged not to meet \
             the goal"
        ));
        self.emit(Event::Answer { text: answer })
    }

    /// Logs what a rule did at run time: at `warn` now, and in the run's log before its next event.
    fn note_rule(&self, rule: &dyn Rule, step: &str, detail: &str) {
        log_run_change(rule, step, detail);
        let rule = rule.about().name.to_string();
        self.rule_notes.borrow_mut().push(Event::RuleApplied { rule, step: step.into(), detail: detail.into() });
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
                format!(
                    "token budget spent ({} of {} tokens, --max-run-tokens)",
                    self.state.tokens_out(),
                    s.max_tokens
                ),
            ));
        }
        if self.started.elapsed() >= Duration::from_secs(s.max_seconds) {
            return Some(Stop::new(StopReason::Budget, format!("time budget spent ({} s, --max-time)", s.max_seconds)));
        }
        None
    }
}

/// What writing a plan adds to its `plan_written` event: the planner's cost, its plan search, the rule book's mends
/// and its thought (all absent for a plan given or edited by the user).
#[derive(Debug, Default)]
struct PlanWriting {
    pub usage: Option<ModelUsage>,
    pub search: Option<SearchReport>,
    pub mends: Vec<MendChange>,
    pub thinking: Option<String>,
}
