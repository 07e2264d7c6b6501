//! `tandem bench speed`: load time, load + first token, prefill and decode throughput, peak RSS.

use std::path::Path;
use std::time::Instant;

use candle_core::{Device, Tensor};

use super::{median, peak_rss_bytes};
use crate::decode::sampler::argmax;
use crate::decode::Model;
use crate::llm::{LoadOptions, SequenceId, SequencePass};
use crate::progress::{ProgressUnit, Reporter};
use crate::Result;

/// Text repeated to build prompts of an exact token length (varied enough to look like a real prompt).
const FILLER: &str = "You are a planner. Given a goal and a list of tools with JSON schemas, write a plan as JSON: \
steps with an id, a tool name, arguments and the ids of the steps each depends on. Tools: calculator(expression), \
read_file(path), list_dir(path), write_file(path, content), shell(command), llm(prompt). ";

/// Settings of one speed measurement.
#[derive(Debug, Clone)]
pub struct SpeedSettings {
    /// Prompt length for the prefill measurement.
    pub prefill_tokens: usize,
    /// Tokens to decode.
    pub decode_tokens: usize,
    /// Positions already cached when decoding starts (llama-bench's `-d`): 0 decodes from a one-token prompt,
    /// as llama-bench's generation test starts from an empty cache; an agent decodes at its prompt's depth, where
    /// every token attends over more positions.
    pub decode_depth: usize,
    /// Repetitions (medians are reported).
    pub repeats: usize,
    /// Prompt length for the load + first token measurement.
    pub first_token_prompt: usize,
    /// Also decode this many sequences at once (one pass per token for all of them), for each number given.
    pub sequences: Vec<usize>,
    /// How to load the model.
    pub load: LoadOptions,
}

impl Default for SpeedSettings {
    fn default() -> Self {
        Self {
            prefill_tokens: 512,
            decode_tokens: 128,
            decode_depth: 0,
            repeats: 3,
            first_token_prompt: 100,
            sequences: Vec::new(),
            load: LoadOptions::default(),
        }
    }
}

/// Medians over the repetitions.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SpeedReport {
    pub model: String,
    pub file_size: u64,
    pub load_s: f64,
    /// Load plus a forward pass over a `first_token_prompt`-token prompt, the first time (cold kernels).
    pub load_and_first_token_s: f64,
    pub prefill_tokens: usize,
    pub prefill_tok_s: f64,
    pub decode_tokens: usize,
    pub decode_depth: usize,
    pub decode_tok_s: f64,
    /// A prompt of `prefill_tokens` whose last `FRESH_TOKENS` differ from the cached one: time to its first
    /// logits with the shared prefix reused from the cache (warm) and recomputed (cold), in milliseconds.
    pub warm_prompt_ms: f64,
    pub cold_prompt_ms: f64,
    pub peak_rss_bytes: Option<u64>,
    pub conversions: Vec<String>,
    pub threads: usize,
    /// Decoding several sequences at once: total tokens a second over all of them, by number of sequences.
    pub batched_decode: Vec<BatchedDecode>,
}

/// Decode throughput of several sequences sharing each pass (what `tandem batch --parallel` does).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct BatchedDecode {
    /// Sequences decoded together.
    pub sequences: usize,
    /// Tokens a second over all of them (median over the repetitions).
    pub tok_s: f64,
}

/// Tokens at the end of the warm/cold prompt that differ from the cached prompt (a new question after a shared
/// system prompt and tool list).
pub const FRESH_TOKENS: usize = 32;

/// A prompt of exactly `n` tokens.
pub fn prompt_of_length(model: &Model, n: usize) -> Result<Vec<u32>> {
    let mut text = String::new();
    let mut tokens = Vec::new();
    while tokens.len() < n {
        text.push_str(FILLER);
        tokens = model.tokenizer.encode(&text, false)?;
    }
    tokens.truncate(n);
    Ok(tokens)
}

/// Measures one model file. Loads it `repeats` times (load time is part of the figures).
pub fn measure(path: &Path, device: &Device, settings: &SpeedSettings, reporter: &dyn Reporter) -> Result<SpeedReport> {
    let repeats = settings.repeats.max(1);
    let progress = reporter.start("measuring speed", Some(repeats as u64), ProgressUnit::Items);
    let (mut loads, mut first, mut prefill, mut decode) = (vec![], vec![], vec![], vec![]);
    let (mut warm, mut cold) = (vec![], vec![]);
    let mut batched: Vec<Vec<f64>> = vec![Vec::new(); settings.sequences.len()];
    let mut last_model = None;
    for _ in 0..repeats {
        drop(last_model.take()); // free the previous copy before loading the next
        crate::memory::release_freed(); // and return it, so that the peak RSS is one load's
        let started = Instant::now();
        let mut model = Model::load(path, device, &settings.load)?;
        loads.push(started.elapsed().as_secs_f64());
        let short = prompt_of_length(&model, settings.first_token_prompt)?;
        let logits = model.weights.forward(&short, 0)?;
        let _ = argmax(&logits.to_vec1::<f32>()?);
        first.push(started.elapsed().as_secs_f64());

        // Decode ignores stop tokens so every run does the same amount of work.
        let context = prompt_of_length(&model, settings.decode_depth.max(1))?;
        let mut next = argmax(&model.weights.forward(&context, 0)?.to_vec1::<f32>()?);
        let t = Instant::now();
        for pos in context.len()..context.len() + settings.decode_tokens {
            let logits = model.weights.forward(&[next], pos)?.to_vec1::<f32>()?;
            next = argmax(&logits);
        }
        decode.push(settings.decode_tokens as f64 / t.elapsed().as_secs_f64());
        for (&n, rates) in settings.sequences.iter().zip(&mut batched) {
            rates.push(decode_together(&mut model, n, &context, settings.decode_tokens)?);
        }

        // A forward pass at position 0 starts the cache afresh.
        let prompt = prompt_of_length(&model, settings.prefill_tokens)?;
        let t = Instant::now();
        let _ = model.weights.forward(&prompt, 0)?;
        prefill.push(prompt.len() as f64 / t.elapsed().as_secs_f64());
        // The prefix cache: a prompt sharing all but its last tokens with the cached one (what generation
        // reuses for every planner and executor call after the first).
        let shared = prompt.len().saturating_sub(FRESH_TOKENS).max(1);
        let mut varied = prompt.clone();
        varied[shared..].reverse();
        let t = Instant::now();
        let _ = argmax(&model.weights.forward(&varied[shared..], shared)?.to_vec1::<f32>()?);
        warm.push(t.elapsed().as_secs_f64() * 1000.0);
        model.weights.clear_kv_cache();
        let t = Instant::now();
        let _ = argmax(&model.weights.forward(&varied, 0)?.to_vec1::<f32>()?);
        cold.push(t.elapsed().as_secs_f64() * 1000.0);
        progress.inc(1);
        last_model = Some(model);
    }
    progress.finish();
    let model = last_model.ok_or_else(|| crate::Error::Internal("no repetition ran".into()))?;
    Ok(SpeedReport {
        model: path.display().to_string(),
        file_size: model.info.file_size,
        load_s: median(&loads),
        load_and_first_token_s: median(&first),
        prefill_tokens: settings.prefill_tokens,
        prefill_tok_s: median(&prefill),
        decode_tokens: settings.decode_tokens,
        decode_depth: settings.decode_depth,
        decode_tok_s: median(&decode),
        warm_prompt_ms: median(&warm),
        cold_prompt_ms: median(&cold),
        peak_rss_bytes: peak_rss_bytes(),
        conversions: model.info.conversions.clone(),
        threads: candle_core::utils::get_num_threads(),
        batched_decode: settings
            .sequences
            .iter()
            .zip(&batched)
            .map(|(&sequences, rates)| BatchedDecode { sequences, tok_s: median(rates) })
            .collect(),
    })
}

/// Decodes `tokens` tokens on each of `n` new sequences after `context`, one pass a token for all of them;
/// returns the tokens a second over all of them.
fn decode_together(model: &mut Model, n: usize, context: &[u32], tokens: usize) -> Result<f64> {
    let architecture = model.info.architecture.clone();
    let multi = model.weights.multi_sequence().ok_or_else(|| {
        crate::Error::Model(format!("{architecture} keeps one sequence: --sequences needs a qwen2 model"))
    })?;
    let ids: Vec<SequenceId> = (0..n.max(1)).map(|_| multi.open_sequence()).collect();
    let result = (|| {
        let prefill: Vec<SequencePass<'_>> =
            ids.iter().map(|&sequence| SequencePass { sequence, tokens: context, pos: 0, logits_from: None }).collect();
        let mut next: Vec<[u32; 1]> = greedy(multi.forward_sequences(&prefill)?)?.into_iter().map(|t| [t]).collect();
        let t = Instant::now();
        for pos in context.len()..context.len() + tokens {
            let step: Vec<SequencePass<'_>> = ids
                .iter()
                .zip(&next)
                .map(|(&sequence, token)| SequencePass { sequence, tokens: token, pos, logits_from: None })
                .collect();
            let tokens = greedy(multi.forward_sequences(&step)?)?;
            for (token, chosen) in next.iter_mut().zip(tokens) {
                *token = [chosen];
            }
        }
        Ok((ids.len() * tokens) as f64 / t.elapsed().as_secs_f64())
    })();
    for id in ids {
        multi.close_sequence(id);
    }
    result
}

/// Each part's greedy next token. On a GPU the argmax runs there, so a step copies back N token ids rather than
/// N rows of logits (151,936 floats each for Qwen2.5), which would take longer than the pass at large N.
fn greedy(logits: Vec<Tensor>) -> Result<Vec<u32>> {
    match logits.first() {
        Some(first) if !first.device().is_cpu() => {
            Ok(Tensor::stack(&logits, 0)?.argmax(candle_core::D::Minus1)?.to_vec1::<u32>()?)
        }
        _ => logits.iter().map(|l| Ok(argmax(&l.to_vec1::<f32>()?))).collect(),
    }
}
