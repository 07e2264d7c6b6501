//! Decoding: the sampler, grammar constraints, the generation loop (the hot path), speculation, several
//! candidates from one prompt, and batching across generations.

pub mod batching;
pub mod candidates;
pub mod constraint;
pub mod draft;
pub mod generate;
pub mod logprobs;
pub mod model;
pub mod sampler;
pub mod token_constraint;

pub use candidates::{generate_candidates, Candidate};
pub use draft::Speculation;
pub use generate::{generate, generate_keeping, generate_observing, GenerateRequest, Generation, StopReason, Timings};
pub use logprobs::{GenerationObserver, TokenLogprob};
pub use model::Model;
pub use sampler::{Sampler, Sampling};

/// Why a generation failed.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error("the prompt has {prompt} tokens but the model's context holds {context}")]
    PromptTooLong { prompt: usize, context: usize },
    #[error("reached the limit of {max_tokens} tokens before the output matched the grammar; raise the token limit (generate --max-new-tokens, plan --plan-tokens). Output so far: {text:?}")]
    GrammarIncomplete { max_tokens: usize, text: String },
    #[error("the grammar allows no token at output position {position}; output so far: {text:?}")]
    NoAllowedToken { position: usize, text: String },
}
