//! The audit log: every run's `events.jsonl`, one JSON event per line, append-only and flushed to disk per event,
//! so a crash loses at most the event being written (a torn last line is reported and skipped when read).

use crate::agent::plan::search::SearchReport;
use crate::agent::usage::ModelUsage;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::agent::plan::Plan;
use crate::agent::rules::MendChange;
use crate::agent::run::evaluation::Judgment;
use crate::settings::{
    Approval, Budgets, Evaluator, Joiner, Mode, PairSettings, ToolSettings, MCP_TIMEOUT_S, SHELL_TIMEOUT_S,
};
use crate::{Error, Result};

/// The settings a run was started with: enough to resume it the same way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// The pair and how it worked (its keys sit at the top level of the log's settings).
    #[serde(flatten)]
    pub pair: PairSettings,
    /// Workspace directory (absolute).
    pub workspace: PathBuf,
    /// Whether `write_file` was offered.
    pub allow_write: bool,
    /// Programs `shell` may run.
    pub allow_shell: Vec<String>,
    /// Time limit of one shell command, in seconds.
    #[serde(default = "default_shell_timeout")]
    pub shell_timeout_s: u64,
    /// User tool file, if any.
    pub tools_file: Option<PathBuf>,
    /// MCP servers file, if any (absent from logs written before MCP support).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_config: Option<PathBuf>,
    /// Time limit of an MCP server's start and of one MCP tool call, in seconds.
    #[serde(default = "default_mcp_timeout", skip_serializing_if = "is_default_mcp_timeout")]
    pub mcp_timeout_s: u64,
    /// The planner sees only this many tools, chosen for the goal by retrieval (0, and logs before it: all).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tools_top_k: usize,
    /// The run's limits (written into the log as their own keys: `max_replans`, `max_steps`, …).
    #[serde(flatten)]
    pub budgets: Budgets,
    /// Sampling seed (decoding is greedy; recorded so a sampled run could be replayed).
    pub seed: u64,
    /// What a human approves (`none`, `plan` or `steps` in the log).
    pub approve: Approval,
}

impl RunSettings {
    /// Plan-ahead, no approval, writes and shell off, 2 replans, 24 steps, 6000 tokens, 900 s, and no joiner (the
    /// answer is the last steps' output; the command line's default, `--joiner planner`, sets it).
    pub fn new(planner: &str, executor: &str, workspace: &Path) -> Self {
        Self {
            pair: PairSettings {
                mode: Mode::PlanAhead,
                joiner: Joiner::Off,
                evaluate: Evaluator::Off,
                ..PairSettings::new(planner, executor)
            },
            workspace: workspace.to_path_buf(),
            allow_write: false,
            allow_shell: Vec::new(),
            shell_timeout_s: default_shell_timeout(),
            tools_file: None,
            mcp_config: None,
            mcp_timeout_s: MCP_TIMEOUT_S,
            tools_top_k: 0,
            budgets: Budgets::default(),
            seed: 0,
            approve: Approval::None,
        }
    }

    /// The tool settings the run was started with (resuming builds the same tools from them).
    pub fn tool_settings(&self) -> ToolSettings {
        ToolSettings {
            workspace: self.workspace.clone(),
            allow_write: self.allow_write,
            allow_shell: self.allow_shell.clone(),
            shell_timeout_s: self.shell_timeout_s,
            tools_file: self.tools_file.clone(),
            mcp_config: self.mcp_config.clone(),
            mcp_timeout_s: self.mcp_timeout_s,
            tools_top_k: self.tools_top_k,
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn default_shell_timeout() -> u64 {
    SHELL_TIMEOUT_S
}

fn default_mcp_timeout() -> u64 {
    MCP_TIMEOUT_S
}

fn is_default_mcp_timeout(seconds: &u64) -> bool {
    *seconds == MCP_TIMEOUT_S
}

/// How a plan revision came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanOrigin {
    /// The planner's first plan.
    Initial,
    /// The planner's revision after a failure or an invalid plan.
    Replan,
    /// The user edited it at approval.
    Edited,
    /// Given on the command line (`--plan FILE`).
    Given,
    /// One step proposed in step mode.
    NextStep,
    /// One failed step's arguments rewritten by the planner, the rest of the plan kept.
    Repair,
}

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Every step ran and an answer was produced.
    Done,
    /// A budget ran out (replans, steps, tokens or wall time).
    Budget,
    /// The user rejected the plan or a step.
    Rejected,
    /// An error the run could not recover from.
    Error,
    /// Someone stopped it from outside (`POST /v1/runs/{id}/cancel`).
    Cancelled,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Done => "done",
            StopReason::Budget => "budget",
            StopReason::Rejected => "rejected",
            StopReason::Error => "error",
            StopReason::Cancelled => "cancelled",
        })
    }
}

/// One thing that happened in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The run began.
    RunStarted {
        /// The goal.
        goal: String,
        /// Settings and budgets.
        settings: RunSettings,
        /// The plan given with `--plan`, kept here so a run killed before its first plan event resumes with it
        /// rather than asking a planner.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        plan: Option<Plan>,
    },
    /// The planner sees some of the run's tools: tool retrieval chose them (`--tools-top-k`), or some were left out
    /// for the goal (`tools-the-goal-allows`); logged once, before the first plan.
    ToolsSelected {
        /// The `k` asked for.
        top_k: usize,
        /// How many tools the run offers in all (execution and validation still know every one).
        offered: usize,
        /// The tools the planner sees, best match first (`llm` kept beyond `k` comes last).
        tools: Vec<String>,
        /// The tools left out for the goal (rule `tools-the-goal-allows`), each as `name (why)`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        left_out: Vec<String>,
    },
    /// A model was loaded (models load lazily, on first use).
    ModelLoaded {
        /// `planner` or `executor` (or `planner+executor` when one model plays both).
        role: String,
        /// Manifest id, or the path given.
        id: String,
        /// The file.
        path: PathBuf,
        /// Verified SHA-256 (manifest models).
        sha256: Option<String>,
        /// Load time.
        ms: u64,
    },
    /// A plan or a revision.
    PlanWritten {
        /// Revision number (1, 2, …).
        version: u32,
        /// How it came about.
        origin: PlanOrigin,
        /// Why (the failure that caused a replan, the user's edit, …).
        reason: String,
        /// The plan.
        plan: Plan,
        /// Validation problems (empty when it can run).
        issues: Vec<String>,
        /// Planner cost, when the planner wrote it.
        usage: Option<ModelUsage>,
        /// What plan search saw, when the planner wrote several candidates (`--plans`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        search: Option<SearchReport>,
        /// What the plan mends changed in the planner's plan, each with its rule and before and after (absent
        /// when nothing was mended, and in logs before the profiles).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        mends: Vec<MendChange>,
        /// What the planner thought before writing it (`--think`; absent without a thought).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking: Option<String>,
    },
    /// The user's decision on a plan.
    PlanApproval {
        /// The revision decided on.
        version: u32,
        /// `approved`, `edited` or `rejected`.
        decision: String,
        /// `user` or `--yes`.
        by: String,
    },
    /// A step began.
    StepStarted {
        /// Plan revision.
        version: u32,
        /// Step id.
        step: String,
        /// Tool named by the step.
        tool: String,
    },
    /// The executor model ran for a step.
    ExecutorCall {
        /// Plan revision.
        version: u32,
        /// Step id.
        step: String,
        /// `text` (an `llm` step), `arguments` (filling a tool's arguments), `expression` (a calculator
        /// expression worked out again after the planned one broke on an earlier step's text); the planner's
        /// readings: `query`, `kind`, `pick` (a list's items), `reading` and `choice` (rule `readings-agree`),
        /// `value` (a reading passed whole as an argument), and the values read out of a text.
        purpose: String,
        /// Which model wrote it, where not the executor: `planner` for a worked-out expression and the readings.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
        /// Tokens and time.
        usage: ModelUsage,
    },
    /// The user's decision on a tool call (`--approve steps`).
    StepApproval {
        /// Plan revision.
        version: u32,
        /// Step id.
        step: String,
        /// `approved` or `rejected`.
        decision: String,
    },
    /// A tool was called with these (resolved) arguments.
    ToolCall {
        /// Plan revision.
        version: u32,
        /// Step id.
        step: String,
        /// Tool.
        tool: String,
        /// Arguments after references were resolved.
        args: Map<String, Value>,
    },
    /// A step finished, successfully or not.
    StepFinished {
        /// Plan revision.
        version: u32,
        /// Step id.
        step: String,
        /// Tool.
        tool: String,
        /// The arguments it ran with (after resolution).
        args: Map<String, Value>,
        /// Its output on success.
        output: Option<Value>,
        /// The error on failure.
        error: Option<String>,
        /// Wall time in milliseconds.
        ms: u64,
        /// `tool` (called directly), `executor` (the model ran) or `cache` (same call done earlier in the run).
        via: String,
    },
    /// The planner is asked for a revision.
    Replan {
        /// The revision being replaced.
        from_version: u32,
        /// What went wrong.
        reason: String,
    },
    /// The joiner read the results: its verdict (`answer`, `not_met`, or `unchecked` when no draft passed the
    /// number check and the answer falls back to the last step's output), in words, and what it cost.
    Joined {
        /// The plan revision whose results it read.
        version: u32,
        /// `answer`, `not_met` or `unchecked`.
        verdict: String,
        /// The answer, what is missing, or the rejected drafts.
        text: String,
        /// `planner` or `executor`.
        role: String,
        /// The answer the steps alone give (the last steps' output), for audit and comparison.
        #[serde(default)]
        from_steps: String,
        /// Tokens and time.
        usage: ModelUsage,
    },
    /// The step evaluation checked the finished calculator steps of a plan (see `agent::evaluation`).
    StepsEvaluated {
        /// The plan revision whose steps it checked.
        version: u32,
        /// `planner` or `executor`.
        role: String,
        /// One judgment per checked step, in plan order.
        judgments: Vec<Judgment>,
        /// Whether a doubt sent the run back to the planner (once a run, within the replan budget).
        sent_back: bool,
        /// Tokens and time.
        usage: ModelUsage,
    },
    /// The final answer.
    Answer {
        /// The answer text.
        text: String,
    },
    /// The run stopped.
    RunFinished {
        /// Why.
        stop: StopReason,
        /// In words.
        detail: String,
    },
    /// A rule of the rule book changed or refused something while a plan ran (its mends of a written plan are in
    /// `plan_written`), as logged at `warn` (`tandem rules` lists them).
    RuleApplied {
        /// The rule's name.
        rule: String,
        /// The step it acted on (empty where it acted on the run: a replan, the answer).
        step: String,
        /// What it did.
        detail: String,
    },
    /// The run was picked up again by `tandem resume`.
    Resumed {
        /// Steps of the current plan already done (not re-run).
        completed: Vec<String>,
        /// Steps whose tool was called but whose result was never logged (the crash came in between), run again:
        /// their tools are safe to repeat, or the user said so with `--rerun-in-doubt`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        rerun: Vec<String>,
    },
}

/// A logged event with its sequence number and time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Position in the log, from 0.
    pub seq: u64,
    /// Unix time in milliseconds.
    pub at_ms: u64,
    /// The event.
    #[serde(flatten)]
    pub event: Event,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// An open `events.jsonl`, appended to and flushed per event.
#[derive(Debug)]
pub struct EventLog {
    path: PathBuf,
    file: File,
    next_seq: u64,
    /// Once set, the log takes no more events but a finished step's result (see [`EventLog::close_when`]).
    closed: Option<Arc<AtomicBool>>,
}

impl EventLog {
    /// The log's file name inside a run directory.
    pub const FILE: &'static str = "events.jsonl";

    /// Creates the log in `dir` (which must not hold one yet).
    pub fn create(dir: &Path) -> Result<Self> {
        let path = dir.join(Self::FILE);
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        Ok(Self { path, file, next_seq: 0, closed: None })
    }

    /// Opens an existing log to append to it (resume), continuing its sequence numbers.
    pub fn open(dir: &Path) -> Result<(Self, LogContents)> {
        let path = dir.join(Self::FILE);
        let contents = read_log(&path)?;
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        let next_seq = contents.records.last().map_or(0, |r| r.seq + 1);
        let mut log = Self { path, file, next_seq, closed: None };
        if contents.torn_tail {
            // A crash mid-write left a partial line: end it so the next event starts on a line of its own.
            log.file.write_all(b"\n").map_err(|e| Error::io(format!("writing {}", log.path.display()), e))?;
        }
        Ok((log, contents))
    }

    /// Makes the log refuse events once `flag` is set, with [`Error::Interrupted`]: the run then stops at its
    /// next event, and since everything it did before is logged, it resumes from there. Two events are still
    /// taken: a step's successful result (the work is done, and logging it keeps a resume from calling the tool
    /// again) and the run's first event (which does nothing, and without which there is nothing to resume). A
    /// server sets the flag to stop a run at a safe point (shutdown, a pause for approval, a cancel).
    pub fn close_when(mut self, flag: Arc<AtomicBool>) -> Self {
        self.closed = Some(flag);
        self
    }

    /// Appends one event and flushes it to disk before returning.
    pub fn append(&mut self, event: Event) -> Result<Record> {
        let closed = self.closed.as_ref().is_some_and(|flag| flag.load(Ordering::SeqCst));
        if closed && !matches!(&event, Event::StepFinished { output: Some(_), .. } | Event::RunStarted { .. }) {
            return Err(Error::Interrupted(format!(
                "the run was stopped before logging its next event; {} ends at the last whole event and the run \
                 can be resumed",
                self.path.display()
            )));
        }
        let record = Record { seq: self.next_seq, at_ms: now_ms(), event };
        let mut line = serde_json::to_vec(&record).map_err(Error::encode("a log event"))?;
        line.push(b'\n');
        let io = |e| Error::io(format!("writing {}", self.path.display()), e);
        self.file.write_all(&line).map_err(io)?;
        self.file.sync_data().map_err(|e| Error::io(format!("syncing {}", self.path.display()), e))?;
        self.next_seq += 1;
        crate::agent::log::fault::after_event(record.seq);
        Ok(record)
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// What a log holds.
#[derive(Debug, Clone, Default)]
pub struct LogContents {
    /// The events, in order.
    pub records: Vec<Record>,
    /// Lines that are not events, as `line number: reason` (a torn last line after a crash is the usual one).
    pub bad_lines: Vec<String>,
    /// Whether the file ends without a newline (a write cut short).
    pub torn_tail: bool,
}

/// Reads a log, keeping every readable event and listing the lines that are not.
pub fn read_log(path: &Path) -> Result<LogContents> {
    let file = File::open(path).map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let mut contents = LogContents::default();
    let mut reader = BufReader::new(file);
    let mut line = String::new();
    let mut number = 0;
    loop {
        line.clear();
        let read = reader.read_line(&mut line).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        if read == 0 {
            break;
        }
        number += 1;
        contents.torn_tail = !line.ends_with('\n');
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(&line) {
            Ok(record) => contents.records.push(record),
            Err(e) => contents.bad_lines.push(format!("{}:{number}: {e}", path.display())),
        }
    }
    Ok(contents)
}

/// Reads a JSON-lines file into values, listing unreadable lines as `file:line: reason` instead of failing.
pub fn read_jsonl(path: &Path) -> Result<(Vec<Value>, Vec<String>)> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    Ok(parse_jsonl(&text, path))
}

/// [`read_jsonl`] of text already read from `path` (named in the unreadable lines).
pub fn parse_jsonl(text: &str, path: &Path) -> (Vec<Value>, Vec<String>) {
    let mut values = Vec::new();
    let mut bad = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(value) => values.push(value),
            Err(e) => bad.push(format!("{}:{}: {e}", path.display(), i + 1)),
        }
    }
    (values, bad)
}
