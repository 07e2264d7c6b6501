//! Command-line types (clap derive) and nothing else: parsing lives here, behaviour in `commands`. The bench
//! subcommands' types are in `bench`.

mod bench;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::settings::{
    self, AgentSettings, Approval, BatchSettings, Budgets, Compute, DeviceKind, Drafting, Evaluator, Joiner, Mode,
    RunnerSettings, ServeSettings, Shard, ToolSettings,
};

pub use bench::{
    BenchCommand, DraftsArgs, GrammarBenchArgs, PairsArgs, ServeBenchArgs, SpeedArgs, SuiteArgs, SuiteName,
};

/// Tandem: a planner–executor agent that runs entirely on local models.
///
/// Models are GGUF files run on candle. The default models are pulled on first use
/// into the cache (`$XDG_CACHE_HOME/tandem/models`, or `~/.cache/tandem/models`).
#[derive(Debug, Parser)]
#[command(name = "tandem", version, propagate_version = true, max_term_width = 110)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Hide progress bars and status lines.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// More log output (-v: debug, -vv: trace). `RUST_LOG` overrides.
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

impl Cli {
    /// The `--threads` the command was given, where it takes one.
    pub fn threads(&self) -> Option<usize> {
        match &self.command {
            Command::Generate(args) => args.model.compute.threads,
            Command::Run(args) => args.runner.compute.threads,
            Command::Resume(args) => args.runner.compute.threads,
            Command::Batch(args) => args.runner.compute.threads,
            Command::Plan(args) => args.compute.threads,
            Command::Serve(args) => args.compute.threads,
            Command::Bench(bench) => match bench {
                BenchCommand::Speed(args) => args.model.compute.threads,
                BenchCommand::Grammar(args) => args.model.compute.threads,
                BenchCommand::Drafts(args) => args.model.compute.threads,
                BenchCommand::Tasks(args) | BenchCommand::Nestful(args) | BenchCommand::Bfcl(args) => {
                    args.compute.threads
                }
                BenchCommand::Pairs(args) => args.suite_args.compute.threads,
                // The servers it starts get --threads; the clients compute nothing.
                BenchCommand::Serve(_) | BenchCommand::Rescore { .. } | BenchCommand::Merge { .. } => None,
            },
            Command::Runs(_) | Command::Models(_) | Command::Tools(_) => None,
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate text with one model, streaming it to stdout.
    ///
    /// Example: tandem generate --chat "What is 12*4+5? Answer with the number only."
    Generate(GenerateArgs),
    /// Run the agent on a goal: the planner plans, tools and the executor carry it out, the answer prints last.
    ///
    /// Every run is logged under the runs directory (`tandem runs list`) and can be resumed after a crash
    /// (`tandem resume ID`).
    ///
    /// Examples:
    ///   tandem run "What is 12*4+5?"
    ///   tandem run --workspace notes --allow-write "Count the lines of todo.txt and write the count to count.txt"
    ///   tandem run --approve plan "Summarise README.md in one sentence"
    Run(RunArgs),
    /// Continue an interrupted or crashed run; completed steps are not run again.
    ///
    /// Example: tandem resume latest
    Resume(ResumeArgs),
    /// Run many goals in one process: models load once, their prompt cache stays warm across goals.
    ///
    /// Each goal is a normal run (its own run directory and audit log, `tandem runs show ID`),
    /// with no approval prompts. Each result is appended to the --out file as the goal finishes;
    /// running the same command again skips the goals already recorded, so an interrupted batch
    /// continues where it stopped, and resumes the run of a goal it was in the middle of (finished
    /// steps are not run again). A goal that fails, and a line that cannot be read, is recorded
    /// with its error and the batch goes on; the exit status is non-zero when a goal of this
    /// invocation did not finish `done`.
    ///
    /// Example goals.jsonl:
    ///   "What is 12*4+5?"
    ///   {"id": "eggs", "goal": "Tom buys 7 boxes of 12 eggs and breaks 5. How many are left?"}
    ///   # a comment
    ///   {"id": "notes", "goal": "Count the lines of notes.txt", "workspace": "ws/notes"}
    ///
    /// Examples:
    ///   tandem batch goals.jsonl --out results.jsonl
    ///   tandem batch goals.jsonl --out results.jsonl --retry-failed --json
    ///   tandem batch goals.jsonl --out results.jsonl --parallel 4   # 4 goals share each pass
    ///   tandem batch goals.jsonl --out results.jsonl --shard auto   # in a Slurm array or Indexed Job
    ///   tandem batch merge results.shard-*.jsonl --out results.jsonl
    ///   jq -r '[.id // .line, .stop, .answer] | @tsv' results.jsonl
    #[command(verbatim_doc_comment)]
    Batch(BatchArgs),
    /// List past runs or show one as a timeline.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Write a plan for a goal with the planner model (a dry run: nothing is executed).
    ///
    /// Example: tandem plan "What is 12*4+5, and what is that times 3?"
    Plan(PlanArgs),
    /// List, pull, verify and locate models.
    #[command(subcommand)]
    Models(ModelsCommand),
    /// Show the tools a run would offer the planner (built-ins, --tools, MCP servers).
    #[command(subcommand)]
    Tools(ToolsCommand),
    /// Serve the models over HTTP with OpenAI's chat-completions API (tool calls and json_schema answers
    /// grammar-constrained, so always valid). See docs/serve.md.
    ///
    /// Examples:
    ///   tandem serve --port 8080
    ///   TANDEM_API_KEY=secret tandem serve --host 0.0.0.0 --parallel 8
    #[command(verbatim_doc_comment)]
    Serve(ServeArgs),
    /// Benchmarks (`tandem bench speed --model ID`).
    #[command(subcommand)]
    Bench(BenchCommand),
}

/// `tandem serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on. The default answers this machine only; another address exposes the models to the
    /// network (set --api-key).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 takes a free one; the address is printed).
    #[arg(long, default_value_t = ServeSettings::PORT)]
    pub port: u16,
    /// Require `Authorization: Bearer KEY` on every /v1 request.
    #[arg(long, env = "TANDEM_API_KEY", value_name = "KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// The planner model, served under its id: a model id or a .gguf path.
    #[arg(long, default_value = settings::DEFAULT_PLANNER)]
    pub planner: String,
    /// The executor model, served under its id: a model id or a .gguf path. The same as --planner serves one model.
    #[arg(long, default_value = settings::DEFAULT_EXECUTOR)]
    pub executor: String,
    #[command(flatten)]
    pub compute: ComputeArgs,
    #[command(flatten)]
    pub speculate: SpeculateArg,
    /// Don't keep prompt-prefix KV snapshots on disk (<model cache>/prefixes).
    #[arg(long)]
    pub no_prefix_store: bool,
    /// Generations in flight at once; they share each model's forward passes (Qwen2 models; 1 for others).
    #[arg(long, value_name = "N", default_value_t = ServeSettings::PARALLEL as u16,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub parallel: u16,
    /// Requests that may wait for a free generation; more are refused with 503.
    #[arg(long, value_name = "N", default_value_t = ServeSettings::QUEUE)]
    pub queue: usize,
    /// Largest request body, in bytes (larger: 413).
    #[arg(long, value_name = "BYTES", default_value_t = ServeSettings::MAX_BODY_BYTES)]
    pub max_body: usize,
    /// Most new tokens of one completion; also the default when a request gives no max_tokens.
    #[arg(long, default_value_t = ServeSettings::MAX_TOKENS)]
    pub max_tokens: usize,
    /// Tools of agent runs (`POST /v1/runs`), with the same policy as `tandem run`.
    #[command(flatten)]
    pub tools: ToolArgs,
    /// A user tool file (TOML, as --tools) that an agent run may ask for by NAME (`"tools": "NAME"`); repeat the
    /// flag for more. Requests name a set, never a path.
    #[arg(long, value_name = "NAME=FILE", value_parser = named_file)]
    pub tool_set: Vec<(String, PathBuf)>,
    /// An MCP servers file (as --mcp) that an agent run may ask for by NAME (`"mcp": "NAME"`); repeat for more.
    #[arg(long, value_name = "NAME=FILE", value_parser = named_file)]
    pub mcp_set: Vec<(String, PathBuf)>,
    /// After Ctrl-C or SIGTERM, how long chat generations in flight may go on before they are cut off (agent runs
    /// stop at their next event at once and can be resumed).
    #[arg(long, value_name = "SECONDS", default_value_t = ServeSettings::SHUTDOWN_GRACE_S)]
    pub shutdown_grace: u64,
    #[command(flatten)]
    pub runs: RunsDirArg,
    /// A `tandem bench` output directory (e.g. bench-results) whose runs the web page shows, read-only.
    #[arg(long, value_name = "DIR")]
    pub bench_results: Option<PathBuf>,
}

/// `NAME=FILE`, NAME of letters, digits, `_` and `-`.
fn named_file(text: &str) -> std::result::Result<(String, PathBuf), String> {
    let (name, file) = text.split_once('=').ok_or_else(|| format!("expected NAME=FILE, got {text:?}"))?;
    let plain = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !plain {
        return Err(format!("the name {name:?} must be letters, digits, '_' or '-'"));
    }
    if file.is_empty() {
        return Err(format!("no file after {name}="));
    }
    Ok((name.to_string(), PathBuf::from(file)))
}

impl ServeArgs {
    /// The settings these flags give.
    pub fn settings(&self) -> ServeSettings {
        ServeSettings {
            host: self.host.clone(),
            port: self.port,
            api_key: self.api_key.clone(),
            planner: self.planner.clone(),
            executor: self.executor.clone(),
            runner: RunnerSettings {
                compute: self.compute.settings(),
                runs_dir: self.runs.runs_dir.clone(),
                drafting: self.speculate.drafting(),
                prefix_store: !self.no_prefix_store,
            },
            tools: self.tools.settings(),
            max_body_bytes: self.max_body,
            queue: self.queue,
            parallel: usize::from(self.parallel),
            max_tokens: self.max_tokens,
            tool_sets: self.tool_set.clone(),
            mcp_sets: self.mcp_set.clone(),
            shutdown_grace_s: self.shutdown_grace,
            bench_results: self.bench_results.clone(),
        }
    }
}

/// Where a command computes: `--threads` and `--device`, declared once and flattened into every command that
/// loads a model.
#[derive(Debug, Clone, Copy, Args)]
pub struct ComputeArgs {
    /// Compute threads (default: all cores).
    #[arg(long, short)]
    pub threads: Option<usize>,
    /// Device to run on.
    #[arg(long, value_enum, default_value_t = DeviceKind::Cpu)]
    pub device: DeviceKind,
}

impl ComputeArgs {
    /// The settings these flags give.
    pub fn settings(&self) -> Compute {
        Compute { threads: self.threads, device: self.device }
    }
}

/// Options shared by every command that loads a model.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// A model id from `tandem models list`, or a path to a .gguf file.
    #[arg(long, short, default_value = settings::DEFAULT_MODEL)]
    pub model: String,
    #[command(flatten)]
    pub compute: ComputeArgs,
    /// Keep tensor types as stored: Q5_0 weights skip our kernels (five-bit panels on AVX-512 VNNI CPUs, widened to
    /// int8 on others) and candle's Q8_0 conversion, and run on candle's slow Q5_0 path.
    #[arg(long)]
    pub keep_tensor_types: bool,
    #[command(flatten)]
    pub speculate: SpeculateArg,
}

/// The `--speculate` flag.
#[derive(Debug, Clone, Copy, Args)]
pub struct SpeculateArg {
    /// Speculative decoding everywhere. By default it runs where it is exact: prompt lookup guesses the next
    /// token from an n-gram of the prompt and output, and one pass checks it with the token before it; on the
    /// CPU with our kernels a batched pass gives each token the logits a one-token pass gives, so the output is
    /// plain decoding's bit for bit, and plans come about a tenth faster. This flag drafts elsewhere too (GPU,
    /// candle's kernels), where batched rounding can tip a near-tie.
    #[arg(long, conflicts_with = "no_speculate")]
    pub speculate: bool,
    /// No speculative decoding, not even where it is exact.
    #[arg(long)]
    pub no_speculate: bool,
}

impl SpeculateArg {
    /// Drafting as the flags ask.
    pub fn drafting(&self) -> Drafting {
        if self.speculate {
            Drafting::Always
        } else if self.no_speculate {
            Drafting::Never
        } else {
            Drafting::WhereExact
        }
    }
}

/// `tandem generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The prompt. Use `-` to read it from stdin.
    pub prompt: String,
    /// Wrap the prompt in the model's chat template (as a user message).
    #[arg(long)]
    pub chat: bool,
    /// A system message for `--chat`.
    #[arg(long, requires = "chat")]
    pub system: Option<String>,
    /// Maximum number of new tokens.
    #[arg(long, short = 'n', default_value_t = 256)]
    pub max_tokens: usize,
    /// Sampling temperature; 0 means greedy (argmax).
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f64,
    /// Keep only the k most likely tokens (with temperature > 0).
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Keep the smallest set of tokens whose probability reaches p (with temperature > 0).
    #[arg(long)]
    pub top_p: Option<f64>,
    /// Seed for sampling.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Constrain the output to JSON matching this JSON Schema file.
    #[arg(long, value_name = "FILE", group = "constraint")]
    pub json_schema: Option<PathBuf>,
    /// Constrain the output to this Lark grammar file.
    #[arg(long, value_name = "FILE.lark", group = "constraint")]
    pub grammar: Option<PathBuf>,
    /// Constrain the output to this regular expression.
    #[arg(long, value_name = "RE", group = "constraint")]
    pub regex: Option<String>,
    /// Print timings (load, prefill, decode) to stderr at the end.
    #[arg(long)]
    pub timings: bool,
}

/// Which tools a run offers, and the policy they run under.
#[derive(Debug, Clone, Args)]
pub struct ToolArgs {
    /// Directory the file tools and commands are confined to.
    #[arg(long, default_value = ".")]
    pub workspace: PathBuf,
    /// Offer the write_file tool (writes stay inside the workspace).
    #[arg(long)]
    pub allow_write: bool,
    /// Offer the shell tool, allowed to run only these programs (comma-separated, e.g. `wc,grep,sort`).
    #[arg(long, value_name = "CMD,...", value_delimiter = ',')]
    pub allow_shell: Vec<String>,
    /// Time limit of one shell command, in seconds.
    #[arg(long, default_value_t = settings::SHELL_TIMEOUT_S)]
    pub shell_timeout: u64,
    /// Add user tools from this TOML file (name, description, args schema, command; see docs/tools.md).
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    /// Add the tools of the MCP servers in this file, in the mcpServers JSON format other MCP clients keep them in
    /// ({"mcpServers": {"name": {"command": "...", "args": [...], "env": {...}}}}; stdio servers; see
    /// docs/tools.md). `tandem tools list --mcp FILE` shows what they offer. Without --mcp or $TANDEM_MCP:
    /// $XDG_CONFIG_HOME/tandem/mcp.json, else ~/.config/tandem/mcp.json, when that file exists.
    #[arg(long, value_name = "FILE", env = "TANDEM_MCP")]
    pub mcp: Option<PathBuf>,
    /// Time limit of an MCP server's start and of one MCP tool call, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = settings::MCP_TIMEOUT_S)]
    pub mcp_timeout: u64,
    /// Show the planner only the K tools that best match the goal (BM25 tool retrieval; `llm` is always kept);
    /// 0 shows every tool. For large catalogues (docs/benchmarks.md, tool retrieval).
    #[arg(long, value_name = "K", default_value_t = settings::TOOLS_TOP_K)]
    pub tools_top_k: usize,
}

/// `tandem plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The goal, in plain words.
    pub goal: String,
    /// The planner: a model id or a .gguf path.
    #[arg(long, short, default_value = settings::DEFAULT_PLANNER)]
    pub model: String,
    #[command(flatten)]
    pub compute: ComputeArgs,
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Token budget for the plan.
    #[arg(long, default_value_t = Budgets::PLAN_TOKENS)]
    pub max_tokens: usize,
    #[command(flatten)]
    pub search: PlanSearchArg,
    /// Print the plan as JSON instead of a numbered list.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub speculate: SpeculateArg,
    /// Don't keep prompt-prefix KV snapshots on disk (<model cache>/prefixes). With them, a second goal against
    /// the same tools starts with the instructions and tool list already computed.
    #[arg(long)]
    pub no_prefix_store: bool,
}

impl PlanArgs {
    /// The model options these flags describe.
    pub fn model_args(&self) -> ModelArgs {
        ModelArgs {
            model: self.model.clone(),
            compute: self.compute,
            keep_tensor_types: false,
            speculate: self.speculate,
        }
    }
}

/// Plan search, for every command that plans.
#[derive(Debug, Clone, Copy, Args)]
pub struct PlanSearchArg {
    /// Plan search: the planner writes N candidate plans side by side from one prompt (the first greedy, the
    /// others sampled) and keeps the valid plan that shares the most calls with the other valid candidates. It costs decoding time, not another
    /// prompt; 1 writes one greedy plan. docs/benchmarks.md (plan search) says what it buys and costs.
    #[arg(long, value_name = "N", env = "TANDEM_PLANS", default_value_t = settings::PLANS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=16))]
    pub plans: usize,
}

/// Where runs are logged.
#[derive(Debug, Clone, Args)]
pub struct RunsDirArg {
    /// Directory of run logs (default: $XDG_DATA_HOME/tandem/runs or ~/.local/share/tandem/runs).
    #[arg(long, env = "TANDEM_RUNS_DIR", value_name = "DIR")]
    pub runs_dir: Option<PathBuf>,
}

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
    pub tools: ToolArgs,
    /// Most plan revisions after failures.
    #[arg(long, default_value_t = Budgets::MAX_REPLANS)]
    pub max_replans: u32,
    /// Most step executions in the run.
    #[arg(long, default_value_t = Budgets::MAX_STEPS)]
    pub max_steps: usize,
    /// Most generated tokens in the run, planner and executor together.
    #[arg(long, default_value_t = Budgets::MAX_TOKENS)]
    pub max_tokens: usize,
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

impl ToolArgs {
    /// The settings these flags give.
    pub fn settings(&self) -> ToolSettings {
        ToolSettings {
            workspace: self.workspace.clone(),
            allow_write: self.allow_write,
            allow_shell: self.allow_shell.clone(),
            shell_timeout_s: self.shell_timeout,
            tools_file: self.tools.clone(),
            mcp_config: self.mcp.clone().or_else(crate::tools::mcp::default_config_path),
            mcp_timeout_s: self.mcp_timeout,
            top_k: self.tools_top_k,
        }
    }
}

impl AgentArgs {
    /// The settings these flags give.
    pub fn settings(&self) -> AgentSettings {
        AgentSettings {
            planner: self.planner.clone(),
            executor: self.executor.clone(),
            mode: self.mode,
            joiner: self.joiner,
            evaluate: self.evaluate,
            plans: self.search.plans,
            tools: self.tools.settings(),
            budgets: self.budgets(),
        }
    }

    /// The budgets these flags set.
    pub fn budgets(&self) -> Budgets {
        Budgets {
            max_replans: self.max_replans,
            max_steps: self.max_steps,
            max_tokens: self.max_tokens,
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
    /// computed. On 2 CPU cores 4 at a time gave 1.27× the goals per minute; the more a pass is bound by reading
    /// weights rather than by compute (more cores, a GPU), the more it gives. Each goal holds its own KV cache.
    /// Records are appended as goals finish, not in file order; on the CPU with our kernels each goal writes
    /// what it would write alone. Qwen2 models only.
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

/// `tandem runs …`.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// One line per run: id, status, steps, goal.
    List {
        #[command(flatten)]
        runs: RunsDirArg,
    },
    /// A run as a readable timeline (plans, steps, tool calls, approvals, answer).
    Show {
        /// The run id (a unique prefix is enough), or `latest`.
        id: String,
        #[command(flatten)]
        runs: RunsDirArg,
        /// Print the run's summary as JSON instead.
        #[arg(long)]
        json: bool,
    },
}

/// `tandem models …`.
#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// List the models in the manifest and whether each is in the cache.
    List,
    /// Download models into the cache (default: all defaults) and verify them.
    Pull {
        /// Model ids; none pulls every model in the manifest.
        ids: Vec<String>,
        /// Download again even if a verified copy is cached.
        #[arg(long)]
        force: bool,
    },
    /// Check size and SHA-256 of cached models (default: all cached).
    Verify {
        /// Model ids; none verifies every cached model.
        ids: Vec<String>,
    },
    /// Print the path of a model's file, pulling it first if needed.
    Path {
        /// Model id.
        id: String,
    },
}

/// `tandem tools …`.
#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Show exactly what the planner will see: each tool's name, description, argument schema (after loosening)
    /// and output schema, then what registration changed or left out. Starts the --mcp servers to list theirs.
    ///
    /// Example: tandem tools list --mcp mcp.json --allow-write
    List(ToolsListArgs),
}

/// `tandem tools list`.
#[derive(Debug, Args)]
pub struct ToolsListArgs {
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Print one JSON object: {"tools": [{name, description, args_schema, output_schema, needs_model}], "warnings":
    /// [...]}.
    #[arg(long)]
    pub json: bool,
}
