//! Agent runs on the generation slots: the runs this server has queued or is running (each with the flags that
//! stop it), and a run's execution, fresh or resumed, through the agent's own start and resume.
//!
//! A run is stopped from outside only at a safe point: its log is closed ([`EventLog::close_when`]), so the run
//! ends at its next event with everything before it on disk, and its generation in progress is halted. That is
//! how shutdown, a cancel, and a pause for plan approval all work, and why each leaves a run that resumes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value};

use crate::agent::log::runs::lock_run;
use crate::agent::{
    Agent, Approver, Event, EventLog, LazyModels, NoObserver, Pause, Plan, PlanDecision, RunParts, RunSettings,
    RunState, Step, StopReason,
};
use crate::settings::ToolSettings;
use crate::tools::toolbox;
use crate::{Error, Result};

/// Where a run on this server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a slot.
    Queued,
    /// On a slot.
    Running,
    /// Cancelled before a slot took it (its log already says so).
    Cancelled,
}

/// What a cancel did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// The run was queued: its log now ends with the cancel.
    Closed,
    /// The run was running: it stops at its next event, and its slot closes its log.
    Stopping,
    /// The run had been cancelled before it started: there was nothing left to cancel.
    AlreadyFinished,
}

/// One run queued or running here.
#[derive(Debug)]
pub struct RunHandle {
    phase: Mutex<Phase>,
    /// Closes the run's log: the run stops at its next event.
    stop: Arc<AtomicBool>,
    /// The halt flag of the slot running it, while it runs: halts the generation in progress.
    halt: Mutex<Option<Arc<AtomicBool>>>,
    /// Set by a cancel: the run's log ends with `run_finished` (`cancelled`) once it has stopped.
    cancel: AtomicBool,
    /// A fresh run's goal and settings: what its first event says (written by whoever ends it before it starts).
    start: Option<(String, RunSettings)>,
}

impl RunHandle {
    /// Where the run is.
    pub fn phase(&self) -> Phase {
        *lock(&self.phase)
    }

    /// Stops the run at its next event and halts its generation (the log first, so nothing the halt causes is
    /// logged).
    pub fn interrupt(&self) {
        // Under the phase lock: a slot starting the run either sees the stop or has registered its halt flag.
        let _phase = lock(&self.phase);
        self.interrupt_locked();
    }

    fn interrupt_locked(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(halt) = lock(&self.halt).as_ref() {
            halt.store(true, Ordering::SeqCst);
        }
    }

    /// Cancels the run: a queued one at once (its log is closed here); a running one is interrupted and its slot
    /// closes its log when it has stopped.
    pub fn cancel(&self, dir: &std::path::Path) -> Result<Cancel> {
        let mut phase = lock(&self.phase);
        match *phase {
            Phase::Queued => {
                *phase = Phase::Cancelled;
                finish_unstarted(dir, self.start.as_ref(), StopReason::Cancelled, "cancelled before it started")?;
                Ok(Cancel::Closed)
            }
            Phase::Running => {
                self.cancel.store(true, Ordering::SeqCst);
                self.interrupt_locked();
                Ok(Cancel::Stopping)
            }
            // Its log already ends; the handle stays until a slot drops the job, so a second cancel lands here.
            Phase::Cancelled => Ok(Cancel::AlreadyFinished),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The runs this server has queued or is running, by id.
#[derive(Debug, Clone, Default)]
pub struct ActiveRuns {
    runs: Arc<Mutex<HashMap<String, Arc<RunHandle>>>>,
}

impl ActiveRuns {
    /// Registers a run; `None` when it is already queued or running here.
    pub fn register(&self, id: &str, start: Option<(String, RunSettings)>) -> Option<(Arc<RunHandle>, ActiveGuard)> {
        let mut runs = lock(&self.runs);
        if runs.contains_key(id) {
            return None;
        }
        let handle = Arc::new(RunHandle {
            phase: Mutex::new(Phase::Queued),
            stop: Arc::new(AtomicBool::new(false)),
            halt: Mutex::new(None),
            cancel: AtomicBool::new(false),
            start,
        });
        runs.insert(id.to_string(), handle.clone());
        Some((handle, ActiveGuard { id: id.to_string(), runs: self.clone() }))
    }

    /// The run, when it is queued or running here.
    pub fn get(&self, id: &str) -> Option<Arc<RunHandle>> {
        lock(&self.runs).get(id).cloned()
    }

    /// Stops every run at its next event (shutdown); queued ones are left unstarted by their slots.
    pub fn interrupt_all(&self) {
        for handle in lock(&self.runs).values() {
            handle.interrupt();
        }
    }
}

/// Keeps a run in the active set until its job is over (or dropped unrun).
#[derive(Debug)]
pub struct ActiveGuard {
    id: String,
    runs: ActiveRuns,
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        lock(&self.runs.runs).remove(&self.id);
    }
}

/// What a run job does.
pub enum RunKind {
    /// A fresh run, logged in its (empty) log.
    Start {
        /// The goal.
        goal: String,
        /// The settings its first event records (boxed: the largest part of a job by far).
        settings: Box<RunSettings>,
        /// Its tools.
        tools: ToolSettings,
        /// Its log.
        log: EventLog,
    },
    /// A run picked up from its log, with the decision on the plan it waits on, if any.
    Resume {
        /// The decision on the plan it waits on: applies only to that version.
        decision: Option<Verdict>,
        /// Run again steps a stop left in doubt even when their tools are not safe to repeat.
        rerun_in_doubt: bool,
    },
}

/// One agent run for a slot.
pub struct RunJob {
    /// The run's id.
    pub id: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Fresh or resumed.
    pub kind: RunKind,
    /// Its flags, shared with the handlers.
    pub handle: Arc<RunHandle>,
    /// Removes it from the active set when the job is done.
    pub guard: ActiveGuard,
}

/// Runs a run on a slot's models (`halt` is the slot's halt flag). The tools are built per run (MCP servers live
/// as long as the run). A run stopped at a safe point leaves its log without `run_finished`: it resumes.
pub fn execute_run(models: &mut LazyModels<'_>, job: RunJob, halt: &Arc<AtomicBool>) {
    let RunJob { id, dir, kind, handle, guard } = job;
    {
        let mut phase = lock(&handle.phase);
        if *phase != Phase::Queued {
            return; // cancelled while queued: the canceller closed its log
        }
        if handle.stop.load(Ordering::SeqCst) {
            // The server is shutting down: a fresh run gets its first event, so it can be resumed later.
            if let RunKind::Start { goal, settings, mut log, .. } = kind {
                let _ = log.append(Event::RunStarted { goal, settings: *settings, plan: None });
            }
            tracing::info!(run = %id, "the server stopped before this run started: it can be resumed");
            return;
        }
        *phase = Phase::Running;
        *lock(&handle.halt) = Some(halt.clone());
    }
    let outcome = run(models, &dir, kind, &handle);
    *lock(&handle.halt) = None;
    match outcome {
        Ok(()) => {}
        Err(Error::Interrupted(why)) if handle.cancel.load(Ordering::SeqCst) => {
            tracing::info!(run = %id, "cancelled: {why}");
            if let Err(e) = append_finish(&dir, StopReason::Cancelled, "cancelled over HTTP") {
                tracing::warn!(run = %id, error = %e, "could not log the cancel");
            }
        }
        Err(Error::Interrupted(why)) => tracing::info!(run = %id, "stopped at a safe point: {why}"),
        Err(e) => tracing::warn!(run = %id, error = %e, "the run could not go on"),
    }
    drop(guard);
}

fn run(models: &mut LazyModels<'_>, dir: &std::path::Path, kind: RunKind, handle: &RunHandle) -> Result<()> {
    // Held while the run runs: `tandem resume` of it meanwhile is refused, as between two CLI processes.
    let _lock = lock_run(dir)?;
    match kind {
        RunKind::Start { goal, settings, tools, mut log } => {
            let (context, registry) = match toolbox::build_tools(&tools) {
                Ok(built) => built,
                Err(e) => {
                    // The run's log says why it never started.
                    log.append(Event::RunStarted { goal, settings: *settings, plan: None })?;
                    log.append(Event::RunFinished {
                        stop: StopReason::Error,
                        detail: format!("the run's tools could not be set up: {e}"),
                    })?;
                    return Err(e);
                }
            };
            let mut approver = HttpApprover { decision: None, by: HTTP, pause: Pause::on(handle.stop.clone()) };
            let log = log.close_when(handle.stop.clone());
            let agent = Agent::start(
                &goal,
                *settings,
                log,
                RunParts {
                    registry: &registry,
                    context: &context,
                    models,
                    approver: &mut approver,
                    observer: &NoObserver,
                },
            )?;
            agent.run(None)?;
        }
        RunKind::Resume { decision, rerun_in_doubt } => {
            let (log, contents) = EventLog::open(dir)?;
            let state = RunState::replay(&contents.records);
            if let Some((stop, _)) = state.finished {
                return Err(Error::Run(format!("the run already finished ({stop})")));
            }
            let settings =
                state.settings.as_ref().ok_or_else(|| Error::Run("the run's log has no run_started event".into()))?;
            let (context, registry) = toolbox::build_tools(&settings.tool_settings())?;
            let mut approver = HttpApprover { decision, by: HTTP, pause: Pause::on(handle.stop.clone()) };
            let log = log.close_when(handle.stop.clone());
            let agent = Agent::resume(
                log,
                &contents.records,
                rerun_in_doubt,
                RunParts {
                    registry: &registry,
                    context: &context,
                    models,
                    approver: &mut approver,
                    observer: &NoObserver,
                },
            )?;
            agent.run(None)?;
        }
    }
    Ok(())
}

/// Ends a run that never started: its first event (when it has none) and `run_finished`.
pub fn finish_unstarted(
    dir: &std::path::Path,
    start: Option<&(String, RunSettings)>,
    stop: StopReason,
    detail: &str,
) -> Result<()> {
    let (mut log, contents) = EventLog::open(dir)?;
    if contents.records.is_empty() {
        if let Some((goal, settings)) = start {
            log.append(Event::RunStarted { goal: goal.clone(), settings: settings.clone(), plan: None })?;
        }
    }
    log.append(Event::RunFinished { stop, detail: detail.into() })?;
    Ok(())
}

/// Appends `run_finished` to a run's log.
pub fn append_finish(dir: &std::path::Path, stop: StopReason, detail: &str) -> Result<()> {
    finish_unstarted(dir, None, stop, detail)
}

/// A decision on a plan a run waits on, and who made it (as the run's log records it).
pub struct Verdict {
    /// The plan version decided on: the decision applies to it only.
    pub version: u32,
    pub decision: PlanDecision,
    /// Who decided: [`HTTP`] for `/v1/runs/{id}/approve`, or the MCP route it came by.
    pub by: &'static str,
}

/// Who approves plans through `/v1/runs` (the name the run's log records).
pub const HTTP: &str = "http";

/// Approval over HTTP: no one to ask while the run runs, so a plan that needs approval pauses the run (its log
/// closed before anything else happens); `POST /v1/runs/{id}/approve` or `reject` resumes it with the decision,
/// which applies only to the plan version it was made on.
struct HttpApprover {
    decision: Option<Verdict>,
    /// Who decided the plan this run goes on with.
    by: &'static str,
    /// Pauses the run where the plan waits for a decision.
    pause: Pause,
}

impl Approver for HttpApprover {
    fn review_plan(&mut self, plan: &Plan) -> Result<PlanDecision> {
        match self.decision.take() {
            Some(verdict) if verdict.version == plan.version => {
                self.by = verdict.by;
                Ok(verdict.decision)
            }
            _ => Err(self.pause.pause(format!("plan v{}", plan.version))),
        }
    }

    fn review_step(&mut self, step: &Step, _args: &Map<String, Value>) -> Result<bool> {
        // Runs over HTTP never ask per step (`approve: "steps"` is refused when the run is created).
        Err(self.pause.pause(format!("step {} (a run over HTTP is not asked about per step)", step.id)))
    }

    fn name(&self) -> &str {
        self.by
    }
}
