//! The orchestrator: plans, asks for approval, runs ready steps in dependency order (tool steps concurrently),
//! judges each observation, replans with the execution record on failure, and stops for an explicit reason —
//! logging every event to the run's `events.jsonl` as it goes, so a run can be audited and resumed.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::events::{Event, EventLog, ModelUsage, PlanOrigin, Record, RunSettings, StopReason};
use super::executor::{fill_arguments, write_text};
use super::models::ModelSource;
use super::plan::{Plan, Step};
use super::planner::{next_move, revise_plan, NextMove, PlanOutcome};
use super::refs::{coerce_to_schema, resolve_args, value_text};
use super::runs::{call_key, RunState};
use crate::tools::{Llm, ToolContext, ToolError, ToolRegistry};
use crate::Result;

/// How the planner works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// The whole plan first; a new revision after a failure.
    #[default]
    PlanAhead,
    /// One step at a time, each chosen after seeing the observations so far.
    Step,
}

impl Mode {
    /// The name used in settings and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::PlanAhead => "plan-ahead",
            Mode::Step => "step",
        }
    }

    /// Parses [`Mode::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "plan-ahead" => Some(Mode::PlanAhead),
            "step" => Some(Mode::Step),
            _ => None,
        }
    }
}

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

/// What the run asks approval for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApproveMode {
    /// Nothing: run as planned.
    #[default]
    None,
    /// Each plan revision, before it runs.
    Plan,
    /// Each tool call.
    Steps,
}

impl ApproveMode {
    /// The name used in settings.
    pub fn name(self) -> &'static str {
        match self {
            ApproveMode::None => "none",
            ApproveMode::Plan => "plan",
            ApproveMode::Steps => "steps",
        }
    }

    /// Parses [`ApproveMode::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "none" => Some(ApproveMode::None),
            "plan" => Some(ApproveMode::Plan),
            "steps" => Some(ApproveMode::Steps),
            _ => None,
        }
    }
}

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
            log,
            state: RunState::default(),
            settings: settings.clone(),
            started: Instant::now(),
        };
        agent.emit(Event::RunStarted { goal: goal.to_string(), settings })?;
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
            .ok_or_else(|| crate::Error::Usage("the run's log has no settings (no run_started event)".into()))?;
        let mut agent =
            Self { registry, context, models, approver, observer, log, state, settings, started: Instant::now() };
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
        let ended = match Mode::from_name(&self.settings.mode).unwrap_or_default() {
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
        let s = &self.settings;
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

    // ---- plan-ahead ----

    fn plan_ahead(&mut self, given_plan: Option<Plan>) -> Result<Stop> {
        if self.state.plan.is_none() {
            match given_plan {
                Some(plan) => self.record_plan(plan, PlanOrigin::Given, "given with --plan", None)?,
                None => {
                    if let Some(stop) = self.write_plan(PlanOrigin::Initial, "first plan")? {
                        return Ok(stop);
                    }
                }
            }
        }
        loop {
            let plan = self.state.plan.clone().expect("a plan was recorded above");
            let issues = plan.validate(self.registry);
            if !issues.is_empty() {
                let list: Vec<String> = issues.iter().map(|i| format!("- {i}")).collect();
                let feedback = format!("That plan cannot run:\n{}\nWrite a corrected plan.", list.join("\n"));
                if let Some(stop) = self.replan(feedback)? {
                    return Ok(stop);
                }
                continue;
            }
            if !self.state.plan_approved {
                match self.approver.review_plan(&plan)? {
                    PlanDecision::Approve => self.record_approval(plan.version, "approved")?,
                    PlanDecision::Edit(edited) => {
                        self.record_plan(edited, PlanOrigin::Edited, "edited at approval", None)?;
                        let version = self.state.version();
                        self.record_approval(version, "edited")?;
                        continue;
                    }
                    PlanDecision::Reject => {
                        self.record_approval(plan.version, "rejected")?;
                        return Ok(Stop::new(StopReason::Rejected, "the plan was rejected; nothing ran"));
                    }
                }
            }
            match self.execute(&plan)? {
                Execution::Complete => {
                    let answer = final_answer(&plan, &self.state);
                    self.emit(Event::Answer { text: answer })?;
                    return Ok(Stop::new(
                        StopReason::Done,
                        format!("{} step(s) of plan v{} done", plan.steps.len(), plan.version),
                    ));
                }
                Execution::Failed(record) => {
                    if let Some(stop) = self.replan(record)? {
                        return Ok(stop);
                    }
                }
                Execution::Stopped(stop) => return Ok(stop),
            }
        }
    }

    fn record_approval(&mut self, version: u32, decision: &str) -> Result<()> {
        let by = self.approver.name().to_string();
        self.emit(Event::PlanApproval { version, decision: decision.into(), by })
    }

    /// Logs a plan as the next revision.
    fn record_plan(&mut self, plan: Plan, origin: PlanOrigin, reason: &str, usage: Option<ModelUsage>) -> Result<()> {
        let mut plan = plan.with_explicit_dependencies();
        plan.version = self.state.version() + 1;
        plan.goal = self.state.goal.clone();
        let issues = plan.validate(self.registry).iter().map(ToString::to_string).collect();
        self.emit(Event::PlanWritten { version: plan.version, origin, reason: reason.into(), plan, issues, usage })
    }

    /// Has the planner write a plan (with the revision history); a planner failure stops the run.
    fn write_plan(&mut self, origin: PlanOrigin, reason: &str) -> Result<Option<Stop>> {
        let goal = self.state.goal.clone();
        let history = self.state.revisions.clone();
        let tokens = self.settings.plan_tokens;
        let model = self.models.planner()?;
        let started = Instant::now();
        let written = revise_plan(model, &goal, self.registry, &history, tokens);
        self.log_model_loads()?;
        match written {
            Ok(PlanOutcome { plan, timings, .. }) => {
                let usage = ModelUsage {
                    tokens_in: timings.prompt_tokens,
                    tokens_out: timings.generated_tokens,
                    ms: started.elapsed().as_millis() as u64,
                };
                self.record_plan(plan, origin, reason, Some(usage))?;
                Ok(None)
            }
            Err(e) => Ok(Some(Stop::new(StopReason::Error, format!("the planner could not write a plan: {e}")))),
        }
    }

    /// Asks for a revision, unless a budget forbids it.
    fn replan(&mut self, feedback: String) -> Result<Option<Stop>> {
        if self.state.replans >= self.settings.max_replans {
            return Ok(Some(Stop::new(
                StopReason::Budget,
                format!(
                    "replan budget spent ({} replans, --max-replans); last problem: {feedback}",
                    self.settings.max_replans
                ),
            )));
        }
        if let Some(stop) = self.spent_budget(0) {
            return Ok(Some(stop));
        }
        self.emit(Event::Replan { from_version: self.state.version(), reason: feedback.clone() })?;
        self.write_plan(PlanOrigin::Replan, &feedback)
    }

    // ---- executing steps ----

    /// Runs the plan's remaining steps, ready ones together, until all are done, one fails, or the run stops.
    fn execute(&mut self, plan: &Plan) -> Result<Execution> {
        loop {
            let done: HashSet<String> = self.state.outputs.keys().cloned().collect();
            if plan.steps.iter().all(|s| done.contains(&s.id)) {
                return Ok(Execution::Complete);
            }
            let ready: Vec<Step> = plan.ready_steps(&done).into_iter().cloned().collect();
            if ready.is_empty() {
                return Ok(Execution::Failed(
                    "No step can run: every remaining step waits for one that cannot.".into(),
                ));
            }
            if let Some(stop) = self.spent_budget(ready.len()) {
                return Ok(Execution::Stopped(stop));
            }
            match self.run_round(plan, &ready)? {
                Some(Ok(failure)) => return Ok(Execution::Failed(self.execution_record(plan, &failure))),
                Some(Err(stop)) => return Ok(Execution::Stopped(stop)),
                None => {}
            }
        }
    }

    /// Runs one round of ready steps: tool calls on threads while the model steps run here. Returns the first
    /// failure (`Ok`) or a stop (`Err`), or `None` when every step succeeded.
    fn run_round(&mut self, plan: &Plan, ready: &[Step]) -> Result<Option<std::result::Result<String, Stop>>> {
        let version = plan.version;
        let mut direct = Vec::new();
        let mut model_steps = Vec::new();
        let mut failure = None;
        for step in ready {
            self.emit(Event::StepStarted { version, step: step.id.clone(), tool: step.tool.clone() })?;
            match self.prepare(step) {
                Ok(Prepared::Cached(args, output)) => {
                    self.finish_step(version, step, args, Ok(output), 0, "cache")?;
                }
                Ok(Prepared::Direct(args)) => direct.push((step.clone(), args)),
                Ok(other) => model_steps.push((step.clone(), other)),
                Err(e) => {
                    let error = e.to_string();
                    self.finish_step(version, step, Map::new(), Err(error.clone()), 0, "tool")?;
                    failure.get_or_insert(format!("step {} failed: {error}", step.id));
                }
            }
        }
        if self.settings.approve == ApproveMode::Steps.name() {
            for (step, args) in &direct {
                if let Some(stop) = self.approve_step(version, step, args)? {
                    return Ok(Some(Err(stop)));
                }
            }
        }
        for (step, args) in &direct {
            self.emit(Event::ToolCall { version, step: step.id.clone(), tool: step.tool.clone(), args: args.clone() })?;
        }
        let registry = self.registry;
        let context = self.context;
        let results: Vec<(std::result::Result<Value, ToolError>, u64)> = std::thread::scope(|scope| {
            let handles: Vec<_> = direct
                .iter()
                .map(|(step, args)| {
                    scope.spawn(move || {
                        let started = Instant::now();
                        let result = registry.call(&step.tool, &Value::Object(args.clone()), context);
                        (result, started.elapsed().as_millis() as u64)
                    })
                })
                .collect();
            // Model steps run on this thread meanwhile; their errors are kept until the tools are joined.
            let model_result = self.run_model_steps(version, &model_steps, &mut failure);
            let results = handles.into_iter().map(|h| h.join().expect("a tool thread panicked")).collect();
            model_result.map(|()| results)
        })?;
        for ((step, args), (result, ms)) in direct.into_iter().zip(results) {
            let outcome = match result {
                Ok(output) => self.judge(&step.tool, output),
                Err(e) => Err(e),
            };
            match outcome {
                Ok(output) => self.finish_step(version, &step, args, Ok(output), ms, "tool")?,
                Err(e) if retryable(&e) && !step.references().is_empty() && failure.is_none() => {
                    // A reference brought text the tool cannot take: the executor pulls the value out of it.
                    let problem = e.to_string();
                    self.finish_step(version, &step, args.clone(), Err(problem.clone()), ms, "tool")?;
                    self.run_model_steps(version, &[(step.clone(), Prepared::Fill(args, problem))], &mut failure)?;
                }
                Err(e) => {
                    let error = e.to_string();
                    self.finish_step(version, &step, args, Err(error.clone()), ms, "tool")?;
                    failure.get_or_insert(format!("step {} failed: {error}", step.id));
                }
            }
        }
        Ok(failure.map(Ok))
    }

    /// Asks for approval of one tool call; a refusal stops the run.
    fn approve_step(&mut self, version: u32, step: &Step, args: &Map<String, Value>) -> Result<Option<Stop>> {
        let approved = self.approver.review_step(step, args)?;
        let decision = if approved { "approved" } else { "rejected" };
        self.emit(Event::StepApproval { version, step: step.id.clone(), decision: decision.into() })?;
        Ok((!approved).then(|| {
            Stop::new(StopReason::Rejected, format!("the call of {} in step {} was rejected", step.tool, step.id))
        }))
    }

    /// Resolves a step's references and decides who runs it.
    fn prepare(&self, step: &Step) -> Result<Prepared> {
        let spec = self.registry.spec(&step.tool).ok_or_else(|| ToolError::UnknownTool {
            name: step.tool.clone(),
            known: self.registry.names().join(", "),
        })?;
        let resolved = resolve_args(step, &self.state.outputs)?;
        let args = match coerce_to_schema(Value::Object(resolved), &spec.args_schema) {
            Value::Object(map) => map,
            _ => unreachable!("coercing an object keeps it an object"),
        };
        if spec.needs_model {
            return Ok(Prepared::Text(args));
        }
        let problems = self.registry.arg_errors(&step.tool, &Value::Object(args.clone()))?;
        if !problems.is_empty() {
            let text = problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
            return Ok(Prepared::Fill(args, text));
        }
        if let Some(output) = self.state.call_cache.get(&call_key(&step.tool, &args)) {
            return Ok(Prepared::Cached(args, output.clone()));
        }
        Ok(Prepared::Direct(args))
    }

    /// Runs steps that need the executor model, one after another; the first failure lands in `failure`.
    fn run_model_steps(
        &mut self,
        version: u32,
        steps: &[(Step, Prepared)],
        failure: &mut Option<String>,
    ) -> Result<()> {
        for (step, prepared) in steps {
            let started = Instant::now();
            let result = match prepared {
                Prepared::Text(args) => self.run_text_step(version, step, args),
                Prepared::Fill(args, problem) => self.run_fill_step(version, step, args, problem),
                Prepared::Direct(_) | Prepared::Cached(..) => {
                    unreachable!("tool steps do not reach the executor")
                }
            };
            let ms = started.elapsed().as_millis() as u64;
            let args = match prepared {
                Prepared::Text(a) | Prepared::Fill(a, _) | Prepared::Direct(a) | Prepared::Cached(a, _) => a.clone(),
            };
            match result {
                Ok((args, output)) => self.finish_step(version, step, args, Ok(output), ms, "executor")?,
                Err(e) => {
                    let error = e.to_string();
                    self.finish_step(version, step, args, Err(error.clone()), ms, "executor")?;
                    failure.get_or_insert(format!("step {} failed: {error}", step.id));
                }
            }
        }
        Ok(())
    }

    fn run_text_step(
        &mut self,
        version: u32,
        step: &Step,
        args: &Map<String, Value>,
    ) -> Result<(Map<String, Value>, Value)> {
        let prompt =
            with_unreferenced_inputs(step, &args.get("prompt").map(value_text).unwrap_or_default(), &self.state);
        let tokens = self.settings.executor_tokens;
        let model = self.models.executor()?;
        let written = write_text(model, &prompt, tokens);
        self.log_model_loads()?;
        let (text, usage) = written?;
        self.emit(Event::ExecutorCall { version, step: step.id.clone(), purpose: "text".into(), usage })?;
        let output = self.judge(Llm::NAME, serde_json::json!({ "text": text }))?;
        Ok((args.clone(), output))
    }

    fn run_fill_step(
        &mut self,
        version: u32,
        step: &Step,
        args: &Map<String, Value>,
        problem: &str,
    ) -> Result<(Map<String, Value>, Value)> {
        let spec = self.registry.spec(&step.tool).cloned().ok_or_else(|| ToolError::UnknownTool {
            name: step.tool.clone(),
            known: self.registry.names().join(", "),
        })?;
        let tokens = self.settings.executor_tokens;
        let model = self.models.executor()?;
        let filled = fill_arguments(model, step, &spec, args, problem, tokens);
        self.log_model_loads()?;
        let (call, usage) = filled?;
        self.emit(Event::ExecutorCall { version, step: step.id.clone(), purpose: "arguments".into(), usage })?;
        if self.settings.approve == ApproveMode::Steps.name() {
            if let Some(stop) = self.approve_step(version, step, &call.args)? {
                return Err(crate::Error::Usage(stop.detail));
            }
        }
        self.emit(Event::ToolCall {
            version,
            step: step.id.clone(),
            tool: call.tool.clone(),
            args: call.args.clone(),
        })?;
        let output = self.registry.call(&call.tool, &Value::Object(call.args.clone()), self.context)?;
        Ok((call.args, self.judge(&call.tool, output)?))
    }

    /// Judges an observation: empty output, or output that breaks the tool's declared schema, is a failure.
    fn judge(&self, tool: &str, output: Value) -> std::result::Result<Value, ToolError> {
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

    fn finish_step(
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

    /// The execution record the planner sees when it revises: what ran, what came out, what failed.
    fn execution_record(&self, plan: &Plan, failure: &str) -> String {
        let mut lines = vec![format!("Running that plan: {failure}.")];
        for step in &plan.steps {
            if let Some(output) = self.state.outputs.get(&step.id) {
                lines.push(format!("- {} ({}) succeeded with output {}", step.id, step.tool, output));
            }
        }
        lines.push(
            "Write a corrected plan for the whole goal. You may write the outputs above as literal values; a step \
             with the same tool and arguments as one that succeeded is not run again."
                .into(),
        );
        lines.join("\n")
    }

    // ---- step mode ----

    fn step_mode(&mut self, given_plan: Option<Plan>) -> Result<Stop> {
        if self.state.plan.is_none() {
            let start =
                given_plan.unwrap_or_else(|| Plan { goal: self.state.goal.clone(), version: 1, steps: Vec::new() });
            if start.steps.is_empty() {
                // Nothing to validate yet: the planner adds steps one at a time.
                let plan = Plan { version: 1, ..start };
                self.emit(Event::PlanWritten {
                    version: 1,
                    origin: PlanOrigin::NextStep,
                    reason: "step mode".into(),
                    plan,
                    issues: Vec::new(),
                    usage: None,
                })?;
            } else {
                self.record_plan(start, PlanOrigin::Given, "step mode", None)?;
            }
        }
        let mut rejected_proposals = 0u32;
        loop {
            let plan = self.state.plan.clone().expect("recorded above");
            // Given steps (or a resumed run's) run first.
            if plan.steps.iter().any(|s| !self.state.outputs.contains_key(&s.id)) {
                match self.execute(&plan)? {
                    Execution::Complete => {}
                    Execution::Failed(record) => {
                        // The failed step leaves the plan; the planner sees the failure in the record.
                        rejected_proposals += 1;
                        if rejected_proposals > self.settings.max_replans {
                            return Ok(Stop::new(
                                StopReason::Budget,
                                format!("too many failed steps (--max-replans); last: {record}"),
                            ));
                        }
                        self.emit(Event::Replan { from_version: plan.version, reason: record })?;
                        let mut trimmed = plan.clone();
                        trimmed.steps.retain(|s| self.state.outputs.contains_key(&s.id));
                        trimmed.version = plan.version;
                        self.emit(Event::PlanWritten {
                            version: plan.version,
                            origin: PlanOrigin::NextStep,
                            reason: "failed step removed".into(),
                            plan: trimmed,
                            issues: Vec::new(),
                            usage: None,
                        })?;
                        continue;
                    }
                    Execution::Stopped(stop) => return Ok(stop),
                }
            }
            if let Some(stop) = self.spent_budget(1) {
                return Ok(stop);
            }
            let record = self.step_record(&plan);
            let goal = self.state.goal.clone();
            let tokens = self.settings.plan_tokens;
            let model = self.models.planner()?;
            let started = Instant::now();
            let proposed = next_move(model, &goal, self.registry, &record, tokens);
            self.log_model_loads()?;
            let (next, _text, timings) = match proposed {
                Ok(proposed) => proposed,
                Err(e) => {
                    return Ok(Stop::new(StopReason::Error, format!("the planner could not propose a step: {e}")))
                }
            };
            let usage = ModelUsage {
                tokens_in: timings.prompt_tokens,
                tokens_out: timings.generated_tokens,
                ms: started.elapsed().as_millis() as u64,
            };
            let mut grown = plan.clone();
            let answer = match next {
                NextMove::Answer(answer) => Some(answer),
                NextMove::Step(mut step) => {
                    step.id = format!("s{}", plan.steps.len() + 1);
                    // A call that already ran can teach nothing new: small planners repeat the last call when
                    // they should answer, so its result is taken as the answer.
                    let repeated = self.repeated_call(&step);
                    grown.steps.push(step);
                    repeated
                }
            };
            let issues: Vec<String> = grown.validate(self.registry).iter().map(ToString::to_string).collect();
            let reason = if answer.is_some() { "answer" } else { "next step" };
            let logged = if issues.is_empty() && answer.is_none() { grown } else { plan.clone() };
            self.emit(Event::PlanWritten {
                version: plan.version,
                origin: PlanOrigin::NextStep,
                reason: reason.into(),
                plan: logged,
                issues: issues.clone(),
                usage: Some(usage),
            })?;
            if let Some(answer) = answer {
                // An answer with no letter or digit in it says nothing: the results speak instead.
                let says_something = answer.chars().any(char::is_alphanumeric);
                let text =
                    if says_something || plan.steps.is_empty() { answer } else { final_answer(&plan, &self.state) };
                self.emit(Event::Answer { text })?;
                return Ok(Stop::new(StopReason::Done, format!("{} step(s) run in step mode", plan.steps.len())));
            }
            if !issues.is_empty() {
                rejected_proposals += 1;
                if rejected_proposals > self.settings.max_replans {
                    return Ok(Stop::new(
                        StopReason::Budget,
                        format!("too many invalid proposals; last: {}", issues.join("; ")),
                    ));
                }
            }
        }
    }

    /// The output of an earlier identical call, as text, if the step repeats one.
    fn repeated_call(&self, step: &Step) -> Option<String> {
        let resolved = resolve_args(step, &self.state.outputs).ok()?;
        self.state.call_cache.get(&call_key(&step.tool, &resolved)).map(output_text)
    }

    /// Step mode's view of the run so far, for the planner.
    fn step_record(&self, plan: &Plan) -> String {
        let mut lines: Vec<String> = plan
            .steps
            .iter()
            .filter_map(|s| {
                let output = self.state.outputs.get(&s.id)?;
                Some(format!("{} {} {} -> {}", s.id, s.tool, Value::Object(s.args.clone()), output_text(output)))
            })
            .collect();
        lines.extend(self.state.failures.iter().map(|f| format!("(failed, not in the plan) {f}")));
        lines.join("\n")
    }
}

/// Tool errors that better arguments might fix.
fn retryable(error: &ToolError) -> bool {
    matches!(error, ToolError::InvalidArgs { .. } | ToolError::Calculation { .. })
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

/// The prompt of an `llm` step, followed by the outputs of steps it depends on but does not reference: small
/// planners often write "summarise the file" after a `read_file` step without `$s1.content$`, and the
/// dependency says what they meant.
fn with_unreferenced_inputs(step: &Step, prompt: &str, state: &RunState) -> String {
    let referenced: HashSet<String> = step.references().into_iter().map(|r| r.step).collect();
    let inputs: Vec<String> = step
        .dependencies()
        .into_iter()
        .filter(|dep| !referenced.contains(dep))
        .filter_map(|dep| state.outputs.get(&dep).map(output_text))
        .collect();
    if inputs.is_empty() {
        prompt.to_string()
    } else {
        format!("{prompt}\n\nInput:\n{}", inputs.join("\n\n"))
    }
}

/// An output as text: a single field's value, else its `text`, `result` or `content` field, else compact JSON.
fn output_text(output: &Value) -> String {
    match output {
        Value::Object(map) if map.len() == 1 => value_text(map.values().next().expect("one value")),
        Value::Object(map) => match map.get("text").or_else(|| map.get("result")).or_else(|| map.get("content")) {
            Some(value) => value_text(value),
            None => value_text(output),
        },
        other => value_text(other),
    }
}
