//! The planner's thinking mode (`tandem run --think`): which chat templates have the switch, the grammar that lets
//! a thought come before the answer, and a Qwen3 twin with Qwen3's template writing a thought and then an answer
//! under it.

use std::path::Path;

use candle_core::Device;
use tandem::agent::model_call::chat_candidates;
use tandem::decode::constraint::{split_thinking, ConstraintSpec};
use tandem::decode::{Model, Sampling, Speculation};
use tandem::llm::{ChatMessage, ChatTemplate, LoadOptions};

use crate::common::twins::{write_twin_with, Family, Quant, Tweak};

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat_templates").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Qwen3's and SmolLM3's templates read `enable_thinking`; the others render the same either way.
#[test]
fn the_thinking_switch_is_told_from_the_template() {
    for (name, switch) in [
        ("qwen3", true),
        ("smollm3", true),
        ("smollm2", false),
        ("llama-3.1", false),
        ("phi-4-mini", false),
        ("gemma3", false),
        ("mistral-nemo", false),
    ] {
        let template = ChatTemplate::new(&fixture(&format!("{name}.jinja")), "<s>", "</s>").unwrap();
        assert_eq!(template.has_thinking_switch(), switch, "{name}");
    }
}

/// A Qwen3 twin carrying Qwen3's chat template: asked to think, every output opens with a thought, then
/// `</think>`, then only what the grammar admits; not asked, it answers at once. The twin's weights are random, so
/// this checks the mechanism (render, grammar, reading apart), not what a thought says.
#[test]
fn a_thinking_model_writes_its_thought_before_the_answer_and_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("qwen3-twin.gguf");
    let tweak = Tweak { chat_template: Some(fixture("qwen3.jinja")), ..Tweak::default() };
    write_twin_with(&path, Family::Qwen3, Quant::Q8_0, &tweak);
    let mut model = Model::load_with(&path, &Device::Cpu, &LoadOptions::default(), Some(Speculation::Off)).unwrap();
    let messages = [ChatMessage::system("Answer yes or no."), ChatMessage::user("Is the sky blue?")];
    let spec = ConstraintSpec::Regex("yes|no".into());
    let samplings = [(Sampling::Greedy, 0), (Sampling::Random { temperature: 1.0, top_k: None, top_p: None }, 7)];

    let thought = chat_candidates(&mut model, "planner", &messages, Some(&spec), 4, &samplings, true).unwrap();
    for output in thought {
        let (text, _) = output.unwrap();
        assert!(text.starts_with("<think>") && text.contains("</think>"), "{text:?}");
        let (thought, answer) = split_thinking(&text);
        assert!(thought.is_some_and(|t| !t.contains('<')), "{text:?}");
        assert!(answer == "yes" || answer == "no", "{text:?}");
    }

    let plain = chat_candidates(&mut model, "planner", &messages, Some(&spec), 4, &samplings, false).unwrap();
    for output in plain {
        let (text, _) = output.unwrap();
        assert!(text == "yes" || text == "no", "{text:?}");
        assert_eq!(split_thinking(&text), (None, text.as_str()));
    }
}
