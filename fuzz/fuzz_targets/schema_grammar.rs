//! JSON Schema → grammar: any JSON value is loosened as a tool's schema is (`schema_fit`) and compiled to a
//! grammar on a small byte-level vocabulary, then a few masks are computed; compile errors are fine, panics not.
#![no_main]

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use candle_core::quantized::gguf_file::Value as Meta;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tandem::decode::constraint::{ConstraintSpec, GrammarEngine};
use tandem::llm::tokenizer::{gpt2_byte_to_char, GgufTokenizer};
use tandem::tools::schema_fit::fit;

/// 256 byte tokens and an end token, as GGUF metadata.
fn engine() -> &'static GrammarEngine {
    static ENGINE: OnceLock<GrammarEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let chars = gpt2_byte_to_char();
        let mut tokens: Vec<Meta> = (0..=255u8).map(|b| Meta::String(chars[b as usize].to_string())).collect();
        let mut types = vec![Meta::I32(1); 256];
        tokens.push(Meta::String("<|im_end|>".into()));
        types.push(Meta::I32(3));
        let md: HashMap<String, Meta> = [
            ("tokenizer.ggml.model", Meta::String("gpt2".into())),
            ("tokenizer.ggml.pre", Meta::String("qwen2".into())),
            ("tokenizer.ggml.tokens", Meta::Array(tokens)),
            ("tokenizer.ggml.token_type", Meta::Array(types)),
            ("tokenizer.ggml.merges", Meta::Array(Vec::new())),
            ("tokenizer.ggml.eos_token_id", Meta::U32(256)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let tokenizer = Arc::new(GgufTokenizer::from_gguf(&md).unwrap());
        GrammarEngine::new(tokenizer, 257).unwrap()
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(schema) = serde_json::from_slice::<Value>(data) else { return };
    let (fitted, _notes) = fit(&schema);
    for spec in [ConstraintSpec::JsonSchema(schema), ConstraintSpec::JsonSchema(fitted)] {
        let Ok(mut matcher) = engine().matcher_uncached(&spec) else { continue };
        // A few steps along the first allowed token, as a generation would take them.
        for _ in 0..8 {
            let Ok(allowed) = matcher.allowed_tokens() else { break };
            let Some(&token) = allowed.first() else { break };
            if matcher.commit(token).is_err() || matcher.is_finished() {
                break;
            }
        }
    }
});
