//! `tandem bench drafts`: speculative decoding by prompt lookup on the planner's real work (plans for a few
//! goals, written under the plan grammar with the planner's prompt) against plain decoding of the same plans, both
//! with every logit computed at every step; then drafted decoding as generations run it by default, with the
//! steps whose grammar allows few tokens computing only theirs (narrowed). Reports tok/s each way, forward passes,
//! how many drafted tokens the model kept, and whether the outputs are identical (they must be where the model's
//! batches are exact; elsewhere a near-tie can go the other way).

use std::path::Path;

use candle_core::Device;

use super::llamacpp::run_llama_decode;
use super::median;
use crate::agent::model_call::chat_call;
use crate::agent::plan::planner::system_prompt;
use crate::agent::plan::schema::plan_json_schema;
use crate::decode::constraint::ConstraintSpec;
use crate::decode::Model;
use crate::decode::{Speculation, Timings};
use crate::llm::{ChatMessage, LoadOptions};
use crate::progress::{ProgressUnit, Reporter};
use crate::tools::{ToolContext, ToolRegistry, Workspace};
use crate::Result;

/// Goals whose plans are measured: one step, a word problem, a file task, two conversions.
pub const GOALS: &[&str] = &[
    "What is 12*4+5?",
    "A box holds 12 eggs. Tom buys 7 boxes and breaks 5 eggs. How many eggs are left?",
    "Read notes.txt and todo.txt, then write a one-line summary of both to summary.txt.",
    "Convert 26.2 miles to kilometres and 5.5 feet to centimetres, then add the two results.",
];

/// Token budget for one plan.
const PLAN_TOKENS: usize = 400;

/// One goal's plan, decoded both ways (medians over the repetitions).
#[derive(Debug, Clone, serde::Serialize)]
pub struct GoalDrafts {
    pub goal: String,
    /// Tokens in the plan (forced ones included).
    pub tokens: usize,
    pub plain_s: f64,
    pub drafted_s: f64,
    /// Drafted, with narrowed passes (the default).
    pub narrowed_s: f64,
    pub plain_passes: usize,
    pub drafted_passes: usize,
    pub drafted_tokens: usize,
    pub accepted_tokens: usize,
    /// The narrowed run's passes that computed only the allowed tokens' logits.
    pub narrowed_passes: usize,
    /// Whether the drafted and narrowed runs wrote exactly the plain run's plan.
    pub identical: bool,
    /// The prompt's length: the depth the plan is decoded at.
    pub prompt_tokens: usize,
    /// llama.cpp's plain decode of as many tokens at the same depth (`llama-bench -n TOKENS -d PROMPT`), when
    /// asked for.
    pub llamacpp_s: Option<f64>,
}

/// The whole measurement.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DraftReport {
    pub model: String,
    pub speculation: Speculation,
    pub goals: Vec<GoalDrafts>,
    /// Plan tokens over decode time, all goals together.
    pub plain_tok_s: f64,
    pub drafted_tok_s: f64,
    pub narrowed_tok_s: f64,
    /// drafted ÷ plain throughput.
    pub speedup: f64,
    /// narrowed ÷ drafted throughput.
    pub narrowed_speedup: f64,
    /// llama.cpp's plain decode of the same numbers of tokens at the same depths, when measured.
    pub llamacpp_tok_s: Option<f64>,
    pub threads: usize,
}

/// Decode time: the generation after its prompt (prefill is the same both ways and not what drafts change).
fn decode_seconds(timings: &Timings) -> f64 {
    timings.decode.as_secs_f64()
}

/// Measures `GOALS` on one model file with the built-in tools (writes allowed, so the file goal can plan them);
/// with `peer` (a `llama-bench` binary), each repetition also times llama.cpp decoding as many tokens at the
/// same depth, alternating with ours.
pub fn measure(
    path: &Path,
    device: &Device,
    load: &LoadOptions,
    repeats: usize,
    peer: Option<&Path>,
    reporter: &dyn Reporter,
) -> Result<DraftReport> {
    let mut model = Model::load(path, device, load)?;
    let workspace = Workspace::new(std::env::temp_dir())?;
    let registry = ToolRegistry::builtins(&ToolContext::new(workspace).with_write(true));
    let system = system_prompt(&registry)?;
    let spec = ConstraintSpec::JsonSchema(plan_json_schema(&registry));
    let speculation = Speculation::prompt_lookup();
    let progress =
        reporter.start("plans, plain and drafted", Some((GOALS.len() * repeats) as u64), ProgressUnit::Items);
    let mut goals = Vec::new();
    for goal in GOALS {
        let messages = [ChatMessage::system(system.clone()), ChatMessage::user(*goal)];
        let plan = |model: &mut Model, mode: Speculation, narrow: bool| -> Result<(String, Timings)> {
            model.speculation = mode;
            model.narrow_logits = narrow;
            // The prompt is cached from the previous run; both modes start from the same warm prefix.
            chat_call(model, "planner", &messages, Some(&spec), PLAN_TOKENS)
        };
        plan(&mut model, Speculation::Off, false)?; // warm-up: the first passes rearrange weights, the prompt gets cached
        let (mut plain, mut drafted, mut narrowed, mut peer_s) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut last = None;
        for _ in 0..repeats.max(1) {
            let (plain_text, plain_timings) = plan(&mut model, Speculation::Off, false)?;
            let (drafted_text, drafted_timings) = plan(&mut model, speculation, false)?;
            let (narrowed_text, narrowed_timings) = plan(&mut model, speculation, true)?;
            plain.push(decode_seconds(&plain_timings));
            drafted.push(decode_seconds(&drafted_timings));
            narrowed.push(decode_seconds(&narrowed_timings));
            if let Some(bin) = peer {
                let (tokens, depth) = (plain_timings.generated_tokens, plain_timings.prompt_tokens);
                let threads = candle_core::utils::get_num_threads();
                peer_s.push(tokens as f64 / run_llama_decode(bin, path, threads, tokens, depth)?);
            }
            let identical = drafted_text == plain_text && narrowed_text == plain_text;
            if !identical {
                tracing::warn!(goal, plain = %plain_text, drafted = %drafted_text, narrowed = %narrowed_text,
                    "a drafted or narrowed plan differs");
            }
            last = Some((plain_timings, drafted_timings, narrowed_timings, identical));
            progress.inc(1);
        }
        let Some((plain_timings, drafted_timings, narrowed_timings, identical)) = last else { continue };
        goals.push(GoalDrafts {
            goal: goal.to_string(),
            tokens: plain_timings.generated_tokens,
            plain_s: median(&plain),
            drafted_s: median(&drafted),
            narrowed_s: median(&narrowed),
            plain_passes: plain_timings.forward_passes,
            drafted_passes: drafted_timings.forward_passes,
            drafted_tokens: drafted_timings.drafted_tokens,
            accepted_tokens: drafted_timings.accepted_tokens,
            narrowed_passes: narrowed_timings.narrowed_passes,
            identical,
            prompt_tokens: plain_timings.prompt_tokens,
            llamacpp_s: (!peer_s.is_empty()).then(|| median(&peer_s)),
        });
    }
    progress.finish();
    let tokens: usize = goals.iter().map(|g| g.tokens).sum();
    let plain_s: f64 = goals.iter().map(|g| g.plain_s).sum();
    let drafted_s: f64 = goals.iter().map(|g| g.drafted_s).sum();
    let narrowed_s: f64 = goals.iter().map(|g| g.narrowed_s).sum();
    let rate = |s: f64| if s > 0.0 { tokens as f64 / s } else { 0.0 };
    let llamacpp_s: Option<f64> = goals.iter().map(|g| g.llamacpp_s).sum();
    Ok(DraftReport {
        model: path.display().to_string(),
        speculation,
        plain_tok_s: rate(plain_s),
        drafted_tok_s: rate(drafted_s),
        narrowed_tok_s: rate(narrowed_s),
        speedup: if drafted_s > 0.0 { plain_s / drafted_s } else { 0.0 },
        narrowed_speedup: if narrowed_s > 0.0 { drafted_s / narrowed_s } else { 0.0 },
        llamacpp_tok_s: llamacpp_s.map(rate),
        goals,
        threads: candle_core::utils::get_num_threads(),
    })
}
