//! `tandem run`'s, `tandem resume`'s and `tandem batch`'s arguments: the agent, its budgets and its runner.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{ComputeArgs, MendArg, PlanSearchArg, RunsDirArg, SpeculateArg, ToolArgs};
use crate::settings::{
    self, AgentSettings, Approval, BatchSettings, Budgets, Evaluator, Joiner, Mode, PairSettings, RunnerSettings, Shard,
};

/// What a run plans with and within: the models, the planner's mode, the tools and the budgets (shared by `run`
/// and `batch`).
#[derive(Debug, Clone, Args)]
pub struct AgentArgs {
    /// The planner: a model id or a .gguf path.
    #[arg(long, default_value = settings::DEFAULT_PLANNER)]
    pub planner: String,
    /// The executor (llm steps, filling arguments): a model id or a .gguf path. The same as --planner uses one model.
    #[arg(long, default_value = settings::DEFAULT_EXECUTOR)]
    pub executor: String,
    /// How the planner works.
    #[arg(long, value_enum, default_value_t = Mode::PlanAhead)]
    pub mode: Mode,
    /// Who writes the final answer from the step results (plan-ahead mode): a model call that answers every part
    /// of the goal, its numbers checked against the results, then names any part no result gives, which sends the
    /// run back to the planner. `off` answers with the last step's output.
    #[arg(long, value_enum, env = "TANDEM_JOINER", default_value_t = Joiner::Planner)]
    pub joiner: Joiner,
    /// Step evaluation (plan-ahead mode): after a plan's steps ran, the model works each calculator step out again
    /// on its own (from the goal and the step's purpose, without its expression) and the calculator compares the
    /// two results; a step that disagrees sends the run back to the planner with both (once a run, within
    /// --max-replans). `planner` checks well; `executor` is faster and doubts right steps too. Off by default:
    /// docs/benchmarks.md says what it catches and costs.
    #[arg(long, value_enum, env = "TANDEM_EVALUATE", default_value_t = Evaluator::Off)]
    pub evaluate: Evaluator,
    #[command(flatten)]
    pub search: PlanSearchArg,
    #[command(flatten)]
    pub mend: MendArg,
    /// The planner thinks before each plan, where its chat template has a thinking mode (Qwen3's and SmolLM3's
    /// `enable_thinking`): up to 1024 tokens of thought, written before the plan and outside its grammar, logged
    /// with the plan (`thinking` in its `plan_written` event). Off by default: agent roles render with thinking off.
    /// A template without the switch plans as without it (a warning says so).
    #[arg(long)]
    pub think: bool,
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Most plan revisions after failures.
    #[arg(long, default_value_t = Budgets::MAX_REPLANS)]
    pub max_replans: u32,
    /// Most step executions in the run.
    #[arg(long, default_value_t = Budgets::MAX_STEPS)]
    pub max_steps: usize,
    /// Most generated tokens in the run, planner and executor together.
    #[arg(long, value_name = "N", default_value_t = Budgets::MAX_TOKENS)]
    pub max_run_tokens: usize,
    /// Wall-time limit, in seconds (checked between steps).
    #[arg(long, value_name = "SECONDS", default_value_t = Budgets::MAX_SECONDS)]
    pub max_time: u64,
    /// Token budget of one plan.
    #[arg(long, default_value_t = Budgets::PLAN_TOKENS)]
    pub plan_tokens: usize,
    /// Token budget of one executor call.
    #[arg(long, default_value_t = Budgets::EXECUTOR_TOKENS)]
    pub executor_tokens: usize,
}

impl AgentArgs {
    /// The settings these flags give.
    pub fn settings(&self) -> AgentSettings {
        AgentSettings {
            pair: PairSettings {
                planner: self.planner.clone(),
                executor: self.executor.clone(),
                mode: self.mode,
                joiner: self.joiner,
                evaluate: self.evaluate,
                plans: self.search.plans,
                mend: self.mend.mend,
                rules_off: self.mend.rules_off.clone(),
                think: self.think,
            },
            tools: self.tools.settings(),
            budgets: self.budgets(),
        }
    }

    /// The budgets these flags set.
    pub fn budgets(&self) -> Budgets {
        Budgets {
            max_replans: self.max_replans,
            max_steps: self.max_steps,
            max_tokens: self.max_run_tokens,
            max_seconds: self.max_time,
            plan_tokens: self.plan_tokens,
            executor_tokens: self.executor_tokens,
        }
    }
}

/// `tandem run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The goal, in plain words (optional with --plan, which holds one).
    pub goal: Option<String>,
    /// Run this plan (JSON file) instead of asking the planner; the planner is still used to replan.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    #[command(flatten)]
    pub agent: AgentArgs,
    /// Ask a human before running: the plan, or each tool call. Needs a terminal, or --yes.
    #[arg(long, value_enum)]
    pub approve: Option<Approval>,
    /// Approve automatically (for scripts; every approval is still logged, as by --yes).
    #[arg(long, short = 'y')]
    pub yes: bool,
    #[command(flatten)]
    pub runner: RunnerArgs,
}

/// `tandem batch`.
#[derive(Debug, Args)]
// `--json` comes with the shared runner flags; here it prints the batch summary.
#[command(mut_arg("json", |a| {
    a.help("Print the summary as one JSON object on stdout (the text summary still goes to stderr)")
}))]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BatchArgs {
    #[command(subcommand)]
    pub command: Option<BatchCommand>,
    /// The goals: a JSON-lines file, one goal per line — a JSON string, or an object
    /// {"goal": "...", "id": "...", "workspace": "DIR"} (id and workspace optional; a relative workspace is
    /// taken from the goal file's directory). Blank lines and lines starting with # are skipped.
    #[arg(value_name = "GOALS.jsonl", required = true)]
    pub goals: Option<PathBuf>,
    /// The results file: one JSON object per goal, appended and synced as each goal finishes. Goals it already
    /// holds a record for (by id, or by line number for goals without one) are skipped, so the same command
    /// continues an interrupted batch.
    #[arg(long, value_name = "RESULTS.jsonl", required = true)]
    pub out: Option<PathBuf>,
    /// Run one shard of the goals: K/N is shard K of N, counted from 0 (0/4 … 3/4); `auto` takes K (and N) from
    /// a Slurm array task (SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT) or a Kubernetes Indexed Job
    /// (JOB_COMPLETION_INDEX, with N from auto/N or TANDEM_SHARD_COUNT). A goal's shard is a hash of its id (or
    /// line number), so goals appended to the file leave the others where they were. The shard writes
    /// RESULTS.shard-K-of-N.jsonl beside --out and resumes it like any results file; `tandem batch merge` joins
    /// the shards.
    #[arg(long, value_name = "K/N|auto", value_parser = parse_shard)]
    pub shard: Option<Shard>,
    /// Run again the goals whose latest record is not `done` (an error, a spent budget); the new record is
    /// appended after the old one.
    #[arg(long)]
    pub retry_failed: bool,
    /// Goals in flight at once. Their generations share each model's forward passes (a pass reads the weights
    /// once for every goal decoding at that moment), and a goal's prompt copies the opening another goal has
    /// computed, so more goals finish per minute (docs/performance.md, batching); the more a pass is bound by
    /// reading weights rather than by compute (more cores, a GPU), the more it gives. Each goal holds its own KV
    /// cache.
    /// Records are appended as goals finish, not in file order; on the CPU with our kernels each goal writes
    /// what it would write alone.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub parallel: u16,
    #[command(flatten)]
    pub agent: AgentArgs,
    #[command(flatten)]
    pub runner: RunnerArgs,
}

/// `tandem resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The run id (a unique prefix is enough), or `latest`.
    pub id: String,
    /// Approve automatically, as `tandem run --yes`.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Run again a step the crash left in doubt (its tool was called, its result never logged) even though the
    /// tool is not safe to repeat: check first that it did not take effect.
    #[arg(long)]
    pub rerun_in_doubt: bool,
    #[command(flatten)]
    pub runner: RunnerArgs,
}

/// Where a run computes, where it is logged, and how it reports (shared by `run`, `resume` and `batch`).
#[derive(Debug, Clone, Args)]
pub struct RunnerArgs {
    #[command(flatten)]
    pub compute: ComputeArgs,
    #[command(flatten)]
    pub runs: RunsDirArg,
    /// Print one JSON object with the outcome (answer, plan, steps, usage) instead of the live view.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub speculate: SpeculateArg,
    /// Don't keep prompt-prefix KV snapshots on disk (<model cache>/prefixes). With them, a new run starts with
    /// the planner's and executor's long shared prompt openings already computed.
    #[arg(long)]
    pub no_prefix_store: bool,
}

impl RunnerArgs {
    /// The settings these flags give.
    pub fn settings(&self) -> RunnerSettings {
        RunnerSettings {
            compute: self.compute.settings(),
            runs_dir: self.runs.runs_dir.clone(),
            drafting: self.speculate.drafting(),
            prefix_store: !self.no_prefix_store,
        }
    }
}

/// `tandem batch …` subcommands.
#[derive(Debug, Subcommand)]
pub enum BatchCommand {
    /// Join the results files of a sharded batch (`--shard K/N`) into one results file, as one unsharded batch
    /// would have written it. Refuses, naming them, missing or repeated shards, shards run with other settings
    /// or model files, and goals recorded twice with different results.
    ///
    /// Example: tandem batch merge results.shard-*.jsonl --out results.jsonl
    Merge(BatchMergeArgs),
}

/// `tandem batch merge`.
#[derive(Debug, Args)]
pub struct BatchMergeArgs {
    /// The shards' results files (RESULTS.shard-K-of-N.jsonl), one per shard.
    #[arg(value_name = "SHARD.jsonl", required = true)]
    pub files: Vec<PathBuf>,
    /// The merged results file (must not exist yet).
    #[arg(long, value_name = "RESULTS.jsonl")]
    pub out: PathBuf,
    /// Print the totals as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `--shard`'s value: `K/N`, `auto` or `auto/N` (auto reads the scheduler's environment now).
pub fn parse_shard(text: &str) -> Result<Shard, String> {
    Shard::parse(text)
}

impl BatchArgs {
    /// The settings these flags give (for a batch run: the goal file and --out are given).
    pub fn settings(&self) -> BatchSettings {
        BatchSettings {
            goals: self.goals.clone().unwrap_or_default(),
            out: self.out.clone().unwrap_or_default(),
            shard: self.shard,
            retry_failed: self.retry_failed,
            parallel: usize::from(self.parallel),
            agent: self.agent.settings(),
            runner: self.runner.settings(),
        }
    }
}
