//! Criterion benches of our quantized matmul kernels against candle's `QMatMul` on the same weights, in the same
//! run: one activation row (a decode step), 2–16 rows (drafts, sequences decoded together) and 64 rows (a prefill
//! chunk), at the default models' shapes. Q5_0
//! weights run on the kernel a model load picks (`int8`: widened, for comparison); F16 and BF16 ones on ours at two
//! bytes a value against candle's, which widens them to f32 at load.
//!
//! Also our CPU attention against candle's ops. Run with `cargo bench --bench kernels` (`-- q4k` to pick one group).

use std::time::Duration;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::sync::Arc;

use tandem::kernels::attention::{candle_attention, causal_attention};
use tandem::kernels::{Q8_0Matrix, QLinear};

/// (name, type, output rows, input width): the 0.5B's gate/up and down, the 1.5B's gate/up and down, Phi-4-mini's
/// fused `attn_qkv` (Q5_K in its Q4_K_M file).
const SHAPES: &[(&str, GgmlDType, usize, usize)] = &[
    ("q8_0 4864x896 (0.5B gate)", GgmlDType::Q8_0, 4864, 896),
    ("q5_0 4864x896 (0.5B gate)", GgmlDType::Q5_0, 4864, 896),
    ("q8_0 151936x896 (0.5B output)", GgmlDType::Q8_0, 151936, 896),
    ("q4k 896x4864 (0.5B down)", GgmlDType::Q4K, 896, 4864),
    ("q4k 8960x1536 (1.5B gate)", GgmlDType::Q4K, 8960, 1536),
    ("q6k 1536x8960 (1.5B down)", GgmlDType::Q6K, 1536, 8960),
    ("q5k 5120x3072 (Phi-4-mini qkv)", GgmlDType::Q5K, 5120, 3072),
    ("f16 4864x896 (0.5B gate, an F16 file)", GgmlDType::F16, 4864, 896),
    ("bf16 4864x896 (0.5B gate, a BF16 file)", GgmlDType::BF16, 4864, 896),
];

fn weights(rows: usize, cols: usize, dtype: GgmlDType) -> QTensor {
    let values: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919 % 1013) as f32 / 1013.0 - 0.5) * 0.2).collect();
    let dense = Tensor::from_vec(values, (rows, cols), &Device::Cpu).expect("tensor");
    QTensor::quantize(&dense, dtype).expect("quantize")
}

fn bench_kernels(c: &mut Criterion) {
    for &(name, dtype, rows, cols) in SHAPES {
        // What a model load picks on this CPU (Q5_0: five-bit panels on AVX-512 VNNI, `TANDEM_KERNELS=q5_0` the
        // five-bit rows, else widened to int8).
        let ours = match dtype {
            GgmlDType::Q5_0 => QLinear::widened(&weights(rows, cols, dtype)).expect("q5").expect("a kernel of ours"),
            _ => QLinear::new(weights(rows, cols, dtype)).expect("ours"),
        };
        let int8 = (dtype == GgmlDType::Q5_0)
            .then(|| QLinear::Ours(Arc::new(Q8_0Matrix::from_q5_0(&weights(rows, cols, dtype)).expect("int8"))));
        let theirs = QMatMul::from_qtensor(weights(rows, cols, dtype)).expect("candle");
        let mut group = c.benchmark_group(name);
        group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
        // 1 row: a decode step; 2–16: drafts and sequences decoded together (`tandem batch --parallel`); 64: a
        // prefill chunk. candle's only at 1 and 64, to keep the run short.
        for m in [1usize, 2, 4, 8, 16, 64] {
            let x: Vec<f32> = (0..m * cols).map(|i| ((i % 97) as f32 - 48.0) / 50.0).collect();
            let x = Tensor::from_vec(x, (m, cols), &Device::Cpu).expect("input");
            group.throughput(Throughput::Elements((rows * cols * m) as u64));
            group.bench_with_input(BenchmarkId::new(ours.kernel_name(), m), &x, |b, x| {
                b.iter(|| ours.forward(x).expect("ours"))
            });
            if let Some(int8) = &int8 {
                group.bench_with_input(BenchmarkId::new("int8", m), &x, |b, x| {
                    b.iter(|| int8.forward(x).expect("int8"))
                });
            }
            if m == 1 || m == 64 {
                group.bench_with_input(BenchmarkId::new("candle", m), &x, |b, x| {
                    b.iter(|| theirs.forward(x).expect("candle"))
                });
            }
        }
        group.finish();
    }
}

/// Attention at the 1.5B's shapes (12 query heads over 2 key/value heads of 128): a decode step after 512 cached
/// positions and a 512-token prefill, ours against candle's ops on the same tensors.
fn bench_attention(c: &mut Criterion) {
    let (n_head, n_kv_head, head_dim) = (12, 2, 128);
    let mut group = c.benchmark_group("attention 12x2x128 (1.5B)");
    group.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    // 2,333 positions: a second plan against a 30-tool catalogue, one row (a plain step) and three (a step with
    // forced tokens and a draft).
    for (seq, pos) in [(1usize, 512usize), (8, 512), (1, 2333), (3, 2333), (512, 0)] {
        let tensor = |heads: usize, rows: usize, seed: usize| {
            let values: Vec<f32> =
                (0..heads * rows * head_dim).map(|i| ((i * 7919 + seed) % 1013) as f32 / 1013.0 - 0.5).collect();
            Tensor::from_vec(values, (1, heads, rows, head_dim), &Device::Cpu).expect("tensor")
        };
        let (q, k, v) = (tensor(n_head, seq, 1), tensor(n_kv_head, pos + seq, 2), tensor(n_kv_head, pos + seq, 3));
        let mask: Vec<f32> = (0..seq)
            .flat_map(|i| (0..pos + seq).map(move |j| if j > pos + i { f32::NEG_INFINITY } else { 0.0 }))
            .collect();
        let mask = (seq > 1).then(|| Tensor::from_vec(mask, (seq, pos + seq), &Device::Cpu).expect("mask"));
        let scale = 1.0 / (head_dim as f64).sqrt();
        let label = format!("seq {seq} after {pos}");
        group.bench_function(BenchmarkId::new("tandem", &label), |b| {
            b.iter(|| causal_attention(&q, &k, &v, pos, scale as f32).expect("ours"))
        });
        group.bench_function(BenchmarkId::new("candle", &label), |b| {
            b.iter(|| candle_attention(&q, &k, &v, mask.as_ref(), scale).expect("candle"))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_kernels, bench_attention);
criterion_main!(benches);
