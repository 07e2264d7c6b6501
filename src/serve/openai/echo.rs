//! Text completions' `echo`: the answer opens with the prompt, and with `logprobs` each prompt token's
//! log-probability under the tokens before it (the first has none), scored by the slot's model in passes that
//! keep every position's logits. The passes fill the slot's cache with the prompt, so the generation after them
//! computes only its last token again.

use std::sync::atomic::{AtomicBool, Ordering};

use candle_core::DType;

use crate::decode::logprobs::token_logprob;
use crate::decode::Model;
use crate::serve::openai::logprobs::{Logprob, Named, TextToken};
use crate::serve::openai::request::{ChatRequest, RawPrompt};
use crate::serve::plumbing::error::ApiError;

/// Prompt tokens a scoring pass takes at once: its logits are this many rows of the vocabulary's width (39 MB of
/// floats for Qwen2.5's 151,936 tokens), so a long prompt is not one huge tensor.
const SCORING_CHUNK: usize = 64;

/// The prompt as the answer repeats it.
#[derive(Debug)]
pub struct Echo {
    /// The prompt's text: as the request wrote it, or its token ids decoded.
    pub text: String,
    /// One entry per prompt token when log-probabilities were asked; the first is unscored (nothing precedes it).
    pub tokens: Option<Vec<TextToken>>,
}

/// The echo of `prompt` (the request's prompt tokens); `top` alternatives per token when log-probabilities are
/// asked. Stops between passes when the client has gone (`cancel`).
pub fn echo(model: &mut Model, request: &ChatRequest, prompt: &[u32], cancel: &AtomicBool) -> Result<Echo, ApiError> {
    let text = match &request.raw_prompt {
        Some(RawPrompt::Text(text)) => text.clone(),
        _ => model
            .tokenizer
            .decode(prompt)
            .map_err(|e| ApiError::internal(format!("the prompt's tokens could not be decoded: {e}")))?,
    };
    let tokens = match request.options.logprobs {
        Some(top) => Some(score(model, prompt, top, cancel)?),
        None => None,
    };
    Ok(Echo { text, tokens })
}

/// Each prompt token's log-probability: the logits of position `i` score token `i + 1`. The last position's
/// logits score the first generated token, which the generation computes itself.
fn score(model: &mut Model, prompt: &[u32], top: usize, cancel: &AtomicBool) -> Result<Vec<TextToken>, ApiError> {
    let tokenizer = model.tokenizer.clone();
    let mut scored = Vec::with_capacity(prompt.len());
    if let Some(&first) = prompt.first() {
        scored.push(TextToken::Unscored(Named::new(&tokenizer, first, 0.0)));
    }
    let scoring = &prompt[..prompt.len().saturating_sub(1)];
    // The slot whose cache suits this prompt best is chosen (and what it held kept) as a generation would.
    model.weights.select_cache_for(prompt);
    for (chunk_index, chunk) in scoring.chunks(SCORING_CHUNK).enumerate() {
        if cancel.load(Ordering::Relaxed) {
            return Err(ApiError::internal("the client went away while its prompt was scored"));
        }
        let start = chunk_index * SCORING_CHUNK;
        let rows = model
            .weights
            .forward_from(chunk, start, 0)
            .and_then(|t| Ok(t.to_dtype(DType::F32)?.to_vec2::<f32>()?))
            .map_err(|e| ApiError::internal(format!("scoring the prompt failed: {e}")))?;
        for (row, logits) in rows.iter().enumerate() {
            let next = prompt[start + row + 1];
            scored.push(TextToken::Scored(Logprob::new(&tokenizer, &token_logprob(logits, next, top))));
        }
    }
    Ok(scored)
}
