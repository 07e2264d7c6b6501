//! Generation mechanics on a tiny synthetic model: budgets, stop tokens, seeds, and the constraint protocol
//! (validate → mask → commit → fast-forward) with a hand-written constraint.

use candle_core::Device;
use tandem::decode::token_constraint::TokenConstraint;
use tandem::decode::Model;
use tandem::decode::{generate, GenerateError, GenerateRequest, Sampling, Speculation, StopReason};
use tandem::llm::LoadOptions;
use tandem::Error;

use crate::common::tiny::{write_tiny_qwen2, TinyQwen2};

fn tiny_model() -> (tempfile::TempDir, Model) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    write_tiny_qwen2(&path, &TinyQwen2::default());
    let model = Model::load(&path, &Device::Cpu, &LoadOptions::default()).unwrap();
    (dir, model)
}

/// A stop list that never matches, so runs are limited only by the budget.
const NO_STOP: [u32; 1] = [u32::MAX];

fn run(
    model: &mut Model,
    sampling: Sampling,
    seed: u64,
    max_tokens: usize,
    stop: &[u32],
) -> tandem::decode::Generation {
    run_with(model, sampling, seed, max_tokens, stop, Speculation::Off)
}

fn run_with(
    model: &mut Model,
    sampling: Sampling,
    seed: u64,
    max_tokens: usize,
    stop: &[u32],
    speculation: Speculation,
) -> tandem::decode::Generation {
    let prompt = model.tokenizer.encode("the theme", false).unwrap();
    model.weights.clear_kv_cache();
    let request = GenerateRequest {
        prompt,
        max_tokens,
        sampling,
        seed,
        stop_tokens: stop.to_vec(),
        constraint: None,
        speculation,
    };
    generate(model, request, &mut |_| {}).unwrap()
}

#[test]
fn drafted_decoding_keeps_the_output_and_saves_passes() {
    let (_dir, mut model) = tiny_model();
    for (sampling, seed) in
        [(Sampling::Greedy, 0), (Sampling::Random { temperature: 0.8, top_k: None, top_p: None }, 5)]
    {
        let plain = run_with(&mut model, sampling, seed, 60, &NO_STOP, Speculation::Off);
        let drafted = run_with(&mut model, sampling, seed, 60, &NO_STOP, Speculation::prompt_lookup());
        assert_eq!(drafted.tokens, plain.tokens, "{sampling:?}");
        assert_eq!(plain.timings.drafted_tokens, 0);
        if sampling == Sampling::Greedy {
            // A tiny random model loops, which is what prompt lookup predicts.
            assert!(drafted.timings.accepted_tokens > 0, "{:?}", drafted.timings);
            assert!(drafted.timings.forward_passes < plain.timings.forward_passes);
        }
        assert_eq!(
            drafted.timings.forward_passes + drafted.timings.accepted_tokens,
            plain.timings.forward_passes,
            "every pass saved is a drafted token kept"
        );
    }
}

#[test]
fn greedy_is_deterministic_and_respects_the_budget() {
    let (_dir, mut model) = tiny_model();
    let a = run(&mut model, Sampling::Greedy, 0, 12, &NO_STOP);
    let b = run(&mut model, Sampling::Greedy, 99, 12, &NO_STOP);
    assert_eq!(a.tokens, b.tokens);
    assert_eq!(a.tokens.len(), 12);
    assert_eq!(a.stop, StopReason::MaxTokens);
    assert_eq!(a.timings.generated_tokens, 12);
    assert_eq!(a.text, model.tokenizer.decode(&a.tokens).unwrap());
}

#[test]
fn output_stops_before_a_stop_token() {
    let (_dir, mut model) = tiny_model();
    let free = run(&mut model, Sampling::Greedy, 0, 10, &NO_STOP);
    let k = 4;
    let stop_token = free.tokens[k];
    let first = free.tokens.iter().position(|&t| t == stop_token).unwrap();
    let stopped = run(&mut model, Sampling::Greedy, 0, 10, &[stop_token]);
    assert_eq!(stopped.stop, StopReason::StopToken(stop_token));
    assert_eq!(stopped.tokens, free.tokens[..first]);
}

#[test]
fn seeds_fix_sampled_output() {
    let (_dir, mut model) = tiny_model();
    let sampling = Sampling::Random { temperature: 1.0, top_k: None, top_p: None };
    let a = run(&mut model, sampling, 7, 20, &NO_STOP);
    let b = run(&mut model, sampling, 7, 20, &NO_STOP);
    let c = run(&mut model, sampling, 8, 20, &NO_STOP);
    assert_eq!(a.tokens, b.tokens);
    assert_ne!(a.tokens, c.tokens, "different seeds gave the same 20 tokens");
}

/// Digits only; after the first digit the grammar forces "-" (a fast-forward), and `len` tokens finish it.
struct Digits {
    committed: Vec<u32>,
    len: usize,
    forced_once: bool,
    masks: usize,
}

const DASH: u32 = b'-' as u32;

impl TokenConstraint for Digits {
    fn validate(&mut self, token: u32) -> bool {
        (b'0' as u32..=b'9' as u32).contains(&token)
    }
    fn mask_logits(&mut self, logits: &mut [f32]) -> tandem::Result<()> {
        self.masks += 1;
        for (id, l) in logits.iter_mut().enumerate() {
            if !self.validate(id as u32) {
                *l = f32::NEG_INFINITY;
            }
        }
        Ok(())
    }
    fn commit(&mut self, token: u32) -> tandem::Result<()> {
        self.committed.push(token);
        Ok(())
    }
    fn forced_tokens(&mut self) -> tandem::Result<Vec<u32>> {
        if !self.forced_once && !self.is_finished() {
            self.forced_once = true;
            self.committed.push(DASH);
            return Ok(vec![DASH]);
        }
        Ok(vec![])
    }
    fn is_accepting(&mut self) -> bool {
        self.committed.len() >= self.len
    }
    fn is_finished(&self) -> bool {
        self.committed.len() >= self.len
    }
}

#[test]
fn constraint_masks_fast_forwards_and_finishes() {
    let (_dir, mut model) = tiny_model();
    let mut digits = Digits { committed: vec![], len: 6, forced_once: false, masks: 0 };
    let prompt = model.tokenizer.encode("the", false).unwrap();
    let request = GenerateRequest {
        prompt,
        max_tokens: 50,
        sampling: Sampling::Random { temperature: 1.0, top_k: None, top_p: None },
        seed: 3,
        stop_tokens: NO_STOP.to_vec(),
        constraint: Some(&mut digits),
        speculation: Speculation::default(),
    };
    let out = generate(&mut model, request, &mut |_| {}).unwrap();
    assert_eq!(out.stop, StopReason::GrammarComplete);
    assert_eq!(out.tokens.len(), 6);
    assert_eq!(out.tokens[1], DASH, "forced token missing: {:?}", out.tokens);
    assert!(
        out.tokens.iter().enumerate().all(|(i, &t)| i == 1 || (b'0' as u32..=b'9' as u32).contains(&t)),
        "{}",
        out.text
    );
    assert_eq!(out.timings.forced_tokens, 1);
    // Six tokens, one forced with the first digit, none after the last: four forward passes after prefill.
    assert_eq!(out.timings.forward_passes, 4);
    assert!(digits.masks > 0, "the random tiny model should sometimes pick a non-digit");
}

#[test]
fn budget_exhausted_before_the_grammar_accepts_is_an_error() {
    let (_dir, mut model) = tiny_model();
    let mut digits = Digits { committed: vec![], len: 100, forced_once: true, masks: 0 };
    let prompt = model.tokenizer.encode("the", false).unwrap();
    let request = GenerateRequest {
        prompt,
        max_tokens: 3,
        sampling: Sampling::Greedy,
        seed: 0,
        stop_tokens: NO_STOP.to_vec(),
        constraint: Some(&mut digits),
        speculation: Speculation::default(),
    };
    let err = generate(&mut model, request, &mut |_| {}).unwrap_err();
    assert!(matches!(err, Error::Generate(GenerateError::GrammarIncomplete { max_tokens: 3, .. })), "{err:?}");
}

#[test]
fn empty_prompt_is_refused() {
    let (_dir, mut model) = tiny_model();
    let err = generate(&mut model, GenerateRequest::greedy(vec![], 5), &mut |_| {}).unwrap_err();
    assert!(matches!(err, Error::Generate(GenerateError::EmptyPrompt)));
}

#[test]
fn streamed_text_equals_the_final_text() {
    let (_dir, mut model) = tiny_model();
    let prompt = model.tokenizer.encode("the", false).unwrap();
    let mut streamed = String::new();
    let request = GenerateRequest { stop_tokens: NO_STOP.to_vec(), ..GenerateRequest::greedy(prompt, 15) };
    let out = generate(&mut model, request, &mut |piece| streamed.push_str(piece)).unwrap();
    assert_eq!(streamed, out.text);
}
