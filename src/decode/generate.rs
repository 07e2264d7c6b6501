//! The generation loop: prefill, then per token sample → (grammar check) → commit → forward, with stop tokens,
//! a token budget, streaming and timings.
//!
//! Constrained decoding follows the protocol in docs/architecture.md (*decode*): try the unconstrained pick first
//! and keep it when the grammar accepts it (sampling from p, keeping the pick when allowed, else resampling from
//! the masked p is exactly sampling from the masked distribution); otherwise mask with −inf and resample; then
//! feed the token and every token the grammar forces after it through one forward pass.

use std::time::{Duration, Instant};

use candle_core::Tensor;

use super::draft::Speculation;
use super::logprobs::{forced, token_logprob, GenerationObserver};
use super::sampler::{Sampler, Sampling};
use super::token_constraint::TokenConstraint;
use super::GenerateError;
use crate::decode::Model;
use crate::llm::prefix_store::{self, common_prefix};
use crate::llm::tokenizer::TokenStream;
use crate::Result;

/// A step's logits are computed for the allowed tokens alone when the grammar allows at most this share of the
/// vocabulary (1/`FEW_ALLOWED_SHARE`). A plan's steps allow either a handful (a tool's name, a key, a step id:
/// at most 172 of 151,936 on a 30-tool catalogue) or nearly everything (text inside a string); one row costs a
/// row of the product, so any small share pays.
const FEW_ALLOWED_SHARE: usize = 16;

/// One generation.
pub struct GenerateRequest<'c> {
    /// Prompt token ids (chat template already applied, BOS included if wanted).
    pub prompt: Vec<u32>,
    /// Upper bound on new tokens.
    pub max_tokens: usize,
    /// Token choice.
    pub sampling: Sampling,
    /// Seed for `sampling`.
    pub seed: u64,
    /// Tokens that end the output (not included in it). Empty: the tokenizer's stop tokens.
    pub stop_tokens: Vec<u32>,
    /// Optional grammar.
    pub constraint: Option<&'c mut dyn TokenConstraint>,
    /// Drafting for speculative decoding: every token is still chosen from the model's logits, but drafted ones
    /// come from a batched pass, which rounds differently (see `Speculation::default`).
    pub speculation: Speculation,
}

impl GenerateRequest<'_> {
    /// A greedy, unconstrained request.
    pub fn greedy(prompt: Vec<u32>, max_tokens: usize) -> Self {
        Self {
            prompt,
            max_tokens,
            sampling: Sampling::Greedy,
            seed: 0,
            stop_tokens: Vec::new(),
            constraint: None,
            speculation: Speculation::default(),
        }
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A stop token was produced.
    StopToken(u32),
    /// The token budget ran out.
    MaxTokens,
    /// The grammar was complete and allowed nothing more.
    GrammarComplete,
}

/// Where the time went.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Timings {
    /// Prompt length.
    pub prompt_tokens: usize,
    /// Leading prompt tokens whose cached positions were reused (not recomputed).
    pub reused_tokens: usize,
    /// Time of the prompt's forward pass.
    pub prefill: Duration,
    /// New tokens (stop token excluded).
    pub generated_tokens: usize,
    /// Time from the end of prefill to the end.
    pub decode: Duration,
    /// Forward passes after prefill.
    pub forward_passes: usize,
    /// Tokens the grammar forced (fed without sampling).
    pub forced_tokens: usize,
    /// Drafted tokens fed to the model for checking (speculative decoding).
    pub drafted_tokens: usize,
    /// Drafted tokens the model agreed with (each saves a forward pass).
    pub accepted_tokens: usize,
    /// Forward passes that computed only the logits of the few tokens the grammar allowed.
    pub narrowed_passes: usize,
}

impl Timings {
    /// Prompt tokens per second.
    pub fn prefill_tok_s(&self) -> f64 {
        per_second(self.prompt_tokens, self.prefill)
    }
    /// New tokens per second.
    pub fn decode_tok_s(&self) -> f64 {
        per_second(self.generated_tokens, self.decode)
    }
}

fn per_second(n: usize, d: Duration) -> f64 {
    if d.is_zero() {
        0.0
    } else {
        n as f64 / d.as_secs_f64()
    }
}

/// A finished generation.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Generation {
    /// New token ids (stop token excluded).
    pub tokens: Vec<u32>,
    /// Their text.
    pub text: String,
    /// Why it ended.
    pub stop: StopReason,
    /// Timings.
    pub timings: Timings,
}

/// Runs one generation on `model`, calling `on_text` with each newly completed piece of text. With a prefix
/// store, a prompt computed for the most part is saved whole (see [`prefix_store::save_after_prefill`]).
pub fn generate(model: &mut Model, request: GenerateRequest<'_>, on_text: &mut dyn FnMut(&str)) -> Result<Generation> {
    generate_keeping(model, request, None, on_text)
}

/// [`generate`], where the prompt's first `stable` tokens are the part other prompts will share (a system
/// message: instructions and tools, before the goal): with a prefix store, those are what is saved, whenever
/// most of them had to be computed.
pub fn generate_keeping(
    model: &mut Model,
    request: GenerateRequest<'_>,
    stable: Option<usize>,
    on_text: &mut dyn FnMut(&str),
) -> Result<Generation> {
    generate_observing(model, request, stable, &mut NoObserver, on_text)
}

/// Watches nothing.
struct NoObserver;

impl GenerationObserver for NoObserver {}

/// [`generate_keeping`], telling `observer` the prompt tokens reused and, when it asks, each new token's
/// log-probabilities before its text. Under a grammar they are those of the masked logits, so the logits are
/// masked before every choice (sampling from them is the same distribution as the unconstrained-pick-first
/// protocol); forced tokens have probability 1.
pub fn generate_observing(
    model: &mut Model,
    mut request: GenerateRequest<'_>,
    stable: Option<usize>,
    observer: &mut dyn GenerationObserver,
    on_text: &mut dyn FnMut(&str),
) -> Result<Generation> {
    let context = check_prompt(model, &request.prompt)?;
    let max_tokens = request.max_tokens.min(context - request.prompt.len());
    let stop_tokens = if request.stop_tokens.is_empty() {
        model.tokenizer.stop_tokens()
    } else {
        std::mem::take(&mut request.stop_tokens)
    };
    let tokenizer = model.tokenizer.clone();
    let mut stream = TokenStream::new(&tokenizer);
    let mut sampler = Sampler::new(request.sampling, request.seed);
    let mut timings = Timings { prompt_tokens: request.prompt.len(), ..Timings::default() };
    let mut constraint = request.constraint.take();
    let mut logits = prefill(model, &request.prompt, stable, &mut timings)?;
    observer.on_prefill(timings.reused_tokens);
    let top_logprobs = observer.logprobs();
    let decode_started = Instant::now();
    let mut pos = request.prompt.len();
    let mut tokens: Vec<u32> = Vec::with_capacity(max_tokens);
    let mut text = String::new();
    let mut emit = |ids: &[u32], text: &mut String| -> Result<()> {
        for &id in ids {
            if let Some(piece) = stream.push(id)? {
                on_text(&piece);
                text.push_str(&piece);
            }
        }
        Ok(())
    };

    // Speculative decoding: tokens fed ahead of the choice (a draft) and the logits that follow each of them.
    // The loop still chooses every token from the logits of its own prefix, as without drafts; a draft only decides
    // which logits are computed ahead of time (in one batched pass, whose rounding can differ from a 1-token pass).
    let drafting = request.speculation != Speculation::Off && model.weights.batched_logits();
    let mut ahead = Ahead::default();
    let stop = loop {
        if tokens.len() >= max_tokens {
            break StopReason::MaxTokens;
        }
        if let (Some(_), Some(c)) = (top_logprobs, constraint.as_deref_mut()) {
            c.mask_logits(&mut logits)?;
        }
        let so_far = (tokens.len(), text.as_str());
        let (mut batch, finished) =
            match choose(&mut sampler, constraint.as_deref_mut(), &mut logits, &stop_tokens, &mut timings, so_far)? {
                Choice::Stop(token) => break StopReason::StopToken(token),
                Choice::Feed { tokens, finished } => (tokens, finished),
            };
        if let Some(top) = top_logprobs {
            for (i, &token) in batch.iter().enumerate() {
                observer.on_token(if i == 0 { token_logprob(&logits, token, top) } else { forced(token, top) });
            }
        }
        let room = max_tokens - tokens.len();
        if batch.len() > room {
            // Only forced tokens can overflow the budget. The grammar has already committed them, so its
            // state no longer describes a truncated output: report the budget, never a cut "complete" answer.
            batch.truncate(room);
            emit(&batch, &mut text)?;
            return Err(GenerateError::GrammarIncomplete { max_tokens, text }.into());
        }
        tokens.extend_from_slice(&batch);
        emit(&batch, &mut text)?;
        if finished {
            break StopReason::GrammarComplete;
        }
        if tokens.len() >= max_tokens {
            break StopReason::MaxTokens;
        }
        // The batch's positions the cache already holds from a draft; if it holds them all, the logits that
        // follow are already known.
        let known = ahead.take(&batch);
        timings.accepted_tokens += known;
        if let Some(next_logits) = ahead.logits_after_take(known) {
            logits = next_logits;
            pos += batch.len();
            continue;
        }
        let fresh = &batch[known..];
        let start = pos + known;
        let mut draft = Vec::new();
        if drafting {
            let limit = (max_tokens - tokens.len()).min(context.saturating_sub(start + fresh.len()));
            let mut context_so_far = request.prompt.clone();
            context_so_far.extend_from_slice(&tokens);
            draft = request.speculation.draft(&context_so_far, limit);
            if let Some(c) = constraint.as_deref_mut() {
                let valid = c.valid_prefix(&draft);
                draft.truncate(valid);
            }
        }
        let _step = tracing::trace_span!("decode_step", tokens = fresh.len(), drafted = draft.len()).entered();
        if draft.is_empty() {
            // Greedy choice under a grammar that allows few tokens, on a model whose kernels can skip rows: only
            // their logits (the others are −inf, as a mask would make them). The choice is the one the full
            // logits give: their largest allowed value. Sampling keeps the full logits, whose draws its seed is
            // known to give.
            let n_logits = model.weights.n_logits();
            let few = match (request.sampling, constraint.as_deref_mut()) {
                (Sampling::Greedy, Some(c)) if model.narrow_logits && model.weights.narrows_logits() => {
                    // A token table wider than the logits (a malformed file) names rows the model has not.
                    c.allowed_if_few(n_logits / FEW_ALLOWED_SHARE)
                        .filter(|rows| rows.last().is_some_and(|&last| (last as usize) < n_logits))
                }
                _ => None,
            };
            logits = match few {
                Some(rows) => {
                    timings.narrowed_passes += 1;
                    model.weights.forward_rows(fresh, start, &rows)?
                }
                None => logits_vec(model.weights.forward(fresh, start)?)?,
            };
        } else {
            let mut input = fresh.to_vec();
            input.extend_from_slice(&draft);
            // Only the last fresh token's logits and the drafts' are read: the fresh tokens before it were forced.
            let rows = model.weights.forward_from(&input, start, fresh.len() - 1)?.to_vec2::<f32>()?;
            let mut rows = rows.into_iter();
            logits = rows.next().expect("one row per input token");
            timings.drafted_tokens += draft.len();
            ahead = Ahead { tokens: draft, logits: rows.collect() };
        }
        timings.forward_passes += 1;
        pos += batch.len();
    };
    if let Some(rest) = stream.finish()? {
        on_text(&rest);
        text.push_str(&rest);
    }
    if let Some(c) = constraint {
        if stop == StopReason::MaxTokens && !c.is_accepting() {
            return Err(GenerateError::GrammarIncomplete { max_tokens, text }.into());
        }
    }
    timings.decode = decode_started.elapsed();
    timings.generated_tokens = tokens.len();
    Ok(Generation { tokens, text, stop, timings })
}

/// Checks that the prompt can run; returns the model's context length.
pub(super) fn check_prompt(model: &Model, prompt: &[u32]) -> Result<usize> {
    if prompt.is_empty() {
        return Err(GenerateError::EmptyPrompt.into());
    }
    let context = model.weights.context_length();
    if prompt.len() >= context {
        return Err(GenerateError::PromptTooLong { prompt: prompt.len(), context }.into());
    }
    Ok(context)
}

/// Runs the prompt through the model's current sequence and returns the logits after it. Positions the cache
/// already holds for the same leading tokens (a system prompt and tool list shared by every planner or executor
/// call) are kept, and a new process (or a prompt unlike the cached one) may find the opening saved on disk by an
/// earlier one; at least one token is run to get logits. With a prefix store, a prompt computed for the most part
/// is saved (see [`prefix_store::save_after_prefill`]; `stable` as in [`generate_keeping`]).
pub(super) fn prefill(
    model: &mut Model,
    prompt: &[u32],
    stable: Option<usize>,
    timings: &mut Timings,
) -> Result<Vec<f32>> {
    let started = Instant::now();
    model.weights.select_cache_for(prompt);
    let mut reused = common_prefix(model.weights.cached_tokens(), prompt).min(prompt.len() - 1);
    // One borrow of the loaded model, split by field (the store is read while the weights are written).
    let loaded = &mut model.loaded;
    if let Some(store) = &loaded.prefix_store {
        reused = prefix_store::restore(store, loaded.weights.as_mut(), prompt, reused, &loaded.device);
    }
    timings.reused_tokens = reused;
    let _prefill = tracing::debug_span!("prefill", tokens = prompt.len() - reused, reused).entered();
    let logits = logits_vec(model.weights.forward(&prompt[reused..], reused)?)?;
    drop(_prefill);
    timings.prefill = started.elapsed();
    if let Some(store) = &model.prefix_store {
        prefix_store::save_after_prefill(store, model.weights.as_ref(), prompt, reused, stable);
    }
    Ok(logits)
}

/// What one step of the loop chose.
pub(super) enum Choice {
    /// A stop token: the output ends before it.
    Stop(u32),
    /// The chosen token and every token the grammar forces after it, already committed to the grammar;
    /// `finished` when the grammar can take nothing more.
    Feed { tokens: Vec<u32>, finished: bool },
}

/// Chooses the next token from `logits` as the module's protocol says (the unconstrained pick when the grammar
/// accepts it, else a pick from the masked logits), commits it and the tokens the grammar then forces. `produced`
/// (tokens) and `text` are the output so far, for the error when the grammar allows nothing.
pub(super) fn choose<'c>(
    sampler: &mut Sampler,
    constraint: Option<&mut (dyn TokenConstraint + 'c)>,
    logits: &mut [f32],
    stop_tokens: &[u32],
    timings: &mut Timings,
    (produced, text): (usize, &str),
) -> Result<Choice> {
    let mut next = sampler.sample(logits);
    let Some(c) = constraint else {
        return Ok(if stop_tokens.contains(&next) {
            Choice::Stop(next)
        } else {
            Choice::Feed { tokens: vec![next], finished: false }
        });
    };
    if !c.validate(next) {
        c.mask_logits(logits)?;
        next = sampler.sample(logits);
        if !logits.get(next as usize).is_some_and(|l| l.is_finite()) {
            return Err(GenerateError::NoAllowedToken { position: produced, text: text.to_string() }.into());
        }
    }
    c.commit(next)?;
    if stop_tokens.contains(&next) {
        return Ok(Choice::Stop(next));
    }
    let mut tokens = vec![next];
    let mut finished = c.is_finished();
    if !finished {
        let forced = c.forced_tokens()?;
        timings.forced_tokens += forced.len();
        tokens.extend(forced);
        finished = c.is_finished();
    }
    Ok(Choice::Feed { tokens, finished })
}

/// Drafted tokens whose positions the cache holds, each with the logits the model gave after it.
#[derive(Default)]
struct Ahead {
    tokens: Vec<u32>,
    logits: Vec<Vec<f32>>,
}

impl Ahead {
    /// Consumes the leading drafted tokens that `batch` starts with; returns how many. Whatever disagrees with
    /// `batch` is dropped (the next forward pass overwrites its cache positions).
    fn take(&mut self, batch: &[u32]) -> usize {
        let agreed = common_prefix(&self.tokens, batch);
        if agreed < batch.len() {
            self.tokens.clear();
            self.logits.clear();
        }
        agreed
    }

    /// After `take` agreed on the whole batch (`taken` tokens): the logits following it, and the rest of the draft
    /// stays ahead.
    fn logits_after_take(&mut self, taken: usize) -> Option<Vec<f32>> {
        if taken == 0 || self.tokens.is_empty() {
            return None;
        }
        let logits = self.logits.drain(..taken).next_back();
        self.tokens.drain(..taken);
        logits
    }
}

/// Moves logits to the host as a flat f32 vector.
fn logits_vec(logits: Tensor) -> Result<Vec<f32>> {
    Ok(logits.to_vec1::<f32>()?)
}
