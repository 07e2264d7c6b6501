//! Several candidates from one prompt (plan search's decoding) on the real 0.5B model: each candidate writes
//! exactly what a generation of its own with the same sampling and seed writes, batched or one after another.

use candle_core::Device;
use tandem::decode::batching::SharedModel;
use tandem::decode::constraint::ConstraintSpec;
use tandem::decode::token_constraint::TokenConstraint;
use tandem::decode::{
    generate, generate_candidates, Candidate, GenerateRequest, Generation, Model, Sampling, Speculation,
};
use tandem::llm::{ChatMessage, LoadOptions};

fn load() -> Model {
    let path = crate::common::real_model("qwen2.5-coder-0.5b-instruct-q4_k_m");
    Model::load_with(&path, &Device::Cpu, &LoadOptions::default(), Some(Speculation::Off)).unwrap()
}

fn prompt(model: &Model) -> Vec<u32> {
    let question = "Name a large city and its country as JSON.";
    let text = model.chat_template.as_ref().unwrap().render(&[ChatMessage::user(question)], None, true).unwrap();
    model.tokenizer.encode(&text, false).unwrap()
}

fn schema() -> ConstraintSpec {
    ConstraintSpec::JsonSchema(serde_json::json!({
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}, "country": {"type": "string", "maxLength": 20}},
        "required": ["city", "country"],
        "additionalProperties": false
    }))
}

/// Greedy twice (they must agree) and sampled with two seeds.
fn samplings() -> Vec<(Sampling, u64)> {
    let hot = Sampling::Random { temperature: 1.2, top_k: None, top_p: None };
    vec![(Sampling::Greedy, 0), (hot, 1), (hot, 2), (Sampling::Greedy, 0)]
}

const MAX_TOKENS: usize = 40;

/// What a generation of its own writes (an error as its message, to compare).
fn alone(model: &mut Model, tokens: &[u32], (sampling, seed): (Sampling, u64)) -> Result<Generation, String> {
    let mut matcher = model.grammar_engine().unwrap().matcher(&schema()).unwrap();
    let request = GenerateRequest {
        prompt: tokens.to_vec(),
        max_tokens: MAX_TOKENS,
        sampling,
        seed,
        stop_tokens: Vec::new(),
        constraint: Some(&mut matcher as &mut dyn TokenConstraint),
        speculation: Speculation::Off,
    };
    generate(model, request, &mut |_| {}).map_err(|e| e.to_string())
}

fn together(model: &mut Model, tokens: &[u32]) -> Vec<Result<Generation, String>> {
    let engine = model.grammar_engine().unwrap();
    let mut matchers: Vec<_> = samplings().iter().map(|_| engine.matcher(&schema()).unwrap()).collect();
    let candidates = samplings()
        .into_iter()
        .zip(matchers.iter_mut())
        .map(|((sampling, seed), m)| Candidate { sampling, seed, constraint: Some(m as &mut dyn TokenConstraint) })
        .collect();
    generate_candidates(model, tokens.to_vec(), None, MAX_TOKENS, candidates)
        .unwrap()
        .into_iter()
        .map(|g| g.map_err(|e| e.to_string()))
        .collect()
}

fn assert_same(alone: &[Result<Generation, String>], together: &[Result<Generation, String>]) {
    assert_eq!(alone.len(), together.len());
    for (i, (a, t)) in alone.iter().zip(together).enumerate() {
        match (a, t) {
            (Ok(a), Ok(t)) => {
                assert_eq!((&t.text, &t.tokens, t.stop), (&a.text, &a.tokens, a.stop), "candidate {i}");
                assert_eq!(t.timings.generated_tokens, a.timings.generated_tokens, "candidate {i}");
            }
            (a, t) => assert_eq!(t.as_ref().err(), a.as_ref().err(), "candidate {i}"),
        }
    }
}

#[test]
fn candidates_decoded_side_by_side_write_what_each_writes_alone() {
    let mut model = load();
    let tokens = prompt(&model);
    let alone: Vec<_> = samplings().into_iter().map(|s| alone(&mut model, &tokens, s)).collect();
    let greedy = alone[0].as_ref().expect("the greedy answer fits the budget");
    serde_json::from_str::<serde_json::Value>(&greedy.text).expect("the grammar's output is JSON");
    // The check needs sampled candidates that differ from the greedy one.
    assert!(alone[1..3].iter().any(|s| s.as_ref().map(|g| &g.text) != Ok(&greedy.text)), "{alone:?}");
    let together = together(&mut model, &tokens);
    assert_same(&alone, &together);
    // The model's own sequence goes on as before: the next generation is the greedy one again.
    let again = self::alone(&mut model, &tokens, samplings()[0]).unwrap();
    assert_eq!(again.text, greedy.text);
}

#[test]
fn a_model_of_one_sequence_writes_the_candidates_one_after_another() {
    let mut model = load();
    let tokens = prompt(&model);
    let alone: Vec<_> = samplings().into_iter().map(|s| alone(&mut model, &tokens, s)).collect();
    // A handle on a shared model keeps one sequence of its own: the fallback path.
    let shared = SharedModel::start(model).unwrap();
    let mut handle = shared.model().unwrap();
    assert!(handle.weights.multi_sequence().is_none());
    assert_same(&alone, &together(&mut handle, &tokens));
}
