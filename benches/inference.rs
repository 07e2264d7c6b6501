//! Criterion benches of the inference hot path: prefill (512 tokens) and decode (128 tokens) per model.
//!
//! Models come from the store (pulled on first use). `TANDEM_BENCH_MODELS=id1,id2` picks them (default: both
//! default Qwen models). Run with `cargo bench --bench inference`.

use std::time::Duration;

use candle_core::Device;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tandem::bench::speed::prompt_of_length;
use tandem::decode::sampler::argmax;
use tandem::decode::Model;
use tandem::llm::LoadOptions;
use tandem::progress::SilentReporter;
use tandem::store::ModelStore;

const DEFAULT_MODELS: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m,qwen2.5-coder-1.5b-instruct-q4_k_m";

fn bench_models(c: &mut Criterion) {
    let ids = std::env::var("TANDEM_BENCH_MODELS").unwrap_or_else(|_| DEFAULT_MODELS.to_string());
    let store = ModelStore::open().expect("model store");
    for id in ids.split(',').filter(|s| !s.is_empty()) {
        let path = store.resolve(id, &SilentReporter).expect("model").path;
        let mut model = Model::load(&path, &Device::Cpu, &LoadOptions::default()).expect("load");
        let prompt = prompt_of_length(&model, 512).expect("prompt");
        // Warm up once: candle repacks weights on first use.
        model.weights.forward(&prompt[..16], 0).expect("warm-up");

        let mut group = c.benchmark_group(id);
        group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(20));
        group.throughput(Throughput::Elements(512));
        group.bench_function("prefill_512", |b| b.iter(|| model.weights.forward(&prompt, 0).expect("prefill")));
        group.throughput(Throughput::Elements(128));
        group.bench_function("decode_128", |b| {
            b.iter(|| {
                let logits = model.weights.forward(&prompt[..32], 0).expect("prompt");
                let mut next = argmax(&logits.to_vec1::<f32>().expect("logits"));
                for pos in 32..32 + 128 {
                    let logits = model.weights.forward(&[next], pos).expect("decode");
                    next = argmax(&logits.to_vec1::<f32>().expect("logits"));
                }
                next
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench_models);
criterion_main!(benches);
