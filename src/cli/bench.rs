//! `tandem bench …`'s argument types (clap derive): the measurements and the quality suites.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use super::{ComputeArgs, ModelArgs};
use crate::settings::{self, Asks, Evaluator, Joiner, Mend, Mode, PairSettings, Shard, SuiteSettings};

/// `tandem bench …`.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Load time, prefill tok/s, decode tok/s and peak RSS of one model.
    Speed(SpeedArgs),
    /// Grammar cost and savings: compile time, mask time, constrained vs unconstrained plan generation.
    Grammar(GrammarBenchArgs),
    /// Speculative decoding by prompt lookup: the planner's plans for a few goals, drafted vs plain decoding (and
    /// drafted with narrowed steps: those whose grammar allows few tokens compute only their logits).
    ///
    /// Example: tandem bench drafts -m qwen2.5-coder-1.5b-instruct-q4_k_m
    Drafts(DraftsArgs),
    /// End-to-end tasks (benches/tasks.toml): success rate, steps, replans, tokens, wall time.
    ///
    /// Example: tandem bench tasks --limit 10
    Tasks(TasksArgs),
    /// NESTFUL: planning quality (F1 of functions and parameters, partial and full sequence accuracy).
    ///
    /// Example: tandem bench nestful --catalogue gold+5 --limit 40
    Nestful(NestfulArgs),
    /// BFCL's single-turn categories (simple_python, multiple, parallel, parallel_multiple, irrelevance, live_*):
    /// function calls by the executor, checked with BFCL's AST rules.
    ///
    /// Example: tandem bench bfcl --limit 100; tandem bench bfcl --data DIR --categories all
    Bfcl(BfclArgs),
    /// The planner × executor matrix on one suite, with the one-model and executor-only (step mode) baselines.
    ///
    /// Example: tandem bench pairs --planners qwen2.5-coder-1.5b-instruct-q4_k_m --executors
    /// qwen2.5-coder-0.5b-instruct-q4_k_m --suite tasks --limit 10
    Pairs(PairsArgs),
    /// Load test of an OpenAI-compatible server as users load it: N concurrent clients stream chat requests, each
    /// with a prompt of its own (benches/serve/requests.json's templates filled anew; text of a fixed length,
    /// required tool calls, and long documents with a question), sampled as clients sample (temperature 1, a seed
    /// each) and greedy; per workload, sampling and level requests/s, time to first token p50/p99, completion
    /// tok/s, tokens an answer, prompt tokens evaluated and errors, after every slot is warmed. Starts `tandem
    /// serve` itself per level (as many slots as clients) or loads the server at --url instead, and with
    /// --vs-llama-server also llama.cpp's server as it comes (--jinja) on the same file, alternating, with ratios.
    ///
    /// Example: tandem bench serve --threads 2 --clients 1,4,16 --vs-llama-server target/llama.cpp/build/bin/llama-server
    Serve(ServeBenchArgs),
    /// Recompute the scores of a finished or interrupted benchmark run from its records.
    ///
    /// With --mend (NESTFUL runs), each plan is first read again from the planner's own text through today's
    /// plan mends, so a change to the mends is measured on the same plans without running the model.
    ///
    /// Example: tandem bench rescore bench-results/nestful-q1+q0-20261128-002443 --mend
    Rescore {
        /// The benchmark run directory (as printed at its start).
        dir: PathBuf,
        /// Read each NESTFUL plan again from the planner's text through today's plan mends before scoring: those of
        /// the profile given (off, general, nestful), or of `nestful` (what every run before the profiles used) for
        /// a bare --mend.
        #[arg(long, value_enum, value_name = "PROFILE", num_args = 0..=1, default_missing_value = "nestful")]
        mend: Option<Mend>,
        /// With --mend: turn these rules of the profile off, one by one (names from `tandem rules`).
        #[arg(long, value_name = "RULE,...", value_delimiter = ',', value_parser = super::common::rule_name, requires = "mend")]
        rules_off: Vec<String>,
        /// The NESTFUL data directory, for --mend (default: ../shared/data/nestful).
        #[arg(long, value_name = "DIR", requires = "mend")]
        data: Option<PathBuf>,
    },
    /// Join the run directories of a sharded benchmark (`--shard K/N`) into one run directory per pair with the
    /// report one unsharded run writes (samples.jsonl, summary.json, summary.md; for several pairs also the
    /// pairs table and chart). Refuses, naming them, missing or repeated shards, shards run with other settings
    /// or model files, and samples recorded twice with different results.
    ///
    /// Example: tandem bench merge bench-results/nestful-*-shard-* --out bench-results
    Merge {
        /// The shards' run directories, or the report directories of sharded `bench pairs` runs.
        #[arg(value_name = "DIR", required = true)]
        dirs: Vec<PathBuf>,
        /// Where the merged run directories are written.
        #[arg(long, default_value = "bench-results")]
        out: PathBuf,
    },
}

/// The models a suite runs.
#[derive(Debug, Clone, Args)]
pub struct SuiteModels {
    /// The planner: a model id or a .gguf path.
    #[arg(long, default_value = settings::DEFAULT_PLANNER)]
    pub planner: String,
    /// The executor: a model id or a .gguf path.
    #[arg(long, default_value = settings::DEFAULT_EXECUTOR)]
    pub executor: String,
}

/// What every suite takes: its data, how it samples, where it writes and computes.
#[derive(Debug, Clone, Args)]
pub struct SuiteRun {
    /// Data: a directory for nestful (default ../shared/data/nestful) and bfcl (../shared/data/bfcl), a tasks
    /// TOML file for tasks (default: the built-in suite).
    #[arg(long, value_name = "PATH")]
    pub data: Option<PathBuf>,
    /// Only the first N samples (per category for bfcl).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Where benchmark runs are written (one directory per run).
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
    /// Continue an interrupted run in this directory (samples already recorded are skipped).
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    /// Run one shard of the samples (after --limit): K/N is shard K of N from 0, `auto` reads a Slurm array task
    /// or a Kubernetes Indexed Job (as `tandem batch --shard`). A sample's shard is a hash of its id; each shard
    /// writes its own run directory (…-shard-K-of-N-…); `tandem bench merge` joins them into one report.
    #[arg(long, value_name = "K/N|auto", value_parser = super::parse_shard)]
    pub shard: Option<Shard>,
    #[command(flatten)]
    pub compute: ComputeArgs,
}

/// How `tasks` runs the agent.
#[derive(Debug, Clone, Args)]
pub struct TaskOptions {
    /// Planner mode for `tasks` (plan-ahead, or step for the executor-alone baseline).
    #[arg(long, value_enum, default_value_t = Mode::PlanAhead)]
    pub mode: Mode,
    /// Who writes the final answer of `tasks` runs (as `tandem run --joiner`).
    #[arg(long, value_enum, default_value_t = Joiner::Planner)]
    pub joiner: Joiner,
    /// Who checks the calculator steps of `tasks` runs (as `tandem run --evaluate`).
    #[arg(long, value_enum, env = "TANDEM_EVALUATE", default_value_t = Evaluator::Off)]
    pub evaluate: Evaluator,
}

/// NESTFUL's tool catalogue and grammar.
#[derive(Debug, Clone, Args)]
pub struct CatalogueOptions {
    /// Tool catalogue per NESTFUL sample: `all` (the whole spec file, hardest) or `gold+K` (gold tools and K
    /// distractors drawn with --seed).
    #[arg(long, value_name = "all|gold+K", default_value = "gold+5")]
    pub catalogue: String,
    /// Seed for the distractor tools of `gold+K`.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// NESTFUL without the plan grammar (free JSON), to measure what the grammar buys.
    #[arg(long)]
    pub no_grammar: bool,
}

impl CatalogueOptions {}

/// Tool retrieval for the planner (nestful and tasks).
#[derive(Debug, Clone, Copy, Args)]
pub struct TopKArg {
    /// Show the planner only the K tools of the catalogue that best match the goal (BM25 tool retrieval); 0 shows
    /// all.
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub tools_top_k: usize,
}

/// The categories a suite runs (bfcl and tasks).
#[derive(Debug, Clone, Args)]
pub struct CategoriesArg {
    /// Categories to run (comma-separated). bfcl: simple_python, multiple, parallel, parallel_multiple,
    /// irrelevance, live_simple, live_multiple, live_parallel, live_parallel_multiple, live_irrelevance,
    /// live_relevance, or `all` (every category with a question file in --data); default simple_python,multiple.
    /// tasks: the suite's own categories (its tasks' `category`), default all.
    #[arg(long, value_delimiter = ',')]
    pub categories: Vec<String>,
}

/// Which plan mends a suite that writes plans runs.
#[derive(Debug, Clone, Args)]
pub struct MendProfileArg {
    /// Plan mends (tasks and NESTFUL): `off`, `general` (the rules that follow from the tools' schemas and the
    /// goal, as `run`), or `nestful` (also the rules that match NESTFUL's gold conventions). Default: `nestful` for
    /// `bench nestful`, so its figures stay comparable with those published before the profiles; `general`
    /// otherwise.
    #[arg(long, value_enum, value_name = "PROFILE")]
    pub mend: Option<Mend>,
    /// Turn these rules of the profile off, one by one (names from `tandem rules`): each rule off alone is the
    /// rule book's ablation (docs/benchmarks.md).
    #[arg(long, value_name = "RULE,...", value_delimiter = ',', value_parser = super::common::rule_name)]
    pub rules_off: Vec<String>,
}

/// `tandem bench tasks`.
#[derive(Debug, Clone, Args)]
pub struct TasksArgs {
    #[command(flatten)]
    pub models: SuiteModels,
    #[command(flatten)]
    pub search: super::PlanSearchArg,
    #[command(flatten)]
    pub task: TaskOptions,
    #[command(flatten)]
    pub top_k: TopKArg,
    #[command(flatten)]
    pub categories: CategoriesArg,
    #[command(flatten)]
    pub mend: MendProfileArg,
    #[command(flatten)]
    pub run: SuiteRun,
}

/// `tandem bench nestful`.
#[derive(Debug, Clone, Args)]
pub struct NestfulArgs {
    #[command(flatten)]
    pub models: SuiteModels,
    #[command(flatten)]
    pub search: super::PlanSearchArg,
    #[command(flatten)]
    pub catalogue: CatalogueOptions,
    #[command(flatten)]
    pub top_k: TopKArg,
    /// Print the gold-tool recall of tool retrieval at each K (e.g. `3,5,8,10,15`) over the --catalogue
    /// catalogues and exit; no model is loaded.
    #[arg(long, value_name = "K,...", value_delimiter = ',')]
    pub retrieval_recall: Vec<usize>,
    #[command(flatten)]
    pub mend: MendProfileArg,
    #[command(flatten)]
    pub run: SuiteRun,
}

/// `tandem bench bfcl`.
#[derive(Debug, Clone, Args)]
pub struct BfclArgs {
    #[command(flatten)]
    pub models: SuiteModels,
    #[command(flatten)]
    pub categories: CategoriesArg,
    /// In the categories that take a list of calls (parallel, parallel_multiple and their live forms): `executor`
    /// or `planner` has that model list the actions the request asks for, one short line each, then the executor
    /// writes exactly one call for each (the list is recorded as `asks`); `off` writes the list of calls in one
    /// pass.
    #[arg(long, value_enum, value_name = "WHO", default_value = "executor")]
    pub asks: Asks,
    #[command(flatten)]
    pub run: SuiteRun,
}

/// The flag groups a suite's command has (those it lacks take their defaults).
#[derive(Default)]
struct SuiteFlags<'a> {
    search: Option<super::PlanSearchArg>,
    task: Option<&'a TaskOptions>,
    catalogue: Option<&'a CatalogueOptions>,
    top_k: Option<TopKArg>,
    categories: Option<&'a CategoriesArg>,
    /// The rule flags and the suite's default profile.
    rules: Option<(&'a MendProfileArg, Mend)>,
}

/// The settings of a suite: what was given, the defaults for the rest.
fn suite_settings(models: &SuiteModels, run: &SuiteRun, flags: SuiteFlags) -> SuiteSettings {
    let SuiteFlags { search, task, catalogue, top_k, categories, rules } = flags;
    let catalogue_default = || CatalogueOptions { catalogue: "gold+5".into(), seed: 0, no_grammar: false };
    let catalogue = catalogue.cloned().unwrap_or_else(catalogue_default);
    // The rules asked for, else the suite's default profile (`nestful` for NESTFUL, so its figures stay comparable
    // with those published before the profiles).
    let (mend, rules_off) = rules
        .map_or((Mend::General, Vec::new()), |(arg, default)| (arg.mend.unwrap_or(default), arg.rules_off.clone()));
    SuiteSettings {
        pair: PairSettings {
            planner: models.planner.clone(),
            executor: models.executor.clone(),
            mode: task.map_or_else(Mode::default, |t| t.mode),
            joiner: task.map_or_else(Joiner::default, |t| t.joiner),
            evaluate: task.map_or_else(Evaluator::default, |t| t.evaluate),
            plans: search.map_or(settings::PLANS, |s| s.plans),
            mend,
            rules_off,
            think: false,
        },
        data: run.data.clone(),
        tools: catalogue.catalogue,
        tools_top_k: top_k.map_or(settings::TOOLS_TOP_K, |k| k.tools_top_k),
        no_grammar: catalogue.no_grammar,
        categories: categories.map(|c| c.categories.clone()).unwrap_or_default(),
        limit: run.limit,
        seed: catalogue.seed,
        out: run.out.clone(),
        resume: run.resume.clone(),
        compute: run.compute.settings(),
        shard: run.shard,
        asks: Asks::default(),
    }
}

impl TasksArgs {
    /// The settings these flags give.
    pub fn settings(&self) -> SuiteSettings {
        let flags = SuiteFlags {
            search: Some(self.search),
            task: Some(&self.task),
            top_k: Some(self.top_k),
            categories: Some(&self.categories),
            rules: Some((&self.mend, Mend::General)),
            ..SuiteFlags::default()
        };
        suite_settings(&self.models, &self.run, flags)
    }
}

impl NestfulArgs {
    /// The settings these flags give.
    pub fn settings(&self) -> SuiteSettings {
        let flags = SuiteFlags {
            search: Some(self.search),
            catalogue: Some(&self.catalogue),
            top_k: Some(self.top_k),
            rules: Some((&self.mend, Mend::Nestful)),
            ..SuiteFlags::default()
        };
        suite_settings(&self.models, &self.run, flags)
    }
}

impl BfclArgs {
    /// The settings these flags give.
    pub fn settings(&self) -> SuiteSettings {
        let flags = SuiteFlags { categories: Some(&self.categories), ..SuiteFlags::default() };
        let settings = suite_settings(&self.models, &self.run, flags);
        SuiteSettings { asks: self.asks, ..settings }
    }
}

/// The suite `bench pairs` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SuiteName {
    /// End-to-end tasks.
    Tasks,
    /// NESTFUL planning.
    Nestful,
    /// BFCL single calls.
    Bfcl,
}

/// `tandem bench pairs`.
#[derive(Debug, Clone, Args)]
pub struct PairsArgs {
    /// Planner models (comma-separated ids or paths).
    #[arg(long, value_delimiter = ',', required = true)]
    pub planners: Vec<String>,
    /// Executor models (comma-separated ids or paths).
    #[arg(long, value_delimiter = ',', required = true)]
    pub executors: Vec<String>,
    /// The suite to run for every pair.
    #[arg(long, value_enum)]
    pub suite: SuiteName,
    /// Skip the baselines (each model alone; each executor alone in step mode).
    #[arg(long)]
    pub no_baselines: bool,
    #[command(flatten)]
    pub search: super::PlanSearchArg,
    #[command(flatten)]
    pub task: TaskOptions,
    #[command(flatten)]
    pub catalogue: CatalogueOptions,
    #[command(flatten)]
    pub top_k: TopKArg,
    #[command(flatten)]
    pub categories: CategoriesArg,
    #[command(flatten)]
    pub mend: MendProfileArg,
    #[command(flatten)]
    pub run: SuiteRun,
}

impl PairsArgs {
    /// The suite settings of every pair (the pair's models replace the defaults named here).
    pub fn suite_settings(&self) -> SuiteSettings {
        let models =
            SuiteModels { planner: settings::DEFAULT_PLANNER.into(), executor: settings::DEFAULT_EXECUTOR.into() };
        let default_rules = if self.suite == SuiteName::Nestful { Mend::Nestful } else { Mend::General };
        let flags = SuiteFlags {
            search: Some(self.search),
            task: Some(&self.task),
            catalogue: Some(&self.catalogue),
            top_k: Some(self.top_k),
            categories: Some(&self.categories),
            rules: Some((&self.mend, default_rules)),
        };
        suite_settings(&models, &self.run, flags)
    }
}

/// `tandem bench grammar`.
#[derive(Debug, Args)]
pub struct GrammarBenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Repetitions of the generation comparison; medians are reported.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `tandem bench drafts`.
#[derive(Debug, Args)]
pub struct DraftsArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Repetitions of each plan, plain and drafted; medians are reported.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Also time llama.cpp's plain decoding of as many tokens at the same depth (the plan's prompt length),
    /// alternating with ours: a `llama-bench` binary (`scripts/build-llama-bench.sh` builds one).
    #[arg(long, value_name = "LLAMA_BENCH")]
    pub vs_llamacpp: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `tandem bench speed`.
#[derive(Debug, Args)]
pub struct SpeedArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Prompt length in tokens for the prefill measurement.
    #[arg(long, default_value_t = 512)]
    pub prefill_tokens: usize,
    /// Tokens to decode for the decode measurement.
    #[arg(long, default_value_t = 128)]
    pub decode_tokens: usize,
    /// Positions already in the cache when decoding starts. 0 (the default) decodes after a one-token prompt,
    /// like llama-bench's generation test; 512 decodes as after a 512-token prompt (llama-bench `-d 512`).
    #[arg(long, default_value_t = 0)]
    pub decode_depth: usize,
    /// Also decode N sequences at once, one forward pass a token for all of them (what `tandem batch
    /// --parallel N` does), for each N in this list, e.g. `--sequences 2,4,8`; prints the total tok/s and its
    /// ratio to one sequence's.
    #[arg(long, value_delimiter = ',', value_name = "N,..", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub sequences: Vec<u16>,
    /// Repetitions; medians are reported.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also run llama.cpp's llama-bench at this path on the same file, threads and token counts, alternating
    /// with our runs, and print ratios (build one with scripts/build-llama-bench.sh).
    #[arg(long, value_name = "LLAMA_BENCH")]
    pub vs_llamacpp: Option<PathBuf>,
}

/// `tandem bench serve`.
#[derive(Debug, Args)]
pub struct ServeBenchArgs {
    /// The model served: a model id or a .gguf path (llama-server gets the same file).
    #[arg(long, short, default_value = settings::DEFAULT_EXECUTOR)]
    pub model: String,
    /// Concurrent clients, one level each (comma-separated); each level starts the servers afresh with as many
    /// generation slots as clients.
    #[arg(long, value_delimiter = ',', value_name = "N,..", default_value = "1,4,16")]
    pub clients: Vec<usize>,
    /// Workloads, each reported apart (comma-separated): text (no tools, exactly --max-completion-tokens tokens
    /// with ignore_eos), tools (the tool list, tool_choice required) and long (a new document of 1,500+ tokens and
    /// a question, answered as text is).
    #[arg(long, value_delimiter = ',', value_name = "text|tools|long", default_value = "text,tools,long",
        value_parser = ["text", "tools", "long"])]
    pub workload: Vec<String>,
    /// How answers are chosen, each reported apart (comma-separated): sampled (temperature 1 with a seed per
    /// request, as OpenAI clients send by default) and greedy (temperature 0).
    #[arg(long, value_delimiter = ',', value_name = "sampled|greedy", default_value = "sampled,greedy",
        value_parser = ["sampled", "greedy"])]
    pub sampling: Vec<String>,
    /// Requests each client sends per level, one after another, after every slot is warmed.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub requests: usize,
    /// `max_tokens` of every request: the most new tokens of one completion.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_completion_tokens: usize,
    /// Compute threads of each server started (default: all cores).
    #[arg(long, short)]
    pub threads: Option<usize>,
    /// Runs of each level on each server, alternating between them; medians are reported.
    #[arg(long, default_value_t = 1)]
    pub repeats: usize,
    /// Load the server already running at this URL (e.g. http://127.0.0.1:8080) instead of starting one; it
    /// must serve --model under its id.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Also start llama.cpp's llama-server at this path on the same file as it comes (`-np` clients, the same
    /// threads, `--jinja`, 4096 tokens of context a slot, its other defaults), alternating with tandem serve, and
    /// print Tandem ÷ llama-server for each figure (build it with scripts/build-llama-server.sh).
    #[arg(long, value_name = "LLAMA_SERVER")]
    pub vs_llama_server: Option<PathBuf>,
    /// Where the run directory (samples.jsonl, summary.json, summary.md) is written.
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
}

impl BenchCommand {
    /// The `--threads` the command was given, where it takes one.
    pub fn threads(&self) -> Option<usize> {
        match self {
            BenchCommand::Speed(args) => args.model.compute.threads,
            BenchCommand::Grammar(args) => args.model.compute.threads,
            BenchCommand::Drafts(args) => args.model.compute.threads,
            BenchCommand::Tasks(args) => args.run.compute.threads,
            BenchCommand::Nestful(args) => args.run.compute.threads,
            BenchCommand::Bfcl(args) => args.run.compute.threads,
            BenchCommand::Pairs(args) => args.run.compute.threads,
            // The servers it starts get --threads; the clients compute nothing.
            BenchCommand::Serve(_) | BenchCommand::Rescore { .. } | BenchCommand::Merge { .. } => None,
        }
    }
}
