//! Run directories: where runs live, their ids, and what a run's log says about it (for `tandem runs` and
//! `tandem resume`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::agent::log::events::{read_log, Event, EventLog, LogContents, PlanOrigin, Record, RunSettings, StopReason};
use crate::agent::plan::planner::Revision;
use crate::agent::plan::Plan;
use crate::agent::usage::ModelUsage;
use crate::settings::{env, Approval};
use crate::{Error, Result};

/// `$TANDEM_RUNS_DIR`, else `$XDG_DATA_HOME/tandem/runs`, else `~/.local/share/tandem/runs`.
pub fn default_runs_dir() -> PathBuf {
    if let Some(dir) = env::runs_dir() {
        return dir;
    }
    let base = env::data_home().unwrap_or_else(|| PathBuf::from(".tandem"));
    base.join("tandem").join("runs")
}

/// The directory that holds one directory per run.
#[derive(Debug, Clone)]
pub struct RunsDir {
    root: PathBuf,
}

impl RunsDir {
    /// Runs under `root` (created when the first run starts).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Creates a fresh run directory; its id sorts by start time (`20261122-181720-3f2a`).
    pub fn create_run(&self) -> Result<(String, PathBuf)> {
        std::fs::create_dir_all(&self.root).map_err(|e| Error::io(format!("creating {}", self.root.display()), e))?;
        let stamp = utc_stamp(crate::agent::log::events::now_ms() / 1000);
        for _ in 0..16 {
            let id = format!("{stamp}-{:04x}", rand::random::<u16>());
            let dir = self.root.join(&id);
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok((id, dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(format!("creating {}", dir.display()), e)),
            }
        }
        Err(Error::Run(format!("could not pick a fresh run id under {}", self.root.display())))
    }

    /// The directory of a run given its id or a unique prefix of it (`latest` for the newest run).
    pub fn find(&self, id: &str) -> Result<(String, PathBuf)> {
        let ids = self.ids()?;
        if id == "latest" {
            return ids
                .last()
                .map(|last| (last.clone(), self.root.join(last)))
                .ok_or_else(|| Error::Run(format!("no runs yet under {}", self.root.display())));
        }
        let matches: Vec<&String> = ids.iter().filter(|candidate| candidate.starts_with(id)).collect();
        match matches.as_slice() {
            [one] => Ok(((*one).clone(), self.root.join(one))),
            [] => Err(Error::Run(format!("no run '{id}' under {} (see `tandem runs list`)", self.root.display()))),
            many => Err(Error::Run(format!(
                "'{id}' matches {} runs ({}); give more of the id",
                many.len(),
                many.iter().take(5).map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ))),
        }
    }

    /// Run ids, oldest first.
    pub fn ids(&self) -> Result<Vec<String>> {
        let entries = match std::fs::read_dir(&self.root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(format!("listing {}", self.root.display()), e)),
        };
        let mut ids: Vec<String> = entries
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.path().join(EventLog::FILE).is_file())
            .filter_map(|entry| entry.file_name().into_string().ok())
            .collect();
        ids.sort();
        Ok(ids)
    }
}

/// `YYYYMMDD-HHMMSS` (UTC) for a Unix time in seconds.
pub fn utc_stamp(unix_seconds: u64) -> String {
    let (year, month, day) = crate::llm::chat::civil_from_days((unix_seconds / 86_400) as i64);
    let secs = unix_seconds % 86_400;
    format!("{year:04}{month:02}{day:02}-{:02}{:02}{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

/// A run as its log tells it: what resume needs and what `runs list` shows.
#[derive(Debug, Clone, Default)]
pub struct RunState {
    /// The goal.
    pub goal: String,
    /// Settings the run started with.
    pub settings: Option<RunSettings>,
    /// The plan the run was given (`--plan`), if any.
    pub given_plan: Option<Plan>,
    /// The newest plan revision and whether it was approved (or needed no approval).
    pub plan: Option<Plan>,
    /// Whether the newest plan was approved by the user or `--yes`.
    pub plan_approved: bool,
    /// Whether the newest plan was written without validation problems (an invalid one is replanned, not shown
    /// for approval).
    pub plan_valid: bool,
    /// Outputs of the newest plan's finished steps.
    pub outputs: HashMap<String, Value>,
    /// Tool calls of the newest plan logged without a result yet, by step: `(tool, arguments)`. After a crash
    /// these are in doubt: the tool may or may not have taken effect.
    pub in_flight: BTreeMap<String, (String, Map<String, Value>)>,
    /// Every successful call in the run, by tool and arguments (so a revision does not redo finished work).
    pub call_cache: HashMap<String, Value>,
    /// Replans so far.
    pub replans: u32,
    /// Replans the step evaluation asked for so far (it may ask once a run).
    pub evaluations_sent_back: u32,
    /// Step executions so far.
    pub steps_run: usize,
    /// Planner and executor usage so far.
    pub planner: UsageTotals,
    /// Executor usage so far.
    pub executor: UsageTotals,
    /// Earlier plans and the feedback that replaced them, for the planner's next revision.
    pub revisions: Vec<Revision>,
    /// Failed step executions, in words (step mode shows them to the planner).
    pub failures: Vec<String>,
    /// Every tool call that failed in the run: tool, arguments, error (a call is not made again with the same
    /// arguments).
    pub failed_calls: Vec<(String, Map<String, Value>, String)>,
    /// Calls whose tool process failed once (they may be made once more unchanged).
    pub tried_calls: Vec<(String, Map<String, Value>)>,
    /// Rule `writes-keep-data`: how many whole writes it refused in this run (it refuses once).
    pub lost_data_refused: u32,
    /// The newest failed tool call: what a repair rewrites.
    pub last_failure: Option<FailedStep>,
    /// How the newest plan came about.
    pub plan_origin: Option<PlanOrigin>,
    /// Repaired plans so far.
    pub repairs: u32,
    /// The answer, once given.
    pub answer: Option<String>,
    /// The last plan whose steps all ran but whose results the joiner judged not to meet the goal: its version
    /// and the answer its steps gave. What the run answers if its replans then run out.
    pub doubted: Option<(u32, String)>,
    /// How it ended, once it has.
    pub finished: Option<(StopReason, String)>,
    /// Start time (Unix ms).
    pub started_ms: u64,
    /// Time of the last event (Unix ms).
    pub last_ms: u64,
}

/// A step whose tool call failed.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedStep {
    /// The plan version it ran in.
    pub version: u32,
    /// Its id.
    pub step: String,
    /// The tool called.
    pub tool: String,
    /// The arguments it was called with.
    pub args: Map<String, Value>,
    /// What the tool answered.
    pub error: String,
    /// The tool's process or server failed rather than answering (`tools::error::may_pass_unchanged`): other
    /// arguments would not help, the same call may pass.
    pub unchanged_may_pass: bool,
}

/// Calls and tokens of one model role.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UsageTotals {
    /// Model calls.
    pub calls: usize,
    /// Prompt tokens.
    pub tokens_in: usize,
    /// Generated tokens.
    pub tokens_out: usize,
    /// Time in the model, ms.
    pub ms: u64,
}

impl UsageTotals {
    /// Adds another total (of another run).
    pub fn merge(&mut self, other: &UsageTotals) {
        self.calls += other.calls;
        self.tokens_in += other.tokens_in;
        self.tokens_out += other.tokens_out;
        self.ms += other.ms;
    }

    /// Adds one call.
    pub fn add(&mut self, usage: &ModelUsage) {
        self.calls += 1;
        self.tokens_in += usage.tokens_in;
        self.tokens_out += usage.tokens_out;
        self.ms += usage.ms;
    }
}

/// The key under which a tool call's output is remembered.
pub fn call_key(tool: &str, args: &serde_json::Map<String, Value>) -> String {
    format!("{tool}\u{0}{}", Value::Object(args.clone()))
}

impl RunState {
    /// Replays a run's events.
    pub fn replay(records: &[Record]) -> Self {
        let mut state = RunState::default();
        for record in records {
            state.apply(record);
        }
        state
    }

    /// The token totals of the model that played `role` in a joiner or evaluation call: the executor's for
    /// `executor`, else the planner's.
    fn totals_of(&mut self, role: &str) -> &mut UsageTotals {
        if role == "executor" {
            &mut self.executor
        } else {
            &mut self.planner
        }
    }

    /// Takes one event into account (the orchestrator calls this for every event it logs, so its view of the
    /// run is always the log's).
    pub fn apply(&mut self, record: &Record) {
        if self.started_ms == 0 {
            self.started_ms = record.at_ms;
        }
        self.last_ms = record.at_ms;
        match &record.event {
            Event::RunStarted { goal, settings, plan } => {
                self.goal = goal.clone();
                self.given_plan = plan.clone();
                self.plan_approved = settings.approve != Approval::Plan;
                self.settings = Some(settings.clone());
            }
            Event::PlanWritten { plan, usage, origin, issues, .. } => {
                // Step mode grows one plan a step at a time: its outputs stay valid.
                if *origin != PlanOrigin::NextStep {
                    self.outputs.clear();
                    self.in_flight.clear();
                    self.plan_approved = self.settings.as_ref().is_none_or(|s| s.approve != Approval::Plan);
                }
                self.plan = Some(plan.clone());
                self.plan_origin = Some(*origin);
                self.repairs += u32::from(*origin == PlanOrigin::Repair);
                self.plan_valid = issues.is_empty();
                if let Some(usage) = usage {
                    self.planner.add(usage);
                }
            }
            Event::PlanApproval { version, decision, .. } if *version == self.version() => {
                self.plan_approved = decision != "rejected";
            }
            Event::ExecutorCall { usage, role: Some(role), .. } if role == "planner" => self.planner.add(usage),
            Event::ExecutorCall { usage, .. } => self.executor.add(usage),
            Event::Joined { version, verdict, from_steps, usage, role, .. } => {
                if verdict == "not_met" && !from_steps.is_empty() {
                    self.doubted = Some((*version, from_steps.clone()));
                }
                self.totals_of(role).add(usage);
            }
            Event::StepsEvaluated { usage, role, sent_back, .. } => {
                self.totals_of(role).add(usage);
                self.evaluations_sent_back += u32::from(*sent_back);
            }
            Event::ToolCall { version, step, tool, args } if *version == self.version() => {
                self.in_flight.insert(step.clone(), (tool.clone(), args.clone()));
            }
            Event::StepFinished { version, step, tool, args, output, error, .. } => {
                self.steps_run += 1;
                if error.as_deref().is_some_and(|e| e.contains(crate::agent::rules::LOSES_DATA)) {
                    self.lost_data_refused += 1;
                }
                // The call as made: a failed step whose arguments a model wrote (read out of a text, filled in)
                // finishes with the arguments it was prepared with, and its tool was called with the ones written;
                // those are the call that must not be repeated.
                let called = self.in_flight.remove(step);
                if let (Some((_, args)), None) = (&called, output) {
                    let error = error.clone().unwrap_or_else(|| "unknown error".into());
                    // A process that failed may pass when called again unchanged: once. A second failure of the
                    // same call, and every answer of a tool that the call is wrong, forbid it.
                    let unchanged_may_pass = crate::tools::error::may_pass_unchanged(&error)
                        && !self.tried_calls.iter().any(|(t, a)| t == tool && a == args);
                    if unchanged_may_pass {
                        self.tried_calls.push((tool.clone(), args.clone()));
                    } else {
                        self.failed_calls.push((tool.clone(), args.clone(), error.clone()));
                    }
                    let (step, tool, args) = (step.clone(), tool.clone(), args.clone());
                    let version = *version;
                    self.last_failure = Some(FailedStep { version, step, tool, args, error, unchanged_may_pass });
                }
                match output {
                    Some(output) => {
                        self.call_cache.insert(call_key(tool, args), output.clone());
                        if *version == self.version() {
                            self.outputs.insert(step.clone(), output.clone());
                        }
                    }
                    None => self.failures.push(format!(
                        "{step} {tool} {} failed: {}",
                        Value::Object(args.clone()),
                        error.as_deref().unwrap_or("unknown error")
                    )),
                }
            }
            Event::Replan { reason, .. } => {
                // A plan written again because its steps were written before the results they wait for were seen
                // (rule `dependencies`, at run time) is no failure to count against `--max-replans`.
                if !reason.starts_with(crate::agent::rules::WRITTEN_BEFORE_SEEN) {
                    self.replans += 1;
                }
                let plan_text = self.plan.as_ref().and_then(|p| serde_json::to_string(p).ok()).unwrap_or_default();
                self.revisions.push(Revision { plan_text, feedback: reason.clone() });
            }
            Event::Answer { text } => self.answer = Some(text.clone()),
            Event::RunFinished { stop, detail } => self.finished = Some((*stop, detail.clone())),
            _ => {}
        }
    }

    /// The plan version a run waits on a decision for: it asks for plan approval, has not finished, and its
    /// newest plan is valid and neither approved nor rejected (a run stopped there resumes by asking for it).
    pub fn awaiting_approval(&self) -> Option<u32> {
        let asks = self
            .settings
            .as_ref()
            .is_some_and(|s| s.approve == Approval::Plan && s.pair.mode == crate::settings::Mode::PlanAhead);
        (asks && self.finished.is_none() && self.plan.is_some() && self.plan_valid && !self.plan_approved)
            .then(|| self.version())
    }

    /// The error of an earlier call of `tool` with exactly these arguments that failed, if one did.
    pub fn failed_call(&self, tool: &str, args: &Map<String, Value>) -> Option<&str> {
        self.failed_calls.iter().find(|(t, a, _)| t == tool && a == args).map(|(_, _, e)| e.as_str())
    }

    /// Generated tokens so far, planner and executor together.
    pub fn tokens_out(&self) -> usize {
        self.planner.tokens_out + self.executor.tokens_out
    }

    /// The newest plan's revision number.
    pub fn version(&self) -> u32 {
        self.plan.as_ref().map_or(0, |p| p.version)
    }

    /// One word for `runs list`: done / budget / rejected / error, or `interrupted` when the log just stops.
    pub fn status(&self) -> String {
        match &self.finished {
            Some((stop, _)) => stop.to_string(),
            None => "interrupted".into(),
        }
    }
}

/// Locks a run's directory (its `lock` file) for as long as the file is held, so that two processes, or a server
/// and `tandem resume`, cannot run the same run at once.
pub fn lock_run(dir: &Path) -> Result<std::fs::File> {
    use fs2::FileExt;
    let path = dir.join("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    file.try_lock_exclusive()
        .map_err(|_| Error::Run(format!("run {} is being run by another process", dir.display())))?;
    Ok(file)
}

/// Reads a run's log.
pub fn load_run(dir: &Path) -> Result<LogContents> {
    read_log(&dir.join(EventLog::FILE))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    /// A step whose arguments a model wrote (read out of a text) finishes with the arguments it was prepared with;
    /// the call that failed, and must not be made again, is the one the tool got.
    #[test]
    fn a_failed_call_is_the_one_the_tool_got() {
        let record = |seq, event| Record { seq, at_ms: 1, event };
        let (prepared, called) =
            (args(json!({"expression": "Repository status: …"})), args(json!({"expression": "-a"})));
        let tool = "calculator".to_string();
        let state = RunState::replay(&[
            record(0, Event::ToolCall { version: 0, step: "s2".into(), tool: tool.clone(), args: called.clone() }),
            record(
                1,
                Event::StepFinished {
                    version: 0,
                    step: "s2".into(),
                    tool: tool.clone(),
                    args: prepared.clone(),
                    output: None,
                    error: Some("cannot evaluate '-a'".into()),
                    ms: 1,
                    via: "executor".into(),
                },
            ),
        ]);
        assert_eq!(state.failed_call(&tool, &called), Some("cannot evaluate '-a'"));
        assert_eq!(state.failed_call(&tool, &prepared), None);
    }
}
