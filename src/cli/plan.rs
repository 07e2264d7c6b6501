//! `tandem generate`'s and `tandem plan`'s arguments: one model, no run.

use std::path::PathBuf;

use clap::Args;

use super::{ComputeArgs, MendArg, ModelArgs, PlanSearchArg, SpeculateArg, ToolArgs};
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
    /// Most new tokens to generate.
    #[arg(long, short = 'n', value_name = "N", default_value_t = 256)]
    pub max_new_tokens: usize,
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
    /// Put this plan (the JSON `tandem plan --json` prints, or a plan file as `tandem run --plan` takes) through
    /// the rule book instead of asking the planner: the same mends and checks a planner's plan meets, with the same
    /// tools (--tools, --mcp, --workspace). Prints the plan after the rules, each change and each refusal with its
    /// feedback; with --json one object with `plan`, `changes` and `refusals`. No model is loaded.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// The planner: a model id or a .gguf path.
    #[arg(long, default_value = settings::DEFAULT_PLANNER)]
    pub planner: String,
    #[command(flatten)]
    pub compute: ComputeArgs,
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Token budget of the plan (as `tandem run --plan-tokens`).
    #[arg(long, value_name = "N", default_value_t = Budgets::PLAN_TOKENS)]
    pub plan_tokens: usize,
    #[command(flatten)]
    pub search: PlanSearchArg,
    #[command(flatten)]
    pub mend: MendArg,
    /// The planner thinks before the plan where its chat template has a thinking mode (as `tandem run --think`);
    /// the thought is printed before the plan (`thinking` with --json).
    #[arg(long)]
    pub think: bool,
    /// Print the plan as JSON instead of a numbered list (with the mends as `mends` and what a run would send back
    /// to the planner as `sent_back`; with --from: `plan`, `changes` and `refusals`).
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
            model: self.planner.clone(),
            compute: self.compute,
            keep_tensor_types: false,
            speculate: self.speculate,
        }
    }
}
