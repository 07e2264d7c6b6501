//! Batches of goals (`tandem batch`): reading the goal file (JSON lines), the results file (one record per goal,
//! appended and synced, read back so a rerun skips the goals already recorded, and a journal line per run started,
//! so a rerun resumes a goal's run that a crash left unfinished), and the batch's totals.

pub mod merge;
pub mod run;

use std::collections::HashMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::log::events::{now_ms, StopReason};
use crate::agent::log::runs::UsageTotals;
use crate::agent::run::orchestrator::RunOutcome;
use crate::{Error, Result};

/// What names a goal across reruns of a batch: its id, or its line number when it has none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GoalKey {
    /// The goal's `id`.
    Id(String),
    /// The goal's line in the goal file (1-based), for goals without an id and for unreadable lines.
    Line(usize),
}

impl GoalKey {
    /// The key of a goal with this id (if any) on this line.
    fn of(id: Option<&str>, line: usize) -> Self {
        match id {
            Some(id) => GoalKey::Id(id.to_string()),
            None => GoalKey::Line(line),
        }
    }
}

impl fmt::Display for GoalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GoalKey::Id(id) => write!(f, "id {id:?}"),
            GoalKey::Line(line) => write!(f, "line {line}"),
        }
    }
}

/// One goal of a goal file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchGoal {
    /// Line in the goal file (1-based).
    pub line: usize,
    /// The goal's id, if the line gave one.
    pub id: Option<String>,
    /// The goal, in plain words.
    pub goal: String,
    /// The goal's own workspace, as written (relative paths are taken from the goal file's directory).
    pub workspace: Option<PathBuf>,
}

impl BatchGoal {
    /// The goal's key in the results file.
    pub fn key(&self) -> GoalKey {
        GoalKey::of(self.id.as_deref(), self.line)
    }
}

/// One non-blank, non-comment line of a goal file: a goal, or why it cannot be one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoalLine {
    /// A goal to run.
    Goal(BatchGoal),
    /// A line that is not a goal (bad JSON, a missing or empty goal, a repeated id, …).
    Malformed {
        /// Line in the goal file (1-based).
        line: usize,
        /// What is wrong with it.
        message: String,
    },
}

impl GoalLine {
    /// The line number (1-based).
    pub fn line(&self) -> usize {
        match self {
            GoalLine::Goal(goal) => goal.line,
            GoalLine::Malformed { line, .. } => *line,
        }
    }

    /// The key its record has in the results file (a malformed line is known by its line number).
    pub fn key(&self) -> GoalKey {
        match self {
            GoalLine::Goal(goal) => goal.key(),
            GoalLine::Malformed { line, .. } => GoalKey::Line(*line),
        }
    }
}

/// A goal line written as an object.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GoalObject {
    goal: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    workspace: Option<PathBuf>,
}

/// Parses a goal file: each line is a JSON string (the goal) or an object `{"goal": …, "id": …, "workspace": …}`
/// (`id` and `workspace` optional, other keys refused). Blank lines and lines starting with `#` are skipped; every
/// other line becomes a [`GoalLine`], malformed ones included, so none is dropped silently. An id used twice
/// makes the second line malformed.
pub fn parse_goals(text: &str) -> Vec<GoalLine> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut first_line_of: HashMap<String, usize> = HashMap::new();
    let mut lines = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let parsed = parse_line(trimmed).and_then(|(goal, id, workspace)| {
            if let Some(id) = &id {
                if let Some(first) = first_line_of.get(id) {
                    return Err(format!("id {id:?} is used again (first on line {first}); ids must be unique"));
                }
                first_line_of.insert(id.clone(), line);
            }
            Ok(BatchGoal { line, id, goal, workspace })
        });
        lines.push(match parsed {
            Ok(goal) => GoalLine::Goal(goal),
            Err(message) => GoalLine::Malformed { line, message },
        });
    }
    lines
}

/// One line's goal, id and workspace, or what is wrong with it.
fn parse_line(text: &str) -> std::result::Result<(String, Option<String>, Option<PathBuf>), String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    let (goal, id, workspace) = match value {
        Value::String(goal) => (goal, None, None),
        Value::Object(_) => {
            let object: GoalObject = serde_json::from_value(value).map_err(|e| format!("not a goal object ({e})"))?;
            (object.goal, object.id, object.workspace)
        }
        other => {
            let kind = match other {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                _ => "an array",
            };
            return Err(format!("expected a JSON string (the goal) or an object with \"goal\", found {kind}"));
        }
    };
    let goal = goal.trim().to_string();
    if goal.is_empty() {
        return Err("the goal is empty".into());
    }
    let id = match id {
        Some(id) if id.trim().is_empty() => return Err("the id is empty (leave it out to use the line number)".into()),
        Some(id) => Some(id.trim().to_string()),
        None => None,
    };
    if workspace.as_ref().is_some_and(|w| w.as_os_str().is_empty()) {
        return Err("the workspace is empty (leave it out to use --workspace)".into());
    }
    Ok((goal, id, workspace))
}

/// Reads and parses a goal file ([`parse_goals`]).
pub fn read_goals(path: &Path) -> Result<Vec<GoalLine>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading the goal file {}", path.display()), e))?;
    Ok(parse_goals(&text))
}

/// What a goal is known by when goals are split into shards: its id, or `line N`.
pub fn shard_key(key: &GoalKey) -> String {
    match key {
        GoalKey::Id(id) => id.clone(),
        GoalKey::Line(line) => format!("line {line}"),
    }
}

/// The results file of one shard: `results.jsonl` becomes `results.shard-K-of-N.jsonl`, beside it.
pub fn shard_results_path(out: &Path, shard: &crate::settings::Shard) -> PathBuf {
    let stem = out.file_stem().and_then(|s| s.to_str()).unwrap_or("results");
    let name = match out.extension().and_then(|e| e.to_str()) {
        Some(ext) => format!("{stem}.{}.{ext}", shard.tag()),
        None => format!("{stem}.{}", shard.tag()),
    };
    out.with_file_name(name)
}

/// One goal's record in the results file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchRecord {
    /// Line in the goal file.
    pub line: usize,
    /// The goal's id, if it has one.
    pub id: Option<String>,
    /// The goal (none for a malformed line).
    pub goal: Option<String>,
    /// The goal's own workspace, as written in the goal file.
    pub workspace: Option<PathBuf>,
    /// The run's id (`tandem runs show ID`), once its directory was made.
    pub run_id: Option<String>,
    /// The run's directory, with its `events.jsonl`.
    pub run_dir: Option<PathBuf>,
    /// Why the run stopped; `error` for a goal that failed before or outside its run, and for a malformed line.
    pub stop: StopReason,
    /// The answer, when the run got that far.
    pub answer: Option<String>,
    /// The stop in words.
    pub detail: String,
    /// Step executions.
    pub steps: usize,
    /// Plan revisions after failures.
    pub replans: u32,
    /// Planner calls, tokens and time in the model.
    pub planner: UsageTotals,
    /// Executor calls, tokens and time in the model.
    pub executor: UsageTotals,
    /// Wall time of the goal, in seconds.
    pub wall_s: f64,
    /// The error, when the goal stopped with one (a malformed line says which file and line).
    pub error: Option<String>,
    /// When the record was written (Unix ms).
    pub finished_unix_ms: u64,
}

impl BatchRecord {
    /// The record of a finished run.
    pub fn from_outcome(goal: &BatchGoal, run_id: &str, run_dir: &Path, outcome: &RunOutcome, wall: Duration) -> Self {
        let error = (outcome.stop == StopReason::Error).then(|| outcome.detail.clone());
        Self {
            run_id: Some(run_id.to_string()),
            run_dir: Some(run_dir.to_path_buf()),
            stop: outcome.stop,
            answer: outcome.answer.clone(),
            detail: outcome.detail.clone(),
            steps: outcome.state.steps_run,
            replans: outcome.state.replans,
            planner: outcome.state.planner,
            executor: outcome.state.executor,
            error,
            ..Self::failed(goal, None, String::new(), wall)
        }
    }

    /// The record of a goal that failed outside a finished run (its workspace, its log); `run` is the run's id
    /// and directory when it had been made.
    pub fn failed(goal: &BatchGoal, run: Option<(&str, &Path)>, error: String, wall: Duration) -> Self {
        Self {
            line: goal.line,
            id: goal.id.clone(),
            goal: Some(goal.goal.clone()),
            workspace: goal.workspace.clone(),
            run_id: run.map(|(id, _)| id.to_string()),
            run_dir: run.map(|(_, dir)| dir.to_path_buf()),
            stop: StopReason::Error,
            answer: None,
            detail: error.clone(),
            steps: 0,
            replans: 0,
            planner: UsageTotals::default(),
            executor: UsageTotals::default(),
            wall_s: wall.as_secs_f64(),
            error: (!error.is_empty()).then_some(error),
            finished_unix_ms: now_ms(),
        }
    }

    /// The record of a malformed line; `error` should name the file and line.
    pub fn malformed(line: usize, error: String) -> Self {
        let placeholder = BatchGoal { line, id: None, goal: String::new(), workspace: None };
        Self { goal: None, ..Self::failed(&placeholder, None, error, Duration::ZERO) }
    }

    /// Its key: the id, or the line number.
    pub fn key(&self) -> GoalKey {
        GoalKey::of(self.id.as_deref(), self.line)
    }

    /// Whether the goal finished: stopped `done` without an error.
    pub fn is_done(&self) -> bool {
        self.stop == StopReason::Done && self.error.is_none()
    }
}

/// What the results file already says about a goal (its latest record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The goal text recorded (none for a malformed line).
    pub goal: Option<String>,
    /// Whether it finished `done` without an error.
    pub done: bool,
}

/// A goal's run that a batch started and no record ends yet: a crash stopped the batch while it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartedRun {
    /// The run's id.
    pub run_id: String,
    /// The run's directory, with its `events.jsonl`.
    pub run_dir: PathBuf,
}

/// The key of a results file's journal line: `{"started": {"run_id": …, "run_dir": …}, "line": …, "id": …, "goal":
/// …}`, written and synced before a goal's run does anything, so a batch killed during the run resumes that run
/// on its next start instead of running the goal again (its side effects would happen twice). It has no `stop`:
/// it is not a record.
pub const RUN_STARTED: &str = "started";

/// Whether a results line is a journal line (a run started) rather than a record.
pub fn is_run_started(value: &Value) -> bool {
    value.get(RUN_STARTED).is_some_and(Value::is_object) && value.get("stop").is_none()
}

/// An open results file: records read back by key, new ones appended and synced one by one. The file is locked
/// while open, so two batches cannot write the same results at once. A shard's results file starts with a
/// header line ([`SHARD_HEADER`]) that says which shard it is and what settings it ran with.
#[derive(Debug)]
pub struct BatchResults {
    path: PathBuf,
    file: File,
    latest: HashMap<GoalKey, Recorded>,
    /// Runs started whose goal has no record after them.
    unfinished: HashMap<GoalKey, StartedRun>,
    unreadable: Vec<String>,
    header: Option<Value>,
}

/// The key of a shard's header line in its results file: `{"shard": {"index": K, "count": N}, "goals": …,
/// "settings": {…}}`, a line that is not a record (it has no `line`).
pub const SHARD_HEADER: &str = "shard";

/// Whether a results line is a shard's header rather than a record.
pub fn is_shard_header(value: &Value) -> bool {
    value.get(SHARD_HEADER).is_some() && value.get("line").is_none()
}

impl BatchResults {
    /// Opens (or creates, with its directory) a results file, locks it, and reads the records it holds. A line cut short by a crash
    /// is listed in [`BatchResults::unreadable`] and ended, so the next record starts on a line of its own. A file
    /// another process holds open is an error (after waiting up to 2 s for it).
    pub fn open(path: &Path) -> Result<Self> {
        use fs2::FileExt;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| Error::io(format!("opening the results file {}", path.display()), e))?;
        // A lock can outlive its holder by a moment (a child process between fork and exec shares it): wait a
        // little before calling the file busy.
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while file.try_lock_exclusive().is_err() {
            if std::time::Instant::now() >= deadline {
                return Err(Error::Run(format!(
                    "{} is being written by another `tandem batch`; wait for it to end",
                    path.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut text = String::new();
        file.read_to_string(&mut text)
            .map_err(|e| Error::io(format!("reading the results file {}", path.display()), e))?;
        let Lines { latest, unfinished, unreadable } = read_records(&text, path);
        let header = text.lines().find_map(|line| serde_json::from_str::<Value>(line).ok().filter(is_shard_header));
        if !text.is_empty() && !text.ends_with('\n') {
            file.write_all(b"\n").map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        }
        Ok(Self { path: path.to_path_buf(), file, latest, unfinished, unreadable, header })
    }

    /// The shard header the file holds, if it is a shard's results.
    pub fn header(&self) -> Option<&Value> {
        self.header.as_ref()
    }

    /// Whether the file holds no record (nor journal line) yet.
    pub fn is_empty(&self) -> bool {
        self.latest.is_empty() && self.unfinished.is_empty() && self.unreadable.is_empty()
    }

    /// Writes the shard header (first, into a file with no records) and syncs it.
    pub fn write_header(&mut self, header: &Value) -> Result<()> {
        let mut line = serde_json::to_vec(header).map_err(Error::encode("a shard header"))?;
        line.push(b'\n');
        self.file.write_all(&line).map_err(|e| Error::io(format!("writing {}", self.path.display()), e))?;
        self.file.sync_data().map_err(|e| Error::io(format!("syncing {}", self.path.display()), e))?;
        self.header = Some(header.clone());
        Ok(())
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The latest record of a goal, if any.
    pub fn recorded(&self, key: &GoalKey) -> Option<&Recorded> {
        self.latest.get(key)
    }

    /// The goal's run that an earlier batch started and did not record the end of, if any.
    pub fn unfinished(&self, key: &GoalKey) -> Option<&StartedRun> {
        self.unfinished.get(key)
    }

    /// Lines of the file that are not records, as `file:line: reason`.
    pub fn unreadable(&self) -> &[String] {
        &self.unreadable
    }

    /// Appends one record and syncs it to disk before returning.
    pub fn append(&mut self, record: &BatchRecord) -> Result<()> {
        self.write_line(serde_json::to_vec(record).map_err(Error::encode("a batch result"))?)?;
        self.unfinished.remove(&record.key());
        self.latest.insert(record.key(), Recorded { goal: record.goal.clone(), done: record.is_done() });
        Ok(())
    }

    /// Journals that `goal`'s run `run` has started (a [`RUN_STARTED`] line), synced before returning.
    pub fn append_started(&mut self, goal: &BatchGoal, run: StartedRun) -> Result<()> {
        let line = serde_json::json!({
            RUN_STARTED: {"run_id": run.run_id, "run_dir": run.run_dir},
            "line": goal.line,
            "id": goal.id,
            "goal": goal.goal,
        });
        self.write_line(serde_json::to_vec(&line).map_err(Error::encode("a batch journal line"))?)?;
        self.unfinished.insert(goal.key(), run);
        Ok(())
    }

    /// Appends one line, record or journal line, and syncs it (`TANDEM_FAULT_KILL=torn:N` can cut it in half).
    fn write_line(&mut self, mut line: Vec<u8>) -> Result<()> {
        line.push(b'\n');
        crate::agent::log::fault::before_record(&mut self.file, &line);
        self.file.write_all(&line).map_err(|e| Error::io(format!("writing {}", self.path.display()), e))?;
        self.file.sync_data().map_err(|e| Error::io(format!("syncing {}", self.path.display()), e))
    }
}

/// What a results file's lines say.
struct Lines {
    /// The latest record per key.
    latest: HashMap<GoalKey, Recorded>,
    /// Runs journaled as started with no record of their goal after them.
    unfinished: HashMap<GoalKey, StartedRun>,
    /// The lines that are neither records nor journal lines, as `file:line: reason`.
    unreadable: Vec<String>,
}

/// Reads a results file's records and journal lines, in order: a record ends the run journaled before it.
fn read_records(text: &str, path: &Path) -> Lines {
    let mut latest = HashMap::new();
    let mut unfinished = HashMap::new();
    let mut unreadable = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let where_ = format!("{}:{}", path.display(), index + 1);
        let value: Value = match serde_json::from_str(line) {
            Ok(value) => value,
            Err(e) => {
                unreadable.push(format!("{where_}: {e}"));
                continue;
            }
        };
        if is_shard_header(&value) {
            continue;
        }
        let key = match (value.get("id").and_then(Value::as_str), value.get("line").and_then(Value::as_u64)) {
            (Some(id), _) => GoalKey::Id(id.to_string()),
            (None, Some(line)) => GoalKey::Line(line as usize),
            (None, None) => {
                unreadable.push(format!("{where_}: a record without \"id\" or \"line\""));
                continue;
            }
        };
        if is_run_started(&value) {
            let started = &value[RUN_STARTED];
            match (started["run_id"].as_str(), started["run_dir"].as_str()) {
                (Some(run_id), Some(run_dir)) => {
                    unfinished.insert(key, StartedRun { run_id: run_id.into(), run_dir: run_dir.into() });
                }
                _ => unreadable.push(format!("{where_}: a started run without \"run_id\" or \"run_dir\"")),
            }
            continue;
        }
        unfinished.remove(&key);
        let done =
            value.get("stop").and_then(Value::as_str) == Some("done") && value.get("error").is_none_or(Value::is_null);
        let goal = value.get("goal").and_then(Value::as_str).map(str::to_string);
        latest.insert(key, Recorded { goal, done });
    }
    Lines { latest, unfinished, unreadable }
}

/// A batch's totals over the goals this invocation ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BatchSummary {
    /// The goal file.
    pub goals_file: PathBuf,
    /// The results file.
    pub results: PathBuf,
    /// Goal lines in the file (goals and malformed lines).
    pub lines: usize,
    /// Goals that finished `done`.
    pub done: usize,
    /// Goals that did not (errors, spent budgets, malformed lines).
    pub failed: usize,
    /// Goals skipped because the results file already held them.
    pub skipped: usize,
    /// Wall time of the batch, model loading included, in seconds.
    pub wall_s: f64,
    /// Goals run (done + failed) per minute of wall time.
    pub goals_per_minute: f64,
    /// Planner calls, tokens and model time, summed.
    pub planner: UsageTotals,
    /// Executor calls, tokens and model time, summed.
    pub executor: UsageTotals,
    /// Planner tokens generated per second of the batch's wall time.
    pub planner_tokens_out_per_s: f64,
    /// Executor tokens generated per second of the batch's wall time.
    pub executor_tokens_out_per_s: f64,
    /// Goals in flight at once (`--parallel`).
    pub parallel: usize,
    /// With several goals in flight: goals a planner forward pass served, on average.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planner_goals_per_pass: Option<f64>,
    /// With several goals in flight: goals an executor forward pass served, on average.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executor_goals_per_pass: Option<f64>,
}

impl BatchSummary {
    /// Counts one record of this invocation.
    pub fn add(&mut self, record: &BatchRecord) {
        if record.is_done() {
            self.done += 1;
        } else {
            self.failed += 1;
        }
        self.planner.merge(&record.planner);
        self.executor.merge(&record.executor);
    }

    /// Sets the wall time and the rates derived from it.
    pub fn finish(&mut self, wall: Duration) {
        self.wall_s = wall.as_secs_f64();
        let per_s = |n: usize| if self.wall_s > 0.0 { n as f64 / self.wall_s } else { 0.0 };
        self.goals_per_minute = per_s(self.done + self.failed) * 60.0;
        self.planner_tokens_out_per_s = per_s(self.planner.tokens_out);
        self.executor_tokens_out_per_s = per_s(self.executor.tokens_out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_prefer_the_id() {
        let goals = parse_goals("\"a\"\n{\"goal\": \"b\", \"id\": \"x\"}\n");
        assert_eq!(goals.iter().map(GoalLine::key).collect::<Vec<_>>(), [GoalKey::Line(1), GoalKey::Id("x".into())]);
    }

    #[test]
    fn a_torn_record_is_unreadable_and_the_rest_counts() {
        let text = "{\"line\":1,\"id\":null,\"stop\":\"done\",\"error\":null}\n{\"line\":2,\"st";
        let Lines { latest, unreadable: bad, .. } = read_records(text, Path::new("r.jsonl"));
        assert_eq!(latest.get(&GoalKey::Line(1)).map(|r| r.done), Some(true));
        assert_eq!(bad.len(), 1);
        assert!(bad[0].starts_with("r.jsonl:2: "), "{bad:?}");
    }

    #[test]
    fn a_started_run_is_unfinished_until_a_record_of_its_goal_follows() {
        let started = |line: usize, run: &str| {
            format!(
                "{{\"started\":{{\"run_id\":\"{run}\",\"run_dir\":\"/runs/{run}\"}},\"line\":{line},\"id\":null}}\n"
            )
        };
        let record = |line: usize| format!("{{\"line\":{line},\"id\":null,\"stop\":\"budget\",\"error\":null}}\n");
        // Line 1: started, recorded (failed), started again by --retry-failed, then the crash. Line 2: started and
        // recorded. Line 3: started, then the crash.
        let text = [started(1, "a"), record(1), started(2, "b"), started(1, "c"), record(2), started(3, "d")].concat();
        let Lines { latest, unfinished, unreadable } = read_records(&text, Path::new("r.jsonl"));
        assert!(unreadable.is_empty(), "{unreadable:?}");
        let run = |line| unfinished.get(&GoalKey::Line(line)).map(|r| r.run_id.as_str());
        assert_eq!((run(1), run(2), run(3)), (Some("c"), None, Some("d")));
        assert_eq!(unfinished[&GoalKey::Line(3)].run_dir, PathBuf::from("/runs/d"));
        // Journal lines are not records.
        assert_eq!((latest.len(), latest[&GoalKey::Line(1)].done), (2, false));
        assert!(!latest.contains_key(&GoalKey::Line(3)));
    }
}
