//! Q4_0 and Q4_1 weight matrices (four-bit values, an f16 scale per 32, Q4_1 also an f16 minimum) and their matmul
//! against f32 activations, in llama.cpp's arithmetic on AVX2 CPUs, step for step.
//!
//! llama.cpp quantizes the activations to int8 per 32 (Q8_0 for Q4_0; Q8_1 for Q4_1, which also keeps each block's
//! scaled sum for the minimum's term), then per weight row and block adds eight lanes of four products each into
//! eight f32 accumulators, sums them in a fixed tree and (Q4_1) adds the minimums' terms summed apart. This module
//! does the same operations in the same order, so each output equals llama.cpp's bit for bit, given the same input:
//! SmolLM2's greedy text drifted from llama.cpp's on candle's Q4_1 route, whose activation sums are rounded
//! differently (docs/models.md). The file's blocks are kept as they are (18 or 20 bytes per 32 weights, the f16
//! scale and minimum beside their nibbles), in rows: widening the scales and minimums to f32 at load took 24 bytes
//! per 32 on Q4_1, a fifth more memory and a fifth more bytes for every decode step to read, for no change in any
//! value (f16 → f32 is exact, and the kernel widens them as it goes).

use candle_core::quantized::GgmlDType;

use crate::Result;

/// Values per quantization block.
pub const BLOCK: usize = 32;

/// Which of the two four-bit types a matrix holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Q4Kind {
    /// `w = d · (q − 8)`.
    Q4_0,
    /// `w = d · q + m`.
    Q4_1,
}

impl Q4Kind {
    /// GGUF bytes of one block: f16 scale (and f16 minimum), 16 bytes of nibbles.
    pub(crate) const fn block_bytes(self) -> usize {
        match self {
            Self::Q4_0 => 2 + BLOCK / 2,
            Self::Q4_1 => 4 + BLOCK / 2,
        }
    }

    /// Where a block's 16 nibble bytes start, after its f16 scale (and minimum).
    pub(crate) const fn nibbles_at(self) -> usize {
        self.block_bytes() - BLOCK / 2
    }

    fn dtype(self) -> GgmlDType {
        match self {
            Self::Q4_0 => GgmlDType::Q4_0,
            Self::Q4_1 => GgmlDType::Q4_1,
        }
    }
}

/// A `[rows, cols]` Q4_0 or Q4_1 matrix, rows = output features, cols = input width (a multiple of 32).
#[derive(Debug)]
pub struct Q4Matrix {
    kind: Q4Kind,
    rows: usize,
    cols: usize,
    /// `[rows][cols / 32]` blocks as in the file: f16 scale, (Q4_1) f16 minimum, 16 nibble bytes (value `j < 16`
    /// is the low nibble of byte `j`, value `j + 16` its high nibble).
    blocks: Vec<u8>,
}

/// Activation rows quantized as llama.cpp's AVX2 `quantize_row_q8_1` does (and, without the sums,
/// `quantize_row_q8_0`).
#[derive(Debug, Default)]
pub struct Q8Acts {
    /// `[rows][cols]` int8 values.
    pub quants: Vec<i8>,
    /// `[rows][cols / 32]` block scales, rounded to f16.
    pub scales: Vec<f32>,
    /// `[rows][cols / 32]` `d · Σ q` rounded to f16, `d` unrounded (Q8_1's `s`).
    pub sums: Vec<f32>,
}

/// Quantizes `values` (`[rows][cols]`, `cols` a multiple of 32) into `out` as llama.cpp does on AVX2 CPUs:
/// per block `d = amax / 127`, `q = round_ties_even(x · (127 / amax))`, `d` kept as f16 and `s = f16(d · Σ q)`.
pub fn quantize_q8_1(values: &[f32], out: &mut Q8Acts) {
    quantize_q8_1_at(super::cpu_level(), values, out);
}

/// `quantize_q8_1` on the code for `level` (at most `cpu_level()`): on AVX2 eight values an instruction, the same
/// bits as the scalar loop. Every matmul's input passes through here on one thread, and the scalar loop's
/// `round_ties_even` is a libm call per value: 3 % of a prefill's samples went to `rintf` alone.
pub fn quantize_q8_1_at(level: super::CpuLevel, values: &[f32], out: &mut Q8Acts) {
    debug_assert_eq!(values.len() % BLOCK, 0);
    let blocks = values.len() / BLOCK;
    out.quants.resize(values.len(), 0);
    out.scales.resize(blocks, 0.0);
    out.sums.resize(blocks, 0.0);
    for (b, (src, dst)) in values.chunks_exact(BLOCK).zip(out.quants.chunks_exact_mut(BLOCK)).enumerate() {
        #[cfg(target_arch = "x86_64")]
        let (d, sum) = if level >= super::CpuLevel::Avx2 {
            // SAFETY: `level` is at most `cpu_level()` (the callers check), so the CPU has AVX2 and FMA; both
            // slices are one block long.
            unsafe { super::q4_avx2::quantize_q8_1_block(src, dst) }
        } else {
            quantize_q8_1_block(src, dst)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let (d, sum) = {
            let _ = level;
            quantize_q8_1_block(src, dst)
        };
        out.scales[b] = half::f16::from_f32(d).to_f32();
        out.sums[b] = half::f16::from_f32(d * sum as f32).to_f32();
    }
}

/// One block of `quantize_q8_1`, one value at a time: its `d` (before the f16 rounding) and `Σ q`.
fn quantize_q8_1_block(src: &[f32], dst: &mut [i8]) -> (f32, i32) {
    let amax = src.iter().fold(0f32, |m, x| m.max(x.abs()));
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut sum = 0i32;
    for (q, &x) in dst.iter_mut().zip(src) {
        // |x · id| ≤ 127 up to rounding, so the conversion does not saturate.
        let v = (x * id).round_ties_even() as i32;
        *q = v as i8;
        sum += v;
    }
    (d, sum)
}

impl Q4Matrix {
    /// Builds the matrix from GGUF Q4_0 or Q4_1 block bytes.
    pub fn from_gguf_bytes(kind: Q4Kind, rows: usize, cols: usize, bytes: &[u8]) -> Result<Self> {
        super::check_layout(rows, cols, bytes.len(), BLOCK, kind.block_bytes(), kind.dtype())?;
        Ok(Self { kind, rows, cols, blocks: bytes.to_vec() })
    }

    /// Which type it holds.
    pub fn kind(&self) -> Q4Kind {
        self.kind
    }

    /// The kernel's name in logs and tests, by the type it holds.
    pub fn kernel_name(&self) -> &'static str {
        match self.kind {
            Q4Kind::Q4_0 => "tandem-q4_0",
            Q4Kind::Q4_1 => "tandem-q4_1",
        }
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `r`'s blocks, `kind().block_bytes()` each, as in the file.
    pub(crate) fn row_blocks(&self, r: usize) -> &[u8] {
        let row_bytes = self.cols / BLOCK * self.kind.block_bytes();
        &self.blocks[r * row_bytes..(r + 1) * row_bytes]
    }

    /// Block `b` of row `r`.
    fn block(&self, r: usize, b: usize) -> &[u8] {
        let bytes = self.kind.block_bytes();
        &self.row_blocks(r)[b * bytes..(b + 1) * bytes]
    }

    /// Block `b` of row `r`'s scale, widened from the file's f16 (exactly).
    fn scale(&self, r: usize, b: usize) -> f32 {
        let block = self.block(r, b);
        half::f16::from_le_bytes([block[0], block[1]]).to_f32()
    }

    /// Block `b` of row `r`'s minimum (Q4_1 only), widened from the file's f16 (exactly).
    fn min(&self, r: usize, b: usize) -> f32 {
        debug_assert_eq!(self.kind, Q4Kind::Q4_1);
        let block = self.block(r, b);
        half::f16::from_le_bytes([block[2], block[3]]).to_f32()
    }

    /// Value `j` of block `b` of row `r` as its unsigned nibble (0–15).
    fn nibble(&self, r: usize, b: usize, j: usize) -> u8 {
        let byte = self.block(r, b)[self.kind.nibbles_at() + j % (BLOCK / 2)];
        if j < BLOCK / 2 {
            byte & 0x0F
        } else {
            byte >> 4
        }
    }

    /// Row `r` as f32.
    pub fn dequantize_row(&self, r: usize) -> Vec<f32> {
        let kb = self.cols / BLOCK;
        let mut out = Vec::with_capacity(self.cols);
        for b in 0..kb {
            let d = self.scale(r, b);
            for j in 0..BLOCK {
                let q = f32::from(self.nibble(r, b, j));
                out.push(match self.kind {
                    Q4Kind::Q4_0 => (q - 8.0) * d,
                    Q4Kind::Q4_1 => q * d + self.min(r, b),
                });
            }
        }
        out
    }

    /// `out[i][r] = Σ_c input[i][c] · W[r][c]` for `m` input rows (`input` `[m][cols]`, `out` `[m][rows]`), on the
    /// fastest kernel this CPU has.
    pub fn matmul(&self, input: &[f32], m: usize, out: &mut [f32]) {
        self.matmul_at(super::cpu_level(), input, m, out);
    }

    /// `matmul` on the kernel for `level` (at most `cpu_level()`; `Portable` is the scalar reference).
    pub fn matmul_at(&self, level: super::CpuLevel, input: &[f32], m: usize, out: &mut [f32]) {
        self.product(level, input, m, out, super::RowTiles::All);
    }

    /// One input row's product with the weight rows `rows` only (ascending), into those rows of `out`, with the
    /// bits `matmul` gives them.
    pub fn matvec_rows(&self, input: &[f32], rows: &[u32], out: &mut [f32]) {
        let runs: Vec<_> = super::runs_of_rows(rows, self.rows).collect();
        self.product(super::cpu_level(), input, 1, out, super::RowTiles::Only(&runs));
    }

    fn product(&self, level: super::CpuLevel, input: &[f32], m: usize, out: &mut [f32], tiles: super::RowTiles<'_>) {
        assert!(level <= super::cpu_level(), "{level:?} kernels on a {:?} CPU", super::cpu_level());
        assert_eq!(input.len(), m * self.cols, "input is [m][cols]");
        assert_eq!(out.len(), m * self.rows, "out is [m][rows]");
        ACTIVATIONS.with(|cell| {
            let mut acts = cell.borrow_mut();
            quantize_q8_1_at(level, input, &mut acts);
            let acts = &*acts;
            super::for_some_row_tiles(tiles, self.rows, out, |rows, out| {
                #[cfg(target_arch = "x86_64")]
                if level >= super::CpuLevel::Avx2 {
                    // SAFETY: `level` is at most `cpu_level()` (asserted above), and a level of `Avx2` or more means
                    // runtime detection found AVX2, FMA and F16C. (AVX-512 CPUs run this kernel too.)
                    return unsafe { super::q4_avx2::rows_kernel(self, acts, m, rows, out) };
                }
                reference_rows(self, acts, m, rows, out);
            });
        });
    }
}

thread_local! {
    /// The quantized activations of the current matmul, reused so a decode step allocates nothing.
    static ACTIVATIONS: std::cell::RefCell<Q8Acts> = std::cell::RefCell::new(Q8Acts::default());
}

/// The scalar definition the AVX2 kernel must match bit for bit: llama.cpp's `ggml_vec_dot_q4_0_q8_0` and
/// `ggml_vec_dot_q4_1_q8_1` on AVX2. Lane `l` of a block holds the exact integer `Σ_{j=4l}^{4l+3} q_j · a_j`
/// (Q4_0: `q − 8`); each lane accumulates `fma(d_w · d_a, lane, acc)` over the blocks; the lanes are summed as
/// `((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))`; Q4_1 then adds `Σ fma(m, s)` over the blocks.
pub fn reference_rows(w: &Q4Matrix, acts: &Q8Acts, m: usize, rows: std::ops::Range<usize>, out: &mut [f32]) {
    let kb = w.cols / BLOCK;
    for i in 0..m {
        let a_quants = &acts.quants[i * w.cols..(i + 1) * w.cols];
        let (a_scales, a_sums) = (&acts.scales[i * kb..(i + 1) * kb], &acts.sums[i * kb..(i + 1) * kb]);
        for r in rows.clone() {
            let mut acc = [0f32; 8];
            let mut mins = 0f32;
            for b in 0..kb {
                let d = w.scale(r, b) * a_scales[b];
                for (l, lane) in acc.iter_mut().enumerate() {
                    let dot: i32 = (4 * l..4 * l + 4)
                        .map(|j| {
                            let q = i32::from(w.nibble(r, b, j));
                            let q = if w.kind == Q4Kind::Q4_0 { q - 8 } else { q };
                            q * i32::from(a_quants[b * BLOCK + j])
                        })
                        .sum();
                    *lane = d.mul_add(dot as f32, *lane);
                }
                if w.kind == Q4Kind::Q4_1 {
                    mins = w.min(r, b).mul_add(a_sums[b], mins);
                }
            }
            let lanes = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
            out[i * w.rows + r] = if w.kind == Q4Kind::Q4_1 { lanes + mins } else { lanes };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::QTensor;
    use candle_core::{Device, Tensor};

    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0
            })
            .collect()
    }

    /// A `[rows, cols]` matrix quantized by candle to `kind`, as ours and as candle's tensor.
    fn matrix(kind: Q4Kind, rows: usize, cols: usize) -> (Q4Matrix, QTensor) {
        let t = Tensor::from_vec(values(rows * cols, 0x9E37_79B9_7F4A_7C15), (rows, cols), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&t, kind.dtype()).unwrap();
        (Q4Matrix::from_gguf_bytes(kind, rows, cols, &q.data().unwrap()).unwrap(), q)
    }

    /// Every kernel this CPU runs gives the scalar reference's bits, on full tiles, a ragged edge, one row.
    #[test]
    fn kernels_match_the_scalar_reference_bit_for_bit() {
        for kind in [Q4Kind::Q4_0, Q4Kind::Q4_1] {
            let (rows, cols) = (37, 576);
            let (w, _) = matrix(kind, rows, cols);
            for m in [1, 2, 3, 7] {
                let input = values(m * cols, 42 + m as u64);
                let mut expected = vec![0f32; m * rows];
                w.matmul_at(crate::kernels::CpuLevel::Portable, &input, m, &mut expected);
                for level in crate::kernels::cpu_level().with_lower_levels() {
                    let mut got = vec![f32::NAN; m * rows];
                    w.matmul_at(level, &input, m, &mut got);
                    let same = got.iter().zip(&expected).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{kind:?} m={m} {level:?}: {:?} vs {:?}", &got[..4], &expected[..4]);
                }
                // Picked rows get the same bits as the whole product.
                if m == 1 {
                    let picked = [0u32, 5, 6, 7, 36];
                    let mut part = vec![0f32; rows];
                    w.matvec_rows(&input, &picked, &mut part);
                    let mut all = vec![0f32; rows];
                    w.matmul(&input, 1, &mut all);
                    for &r in &picked {
                        assert_eq!(part[r as usize].to_bits(), all[r as usize].to_bits(), "{kind:?} row {r}");
                    }
                }
            }
        }
    }

    /// The product is the matrix's own (dequantized, as candle dequantizes it) times the input, up to the 8-bit
    /// rounding of the activations; a wrong nibble order, scale or minimum misses by far more.
    #[test]
    fn products_match_candles_dequantized_matmul() {
        for kind in [Q4Kind::Q4_0, Q4Kind::Q4_1] {
            let (rows, cols, m) = (24, 1536, 3);
            let (w, q) = matrix(kind, rows, cols);
            let dense = q.dequantize(&Device::Cpu).unwrap();
            let ours_rows: Vec<f32> = (0..rows).flat_map(|r| w.dequantize_row(r)).collect();
            assert_eq!(dense.flatten_all().unwrap().to_vec1::<f32>().unwrap(), ours_rows, "{kind:?} dequantized");
            let input = values(m * cols, 7);
            let x = Tensor::from_vec(input.clone(), (m, cols), &Device::Cpu).unwrap();
            let expected = x.matmul(&dense.t().unwrap()).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let mut got = vec![0f32; m * rows];
            w.matmul(&input, m, &mut got);
            let norm = expected.iter().map(|v| v * v).sum::<f32>().sqrt();
            let diff = got.iter().zip(&expected).map(|(a, b)| (a - b) * (a - b)).sum::<f32>().sqrt();
            assert!(diff < 5e-3 * norm, "{kind:?}: relative error {}", diff / norm);
        }
    }

    /// Q8_1 sums are `f16(d · Σ q)` with `d` before its f16 rounding, and halves round to even, as llama.cpp's.
    #[test]
    fn activations_quantize_as_llama_cpp_does() {
        let mut block: Vec<f32> = (0..BLOCK).map(|j| j as f32 * 0.25 - 3.0).collect();
        block[0] = 127.0; // id = 1: x · id keeps the exact halves below
        block[1] = 2.5;
        block[2] = -3.5;
        for level in
            [crate::kernels::CpuLevel::Portable].into_iter().chain(crate::kernels::cpu_level().with_lower_levels())
        {
            let mut acts = Q8Acts::default();
            quantize_q8_1_at(level, &block, &mut acts);
            assert_eq!(&acts.quants[..3], &[127, 2, -4], "{level:?}");
            let sum: i32 = acts.quants.iter().map(|&q| i32::from(q)).sum();
            assert_eq!(acts.scales[0], 1.0, "{level:?}");
            assert_eq!(acts.sums[0], half::f16::from_f32(sum as f32).to_f32(), "{level:?}");
        }
    }

    /// The vector quantization gives the scalar loop's values, scales and sums, on rows with an all-zero block.
    #[test]
    fn activation_quantization_is_the_same_at_every_level() {
        let mut input = values(4 * 576, 3);
        input[64..96].fill(0.0);
        let mut expected = Q8Acts::default();
        quantize_q8_1_at(crate::kernels::CpuLevel::Portable, &input, &mut expected);
        for level in crate::kernels::cpu_level().with_lower_levels() {
            let mut got = Q8Acts::default();
            quantize_q8_1_at(level, &input, &mut got);
            assert_eq!(got.quants, expected.quants, "{level:?}");
            assert_eq!(got.scales, expected.scales, "{level:?}");
            assert_eq!(got.sums, expected.sums, "{level:?}");
        }
    }
}
