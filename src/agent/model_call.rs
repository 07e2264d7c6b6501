//! One greedy model call from chat messages, optionally under a JSON-schema grammar: what the planner and the
//! executor both do.

use crate::decode::constraint::ConstraintSpec;
use crate::decode::generate::TokenConstraint;
use crate::decode::Model;
use crate::decode::{generate, GenerateRequest, Sampling, Timings};
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
    let template = model
        .chat_template
        .as_ref()
        .ok_or_else(|| Error::Model(format!("the {role} model has no chat template; choose an instruct model")))?;
    let prompt = template.render(messages, None, true)?;
    let tokens = model.tokenizer.encode(&prompt, model.tokenizer.add_bos_by_default())?;
    let mut matcher = match spec {
        Some(spec) => Some(model.grammar_engine()?.matcher(spec)?),
        None => None,
    };
    let request = GenerateRequest {
        prompt: tokens,
        max_tokens,
        sampling: Sampling::Greedy,
        seed: 0,
        stop_tokens: Vec::new(),
        constraint: matcher.as_mut().map(|m| m as &mut dyn TokenConstraint),
        speculation: model.speculation,
    };
    let generation = generate(model, request, &mut |_| {})?;
    Ok((generation.text, generation.timings))
}
