//! `tandem run` and `tandem resume`: set up tools, models, approval and the run's log, run the agent, print the
//! answer last (or one JSON object with `--json`).

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;

use crate::agent::log::events::EventLog;
use crate::agent::log::runs::lock_run;
use crate::agent::log::summary::run_summary;
use crate::agent::setup::{open_runs_dir, run_settings, runner_models};
use crate::agent::{Agent, Approval, Approver, AutoApprove, Pause, Plan, RunOutcome, RunParts, StopReason};
use crate::cli::{ResumeArgs, RunArgs};
use crate::commands::run_view::{PausingApprover, TerminalApprover, TerminalObserver};
use crate::commands::Outcome;
use crate::progress::Reporter;
use crate::tools::toolbox;
use crate::{Error, Result};

/// Runs `tandem run`.
pub fn run(args: RunArgs, reporter: &dyn Reporter, quiet: bool) -> Result<Outcome> {
    let given_plan = match &args.plan {
        Some(path) => Some(read_plan(path)?),
        None => None,
    };
    let goal = match (&args.goal, &given_plan) {
        (Some(goal), _) => goal.clone(),
        (None, Some(plan)) => plan.goal.clone(),
        (None, None) => {
            return Err(Error::Usage("give a goal (tandem run \"...\") or a plan file (--plan FILE)".into()))
        }
    };
    let approve = args.approve.unwrap_or(Approval::Destructive);
    check_can_ask(approve, args.yes)?;
    let (context, registry) = toolbox::build_tools(&args.agent.tools.settings())?;
    let settings = run_settings(&args.agent.settings(), &context, approve);
    let runs = open_runs_dir(args.runner.runs.runs_dir.as_ref());
    let (id, dir) = runs.create_run()?;
    // Held for the whole run, so a `tandem resume` of it meanwhile is refused.
    let _lock = lock_run(&dir)?;
    let mut approver = approver_for(args.yes, approve, &dir);
    let log = approver.close(EventLog::create(&dir)?);
    if !args.runner.json {
        reporter.message(&format!("run {id} (log: {})", log.path().display()));
        report_confinement(&settings, reporter);
    }
    let mut models = runner_models(&settings, &args.runner.settings(), reporter)?;
    let observer = TerminalObserver::new(quiet || args.runner.json);
    let agent = Agent::start(
        &goal,
        settings,
        log,
        RunParts {
            registry: &registry,
            context: &context,
            models: &mut models,
            approver: approver.as_mut(),
            observer: &observer,
        },
    )?;
    let ran = agent.run(given_plan);
    finish(&id, &dir, ran, &approver, args.runner.json)
}

/// Runs `tandem resume`.
pub fn resume(args: ResumeArgs, reporter: &dyn Reporter, quiet: bool) -> Result<Outcome> {
    let runs = open_runs_dir(args.runner.runs.runs_dir.as_ref());
    let (id, dir) = runs.find(&args.id)?;
    let _lock = lock_run(&dir)?;
    let (log, contents) = EventLog::open(&dir)?;
    for bad in &contents.bad_lines {
        reporter.message(&format!("skipping an unreadable log line (a write cut short?): {bad}"));
    }
    let state = crate::agent::RunState::replay(&contents.records);
    if let Some((stop, detail)) = &state.finished {
        return Err(Error::Run(format!(
            "run {id} already finished ({stop}: {detail}); `tandem runs show {id}` shows it, `tandem run` starts a new one"
        )));
    }
    let settings = state.settings.clone().ok_or_else(|| Error::Run(format!("run {id} has no settings in its log")))?;
    let approve = settings.approve;
    check_can_ask(approve, args.yes)?;
    let (context, registry) = toolbox::build_tools(&settings.tool_settings())?;
    if !args.runner.json {
        reporter.message(&format!("resuming run {id}: \"{}\"", state.goal));
        report_confinement(&settings, reporter);
    }
    let mut models = runner_models(&settings, &args.runner.settings(), reporter)?;
    let observer = TerminalObserver::new(quiet || args.runner.json);
    let mut approver = approver_for(args.yes, approve, &dir);
    let log = approver.close(log);
    let agent = Agent::resume(
        log,
        &contents.records,
        args.rerun_in_doubt,
        RunParts {
            registry: &registry,
            context: &context,
            models: &mut models,
            approver: approver.as_mut(),
            observer: &observer,
        },
    )?;
    let ran = agent.run(None);
    finish(&id, &dir, ran, &approver, args.runner.json)
}

/// Says what confines the programs tools may start, when the run can start any (`shell`, command tools).
fn report_confinement(settings: &crate::agent::RunSettings, reporter: &dyn Reporter) {
    if !settings.allow_shell.is_empty() || settings.tools_file.is_some() {
        reporter.message(&format!("programs run by tools are {}", crate::tools::confine::confinement()));
    }
}

fn read_plan(path: &Path) -> Result<Plan> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading the plan {}", path.display()), e))?;
    Plan::from_json(&text).map_err(|e| Error::InvalidInput { path: path.to_path_buf(), message: e.to_string() })
}

/// Approval of a plan or of every call needs someone to ask: a terminal on stdin, or `--yes`. (A destructive call
/// with no one to ask pauses the run at that call instead: most runs make none.)
fn check_can_ask(approve: Approval, yes: bool) -> Result<()> {
    let asks_up_front = matches!(approve, Approval::Plan | Approval::Steps);
    if asks_up_front && !yes && !std::io::stdin().is_terminal() {
        return Err(Error::Usage(format!(
            "--approve {} asks on a terminal, but stdin is not one: run it in a terminal, or add --yes to approve \
             automatically (approvals are still logged)",
            approve.name()
        )));
    }
    Ok(())
}

/// Who approves a run from the command line: `--yes`, the user on a terminal, or no one (the run pauses).
enum RunApprover {
    Auto(AutoApprove),
    Terminal(TerminalApprover),
    Pausing(PausingApprover),
}

impl RunApprover {
    fn as_mut(&mut self) -> &mut dyn Approver {
        match self {
            RunApprover::Auto(a) => a,
            RunApprover::Terminal(a) => a,
            RunApprover::Pausing(a) => a,
        }
    }

    /// The run's log, closed by the pausing approver when it pauses.
    fn close(&self, log: EventLog) -> EventLog {
        match self {
            RunApprover::Pausing(a) => log.close_when(Arc::clone(&a.pause.stop)),
            _ => log,
        }
    }

    /// What a paused run waits for.
    fn waits_for(&self) -> Option<&str> {
        match self {
            RunApprover::Pausing(a) => a.pause.waits_for(),
            _ => None,
        }
    }
}

fn approver_for(yes: bool, approve: Approval, dir: &Path) -> RunApprover {
    if yes {
        RunApprover::Auto(AutoApprove)
    } else if std::io::stdin().is_terminal() {
        RunApprover::Terminal(TerminalApprover { edit_file: dir.join("plan-edit.json"), approve })
    } else {
        RunApprover::Pausing(PausingApprover { pause: Pause::default() })
    }
}

/// Prints the outcome: the answer last on stdout (or one JSON object, whose `stop` says why it ended); a run that
/// did not finish is `Outcome::Stopped`.
fn finish(id: &str, dir: &Path, ran: Result<RunOutcome>, approver: &RunApprover, json: bool) -> Result<Outcome> {
    if let Some(what) = approver.waits_for() {
        if json {
            let summary = run_summary(id, dir)?;
            println!("{}", serde_json::to_string_pretty(&summary).map_err(Error::encode("the run summary"))?);
        }
        return Ok(Outcome::Stopped(format!(
            "run {id} is paused: {what} needs approval (`--approve`; a tool its server marks destructive is asked \
             about by default), and stdin is not a terminal to ask on. `tandem resume {id} --yes` approves it and \
             goes on; `tandem resume {id}` in a terminal asks"
        )));
    }
    let outcome = &ran?;
    if json {
        let summary = run_summary(id, dir)?;
        println!("{}", serde_json::to_string_pretty(&summary).map_err(Error::encode("the run summary"))?);
    } else {
        let p = &outcome.state.planner;
        let e = &outcome.state.executor;
        eprintln!(
            "{} in {:.1} s: planner {} call(s), {} → {} tokens; executor {} call(s), {} → {} tokens; {} replan(s)",
            outcome.stop,
            outcome.wall.as_secs_f64(),
            p.calls,
            p.tokens_in,
            p.tokens_out,
            e.calls,
            e.tokens_in,
            e.tokens_out,
            outcome.state.replans
        );
        if let Some(answer) = &outcome.answer {
            println!("{answer}");
        }
    }
    match outcome.stop {
        StopReason::Done => Ok(Outcome::Done),
        stop => Ok(Outcome::Stopped(format!(
            "the run stopped ({stop}): {} — `tandem runs show {id}` has the record",
            outcome.detail
        ))),
    }
}
