//! Several generations from one prompt at once (the planner's plan search): the prompt is computed once, each
//! candidate continues it on a sequence of its own with its own sampler and grammar, and every step runs the
//! candidates' new tokens in one batched pass.
//!
//! Decoding reads every weight once per pass whatever the number of rows, so N candidates cost far less than N
//! generations one after another; on our CPU kernels each candidate's logits are exactly those it would get alone,
//! so a greedy candidate writes what a greedy generation of its own writes.

use std::time::Instant;

use super::generate::{check_prompt, choose, prefill, Choice};
use super::sampler::{Sampler, Sampling};
use super::token_constraint::TokenConstraint;
use super::{generate_keeping, GenerateError, GenerateRequest, Generation, Model, StopReason, Timings};
use crate::llm::prefix_store::common_prefix;
use crate::llm::tokenizer::TokenStream;
use crate::llm::{SequenceId, SequencePass};
use crate::Result;

/// How one candidate chooses its tokens.
pub struct Candidate<'c> {
    /// Token choice.
    pub sampling: Sampling,
    /// Seed for `sampling`.
    pub seed: u64,
    /// Its own grammar matcher, if any.
    pub constraint: Option<&'c mut dyn TokenConstraint>,
}

/// Generates one output per candidate from `prompt`, up to `max_tokens` each (`stable` as in
/// [`generate_keeping`]). A candidate that fails (its grammar allows nothing, its budget ends before the grammar
/// is satisfied) has its error in its place; a failed forward pass fails them all. Each candidate's timings carry
/// the shared prefill. Models that keep one sequence generate the candidates one after another (the prompt's
/// positions are still reused from the cache).
pub fn generate_candidates(
    model: &mut Model,
    prompt: Vec<u32>,
    stable: Option<usize>,
    max_tokens: usize,
    candidates: Vec<Candidate<'_>>,
) -> Result<Vec<Result<Generation>>> {
    if candidates.len() <= 1 || model.weights.multi_sequence().is_none() {
        return Ok(one_after_another(model, prompt, stable, max_tokens, candidates));
    }
    let context = check_prompt(model, &prompt)?;
    let max_tokens = max_tokens.min(context - prompt.len());
    let mut shared = Timings { prompt_tokens: prompt.len(), ..Timings::default() };
    let logits = prefill(model, &prompt, stable, &mut shared)?;
    let home = multi(model).current_sequence();
    let mut opened: Vec<SequenceId> = Vec::new();
    let outcome = (|| {
        // The first candidate continues on the model's own sequence; each other one opens a sequence, which copies
        // the prompt's cached positions from it (`select_cache_for`) and computes only what it could not copy.
        let mut starts = vec![(home, prompt.len())];
        for _ in 1..candidates.len() {
            let sequence = multi(model).open_sequence();
            opened.push(sequence);
            multi(model).use_sequence(sequence)?;
            model.weights.select_cache_for(&prompt);
            let cached = common_prefix(model.weights.cached_tokens(), &prompt).min(prompt.len() - 1);
            starts.push((sequence, cached));
        }
        multi(model).use_sequence(home)?;
        decode_together(model, &prompt, &logits, &shared, max_tokens, candidates, &starts)
    })();
    for sequence in opened {
        multi(model).close_sequence(sequence);
    }
    // Closing never fails; going home only fails for a sequence that is gone, which the pass already reported.
    let _ = multi(model).use_sequence(home);
    outcome
}

/// The model's sequences (the caller checked it keeps several).
fn multi(model: &mut Model) -> &mut dyn crate::llm::MultiSequence {
    model.weights.multi_sequence().expect("checked: the model keeps several sequences")
}

/// The fallback: each candidate as a generation of its own.
fn one_after_another(
    model: &mut Model,
    prompt: Vec<u32>,
    stable: Option<usize>,
    max_tokens: usize,
    candidates: Vec<Candidate<'_>>,
) -> Vec<Result<Generation>> {
    candidates
        .into_iter()
        .map(|c| {
            let request = GenerateRequest {
                prompt: prompt.clone(),
                max_tokens,
                sampling: c.sampling,
                seed: c.seed,
                stop_tokens: Vec::new(),
                constraint: c.constraint,
                speculation: model.speculation,
            };
            generate_keeping(model, request, stable, &mut |_| {})
        })
        .collect()
}

/// One candidate's generation in progress.
struct Running<'c, 't> {
    sequence: SequenceId,
    sampler: Sampler,
    constraint: Option<&'c mut dyn TokenConstraint>,
    stream: TokenStream<'t>,
    tokens: Vec<u32>,
    text: String,
    logits: Vec<f32>,
    /// Tokens for the next pass and the position of the first.
    feed: Vec<u32>,
    feed_pos: usize,
    timings: Timings,
    outcome: Option<Result<Generation>>,
}

impl Running<'_, '_> {
    /// Ends the generation with `stop`.
    fn finish(&mut self, stop: StopReason, max_tokens: usize, started: Instant) -> Result<()> {
        if let Some(rest) = self.stream.finish()? {
            self.text.push_str(&rest);
        }
        let text = std::mem::take(&mut self.text);
        if stop == StopReason::MaxTokens && self.constraint.as_deref_mut().is_some_and(|c| !c.is_accepting()) {
            self.outcome = Some(Err(GenerateError::GrammarIncomplete { max_tokens, text }.into()));
            return Ok(());
        }
        let mut timings = std::mem::take(&mut self.timings);
        timings.decode = started.elapsed();
        timings.generated_tokens = self.tokens.len();
        let tokens = std::mem::take(&mut self.tokens);
        self.outcome = Some(Ok(Generation { tokens, text, stop, timings }));
        Ok(())
    }

    /// One step: chooses the next tokens and queues them for the pass, or ends the generation.
    fn step(&mut self, stop_tokens: &[u32], max_tokens: usize, started: Instant) -> Result<()> {
        if self.tokens.len() >= max_tokens {
            return self.finish(StopReason::MaxTokens, max_tokens, started);
        }
        let so_far = (self.tokens.len(), self.text.as_str());
        let constraint = self.constraint.as_deref_mut();
        let (mut batch, finished) =
            match choose(&mut self.sampler, constraint, &mut self.logits, stop_tokens, &mut self.timings, so_far)? {
                Choice::Stop(token) => return self.finish(StopReason::StopToken(token), max_tokens, started),
                Choice::Feed { tokens, finished } => (tokens, finished),
            };
        let room = max_tokens - self.tokens.len();
        let overflow = batch.len() > room;
        // Only forced tokens can overflow the budget; as in `generate_keeping`, that is the budget's error.
        batch.truncate(room);
        for &id in &batch {
            if let Some(piece) = self.stream.push(id)? {
                self.text.push_str(&piece);
            }
        }
        self.tokens.extend_from_slice(&batch);
        if overflow {
            let text = std::mem::take(&mut self.text);
            self.outcome = Some(Err(GenerateError::GrammarIncomplete { max_tokens, text }.into()));
            return Ok(());
        }
        if finished {
            return self.finish(StopReason::GrammarComplete, max_tokens, started);
        }
        // As `generate_keeping`: a full budget ends the generation now, not after one more pass.
        if self.tokens.len() >= max_tokens {
            return self.finish(StopReason::MaxTokens, max_tokens, started);
        }
        self.feed.extend_from_slice(&batch);
        Ok(())
    }
}

/// The decoding loop over every candidate; `starts` gives each candidate's sequence and how many prompt positions
/// its cache holds.
fn decode_together(
    model: &mut Model,
    prompt: &[u32],
    logits: &[f32],
    shared: &Timings,
    max_tokens: usize,
    candidates: Vec<Candidate<'_>>,
    starts: &[(SequenceId, usize)],
) -> Result<Vec<Result<Generation>>> {
    let stop_tokens = model.tokenizer.stop_tokens();
    let tokenizer = model.tokenizer.clone();
    let started = Instant::now();
    let mut running: Vec<Running<'_, '_>> = candidates
        .into_iter()
        .zip(starts)
        .map(|(c, &(sequence, cached))| Running {
            sequence,
            sampler: Sampler::new(c.sampling, c.seed),
            constraint: c.constraint,
            stream: TokenStream::new(&tokenizer),
            tokens: Vec::with_capacity(max_tokens),
            text: String::new(),
            logits: logits.to_vec(),
            feed: prompt[cached..].to_vec(),
            feed_pos: cached,
            timings: shared.clone(),
            outcome: None,
        })
        .collect();
    loop {
        for candidate in running.iter_mut().filter(|r| r.outcome.is_none()) {
            if let Err(e) = candidate.step(&stop_tokens, max_tokens, started) {
                candidate.outcome = Some(Err(e));
            }
        }
        let mut live: Vec<&mut Running<'_, '_>> = running.iter_mut().filter(|r| r.outcome.is_none()).collect();
        if live.is_empty() {
            break;
        }
        let parts: Vec<SequencePass<'_>> = live
            .iter()
            .map(|r| SequencePass { sequence: r.sequence, tokens: &r.feed, pos: r.feed_pos, logits_from: None })
            .collect();
        let _pass = tracing::trace_span!("candidates_step", candidates = parts.len()).entered();
        let outputs = multi(model).forward_sequences(&parts)?;
        drop(parts);
        for (candidate, output) in live.iter_mut().zip(outputs) {
            candidate.logits = output.to_vec1::<f32>()?;
            candidate.feed_pos += candidate.feed.len();
            candidate.feed.clear();
            candidate.timings.forward_passes += 1;
        }
    }
    Ok(running.into_iter().map(|r| r.outcome.expect("the loop ends when every candidate has its outcome")).collect())
}
