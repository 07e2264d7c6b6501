//! One greedy model call from chat messages, optionally under a JSON-schema grammar: what the planner and the
//! executor both do; several candidates from one prompt (the planner's plan search); and the planner's thinking
//! mode (`--think`).

use std::time::Instant;

use crate::agent::usage::ModelUsage;
use crate::decode::constraint::ConstraintSpec;
use crate::decode::token_constraint::TokenConstraint;
use crate::decode::Model;
use crate::decode::{generate_candidates, Candidate, Sampling, Timings};
use crate::llm::chat::{thinking, TemplateKwargs};
use crate::llm::prefix_store::common_prefix;
use crate::llm::ChatMessage;
use crate::{Error, Result};

/// Renders `messages` with the model's chat template and generates greedily (under `spec` when given).
/// `role` names the model's job in the error when it has no chat template.
pub fn chat_call(
    model: &mut Model,
    role: &str,
    messages: &[ChatMessage],
    spec: Option<&ConstraintSpec>,
    max_tokens: usize,
) -> Result<(String, Timings)> {
    // One candidate is one plain generation (with the model's drafting), as `generate_candidates` runs it.
    let mut outputs = chat_candidates(model, role, messages, spec, max_tokens, &[(Sampling::Greedy, 0)], false)?;
    outputs.pop().expect("one candidate, one output")
}

/// [`chat_call`], timed: the text and what the call cost (tokens, and wall time with the prompt's rendering), as
/// the run's log records a model call.
pub fn timed_chat_call(
    model: &mut Model,
    role: &str,
    messages: &[ChatMessage],
    spec: Option<&ConstraintSpec>,
    max_tokens: usize,
) -> Result<(String, ModelUsage)> {
    let started = Instant::now();
    let (text, timings) = chat_call(model, role, messages, spec, max_tokens)?;
    let usage = ModelUsage {
        tokens_in: timings.prompt_tokens,
        tokens_out: timings.generated_tokens,
        ms: started.elapsed().as_millis() as u64,
    };
    Ok((text, usage))
}

/// How many tokens a thought may take (`tandem run --think`), beside the answer's own budget.
pub const THOUGHT_TOKENS: usize = 1024;

/// [`chat_call`] with one output per entry of `samplings` (token choice and seed), generated side by side from
/// one prefill (see [`generate_candidates`]); each under its own matcher for `spec`. A failed candidate has its
/// error in its place.
///
/// With `think`, where the model's chat template has the switch (`enable_thinking`, Qwen3's and SmolLM3's): rendered
/// in thinking mode, each output opens with a thinking block of at most [`THOUGHT_TOKENS`] (fewer where the context
/// has less room) before what `spec` admits, and its text holds the block (read apart with
/// [`split_thinking`](crate::decode::constraint::split_thinking)). Where the template has no switch the call is as
/// without `think` (warned once).
pub fn chat_candidates(
    model: &mut Model,
    role: &str,
    messages: &[ChatMessage],
    spec: Option<&ConstraintSpec>,
    max_tokens: usize,
    samplings: &[(Sampling, u64)],
    think: bool,
) -> Result<Vec<Result<(String, Timings)>>> {
    let think = think && thinks(model, role);
    let (tokens, stable) = chat_prompt(model, role, messages, &thinking(think))?;
    // The thought takes at most what the context leaves after the prompt, the answer's own budget and the tokens
    // that close the thought (`</think>` and the space after it: one token or two on a real vocabulary, a dozen on
    // a byte-level one).
    const CLOSING: usize = 16;
    let room = model.weights.context_length().saturating_sub(tokens.len() + max_tokens + CLOSING);
    let thought_tokens = THOUGHT_TOKENS.min(room);
    let thinking_spec = match (think, spec) {
        (true, Some(spec)) => spec.after_thinking(thought_tokens),
        _ => None,
    };
    let (spec, max_tokens) = match &thinking_spec {
        Some(wrapped) => (Some(wrapped), max_tokens + thought_tokens + CLOSING),
        None => (spec, max_tokens),
    };
    let mut matchers = Vec::with_capacity(samplings.len());
    for _ in samplings {
        matchers.push(match spec {
            Some(spec) => Some(model.grammar_engine()?.matcher(spec)?),
            None => None,
        });
    }
    let candidates = samplings
        .iter()
        .zip(matchers.iter_mut())
        .map(|(&(sampling, seed), matcher)| Candidate {
            sampling,
            seed,
            constraint: matcher.as_mut().map(|m| m as &mut dyn TokenConstraint),
        })
        .collect();
    let generations = generate_candidates(model, tokens, stable, max_tokens, candidates)?;
    Ok(generations.into_iter().map(|g| g.map(|g| (g.text, g.timings))).collect())
}

/// Whether `model`'s chat template has a thinking switch; where it has none, says once that `--think` does
/// nothing for it.
fn thinks(model: &Model, role: &str) -> bool {
    static SAID: std::sync::Once = std::sync::Once::new();
    let switch = model.chat_template.as_ref().is_some_and(|t| t.has_thinking_switch());
    if !switch {
        SAID.call_once(|| {
            tracing::warn!(
                "--think: the {role} model's chat template has no thinking switch; it writes without thinking"
            )
        });
    }
    switch
}

/// The conversation rendered with the model's chat template and tokenized, and how many leading tokens are the
/// stable opening (see [`stable_opening`]).
fn chat_prompt(
    model: &Model,
    role: &str,
    messages: &[ChatMessage],
    kwargs: &TemplateKwargs,
) -> Result<(Vec<u32>, Option<usize>)> {
    let template = model
        .chat_template
        .as_ref()
        .ok_or_else(|| Error::Model(format!("the {role} model has no chat template; choose an instruct model")))?;
    let prompt = template.render_kwargs(messages, None, true, kwargs)?;
    let bos = model.tokenizer.add_bos_by_default();
    let tokens = model.tokenizer.encode(&prompt, bos)?;
    let stable = stable_opening(model, messages, &tokens, bos, kwargs);
    Ok((tokens, stable))
}

/// How many leading tokens of `tokens` (the whole conversation, rendered) are the opening system message: the
/// part the next call with the same instructions and tools shares, whatever its goal. Counted as the tokens that
/// the system message rendered alone shares with the whole, so a merge across the boundary costs only what it
/// covers. None without a system message or where the template refuses to render it alone.
fn stable_opening(
    model: &Model,
    messages: &[ChatMessage],
    tokens: &[u32],
    bos: bool,
    kwargs: &TemplateKwargs,
) -> Option<usize> {
    let system = messages.first().filter(|m| m.role == "system" && messages.len() > 1)?;
    let template = model.chat_template.as_ref()?;
    let opening = template.render_kwargs(std::slice::from_ref(system), None, false, kwargs).ok()?;
    let opening = model.tokenizer.encode(&opening, bos).ok()?;
    Some(common_prefix(&opening, tokens))
}
