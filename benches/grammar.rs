//! Criterion benches of the grammar engine on the real Qwen tokenizer (no model weights needed): engine build,
//! plan-schema compile (uncached) and cached matcher, one mask inside the plan (compute + apply, cold and with
//! the engine's warm grammar cache), applying a mask to a logits row (ours vs the naive per-id loop), and
//! validating an unconstrained pick. Before the criterion groups it prints the per-mask distribution
//! (mean / p50 / p99) over random walks of the plan schema, cold (a freshly compiled grammar per walk) and warm.
//!
//! Run with `cargo bench --bench grammar`.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use candle_core::quantized::gguf_file;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tandem::bench::grammar::PLAN_SCHEMA;
use tandem::decode::constraint::{apply_allowed_mask, ConstraintMatcher, ConstraintSpec, GrammarEngine};
use tandem::llm::tokenizer::GgufTokenizer;
use tandem::progress::SilentReporter;
use tandem::store::ModelStore;

const QWEN: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m";
const QWEN_LOGITS: usize = 151_936;
/// A state inside the steps array, where the mask is non-trivial (tool enum, ids, nested args).
const IN_STEPS: &str = r#"{"goal":"x","steps":[{"id":"s1","tool":"#;
/// A state inside a free string, where most of the vocabulary is allowed.
const IN_STRING: &str = "{\"goal\":\"";

fn qwen_tokenizer() -> Arc<GgufTokenizer> {
    let path = ModelStore::open().and_then(|s| s.resolve(QWEN, &SilentReporter)).expect("the Qwen model").path;
    let mut file = std::fs::File::open(path).expect("open");
    let md: HashMap<String, gguf_file::Value> = gguf_file::Content::read(&mut file).expect("gguf").metadata;
    Arc::new(GgufTokenizer::from_gguf(&md).expect("tokenizer"))
}

fn matcher_at(engine: &GrammarEngine, spec: &ConstraintSpec, prefix: &[u32], cached: bool) -> ConstraintMatcher {
    let mut m = if cached { engine.matcher(spec) } else { engine.matcher_uncached(spec) }.expect("compile");
    for &t in prefix {
        m.commit(t).expect("commit");
    }
    m
}

fn naive_apply(allowed: &[u32], logits: &mut [f32]) {
    for (i, l) in logits.iter_mut().enumerate() {
        if allowed.get(i / 32).is_none_or(|w| w & (1 << (i % 32)) == 0) {
            *l = f32::NEG_INFINITY;
        }
    }
}

/// `mask_logits` timings along random walks of `spec` (uniform random allowed tokens).
fn walk_mask_times(engine: &GrammarEngine, spec: &ConstraintSpec, cached: bool, walks: u64) -> Vec<Duration> {
    let mut times = Vec::new();
    let mut logits = vec![0.0f32; engine.n_tokens()];
    for seed in 0..walks {
        let mut m = matcher_at(engine, spec, &[], cached);
        let mut rng = StdRng::seed_from_u64(seed);
        for _ in 0..150 {
            m.forced_tokens().expect("forced");
            if m.is_finished() {
                break;
            }
            let before = m.stats().mask_time;
            m.mask_logits(&mut logits).expect("mask");
            times.push(m.stats().mask_time - before);
            let allowed = m.allowed_tokens().expect("mask");
            let pick = allowed[rng.random_range(0..allowed.len())];
            if engine.stop_tokens().contains(&pick) {
                break;
            }
            m.commit(pick).expect("commit");
        }
    }
    times
}

fn report_mask_distribution(engine: &GrammarEngine, spec: &ConstraintSpec, cached: bool) {
    let mut times = walk_mask_times(engine, spec, cached, 30);
    times.sort();
    let mean = times.iter().sum::<Duration>() / times.len().max(1) as u32;
    let p99 = times[((times.len() - 1) as f64 * 0.99).round() as usize];
    eprintln!(
        "grammar/mask_logits ({}) over {} random-walk states of the plan schema: mean {:.1} µs, p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        if cached { "warm: cached grammar" } else { "cold: grammar compiled per walk" },
        times.len(),
        mean.as_secs_f64() * 1e6,
        times[times.len() / 2].as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        times[times.len() - 1].as_secs_f64() * 1e6,
    );
}

fn bench_grammar(c: &mut Criterion) {
    let tokenizer = qwen_tokenizer();
    let spec = ConstraintSpec::JsonSchema(serde_json::from_str(PLAN_SCHEMA).expect("schema"));
    let mut group = c.benchmark_group("grammar_setup");
    group.sample_size(10);
    group.bench_function("engine_build_qwen", |b| {
        b.iter(|| GrammarEngine::new(tokenizer.clone(), QWEN_LOGITS).expect("engine"))
    });
    group.finish();

    let engine = GrammarEngine::new(tokenizer.clone(), QWEN_LOGITS).expect("engine");
    report_mask_distribution(&engine, &spec, false);
    report_mask_distribution(&engine, &spec, true);
    c.bench_function("grammar/compile_plan_schema", |b| b.iter(|| engine.matcher_uncached(&spec).expect("compile")));
    c.bench_function("grammar/cached_plan_matcher", |b| b.iter(|| engine.matcher(&spec).expect("cached")));

    let mut logits = vec![0.0f32; QWEN_LOGITS];
    for (label, prefix) in [("in_steps", IN_STEPS), ("in_string", IN_STRING)] {
        let prefix = tokenizer.encode(prefix, false).expect("encode");
        // llguidance caches a state's mask, so every measured call gets a fresh matcher (built outside the
        // timing): cold = a freshly compiled grammar, warm = a clone of the engine's cached one.
        for (temperature, cached) in [("cold", false), ("warm", true)] {
            c.bench_function(&format!("grammar/mask_logits_{label}_{temperature}"), |b| {
                b.iter_batched(
                    || matcher_at(&engine, &spec, &prefix, cached),
                    |mut m| m.mask_logits(&mut logits).expect("mask"),
                    BatchSize::SmallInput,
                )
            });
        }
        let mut m = matcher_at(&engine, &spec, &prefix, true);
        let allowed = m.allowed_tokens().expect("mask");
        let mut words = vec![0u32; QWEN_LOGITS.div_ceil(32)];
        for t in allowed {
            words[t as usize / 32] |= 1 << (t % 32);
        }
        c.bench_function(&format!("grammar/apply_mask_{label}"), |b| {
            b.iter(|| apply_allowed_mask(black_box(&words), black_box(&mut logits)))
        });
        c.bench_function(&format!("grammar/apply_mask_naive_{label}"), |b| {
            b.iter(|| naive_apply(black_box(&words), black_box(&mut logits)))
        });
    }

    let prefix = tokenizer.encode(IN_STEPS, false).expect("encode");
    let good = tokenizer.encode("\"calculator", false).expect("encode")[0];
    c.bench_function("grammar/validate_pick_in_steps", |b| {
        b.iter_batched(
            || matcher_at(&engine, &spec, &prefix, true),
            |mut m| m.validate(black_box(good)),
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench_grammar);
criterion_main!(benches);
