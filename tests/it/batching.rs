//! Batching across generations on the real 0.5B model: passes over several sequences, and generations on threads
//! sharing one model's passes (never skipped; short prompts, few tokens).

use candle_core::Device;
use tandem::decode::batching::SharedModel;
use tandem::decode::Model;
use tandem::decode::{generate, GenerateRequest};
use tandem::llm::{ChatMessage, LoadOptions, SequencePass};

fn load(id: &str) -> Model {
    Model::load(&crate::common::real_model(id), &Device::Cpu, &LoadOptions::default()).unwrap()
}

fn encode(model: &Model, text: &str) -> Vec<u32> {
    model.tokenizer.encode(text, false).unwrap()
}

/// Asserts two logit rows are the same: bit for bit where batches are exact (our kernels), else within rounding.
fn assert_same(exact: bool, alone: &[f32], together: &[f32], what: &str) {
    assert_eq!(alone.len(), together.len(), "{what}: widths");
    if exact {
        let differing = alone.iter().zip(together).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        assert_eq!(differing, 0, "{what}: {differing} logits differ");
    } else {
        let worst = alone.iter().zip(together).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst < 0.05, "{what}: logits differ by up to {worst}");
    }
}

/// Each part of a pass over three sequences (prompts of different lengths, then a step of one or more tokens with
/// the last position's logits, every position's, or those from the second on) gets the logits a pass of its own gives: the sequences' rows share the
/// products and nothing else.
#[test]
fn a_pass_over_several_sequences_gives_each_the_logits_of_its_own_pass() {
    let mut model = load("qwen2.5-coder-0.5b-instruct-q4_k_m");
    let exact = model.weights.exact_batches();
    let prompts: Vec<Vec<u32>> = ["def add(a, b):", "The capital of France is a city called", "SELECT name FROM"]
        .iter()
        .map(|p| encode(&model, p))
        .collect();
    let steps: Vec<Vec<u32>> = [" return a", " Paris", " users who"].iter().map(|s| encode(&model, s)).collect();
    // Every position's logits, the last one's, and those from the second position on (a drafted pass).
    let logits_from = [Some(0), None, Some(1)];
    assert!(steps[2].len() >= 2, "a step with a position before its first wanted one");
    assert!(prompts[0].len() != prompts[1].len(), "prompts of different lengths");

    let mut alone = Vec::new();
    for ((prompt, step), &from) in prompts.iter().zip(&steps).zip(&logits_from) {
        model.weights.clear_kv_cache();
        let first = model.weights.forward(prompt, 0).unwrap().to_vec1::<f32>().unwrap();
        let second = match from {
            Some(first) => model.weights.forward_from(step, prompt.len(), first).unwrap().to_vec2::<f32>().unwrap(),
            None => vec![model.weights.forward(step, prompt.len()).unwrap().to_vec1::<f32>().unwrap()],
        };
        alone.push((first, second));
    }

    let multi = model.weights.multi_sequence().expect("qwen2 keeps several sequences");
    let ids: Vec<_> = (0..3).map(|_| multi.open_sequence()).collect();
    let prefill: Vec<SequencePass<'_>> = ids
        .iter()
        .zip(&prompts)
        .map(|(&sequence, prompt)| SequencePass { sequence, tokens: prompt, pos: 0, logits_from: None })
        .collect();
    let firsts = multi.forward_sequences(&prefill).unwrap();
    let step: Vec<SequencePass<'_>> = ids
        .iter()
        .zip(&steps)
        .zip(prompts.iter().zip(&logits_from))
        .map(|((&sequence, tokens), (prompt, &logits_from))| SequencePass {
            sequence,
            tokens,
            pos: prompt.len(),
            logits_from,
        })
        .collect();
    let seconds = multi.forward_sequences(&step).unwrap();
    for (i, ((first, second), (alone_first, alone_second))) in firsts.iter().zip(&seconds).zip(&alone).enumerate() {
        assert_same(exact, alone_first, &first.to_vec1::<f32>().unwrap(), &format!("sequence {i}, prompt"));
        let second =
            if logits_from[i].is_some() { second.to_vec2::<f32>().unwrap() } else { vec![second.to_vec1().unwrap()] };
        assert_eq!(second.len(), alone_second.len(), "sequence {i}: rows of the step");
        for (row, (a, t)) in alone_second.iter().zip(&second).enumerate() {
            assert_same(exact, a, t, &format!("sequence {i}, step row {row}"));
        }
    }
    // A pass naming a sequence that is not open, or a position its cache has not reached, is refused.
    let stray = [SequencePass { sequence: 999, tokens: &steps[0], pos: 0, logits_from: None }];
    assert!(multi.forward_sequences(&stray).is_err());
    let gap = [SequencePass { sequence: ids[0], tokens: &steps[0], pos: 1000, logits_from: None }];
    assert!(multi.forward_sequences(&gap).is_err());
}

/// Three greedy generations on threads, sharing one model's passes, write the tokens each writes alone, and the
/// passes did serve several generations at once.
#[test]
fn generations_sharing_passes_write_what_they_write_alone() {
    let mut model = load("qwen2.5-coder-0.5b-instruct-q4_k_m");
    let questions = ["What is 7*8? Answer with the number only.", "Name a primary colour.", "Say hello in French."];
    let template = model.chat_template.clone().unwrap();
    let prompts: Vec<Vec<u32>> = questions
        .iter()
        .map(|q| encode(&model, &template.render(&[ChatMessage::user(*q)], None, true).unwrap()))
        .collect();
    let alone: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| {
            model.weights.clear_kv_cache();
            generate(&mut model, GenerateRequest::greedy(p.clone(), 12), &mut |_| {}).unwrap().tokens
        })
        .collect();

    let shared = SharedModel::start(model).unwrap();
    let mut models: Vec<Model> = prompts.iter().map(|_| shared.model().unwrap()).collect();
    let together: Vec<Vec<u32>> = std::thread::scope(|scope| {
        let threads: Vec<_> = models
            .iter_mut()
            .zip(&prompts)
            .map(|(model, prompt)| {
                scope.spawn(move || {
                    generate(model, GenerateRequest::greedy(prompt.clone(), 12), &mut |_| {}).unwrap().tokens
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for (i, (a, t)) in alone.iter().zip(&together).enumerate() {
        assert_eq!(a, t, "generation {i} ({:?})", questions[i]);
    }
    let stats = shared.stats();
    // (Rows may be fewer than the prompts' tokens: a generation arriving after another copies the chat template's
    // shared opening from it.)
    assert!(stats.passes > 0 && stats.rows >= stats.parts, "{stats:?}");
    assert!(stats.parts_per_pass() > 1.0, "no pass served two generations: {stats:?}");
}

/// Every architecture runs on the one decoder, so a Gemma 3 model is shared across generations as Qwen2 is (it
/// kept one sequence when it ran on candle-transformers' implementation).
#[test]
fn a_gemma3_model_is_shared_across_generations() {
    let model = load("gemma-3-270m-q4_k_m");
    assert!(SharedModel::start(model).is_ok(), "gemma3 should keep several sequences");
}

/// A sequence whose prompt starts like one another sequence has cached copies those positions instead of
/// computing them, and its logits are those of the whole prompt computed cold.
#[test]
fn a_new_sequence_copies_the_prefix_another_has_computed() {
    let mut model = load("qwen2.5-coder-0.5b-instruct-q4_k_m");
    let exact = model.weights.exact_batches();
    let opening = encode(
        &model,
        "You are a careful planner. Tools: calculator(expression) evaluates arithmetic, read_file(path) reads a \
         file of the workspace. Goal: ",
    );
    let first: Vec<u32> = [opening.clone(), encode(&model, "What is 12*4+5?")].concat();
    let second: Vec<u32> = [opening.clone(), encode(&model, "Count the lines of notes.txt")].concat();
    assert!(opening.len() > 20, "{} tokens", opening.len());
    model.weights.clear_kv_cache();
    let cold = model.weights.forward(&second, 0).unwrap().to_vec1::<f32>().unwrap();

    let multi = model.weights.multi_sequence().unwrap();
    let (a, b) = (multi.open_sequence(), multi.open_sequence());
    multi.use_sequence(a).unwrap();
    model.weights.select_cache_for(&first);
    model.weights.forward(&first, 0).unwrap();
    let multi = model.weights.multi_sequence().unwrap();
    multi.use_sequence(b).unwrap();
    model.weights.select_cache_for(&second);
    let borrowed = model.weights.cached_tokens().len();
    assert!(borrowed >= opening.len() - 1, "copied {borrowed} positions of a {}-token opening", opening.len());
    assert_eq!(model.weights.cached_tokens(), &second[..borrowed]);
    let warm = model.weights.forward(&second[borrowed..], borrowed).unwrap().to_vec1::<f32>().unwrap();
    assert_same(exact, &cold, &warm, "the second prompt after a copied prefix");
}
