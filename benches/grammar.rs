//! Criterion benches of the grammar engine on the real Qwen tokenizer: schema compile time, one mask, and
//! masking a full logits vector. Run with `cargo bench --bench grammar`.

use std::collections::HashMap;
use std::sync::Arc;

use candle_core::quantized::gguf_file;
use criterion::{criterion_group, criterion_main, Criterion};
use tandem::bench::grammar::PLAN_SCHEMA;
use tandem::decode::constraint::{ConstraintSpec, GrammarEngine};
use tandem::llm::tokenizer::GgufTokenizer;
use tandem::progress::SilentReporter;
use tandem::store::ModelStore;

fn bench_grammar(c: &mut Criterion) {
    let path = ModelStore::open()
        .and_then(|s| s.resolve("qwen2.5-coder-0.5b-instruct-q4_k_m", &SilentReporter))
        .expect("model")
        .path;
    let mut file = std::fs::File::open(path).expect("open");
    let md: HashMap<String, gguf_file::Value> = gguf_file::Content::read(&mut file).expect("gguf").metadata;
    let tokenizer = Arc::new(GgufTokenizer::from_gguf(&md).expect("tokenizer"));
    let engine = GrammarEngine::new(tokenizer.clone(), 151_936).expect("engine");
    let spec = ConstraintSpec::JsonSchema(serde_json::from_str(PLAN_SCHEMA).expect("schema"));

    c.bench_function("grammar/compile_plan_schema", |b| b.iter(|| engine.matcher(&spec).expect("compile")));
    // A state inside the steps array, where the mask is non-trivial (tool enum, ids, nested args).
    let prefix = tokenizer.encode(r#"{"goal":"x","steps":[{"id":"s1","tool":"#, false).expect("encode");
    let mut logits = vec![0.0f32; 151_936];
    c.bench_function("grammar/mask_in_steps", |b| {
        b.iter_batched(
            || {
                let mut m = engine.matcher(&spec).expect("compile");
                for &t in &prefix {
                    m.commit(t).expect("commit");
                }
                m
            },
            |mut m| m.mask_logits(&mut logits).expect("mask"),
            criterion::BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench_grammar);
criterion_main!(benches);
