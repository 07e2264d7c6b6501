//! `tandem generate`'s and `tandem plan`'s arguments: one model, no run.

use std::path::PathBuf;

use clap::Args;

use super::{ComputeArgs, ModelArgs, PlanSearchArg, SpeculateArg, ToolArgs};
use crate::settings::{self, Budgets};

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
