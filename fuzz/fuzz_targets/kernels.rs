//! The SIMD matmul kernels and the attention kernel (most of the crate's `unsafe` code), run under the fuzz build's
//! AddressSanitizer: fuzzed shapes, weight bytes and activations give the scalar reference's product on every
//! kernel level this CPU runs, and no access strays outside a buffer. Buffers are allocated to their exact size,
//! so one value read past an end lands in ASan's red zone.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tandem::kernels::attention::{attend, AttentionDims, KvRows};
use tandem::kernels::kquants::{self, Q4KMatrix, Q5KMatrix, Q6KMatrix};
use tandem::kernels::q5_0::{self, Q5_0Matrix};
use tandem::kernels::q8_0::{self, Q8_0Matrix};
use tandem::kernels::{cpu_level, CpuLevel, Q4KPanels, Q5KPanels, Q5_0Panels, Q6KPanels};

/// Bytes that choose the case; the rest feed weights and values, cycled.
const HEADER: usize = 8;

fuzz_target!(|data: &[u8]| {
    if data.len() < HEADER {
        return;
    }
    let (header, rest) = data.split_at(HEADER);
    let mut bytes = Cycle::new(rest);
    if header[0] % 8 == 7 {
        fuzz_attention(header, &mut bytes);
    } else {
        fuzz_matmul(header, &mut bytes);
    }
});

/// The fuzz input's bytes after the header, endlessly (zeros when there are none).
struct Cycle<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Cycle<'a> {
    fn new(data: &'a [u8]) -> Self {
        Cycle { data, at: 0 }
    }

    fn next(&mut self) -> u8 {
        if self.data.is_empty() {
            return 0;
        }
        let byte = self.data[self.at % self.data.len()];
        self.at += 1;
        byte
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next()).collect()
    }

    /// `n` values in [-8, 8), some exactly zero.
    fn values(&mut self, n: usize, divisor: f32) -> Vec<f32> {
        (0..n).map(|_| f32::from(self.next() as i8) / divisor).collect()
    }
}

/// The weight types with kernels of ours: (values per block, bytes per block, offsets of the block's f16 scales).
const TYPES: [(&str, usize, usize, &[usize]); 5] = [
    ("Q8_0", 32, 34, &[0]),
    ("Q5_0", 32, 22, &[0]),
    ("Q4_K", 256, 144, &[0, 2]),
    ("Q6_K", 256, 210, &[208]),
    ("Q5_K", 256, 176, &[0, 2]),
];

fn fuzz_matmul(header: &[u8], bytes: &mut Cycle) {
    // `header[0] % 8` is 0–6 here (7 is attention): 0–4 pick each type, 5 and 6 the first two again.
    let (name, values_per_block, block_bytes, scale_offsets) = TYPES[usize::from(header[0] % 8) % TYPES.len()];
    let rows = 1 + usize::from(header[1]) % 40;
    // Mostly decode-sized batches, now and then prefill-sized ones (other kernels take over from 4 and 96 rows).
    let m = if header[2] & 7 == 7 { 1 + usize::from(header[3]) % 104 } else { 1 + usize::from(header[3]) % 12 };
    let blocks = if values_per_block == 32 { 1 + usize::from(header[4]) % 24 } else { 1 + usize::from(header[4]) % 4 };
    let cols = blocks * values_per_block;
    let mut weights = bytes.take(rows * blocks * block_bytes);
    // Any bits in the quants, but finite scales: a NaN or infinite scale makes every kernel's product NaN, which
    // says nothing about the kernels.
    for block in weights.chunks_exact_mut(block_bytes) {
        for &offset in scale_offsets {
            let scale = half::f16::from_le_bytes([block[offset], block[offset + 1]]);
            if !scale.is_finite() {
                block[offset..offset + 2].copy_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
            }
        }
    }
    let mut input = bytes.values(m * cols, 16.0);
    if header[5] & 1 == 1 {
        // An all-zero activation row: its quantization scale is zero.
        input[..cols].fill(0.0);
    }
    match name {
        "Q8_0" => {
            let w = Q8_0Matrix::from_gguf_bytes(rows, cols, &weights).unwrap();
            let reference = q8_0::reference_matmul(&w, &input, m);
            let bound = bounds(rows, cols, m, &input, |r| w.dequantize_row(r));
            for level in cpu_level().with_lower_levels() {
                check(name, level, &reference, &bound, |out| w.matmul_at(level, &input, m, out));
            }
        }
        "Q5_0" => {
            // Widening to int8 is exact, so the widened matrix's scalar product is the reference for all three
            // layouts (the five-bit rows take only widths of whole 64-value groups).
            let widened = Q8_0Matrix::from_q5_0_bytes(rows, cols, &weights).unwrap();
            let reference = q8_0::reference_matmul(&widened, &input, m);
            let bound = bounds(rows, cols, m, &input, |r| widened.dequantize_row(r));
            for level in cpu_level().with_lower_levels() {
                check("Q5_0 widened", level, &reference, &bound, |out| widened.matmul_at(level, &input, m, out));
            }
            let panels = Q5_0Panels::from_gguf_bytes(rows, cols, &weights).unwrap();
            for level in panel_levels(Q5_0Panels::MIN_LEVEL) {
                check("Q5_0 panels", level, &reference, &bound, |out| panels.matmul_at(level, &input, m, out));
            }
            if Q5_0Matrix::fits(cols) {
                let w = Q5_0Matrix::from_gguf_bytes(rows, cols, &weights).unwrap();
                check(name, cpu_level(), &q5_0::reference_matmul(&w, &input, m), &bound, |out| {
                    w.matmul(&input, m, out)
                });
            }
        }
        "Q4_K" => {
            let w = Q4KMatrix::from_gguf_bytes(rows, cols, &weights).unwrap();
            let reference = kquants::reference_matmul(&w, &input, m, Q4KMatrix::dequantize_row);
            let bound = bounds(rows, cols, m, &input, |r| w.dequantize_row(r));
            for level in cpu_level().with_lower_levels() {
                check(name, level, &reference, &bound, |out| w.matmul_at(level, &input, m, out));
            }
            let panels = Q4KPanels::from_rows(&w);
            for level in panel_levels(Q4KPanels::MIN_LEVEL) {
                check("Q4_K panels", level, &reference, &bound, |out| panels.matmul_at(level, &input, m, out));
            }
        }
        "Q5_K" => {
            let w = Q5KMatrix::from_gguf_bytes(rows, cols, &weights).unwrap();
            let reference = kquants::reference_matmul(&w, &input, m, Q5KMatrix::dequantize_row);
            let bound = bounds(rows, cols, m, &input, |r| w.dequantize_row(r));
            let panels = Q5KPanels::from_rows(&w);
            for level in panel_levels(Q5KPanels::MIN_LEVEL) {
                check("Q5_K panels", level, &reference, &bound, |out| panels.matmul_at(level, &input, m, out));
            }
        }
        _ => {
            let w = Q6KMatrix::from_gguf_bytes(rows, cols, &weights).unwrap();
            let reference = kquants::reference_matmul(&w, &input, m, Q6KMatrix::dequantize_row);
            let bound = bounds(rows, cols, m, &input, |r| w.dequantize_row(r));
            for level in cpu_level().with_lower_levels() {
                check(name, level, &reference, &bound, |out| w.matmul_at(level, &input, m, out));
            }
            let panels = Q6KPanels::from_rows(&w);
            for level in panel_levels(Q6KPanels::MIN_LEVEL) {
                check("Q6_K panels", level, &reference, &bound, |out| panels.matmul_at(level, &input, m, out));
            }
        }
    }
}

/// The kernel levels this CPU runs for panels whose lowest kernel is `min`.
fn panel_levels(min: CpuLevel) -> Vec<CpuLevel> {
    cpu_level().with_lower_levels().into_iter().filter(|&level| level >= min).collect()
}

/// How far a kernel may differ from the reference per output `[m][rows]`: the kernels and the reference multiply
/// the same integers and differ only in the order of their f32 sums, so the difference is a few roundings of the
/// sum of the terms' sizes, `Σ |w| · (|x| + the activation's quantization step)`; a wrong value or layout is off by
/// whole terms.
fn bounds(rows: usize, cols: usize, m: usize, input: &[f32], row: impl Fn(usize) -> Vec<f32>) -> Vec<f32> {
    let weights: Vec<Vec<f32>> = (0..rows).map(row).collect();
    let mut bound = vec![0f32; m * rows];
    for i in 0..m {
        let x = &input[i * cols..(i + 1) * cols];
        let largest = x.iter().fold(0f32, |a, v| a.max(v.abs()));
        for (r, w) in weights.iter().enumerate() {
            let size: f32 = w.iter().zip(x).map(|(w, x)| w.abs() * (x.abs() + largest / 64.0)).sum();
            bound[i * rows + r] = 1e-4 * size + 1e-5;
        }
    }
    bound
}

/// Runs `product` into an output that starts as NaN and compares it with `reference` within `bound`.
fn check(name: &str, level: CpuLevel, reference: &[f32], bound: &[f32], product: impl FnOnce(&mut [f32])) {
    let mut out = vec![f32::NAN; reference.len()];
    product(&mut out);
    for (k, ((fast, slow), bound)) in out.iter().zip(reference).zip(bound).enumerate() {
        assert!((fast - slow).abs() <= *bound, "{name} {level:?}: output {k} is {fast}, the reference {slow}");
    }
}

fn fuzz_attention(header: &[u8], bytes: &mut Cycle) {
    let n_kv_head = 1 + usize::from(header[1]) % 3;
    let n_head = n_kv_head * (1 + usize::from(header[2]) % 4);
    let head_dim = 1 + usize::from(header[3]) % 80;
    let seq = 1 + usize::from(header[4]) % 6;
    let pos = usize::from(header[5]) % 70;
    // Rows may sit apart in a wider buffer, as in the KV cache.
    let pos_stride = head_dim + usize::from(header[6]) % 4;
    let capacity = pos + seq + usize::from(header[7]) % 3;
    let head_stride = capacity * pos_stride;
    let offset = usize::from(header[7] >> 4);
    // Exactly to the end of the last row the call may read.
    let len = offset + (n_kv_head - 1) * head_stride + (pos + seq - 1) * pos_stride + head_dim;
    let q = bytes.values(n_head * seq * head_dim, 64.0);
    let k = bytes.values(len, 64.0);
    let v = bytes.values(len, 64.0);
    let dims = AttentionDims { n_head, n_kv_head, head_dim, seq, pos };
    let rows = |data| KvRows { data, offset, head_stride, pos_stride };
    let scale = 0.125;
    let mut out = vec![f32::NAN; n_head * seq * head_dim];
    attend(&q, rows(&k), rows(&v), dims, scale, &mut out);
    // The textbook computation in f64.
    let n_rep = n_head / n_kv_head;
    for h in 0..n_head {
        let start = offset + (h / n_rep) * head_stride;
        fn row(buf: &[f32], start: usize, j: usize, pos_stride: usize, head_dim: usize) -> &[f32] {
            &buf[start + j * pos_stride..][..head_dim]
        }
        for i in 0..seq {
            let query = &q[(h * seq + i) * head_dim..][..head_dim];
            let scores: Vec<f64> = (0..=pos + i)
                .map(|j| {
                    let dot: f64 = query
                        .iter()
                        .zip(row(&k, start, j, pos_stride, head_dim))
                        .map(|(&a, &b)| f64::from(a) * f64::from(b))
                        .sum();
                    dot * f64::from(scale)
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            let mut sums = vec![0f64; head_dim];
            for (j, weight) in weights.iter().enumerate() {
                for (sum, &x) in sums.iter_mut().zip(row(&v, start, j, pos_stride, head_dim)) {
                    *sum += weight * f64::from(x);
                }
            }
            for (d, sum) in sums.iter().enumerate() {
                let (ours, value) = (f64::from(out[(i * n_head + h) * head_dim + d]), sum / total);
                assert!((ours - value).abs() < 1e-4, "{dims:?}: head {h}, row {i}, value {d}: {ours} vs {value}");
            }
        }
    }
}
