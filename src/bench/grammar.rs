//! `tandem bench grammar`: what constrained decoding costs and saves — grammar compile time, per-token mask
//! time (mean / p99), and constrained vs unconstrained generation of a plan on the same model and prompt.

use std::path::Path;
use std::time::{Duration, Instant};

use candle_core::Device;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::median;
use crate::decode::constraint::{ConstraintSpec, GrammarEngine};
use crate::decode::token_constraint::TokenConstraint;
use crate::decode::Model;
use crate::decode::{generate, GenerateRequest, Sampling, Speculation};
use crate::llm::{ChatMessage, LoadOptions};
use crate::Result;

/// The demonstration plan schema (enums, nested objects, arrays with bounds, patterns).
pub const PLAN_SCHEMA: &str = include_str!("plan.schema.json");

const PLAN_PROMPT: &str = "Write a plan as JSON for this goal: compute 12*4+5, then read notes.txt and summarise it \
with the llm tool. Use step ids s1, s2, s3.";

/// The figures of one run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GrammarReport {
    pub model: String,
    /// Building the token trie and parser factory (once per tokenizer).
    pub engine_build_ms: f64,
    /// Compiling the plan schema (median).
    pub compile_ms: f64,
    /// Per-mask time over random walks of the schema.
    pub mask_mean_us: f64,
    pub mask_p99_us: f64,
    pub masks_measured: usize,
    /// Constrained greedy generation of the plan.
    pub constrained_tokens: usize,
    pub constrained_forward_passes: usize,
    pub forced_tokens: usize,
    pub masks_in_generation: usize,
    pub constrained_s: f64,
    /// Unconstrained greedy generation of the same number of tokens from the same prompt.
    pub unconstrained_s: f64,
    /// constrained ÷ unconstrained wall time (≤ 1 means the grammar paid for itself).
    pub wall_ratio: f64,
    pub plan: String,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Masks computed along random walks of `spec` (the states a sampling model visits), each timed.
pub fn mask_times(engine: &GrammarEngine, spec: &ConstraintSpec, walks: u64, steps: usize) -> Result<Vec<Duration>> {
    let n = engine.n_tokens();
    let mut times = Vec::new();
    let mut logits = vec![0.0f32; n];
    for seed in 0..walks {
        let mut matcher = engine.matcher(spec)?;
        let mut rng = StdRng::seed_from_u64(seed);
        for _ in 0..steps {
            matcher.forced_tokens()?;
            if matcher.is_finished() {
                break;
            }
            logits.fill(0.0);
            let started = Instant::now();
            matcher.mask_logits(&mut logits)?;
            times.push(started.elapsed());
            let allowed: Vec<u32> = (0..n as u32).filter(|&i| logits[i as usize].is_finite()).collect();
            if allowed.is_empty() {
                break;
            }
            let pick = allowed[rng.random_range(0..allowed.len())];
            matcher.commit(pick)?;
            if matcher.is_finished() || (matcher.is_accepting() && rng.random_bool(0.5)) {
                break;
            }
        }
    }
    Ok(times)
}

/// Runs the benchmark on one model file.
pub fn measure(path: &Path, device: &Device, load: &LoadOptions, repeats: usize) -> Result<GrammarReport> {
    let mut model = Model::load(path, device, load)?;
    let started = Instant::now();
    let engine = model.grammar_engine()?;
    let engine_build_ms = started.elapsed().as_secs_f64() * 1e3;
    let schema: serde_json::Value =
        serde_json::from_str(PLAN_SCHEMA).map_err(|e| crate::Error::Internal(format!("built-in plan schema: {e}")))?;
    let spec = ConstraintSpec::JsonSchema(schema);
    let compiles: Vec<f64> = (0..5)
        .map(|_| engine.matcher_uncached(&spec).map(|m| m.stats().compile_time.as_secs_f64() * 1e3))
        .collect::<std::result::Result<_, _>>()?;
    let mut masks = mask_times(&engine, &spec, 20, 120)?;
    masks.sort();
    let mean = masks.iter().sum::<Duration>().as_secs_f64() / masks.len().max(1) as f64;

    let template = model
        .chat_template
        .as_ref()
        .ok_or_else(|| crate::Error::Model("the model has no chat template: choose an instruct model".into()))?;
    let prompt = template.render(&[ChatMessage::user(PLAN_PROMPT)], None, true)?;
    let tokens = model.tokenizer.encode(&prompt, model.tokenizer.add_bos_by_default())?;
    // Warm-up: the first forward pass rearranges weights.
    model.weights.forward(&tokens, 0)?;

    let (mut constrained_s, mut unconstrained_s) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..repeats.max(1) {
        let mut matcher = engine.matcher(&spec)?;
        let request = GenerateRequest {
            prompt: tokens.clone(),
            max_tokens: 256,
            sampling: Sampling::Greedy,
            seed: 0,
            stop_tokens: Vec::new(),
            constraint: Some(&mut matcher as &mut dyn TokenConstraint),
            // Without drafts on either side, so that the ratio measures the grammar alone.
            speculation: Speculation::Off,
        };
        let started = Instant::now();
        let out = generate(&mut model, request, &mut |_| {})?;
        constrained_s.push(started.elapsed().as_secs_f64());
        let n = out.tokens.len();
        // The same amount of text without the grammar (stop tokens disabled so the length matches).
        let request = GenerateRequest {
            stop_tokens: vec![u32::MAX],
            speculation: Speculation::Off,
            ..GenerateRequest::greedy(tokens.clone(), n)
        };
        let started = Instant::now();
        generate(&mut model, request, &mut |_| {})?;
        unconstrained_s.push(started.elapsed().as_secs_f64());
        last = Some((out, matcher.stats()));
    }
    let (out, stats) = last.ok_or_else(|| crate::Error::Internal("no repetition ran".into()))?;
    let constrained = median(&constrained_s);
    let unconstrained = median(&unconstrained_s);
    Ok(GrammarReport {
        model: path.display().to_string(),
        engine_build_ms,
        compile_ms: median(&compiles),
        mask_mean_us: mean * 1e6,
        mask_p99_us: percentile(&masks, 0.99).as_secs_f64() * 1e6,
        masks_measured: masks.len(),
        constrained_tokens: out.tokens.len(),
        constrained_forward_passes: out.timings.forward_passes + 1,
        forced_tokens: stats.forced_tokens,
        masks_in_generation: stats.masks,
        constrained_s: constrained,
        unconstrained_s: unconstrained,
        wall_ratio: if unconstrained > 0.0 { constrained / unconstrained } else { 0.0 },
        plan: out.text,
    })
}
