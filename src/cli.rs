//! Command-line types (clap derive) and nothing else: parsing lives here, behaviour in `commands`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

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

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate text with one model, streaming it to stdout.
    ///
    /// Example: tandem generate --chat "What is 12*4+5? Answer with the number only."
    Generate(GenerateArgs),
    /// Write a plan for a goal with the planner model (a dry run: nothing is executed).
    ///
    /// Example: tandem plan "What is 12*4+5, and what is that times 3?"
    Plan(PlanArgs),
    /// List, pull, verify and locate models.
    #[command(subcommand)]
    Models(ModelsCommand),
    /// Benchmarks (`tandem bench speed --model ID`).
    #[command(subcommand)]
    Bench(BenchCommand),
}

/// Where tensors live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum DeviceArg {
    /// The CPU (always available).
    #[default]
    Cpu,
    /// An NVIDIA GPU (build with `--features cuda`).
    Cuda,
    /// An Apple GPU (build with `--features metal`).
    Metal,
}

/// Options shared by every command that loads a model.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// A model id from `tandem models list`, or a path to a .gguf file.
    #[arg(long, short, default_value = "qwen2.5-coder-0.5b-instruct-q4_k_m")]
    pub model: String,
    /// Compute threads (default: all cores).
    #[arg(long, short)]
    pub threads: Option<usize>,
    /// Device to run on.
    #[arg(long, value_enum, default_value_t = DeviceArg::Cpu)]
    pub device: DeviceArg,
    /// Keep tensor types as stored (skip the load-time Q5_0→Q8_0 conversion; slower on CPU).
    #[arg(long)]
    pub keep_tensor_types: bool,
}

impl ModelArgs {
    /// The load options these flags ask for.
    pub fn load_options(&self) -> crate::llm::LoadOptions {
        crate::llm::LoadOptions { keep_tensor_types: self.keep_tensor_types }
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

/// `tandem plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The goal, in plain words.
    pub goal: String,
    /// The planner: a model id or a .gguf path.
    #[arg(long, short, default_value = "qwen2.5-coder-1.5b-instruct-q4_k_m")]
    pub model: String,
    /// Compute threads (default: all cores).
    #[arg(long, short)]
    pub threads: Option<usize>,
    /// Device to run on.
    #[arg(long, value_enum, default_value_t = DeviceArg::Cpu)]
    pub device: DeviceArg,
    /// Directory the file tools are confined to.
    #[arg(long, default_value = ".")]
    pub workspace: PathBuf,
    /// Offer the write_file tool to the planner.
    #[arg(long)]
    pub allow_write: bool,
    /// Token budget for the plan.
    #[arg(long, default_value_t = 768)]
    pub max_tokens: usize,
    /// Print the plan as JSON instead of a numbered list.
    #[arg(long)]
    pub json: bool,
}

impl PlanArgs {
    /// The model options these flags describe.
    pub fn model_args(&self) -> ModelArgs {
        ModelArgs { model: self.model.clone(), threads: self.threads, device: self.device, keep_tensor_types: false }
    }
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

/// `tandem bench …`.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Load time, prefill tok/s, decode tok/s and peak RSS of one model.
    Speed(SpeedArgs),
    /// Grammar cost and savings: compile time, mask time, constrained vs unconstrained plan generation.
    Grammar(GrammarBenchArgs),
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
    /// Repetitions; medians are reported.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}
