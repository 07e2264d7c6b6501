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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use candle_core::quantized::gguf_file::Value as GgufValue;
    use candle_core::{Device, Tensor};

    use super::*;
    use crate::decode::Speculation;
    use crate::llm::tokenizer::{gpt2_byte_to_char, GgufTokenizer};
    use crate::llm::{ChatTemplate, LanguageModel, LoadedModel, ModelInfo};

    const QWEN3: &str = include_str!("../../tests/fixtures/chat_templates/qwen3.jinja");
    const SMOLLM3: &str = include_str!("../../tests/fixtures/chat_templates/smollm3.jinja");

    /// What each pass of a [`Recorder`] was given.
    type Passes = Arc<Mutex<Vec<Vec<u32>>>>;

    /// A network that records the tokens of each pass and always puts its end-of-turn token on top, so a
    /// generation ends after the prompt's pass.
    struct Recorder {
        passes: Passes,
        cached: Vec<u32>,
        end: u32,
        n_logits: usize,
    }

    impl LanguageModel for Recorder {
        fn forward(&mut self, tokens: &[u32], _pos: usize) -> Result<Tensor> {
            self.passes.lock().unwrap().push(tokens.to_vec());
            self.cached.extend_from_slice(tokens);
            let mut logits = vec![0f32; self.n_logits];
            logits[self.end as usize] = 10.0;
            Ok(Tensor::from_vec(logits, self.n_logits, &Device::Cpu)?)
        }
        fn cached_tokens(&self) -> &[u32] {
            &self.cached
        }
        fn clear_kv_cache(&mut self) {
            self.cached.clear()
        }
        fn n_logits(&self) -> usize {
            self.n_logits
        }
        fn context_length(&self) -> usize {
            4096
        }
    }

    /// A model with `template` as its chat template, a byte-level vocabulary (the 256 bytes, `<|im_start|>`,
    /// `<|im_end|>` as end of sequence) and a [`Recorder`] as its network.
    fn model(template: &str) -> (Model, Passes) {
        let mut tokens: Vec<String> = gpt2_byte_to_char().iter().map(|c| c.to_string()).collect();
        let mut types = vec![1i32; tokens.len()];
        for special in ["<|im_start|>", "<|im_end|>"] {
            tokens.push(special.to_string());
            types.push(3);
        }
        let end = tokens.len() as u32 - 1;
        let strings = |items: &[String]| GgufValue::Array(items.iter().map(|s| GgufValue::String(s.clone())).collect());
        let md = HashMap::from([
            ("tokenizer.ggml.model".to_string(), GgufValue::String("gpt2".into())),
            ("tokenizer.ggml.pre".to_string(), GgufValue::String("llama-bpe".into())),
            ("tokenizer.ggml.tokens".to_string(), strings(&tokens)),
            (
                "tokenizer.ggml.token_type".to_string(),
                GgufValue::Array(types.into_iter().map(GgufValue::I32).collect()),
            ),
            ("tokenizer.ggml.merges".to_string(), strings(&[])),
            ("tokenizer.ggml.eos_token_id".to_string(), GgufValue::U32(end)),
        ]);
        let passes = Passes::default();
        let weights = Recorder { passes: passes.clone(), cached: Vec::new(), end, n_logits: tokens.len() };
        let loaded = LoadedModel {
            weights: Box::new(weights),
            tokenizer: Arc::new(GgufTokenizer::from_gguf(&md).unwrap()),
            chat_template: Some(ChatTemplate::new(template, "", "<|im_end|>").unwrap()),
            info: ModelInfo {
                path: "recorder.gguf".into(),
                architecture: "qwen3".into(),
                name: None,
                file_size: 0,
                load_time: Duration::ZERO,
                conversions: Vec::new(),
            },
            device: Device::Cpu,
            prefix_store: None,
        };
        (Model::from_loaded(loaded, Some(Speculation::Off)), passes)
    }

    fn conversation() -> [ChatMessage; 2] {
        [ChatMessage::system("You write plans."), ChatMessage::user("Add 2 and 3.")]
    }

    /// The prompt a model call rendered, as the network's first pass was given it: on a fresh model, with
    /// `think` as `tandem run --think` sets it for the planner, through `chat_candidates` (the planner's call),
    /// and without it through `chat_call` (the executor's, the joiner's and the planner's other calls).
    fn prompt(template: &str, role: &str, think: Option<bool>) -> String {
        let (mut model, passes) = model(template);
        let outputs = match think {
            Some(think) => chat_candidates(&mut model, role, &conversation(), None, 4, &[(Sampling::Greedy, 0)], think)
                .unwrap()
                .into_iter()
                .map(|o| o.unwrap().0)
                .collect(),
            None => vec![chat_call(&mut model, role, &conversation(), None, 4).unwrap().0],
        };
        assert_eq!(outputs, [""], "the recorder ends every generation at once");
        let passes = passes.lock().unwrap();
        model.tokenizer.decode(&passes[0]).unwrap()
    }

    /// docs/models.md, "Thinking": the agent's roles render with `enable_thinking: false`, so Qwen3's template
    /// opens the answer with an empty thought; `--think` (the planner's, off unless asked) renders without it.
    #[test]
    fn agent_roles_render_qwen3_with_thinking_off_and_think_turns_it_on() {
        let turns = "<|im_start|>system\nYou write plans.<|im_end|>\n<|im_start|>user\nAdd 2 and 3.<|im_end|>\n\
                     <|im_start|>assistant\n";
        let off = format!("{turns}<think>\n\n</think>\n\n");
        for role in ["planner", "executor", "joiner"] {
            assert_eq!(prompt(QWEN3, role, None), off, "{role}");
        }
        assert!(!crate::settings::PairSettings::default().think, "the planner thinks only when asked");
        assert_eq!(prompt(QWEN3, "planner", Some(false)), off);
        assert_eq!(prompt(QWEN3, "planner", Some(true)), turns);
    }

    /// The same for SmolLM3's template: `/no_think` in its system part and an empty thought opening the answer;
    /// with `--think`, `/think` and no thought written for it.
    #[test]
    fn agent_roles_render_smollm3_with_no_think_and_think_turns_it_on() {
        let system = |mode: &str| {
            format!(
                "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: {mode}\n\n\
                 ## Custom Instructions\n\nYou write plans.\n\n<|im_end|>\n<|im_start|>user\nAdd 2 and 3.<|im_end|>\n\
                 <|im_start|>assistant\n"
            )
        };
        let off = format!("{}<think>\n\n</think>\n", system("/no_think"));
        for role in ["planner", "executor", "joiner"] {
            assert_eq!(prompt(SMOLLM3, role, None), off, "{role}");
        }
        assert_eq!(prompt(SMOLLM3, "planner", Some(false)), off);
        assert_eq!(prompt(SMOLLM3, "planner", Some(true)), system("/think"));
    }
}
