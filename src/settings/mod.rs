//! Typed settings and their defaults, defined once: the command line declares its flags from them, the library
//! takes them (never `cli` types), and `run`, `batch`, `plan` and `bench` agree on every default.
//!
//! This module sits at the bottom of the layers with `kernels`, `store` and `tools`: it imports nothing of the
//! crate, so every layer may use it.

pub mod env;
pub mod file;
mod serve;

pub use serve::{McpSettings, ServeSettings};

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The default planner: the larger model, which turns a goal into a plan.
pub const DEFAULT_PLANNER: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m";
/// The default executor: the small fast model, which writes `llm` steps and fills arguments.
pub const DEFAULT_EXECUTOR: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m";
/// The model `generate` and the single-model benchmarks load by default.
pub const DEFAULT_MODEL: &str = DEFAULT_EXECUTOR;

/// Where tensors live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceKind {
    /// The CPU (always available).
    #[default]
    Cpu,
    /// An NVIDIA GPU (build with `--features cuda`).
    Cuda,
    /// An Apple GPU (build with `--features metal`).
    Metal,
}

/// Where a model computes: the device and, on the CPU, how many threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Compute {
    /// Compute threads; `None` uses every core.
    pub threads: Option<usize>,
    /// The device.
    pub device: DeviceKind,
}

/// Speculative decoding as the user asked for it; `decode::Speculation` turns it into a drafting mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Drafting {
    /// Draft where it is exact (batched passes give one-token passes' logits), not elsewhere.
    #[default]
    WhereExact,
    /// Draft everywhere.
    Always,
    /// Never draft.
    Never,
}

/// Which model writes the final answer from the step results (the joiner), if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Joiner {
    /// The planner model: reads the goal and results, answers every part, and sends the run back to planning
    /// when a part has no result.
    #[default]
    Planner,
    /// The executor model (faster, weaker at judging whether the goal is met).
    Executor,
    /// No joiner: the answer is the output of the last step(s), as text.
    Off,
}

/// Which model checks the calculator steps after a plan ran, by working each out again (step evaluation), if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Evaluator {
    /// No step evaluation: a step that runs and fits its tool's schema counts as done.
    #[default]
    Off,
    /// The executor model works the steps out (faster; its checks are often wrong).
    Executor,
    /// The planner model works the steps out (slower, checks better).
    Planner,
}

/// Whether a tool-calling turn that may write several calls first lists the actions the request asks for and
/// then writes exactly one call for each (`agent::asks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Asks {
    /// One pass: the model writes its list of calls directly.
    Off,
    /// The executor lists the actions (one short line each), then writes exactly one call for each.
    #[default]
    Executor,
    /// The planner lists the actions, then the executor writes exactly one call for each.
    Planner,
}

/// Whether `tandem serve` lists a tool-calling request's actions before its calls (`serve::openai::asks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServeAsks {
    /// One pass: the model writes its calls directly.
    Off,
    /// The served model lists the actions first, then writes exactly one call for each.
    #[default]
    List,
}

/// Which profile of the rule book (`agent::rules`) runs on a plan the planner wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mend {
    /// None: the plan is validated and run as the planner wrote it.
    Off,
    /// The rules that follow from the tools' schemas and the goal (a reference to a field the tool lacks where it
    /// has one, a duration in the unit the parameter names, a percentage as the fraction a parameter that asks for
    /// a decimal takes, …).
    #[default]
    General,
    /// The general rules and those that match NESTFUL's gold conventions rather than a rule about tools
    /// (percentages as written where no decimal is asked for, language codes as names, unmentioned optional
    /// arguments and invented steps dropped). Only `tandem bench` offers it: run, plan, batch and serve refuse it.
    Nestful,
}

impl Mend {
    /// The name used in settings, logs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mend::Off => "off",
            Mend::General => "general",
            Mend::Nestful => "nestful",
        }
    }
}

/// How the planner works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Plan every step first; write a revised plan when a step fails.
    #[default]
    PlanAhead,
    /// Propose one step at a time, each after seeing the results so far.
    Step,
}

impl Mode {
    /// The name used in settings, logs and on the command line.
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

/// What a run asks a human to approve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Approval {
    /// Nothing: run as planned.
    #[default]
    #[value(skip)]
    None,
    /// Ask before each call of a tool its MCP server marks destructive (`destructiveHint`, which MCP takes as
    /// true for a tool whose annotations say it changes things and say nothing of destruction), as MCP clients
    /// do; everything else runs as planned. The default of `tandem run`.
    Destructive,
    /// Show each plan and ask approve / edit (in $EDITOR) / reject before anything runs.
    Plan,
    /// Ask before each tool call.
    Steps,
}

impl Approval {
    /// The name used in settings and logs.
    pub fn name(self) -> &'static str {
        match self {
            Approval::None => "none",
            Approval::Destructive => "destructive",
            Approval::Plan => "plan",
            Approval::Steps => "steps",
        }
    }

    /// Parses [`Approval::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "none" => Some(Approval::None),
            "destructive" => Some(Approval::Destructive),
            "plan" => Some(Approval::Plan),
            "steps" => Some(Approval::Steps),
            _ => None,
        }
    }
}

/// The limits of one run. The defaults are the command line's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budgets {
    /// Most plan revisions after failures.
    pub max_replans: u32,
    /// Most step executions in the run.
    pub max_steps: usize,
    /// Most generated tokens in the run, planner and executor together.
    pub max_tokens: usize,
    /// Wall-time limit, in seconds (checked between steps).
    pub max_seconds: u64,
    /// Token budget of one plan.
    pub plan_tokens: usize,
    /// Token budget of one executor call.
    pub executor_tokens: usize,
}

impl Budgets {
    /// Default of [`Budgets::max_replans`].
    pub const MAX_REPLANS: u32 = 2;
    /// Default of [`Budgets::max_steps`].
    pub const MAX_STEPS: usize = 24;
    /// Default of [`Budgets::max_tokens`].
    pub const MAX_TOKENS: usize = 6000;
    /// Default of [`Budgets::max_seconds`].
    pub const MAX_SECONDS: u64 = 900;
    /// Default of [`Budgets::plan_tokens`] (also `tandem plan --plan-tokens`).
    pub const PLAN_TOKENS: usize = 768;
    /// Default of [`Budgets::executor_tokens`].
    pub const EXECUTOR_TOKENS: usize = 256;
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            max_replans: Self::MAX_REPLANS,
            max_steps: Self::MAX_STEPS,
            max_tokens: Self::MAX_TOKENS,
            max_seconds: Self::MAX_SECONDS,
            plan_tokens: Self::PLAN_TOKENS,
            executor_tokens: Self::EXECUTOR_TOKENS,
        }
    }
}

/// Default time limit of one shell command, in seconds.
pub const SHELL_TIMEOUT_S: u64 = 10;
/// Time limit of an MCP server's start and of one MCP tool call, in seconds.
pub const MCP_TIMEOUT_S: u64 = 30;

/// Default of `--plans`: one greedy plan per planning call (plan search off; see docs/benchmarks.md, plan
/// search).
pub const PLANS: usize = 1;

/// Default of `--tools-top-k`: 0, every tool is shown to the planner (see docs/benchmarks.md, tool retrieval).
pub const TOOLS_TOP_K: usize = 0;

/// The planner–executor pair and how it works a goal: the models, the planner's mode, who answers and who checks,
/// plan search and the rule book. One struct for every caller: `run` and `batch` ([`AgentSettings`]), the
/// benchmarks ([`SuiteSettings`]) and the run log (`RunSettings`, which writes these keys as they are named here,
/// and reads logs from before a key existed with the value those runs had).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairSettings {
    /// The planner: a model id or a .gguf path.
    pub planner: String,
    /// The executor: a model id or a .gguf path.
    pub executor: String,
    /// How the planner works (`plan-ahead` or `step` in the log).
    pub mode: Mode,
    /// Who writes the final answer (`planner`, `executor` or `off`; logs before the joiner: `off`).
    #[serde(default = "joiner_of_old_logs", skip_serializing_if = "is_joiner_off")]
    pub joiner: Joiner,
    /// Who checks the calculator steps after a plan ran (`executor`, `planner`; off, and logs before it: absent).
    #[serde(default, skip_serializing_if = "is_evaluator_off")]
    pub evaluate: Evaluator,
    /// Candidate plans per planning call (plan search; 1, and logs before it: one greedy plan).
    #[serde(default = "one_plan", skip_serializing_if = "is_one_plan")]
    pub plans: usize,
    /// Which plan rules run (`off` or `nestful`; `general`, and logs before the profiles: absent).
    #[serde(default, skip_serializing_if = "is_general_mend")]
    pub mend: Mend,
    /// Rules of the profile turned off one by one (`--rules-off`; absent: none; `tandem rules` lists them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules_off: Vec<String>,
    /// Whether the planner thinks before each plan (`--think`: its chat template's thinking mode; absent: off).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub think: bool,
}

impl PairSettings {
    /// These models with the command line's defaults for the rest (plan-ahead, the planner answers, no
    /// evaluation, one greedy plan, `general` rules).
    pub fn new(planner: &str, executor: &str) -> Self {
        Self {
            planner: planner.into(),
            executor: executor.into(),
            mode: Mode::default(),
            joiner: Joiner::default(),
            evaluate: Evaluator::default(),
            plans: PLANS,
            mend: Mend::default(),
            rules_off: Vec::new(),
            think: false,
        }
    }
}

impl Default for PairSettings {
    fn default() -> Self {
        Self::new(DEFAULT_PLANNER, DEFAULT_EXECUTOR)
    }
}

/// Runs logged before the joiner existed answered with the last step's output: resuming one keeps that.
fn joiner_of_old_logs() -> Joiner {
    Joiner::Off
}

fn is_joiner_off(joiner: &Joiner) -> bool {
    *joiner == Joiner::Off
}

fn is_general_mend(mend: &Mend) -> bool {
    *mend == Mend::General
}

fn is_evaluator_off(evaluate: &Evaluator) -> bool {
    *evaluate == Evaluator::Off
}

fn one_plan() -> usize {
    PLANS
}

fn is_one_plan(n: &usize) -> bool {
    *n == PLANS
}

/// What one benchmark suite reads and how it samples (the library's side of `tandem bench tasks|nestful|bfcl`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteSettings {
    /// The pair and how it works (mode, joiner and evaluation are read by `tasks` only; the rules by `tasks` and
    /// `nestful`, whose command line defaults them to `general` and `nestful`).
    pub pair: PairSettings,
    /// The data: a directory (nestful, bfcl) or a tasks TOML file; `None` takes the suite's default.
    pub data: Option<PathBuf>,
    /// NESTFUL's tool catalogue per sample: `all` or `gold+K`.
    pub tools: String,
    /// The planner sees only this many tools of the catalogue, chosen by retrieval (0: all); nestful and tasks.
    pub tools_top_k: usize,
    /// NESTFUL without the plan grammar.
    pub no_grammar: bool,
    /// The categories to run: BFCL's (empty: [`DEFAULT_BFCL_CATEGORIES`]) or the tasks suite's (empty: all).
    pub categories: Vec<String>,
    /// Only the first N samples (per category for bfcl).
    pub limit: Option<usize>,
    /// Seed for distractor tools.
    pub seed: u64,
    /// Where benchmark runs are written (one directory per run).
    pub out: PathBuf,
    /// Continue the interrupted run in this directory.
    pub resume: Option<PathBuf>,
    /// Where the models compute.
    pub compute: Compute,
    /// Run only this shard's samples, in a run directory of its own.
    pub shard: Option<Shard>,
    /// BFCL's several-call categories: list the request's actions first (`agent::asks`).
    pub asks: Asks,
}

/// The BFCL categories run when `--categories` names none: the two the project develops on.
pub const DEFAULT_BFCL_CATEGORIES: [&str; 2] = ["simple_python", "multiple"];

impl SuiteSettings {
    /// The BFCL categories to run: those asked for, else [`DEFAULT_BFCL_CATEGORIES`]. Also what the records
    /// keep, as they did when that was the flag's default, so earlier runs still resume.
    pub fn bfcl_categories(&self) -> Vec<String> {
        if self.categories.is_empty() {
            DEFAULT_BFCL_CATEGORIES.iter().map(|c| c.to_string()).collect()
        } else {
            self.categories.clone()
        }
    }
}

/// Which tools a run offers, and the policy they run under (the library's side of the tool flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSettings {
    /// Directory the file tools and commands are confined to.
    pub workspace: PathBuf,
    /// Offer the write_file tool.
    pub allow_write: bool,
    /// Offer the shell tool, allowed to run only these programs.
    pub allow_shell: Vec<String>,
    /// Time limit of one shell command, in seconds.
    pub shell_timeout_s: u64,
    /// A TOML file of user tools.
    pub tools_file: Option<PathBuf>,
    /// An MCP servers file (`{"mcpServers": {...}}`) whose servers' tools are offered too.
    pub mcp_config: Option<PathBuf>,
    /// Time limit of an MCP server's start and of one MCP tool call, in seconds.
    pub mcp_timeout_s: u64,
    /// The planner sees only this many tools, those that best match the goal (tool retrieval); 0 shows all.
    pub tools_top_k: usize,
}

impl Default for ToolSettings {
    fn default() -> Self {
        Self {
            workspace: PathBuf::from("."),
            allow_write: false,
            allow_shell: Vec::new(),
            shell_timeout_s: SHELL_TIMEOUT_S,
            tools_file: None,
            mcp_config: None,
            mcp_timeout_s: MCP_TIMEOUT_S,
            tools_top_k: TOOLS_TOP_K,
        }
    }
}

/// What a run plans with and within: the models, the planner's mode, the tools and the budgets (shared by `run`
/// and `batch`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentSettings {
    /// The pair and how it works.
    pub pair: PairSettings,
    /// The tools and their policy.
    pub tools: ToolSettings,
    /// The run's limits.
    pub budgets: Budgets,
}

/// Where a run computes and is logged (shared by `run`, `resume` and `batch`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunnerSettings {
    /// Device and threads.
    pub compute: Compute,
    /// Directory of run logs; `None` takes the default.
    pub runs_dir: Option<PathBuf>,
    /// Speculative decoding.
    pub drafting: Drafting,
    /// Keep prompt-prefix KV snapshots on disk (in the model cache).
    pub prefix_store: bool,
}

/// What `tandem batch` runs: a goal file into a results file, with the agent's and the runner's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSettings {
    /// The goals: a JSON-lines file.
    pub goals: PathBuf,
    /// The results file (appended; goals it holds are skipped).
    pub out: PathBuf,
    /// Run again the goals whose latest record is not `done`.
    pub retry_failed: bool,
    /// Goals in flight at once.
    pub parallel: usize,
    /// The agent's settings for every goal (a goal may bring its own workspace).
    pub agent: AgentSettings,
    /// Where the goals compute and are logged.
    pub runner: RunnerSettings,
    /// Run only this shard's goals, into its own results file beside `out`.
    pub shard: Option<Shard>,
}

/// The environment variable that gives a Kubernetes Indexed Job's shard count to `--shard auto` (the Job's
/// `completions`; Kubernetes gives each pod its index, `JOB_COMPLETION_INDEX`, but not the count).
pub const SHARD_COUNT_ENV: &str = "TANDEM_SHARD_COUNT";

/// One part of a batch or benchmark split over several machines: shard `index` of `count`, counted from 0 as
/// Slurm array tasks and Kubernetes completion indexes are. A goal or sample belongs to the shard its id hashes to
/// (SHA-256), not to the one its position gives, so appending goals to a file never moves the ones before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    /// This shard, from 0.
    pub index: usize,
    /// How many shards there are.
    pub count: usize,
}

impl Shard {
    /// Shard `index` of `count`, or why there is none.
    pub fn new(index: usize, count: usize) -> Result<Self, String> {
        if count == 0 {
            return Err("the shard count must be at least 1".into());
        }
        if index >= count {
            let last = count - 1;
            return Err(format!(
                "shard {index}/{count} does not exist: shards count from 0, so there are 0/{count} to {last}/{count}"
            ));
        }
        Ok(Self { index, count })
    }

    /// Parses `K/N`, `auto` or `auto/N`, reading the scheduler's variables from the process environment.
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::parse_with(text, env::scheduler)
    }

    /// Parses `K/N`, `auto` or `auto/N` with `env` for the environment. `auto` takes the index from Slurm
    /// (`SLURM_ARRAY_TASK_ID`, less `SLURM_ARRAY_TASK_MIN`, over `SLURM_ARRAY_TASK_STEP`) or from a Kubernetes
    /// Indexed Job (`JOB_COMPLETION_INDEX`); the count from `/N`, else Slurm's `SLURM_ARRAY_TASK_COUNT` (or its
    /// min and max), else [`SHARD_COUNT_ENV`].
    pub fn parse_with(text: &str, env: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let text = text.trim();
        let (first, count) = match text.split_once('/') {
            Some((first, count)) => {
                let count = count
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| format!("--shard {text}: N in K/N must be a whole number (e.g. 0/4, or auto/4)"))?;
                (first.trim(), Some(count))
            }
            None => (text, None),
        };
        if first == "auto" {
            return Self::from_scheduler(count, &env).map_err(|e| format!("--shard {text}: {e}"));
        }
        let (Ok(index), Some(count)) = (first.parse::<usize>(), count) else {
            return Err(format!("--shard {text}: expected K/N (shard K of N, from 0: 0/4 … 3/4), auto or auto/N"));
        };
        Self::new(index, count).map_err(|e| format!("--shard {text}: {e}"))
    }

    /// The shard a Slurm array task or a Kubernetes Indexed Job's pod is, from its environment.
    fn from_scheduler(count: Option<usize>, env: &impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let number = |name: &str| -> Result<Option<usize>, String> {
            match env(name) {
                None => Ok(None),
                Some(value) => value
                    .trim()
                    .parse::<usize>()
                    .map(Some)
                    .map_err(|_| format!("{name}={value:?} is not a whole number")),
            }
        };
        if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
            let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let step = number("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
            let span = match (number("SLURM_ARRAY_TASK_MIN")?, number("SLURM_ARRAY_TASK_MAX")?) {
                (Some(min), Some(max)) if max >= min => Some((max - min) / step + 1),
                _ => None,
            };
            let count = count.or(number("SLURM_ARRAY_TASK_COUNT")?).or(span).ok_or(
                "SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MIN/MAX: give the \
                 count as auto/N",
            )?;
            if id < min {
                return Err(format!("SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}"));
            }
            return Self::new((id - min) / step, count).map_err(|e| format!("Slurm array task {id}: {e}"));
        }
        if let Some(index) = number("JOB_COMPLETION_INDEX")? {
            let count = count.or(number(SHARD_COUNT_ENV)?).ok_or(format!(
                "JOB_COMPLETION_INDEX is set but the count is not: set {SHARD_COUNT_ENV} to the Job's completions, or \
                 give auto/N"
            ))?;
            return Self::new(index, count).map_err(|e| format!("Kubernetes completion index {index}: {e}"));
        }
        Err("neither SLURM_ARRAY_TASK_ID (a Slurm array job) nor JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) is \
             set; give the shard as K/N"
            .into())
    }

    /// The shard a goal or sample id belongs to when there are `count` shards: the first 8 bytes of the id's
    /// SHA-256 modulo `count`, the same on every machine and in every version.
    pub fn of(id: &str, count: usize) -> usize {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(id.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        (u64::from_be_bytes(first) % count.max(1) as u64) as usize
    }

    /// Whether a goal or sample id belongs to this shard.
    pub fn contains(&self, id: &str) -> bool {
        Self::of(id, self.count) == self.index
    }

    /// The shard in file and directory names: `shard-K-of-N`.
    pub fn tag(&self) -> String {
        format!("shard-{}-of-{}", self.index, self.count)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Self::parse(text)
    }
}
