//! The batch engine behind `tandem batch`: many goals in one process on one pair of loaded models (their prefix
//! caches stay warm from goal to goal), one run with its own audit log per goal, one record per goal in the
//! results file, goals in flight at once sharing each model's forward passes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::{json, Value};

use crate::agent::batch::merge::header_differences;
use crate::agent::batch::{
    read_goals, shard_key, shard_results_path, BatchGoal, BatchRecord, BatchResults, BatchSummary, GoalLine,
    StartedRun, SHARD_HEADER,
};
use crate::agent::log::events::EventLog;
use crate::agent::log::runs::{lock_run, RunState, RunsDir};
use crate::agent::models::LazyModels;
use crate::agent::run::orchestrator::{Agent, AutoApprove, NoObserver, RunOutcome, RunParts};
use crate::agent::setup::{open_runs_dir, run_settings, runner_models};
use crate::progress::{clip, Progress, ProgressUnit, Reporter};
use crate::settings::{Approval, BatchSettings};
use crate::store::ModelStore;
use crate::tools::toolbox::{build, build_tools};
use crate::tools::{ToolContext, ToolRegistry};
use crate::{Error, Result};

/// What every goal of the batch shares: the settings, the default tools, where runs go, and where relative goal
/// workspaces start from.
struct Batch<'a> {
    args: &'a BatchSettings,
    context: ToolContext,
    registry: ToolRegistry,
    runs: RunsDir,
    goals_dir: PathBuf,
}

/// Runs a batch: every goal of the goal file that the results file does not hold yet (or holds as failed, with
/// `retry_failed`), each as a normal run with its own log, its record appended to the results as it finishes.
/// Returns the summary; goals that did not finish are counted in it, not returned as errors.
pub fn run_batch(args: &BatchSettings, reporter: &dyn Reporter) -> Result<BatchSummary> {
    let started = Instant::now();
    // Each shard keeps its own results file beside --out, so shards never share (or lock) one file.
    let out = match &args.shard {
        Some(shard) => shard_results_path(&args.out, shard),
        None => args.out.clone(),
    };
    if std::path::absolute(&args.goals).ok() == std::path::absolute(&out).ok() {
        return Err(Error::Usage(format!(
            "--out {} is the goal file itself; give the results their own file",
            out.display()
        )));
    }
    let mut lines = read_goals(&args.goals)?;
    let mut results = BatchResults::open(&out)?;
    for bad in results.unreadable() {
        reporter.message(&format!("unreadable line in the results (ignored): {bad}"));
    }
    let mut of_shard = String::new();
    if let Some(shard) = args.shard {
        let all = lines.len();
        lines.retain(|line| shard.contains(&shard_key(&line.key())));
        of_shard = format!(" (shard {shard}: {} of {all})", lines.len());
        claim_shard(&mut results, &shard_header(args, shard, reporter)?)?;
    }
    let todo: Vec<&GoalLine> =
        lines.iter().filter(|line| should_run(line, &results, args.retry_failed, reporter)).collect();
    let mut summary = BatchSummary {
        goals_file: args.goals.clone(),
        results: out.clone(),
        lines: lines.len(),
        skipped: lines.len() - todo.len(),
        ..BatchSummary::default()
    };
    reporter.message(&format!(
        "batch: {} goal line(s) in {}{of_shard}; {} to run, {} already in {} (skipped)",
        lines.len(),
        args.goals.display(),
        todo.len(),
        summary.skipped,
        out.display()
    ));
    if !todo.is_empty() {
        // The default workspace, tool policy and models are checked (and pulled) before the first goal, so a typo
        // in a flag fails once instead of once per goal.
        let (context, registry) = build_tools(&args.agent.tools)?;
        let goals = todo.iter().filter(|line| matches!(line, GoalLine::Goal(_))).count();
        if goals > 0 {
            let store = ModelStore::open()?;
            store.resolve(&args.agent.pair.planner, reporter)?;
            if args.agent.pair.executor != args.agent.pair.planner {
                store.resolve(&args.agent.pair.executor, reporter)?;
            }
        }
        let settings = run_settings(&args.agent, &context, Approval::None);
        let models = runner_models(&settings, &args.runner, reporter)?;
        let goals_dir = args.goals.parent().map(Path::to_path_buf).unwrap_or_default();
        let batch = Batch { args, context, registry, runs: open_runs_dir(args.runner.runs_dir.as_ref()), goals_dir };
        let workers = args.parallel.min(goals).max(1);
        // One goal at a time loads the models lazily on this thread; several share each model's passes.
        let (sources, shared) = if workers > 1 {
            reporter.message(&format!("batch: {workers} goals at a time, sharing each model's forward passes"));
            let (sources, shared) = models.share(workers)?;
            (sources, Some(shared))
        } else {
            (vec![models], None)
        };
        let progress = reporter.start("batch", Some(todo.len() as u64), ProgressUnit::Items);
        let filed = Mutex::new(Filed { results, summary, progress, count: 0, error: None });
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for mut models in sources {
                let (batch, todo, filed, next) = (&batch, &todo, &filed, &next);
                scope.spawn(move || {
                    while let Some(line) = todo.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let record = match line {
                            GoalLine::Malformed { line, message } => BatchRecord::malformed(
                                *line,
                                format!("{}:{line}: {message}", batch.args.goals.display()),
                            ),
                            GoalLine::Goal(goal) => run_goal(goal, batch, &mut models, filed, reporter),
                        };
                        let mut filed = lock(filed);
                        if !filed.file(&record, todo.len(), reporter) {
                            break;
                        }
                    }
                });
            }
        });
        let filed = filed.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
        filed.progress.finish();
        if let Some(error) = filed.error {
            return Err(error);
        }
        summary = filed.summary;
        summary.parallel = workers;
        if let Some(shared) = shared {
            for (role, stats) in [("planner", shared.planner_stats()), ("executor", shared.executor_stats())] {
                reporter.message(&format!(
                    "{role}: {} forward passes served {:.2} goals ({:.1} tokens) each, {:.1} s computing, {:.1} s \
                     waiting for the goals of the pass before",
                    stats.passes,
                    stats.parts_per_pass(),
                    stats.rows as f64 / stats.passes.max(1) as f64,
                    stats.pass_s,
                    stats.gather_s
                ));
            }
            summary.planner_goals_per_pass = Some(shared.planner_stats().parts_per_pass());
            summary.executor_goals_per_pass = Some(shared.executor_stats().parts_per_pass());
        }
    }
    summary.finish(started.elapsed());
    Ok(summary)
}

/// A shard's header: which shard, of which goal file, with which settings and model files (what `tandem batch
/// merge` checks the shards agree on).
fn shard_header(args: &BatchSettings, shard: crate::settings::Shard, reporter: &dyn Reporter) -> Result<Value> {
    let store = ModelStore::open()?;
    let agent = &args.agent;
    let planner = store.resolve(&agent.pair.planner, reporter)?;
    let executor = store.resolve(&agent.pair.executor, reporter)?;
    Ok(json!({
        SHARD_HEADER: shard,
        "goals": args.goals,
        "settings": {
            "planner": agent.pair.planner,
            "planner_sha256": planner.sha256,
            "executor": agent.pair.executor,
            "executor_sha256": executor.sha256,
            "mode": agent.pair.mode.name(),
            "budgets": format!("{:?}", agent.budgets),
            "tools": format!("{:?}", agent.tools),
        },
    }))
}

/// Marks a shard's results file as this shard's (a new file), or checks that it is (a rerun that resumes it).
fn claim_shard(results: &mut BatchResults, header: &Value) -> Result<()> {
    let path = results.path().display().to_string();
    match results.header() {
        Some(old) if old == header => Ok(()),
        Some(old) => Err(Error::Usage(format!(
            "{path} holds a shard run with other settings ({}); give this run its own --out",
            header_differences(old, header).join("; ")
        ))),
        None if !results.is_empty() => Err(Error::Usage(format!(
            "{path} holds results of a batch run without --shard; give the shard its own --out"
        ))),
        None => results.write_header(header),
    }
}

/// The batch's records so far, shared by the goals in flight.
struct Filed {
    results: BatchResults,
    summary: BatchSummary,
    progress: Box<dyn Progress>,
    /// Records filed by this invocation.
    count: usize,
    /// A record that could not be written: the batch stops (no goal runs without its record being kept).
    error: Option<Error>,
}

impl Filed {
    /// Appends a finished goal's record and reports it; false once a record could not be written.
    fn file(&mut self, record: &BatchRecord, total: usize, reporter: &dyn Reporter) -> bool {
        if self.error.is_some() {
            return false;
        }
        if let Err(e) = self.results.append(record) {
            self.error = Some(e);
            return false;
        }
        self.summary.add(record);
        self.count += 1;
        reporter.message(&format!("[{}/{total}] {}", self.count, describe(record)));
        self.progress.inc(1);
        true
    }
}

/// Whether a goal line runs: not when the results already hold it (unless it failed and `--retry-failed`).
fn should_run(line: &GoalLine, results: &BatchResults, retry_failed: bool, reporter: &dyn Reporter) -> bool {
    let key = line.key();
    // A run an earlier batch started and never recorded is finished now, whatever the goal's older records say.
    if results.unfinished(&key).is_some() {
        return true;
    }
    let Some(recorded) = results.recorded(&key) else {
        return true;
    };
    if let GoalLine::Goal(goal) = line {
        if goal.id.is_none() && recorded.goal.as_deref().is_some_and(|g| g != goal.goal) {
            reporter.message(&format!(
                "line {}: the results hold another goal for this line (was the goal file edited?); give goals ids \
                 to tell them apart, or write to a new --out",
                goal.line
            ));
        }
    }
    retry_failed && !recorded.done
}

/// Runs one goal as a normal run, or resumes the run an earlier batch left unfinished; whatever happens becomes its
/// record.
fn run_goal(
    goal: &BatchGoal,
    batch: &Batch<'_>,
    models: &mut LazyModels<'_>,
    filed: &Mutex<Filed>,
    reporter: &dyn Reporter,
) -> BatchRecord {
    let started = Instant::now();
    let mut run = None;
    let unfinished = lock(filed).results.unfinished(&goal.key()).cloned();
    let resumed = unfinished.and_then(|earlier| resume(goal, earlier, models, &mut run, reporter).transpose());
    let outcome = resumed.unwrap_or_else(|| attempt(goal, batch, models, filed, &mut run));
    match outcome {
        Ok(outcome) => match &run {
            Some((id, dir)) => BatchRecord::from_outcome(goal, id, dir, &outcome, started.elapsed()),
            None => BatchRecord::failed(goal, None, "the run has no directory".into(), started.elapsed()),
        },
        Err(e) => {
            let run = run.as_ref().map(|(id, dir)| (id.as_str(), dir.as_path()));
            BatchRecord::failed(goal, run, e.to_string(), started.elapsed())
        }
    }
}

/// The batch's filed records, whichever goal thread panicked while holding them.
fn lock(filed: &Mutex<Filed>) -> std::sync::MutexGuard<'_, Filed> {
    filed.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The goal's tools, run directory, log and run; `run` is set as soon as the run's directory exists, and journaled
/// in the results before the run does anything.
fn attempt(
    goal: &BatchGoal,
    batch: &Batch<'_>,
    models: &mut LazyModels<'_>,
    filed: &Mutex<Filed>,
    run: &mut Option<(String, PathBuf)>,
) -> Result<RunOutcome> {
    let tools = &batch.args.agent.tools;
    let own;
    let (context, registry) = match &goal.workspace {
        None => (&batch.context, &batch.registry),
        Some(workspace) => {
            own = build(&batch.goals_dir.join(workspace), tools)?;
            (&own.0, &own.1)
        }
    };
    let settings = run_settings(&batch.args.agent, context, Approval::None);
    let (id, dir) = batch.runs.create_run()?;
    *run = Some((id.clone(), dir.clone()));
    // Held for the whole run, so a `tandem resume` of it meanwhile is refused.
    let _lock = lock_run(&dir)?;
    lock(filed).results.append_started(goal, StartedRun { run_id: id, run_dir: dir.clone() })?;
    let log = EventLog::create(&dir)?;
    models.begin_run();
    // Batch never asks: approval stays off, and the approver is never consulted.
    let mut approver = AutoApprove;
    let agent = Agent::start(
        &goal.goal,
        settings,
        log,
        RunParts { registry, context, models, approver: &mut approver, observer: &NoObserver },
    )?;
    agent.run(None)
}

/// Finishes a goal's run that an earlier batch started, as `tandem resume` would: finished steps are not run again,
/// and a step left in doubt runs again only when its call is safe to repeat (else the goal's record says which step
/// and how to resume it by hand). A run that had already finished gives its record from its log. None for a run
/// that logged nothing yet (killed before its first event, or its directory gone): the goal starts over in a new
/// run.
fn resume(
    goal: &BatchGoal,
    earlier: StartedRun,
    models: &mut LazyModels<'_>,
    run: &mut Option<(String, PathBuf)>,
    reporter: &dyn Reporter,
) -> Result<Option<RunOutcome>> {
    let started = Instant::now();
    if !earlier.run_dir.join(EventLog::FILE).is_file() {
        return Ok(None);
    }
    *run = Some((earlier.run_id.clone(), earlier.run_dir.clone()));
    let _lock = lock_run(&earlier.run_dir)?;
    let (log, contents) = EventLog::open(&earlier.run_dir)?;
    let state = RunState::replay(&contents.records);
    if let Some((stop, detail)) = state.finished.clone() {
        return Ok(Some(RunOutcome { stop, detail, answer: state.answer.clone(), state, wall: started.elapsed() }));
    }
    let Some(settings) = &state.settings else {
        *run = None;
        return Ok(None);
    };
    reporter.message(&format!(
        "{}: resuming run {}, which an earlier batch started and did not finish",
        goal.key(),
        earlier.run_id
    ));
    let (context, registry) = build_tools(&settings.tool_settings())?;
    models.begin_run();
    let mut approver = AutoApprove;
    let agent = Agent::resume(
        log,
        &contents.records,
        false,
        RunParts { registry: &registry, context: &context, models, approver: &mut approver, observer: &NoObserver },
    )?;
    agent.run(None).map(Some)
}

/// One goal's outcome in a line.
fn describe(record: &BatchRecord) -> String {
    let name = match (&record.id, &record.goal) {
        (Some(id), _) => format!("{id} (line {})", record.line),
        (None, Some(goal)) => format!("line {}: \"{}\"", record.line, clip(goal, 50)),
        (None, None) => format!("line {}", record.line),
    };
    let mark = if record.is_done() { "✓" } else { "✗" };
    let result = match (&record.error, &record.answer) {
        (Some(error), _) => format!("error: {}", clip(error, 160)),
        (None, Some(answer)) if record.is_done() => format!("→ {}", clip(answer, 80)),
        (None, _) => format!("{}: {}", record.stop, clip(&record.detail, 120)),
    };
    let run = record.run_id.as_deref().map(|id| format!(" [run {id}]")).unwrap_or_default();
    format!("{mark} {name} {:.1} s {result}{run}", record.wall_s)
}
