//! Q4_K, Q5_K and Q6_K weight matrices in a row layout, their scalar reference products, and the matmul driver.
//! CPUs with our kernels load Q4_K and Q5_K as panels (`panels`), and AVX-512 VNNI ones Q6_K too; the row layout
//! serves the AVX2 Q6_K kernel, the reference, and the panels' conversions.
//!
//! The layouts keep the files' bit packing (so a decode step reads about as many bytes as llama.cpp does) and
//! unpack only what a kernel would otherwise redo for every activation row: Q4_K's twelve bytes of 6-bit scales
//! and minimums become eight of each, and the f16 super-block scales become f32 (152 bytes per 256 weights
//! instead of 144; Q6_K 212 instead of 210).

use candle_core::quantized::{GgmlDType, QTensor};

use super::k_acts::{KActivations, K_ACTIVATIONS, SUPER};
use crate::Result;

/// 256 Q4_K weights: value `l` of sub-block `s` (32 values each) is `d · scales[s] · q − dmin · mins[s]`, where
/// `q` is the low nibble of `qs[32 · (s / 2) + l]` for even `s` and its high nibble for odd `s`.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct Q4KBlock {
    pub d: f32,
    pub dmin: f32,
    pub scales: [u8; 8],
    pub mins: [u8; 8],
    pub qs: [u8; 128],
}

/// 256 Q5_K weights: Q4_K's with a fifth bit, value `l` of sub-block `s` being `d · scales[s] · (q + 16 · h) −
/// dmin · mins[s]` where `q` is as in Q4_K and `h` is bit `s` of `qh[l]` (GGUF's layout, unchanged).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct Q5KBlock {
    pub d: f32,
    pub dmin: f32,
    pub scales: [u8; 8],
    pub mins: [u8; 8],
    pub qh: [u8; 32],
    pub qs: [u8; 128],
}

/// 256 Q6_K weights in 16 groups of 16, value = `d · scales[group] · (q − 32)` with 6-bit `q`: for half `h` (128
/// values) and `l < 32`, values `l`, `l + 32`, `l + 64`, `l + 96` take their low four bits from the low nibble of
/// `ql[64h + l]`, of `ql[64h + l + 32]`, the high nibble of `ql[64h + l]`, of `ql[64h + l + 32]`, and their top
/// two bits from bits 0–1, 2–3, 4–5, 6–7 of `qh[32h + l]` (GGUF's layout, unchanged).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct Q6KBlock {
    pub d: f32,
    pub scales: [i8; 16],
    pub ql: [u8; 128],
    pub qh: [u8; 64],
}

/// A `[rows, cols]` matrix of K-quant super-blocks (`cols` a multiple of 256), row-major.
#[derive(Debug)]
pub struct KMatrix<B> {
    rows: usize,
    cols: usize,
    blocks: Vec<B>,
}

/// Q4_K weights.
pub type Q4KMatrix = KMatrix<Q4KBlock>;
/// Q5_K weights.
pub type Q5KMatrix = KMatrix<Q5KBlock>;
/// Q6_K weights.
pub type Q6KMatrix = KMatrix<Q6KBlock>;

/// A SIMD kernel: output columns `rows` of `m` activation rows (unsafe: needs its instruction sets).
type RowsKernel<B> = unsafe fn(&KMatrix<B>, &KActivations, usize, std::ops::Range<usize>, &mut [f32]);

pub(super) const Q4K_FILE_BYTES: usize = 144;
pub(super) const Q5K_FILE_BYTES: usize = 176;
pub(super) const Q6K_FILE_BYTES: usize = 210;

impl<B> KMatrix<B> {
    /// Output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `r`'s super-blocks.
    pub(crate) fn row(&self, r: usize) -> &[B] {
        let per_row = self.cols / SUPER;
        &self.blocks[r * per_row..(r + 1) * per_row]
    }

    /// Quantizes `input` per 256 and runs `fast`, the kernel for `level` (the scalar reference where there is
    /// none), over the weight rows `tiles` names: all of them in tiles on the CPU pool, or some runs of them on the
    /// calling thread (every kernel computes a weight row alone, the same way whatever rows share the call, so a
    /// row has the same bits either way).
    #[allow(clippy::too_many_arguments)]
    fn matmul_by(
        &self,
        level: super::CpuLevel,
        input: &[f32],
        m: usize,
        out: &mut [f32],
        fast: Option<RowsKernel<B>>,
        dequantize_row: fn(&Self, usize) -> Vec<f32>,
        tiles: super::RowTiles<'_>,
    ) where
        B: Sync,
    {
        assert!(level <= super::cpu_level(), "{level:?} kernels on a {:?} CPU", super::cpu_level());
        assert_eq!(input.len(), m * self.cols, "input is [m][cols]");
        assert_eq!(out.len(), m * self.rows, "out is [m][rows]");
        K_ACTIVATIONS.with(|cell| {
            let mut acts = cell.borrow_mut();
            acts.quantize(input, self.cols);
            let acts = &*acts;
            super::for_some_row_tiles(tiles, self.rows, out, |rows, out| match fast {
                // SAFETY: `fast` is the kernel for `level`, which `cpu_level` found on this CPU.
                Some(kernel) => unsafe { kernel(self, acts, m, rows, out) },
                None => reference_rows(self, acts, m, rows, out, dequantize_row),
            });
        });
    }

    fn from_file_blocks(
        tensor: &QTensor,
        dtype: GgmlDType,
        file_bytes: usize,
        unpack: impl Fn(&[u8]) -> B,
    ) -> Result<Self> {
        let (rows, cols, bytes) = super::tensor_bytes(tensor, dtype)?;
        Self::from_bytes(rows, cols, &bytes, dtype, file_bytes, unpack)
    }

    fn from_bytes(
        rows: usize,
        cols: usize,
        bytes: &[u8],
        dtype: GgmlDType,
        file_bytes: usize,
        unpack: impl Fn(&[u8]) -> B,
    ) -> Result<Self> {
        super::check_layout(rows, cols, bytes.len(), SUPER, file_bytes, dtype)?;
        Ok(Self { rows, cols, blocks: bytes.chunks_exact(file_bytes).map(unpack).collect() })
    }
}

fn f16_at(bytes: &[u8], at: usize) -> f32 {
    half::f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

impl Q4KMatrix {
    /// Copies a 2-D Q4_K `QTensor` (`[out, in]`) into our layout.
    pub fn from_qtensor(tensor: &QTensor) -> Result<Self> {
        Self::from_file_blocks(tensor, GgmlDType::Q4K, Q4K_FILE_BYTES, unpack_q4k)
    }

    /// From GGUF Q4_K bytes (`f16 d, f16 dmin, 12 bytes of 6-bit scales and minimums, 128 bytes of nibbles`).
    pub fn from_gguf_bytes(rows: usize, cols: usize, bytes: &[u8]) -> Result<Self> {
        Self::from_bytes(rows, cols, bytes, GgmlDType::Q4K, Q4K_FILE_BYTES, unpack_q4k)
    }

    /// Row `r` as f32.
    pub fn dequantize_row(&self, r: usize) -> Vec<f32> {
        dequantize_q4k_blocks(self.row(r))
    }

    /// `out[i][r] = Σ_c input[i][c] · W[r][c]` with the input quantized per 256 (`input` `[m][cols]`).
    pub fn matmul(&self, input: &[f32], m: usize, out: &mut [f32]) {
        self.matmul_at(super::cpu_level(), input, m, out);
    }

    /// `matmul` at `level` (at most `cpu_level()`), on the scalar reference: every CPU with kernels of ours loads
    /// Q4_K weights as panels (`Q4KPanels`, AVX2 and AVX-512 VNNI kernels), so the row layout serves the reference
    /// and the panels' conversions only.
    pub fn matmul_at(&self, level: super::CpuLevel, input: &[f32], m: usize, out: &mut [f32]) {
        self.matmul_by(level, input, m, out, None, Self::dequantize_row, super::RowTiles::All);
    }
}

/// ggml's 6-bit scale and minimum of sub-block `j` from a Q4_K block's 12 packed bytes.
pub(super) fn scale_min_k4(j: usize, packed: &[u8]) -> (u8, u8) {
    if j < 4 {
        (packed[j] & 63, packed[j + 4] & 63)
    } else {
        ((packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4), (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4))
    }
}

/// The inverse of `scale_min_k4`: eight 6-bit scales and minimums packed into a K-quant block's 12 bytes.
pub(super) fn pack_scale_min_k4(scales: &[u8; 8], mins: &[u8; 8]) -> [u8; 12] {
    let mut packed = [0u8; 12];
    for j in 0..4 {
        let (scale_high, min_high) = (scales[j + 4], mins[j + 4]);
        packed[j] = scales[j] | (scale_high >> 4) << 6;
        packed[j + 4] = mins[j] | (min_high >> 4) << 6;
        packed[j + 8] = (scale_high & 0x0F) | (min_high & 0x0F) << 4;
    }
    packed
}

/// Super-blocks as f32 values, in order.
pub(super) fn dequantize_q4k_blocks(blocks: &[Q4KBlock]) -> Vec<f32> {
    let mut values = Vec::with_capacity(blocks.len() * SUPER);
    for block in blocks {
        for s in 0..8 {
            let (scale, min) = (block.d * f32::from(block.scales[s]), block.dmin * f32::from(block.mins[s]));
            let chunk = &block.qs[32 * (s / 2)..32 * (s / 2 + 1)];
            let shift = 4 * (s % 2);
            values.extend(chunk.iter().map(|&q| scale * f32::from((q >> shift) & 0x0F) - min));
        }
    }
    values
}

/// A GGUF Q4_K block (144 bytes) in our layout.
pub(super) fn unpack_q4k(bytes: &[u8]) -> Q4KBlock {
    let packed = &bytes[4..16];
    let mut block =
        Q4KBlock { d: f16_at(bytes, 0), dmin: f16_at(bytes, 2), scales: [0; 8], mins: [0; 8], qs: [0; 128] };
    for j in 0..8 {
        (block.scales[j], block.mins[j]) = scale_min_k4(j, packed);
    }
    block.qs.copy_from_slice(&bytes[16..144]);
    block
}

impl Q5KMatrix {
    /// Copies a 2-D Q5_K `QTensor` (`[out, in]`) into our layout.
    pub fn from_qtensor(tensor: &QTensor) -> Result<Self> {
        Self::from_file_blocks(tensor, GgmlDType::Q5K, Q5K_FILE_BYTES, unpack_q5k)
    }

    /// From GGUF Q5_K bytes (`f16 d, f16 dmin, 12 bytes of 6-bit scales and minimums, 32 bytes of fifth bits, 128
    /// bytes of nibbles`).
    pub fn from_gguf_bytes(rows: usize, cols: usize, bytes: &[u8]) -> Result<Self> {
        Self::from_bytes(rows, cols, bytes, GgmlDType::Q5K, Q5K_FILE_BYTES, unpack_q5k)
    }

    /// Row `r` as f32.
    pub fn dequantize_row(&self, r: usize) -> Vec<f32> {
        dequantize_q5k_blocks(self.row(r))
    }

    /// `out[i][r] = Σ_c input[i][c] · W[r][c]` with the input quantized per 256 (`input` `[m][cols]`).
    pub fn matmul(&self, input: &[f32], m: usize, out: &mut [f32]) {
        self.matmul_at(super::cpu_level(), input, m, out);
    }

    /// `matmul` at `level` (at most `cpu_level()`), on the scalar reference: as for Q4_K, every CPU with kernels of
    /// ours loads Q5_K weights as panels (`Q5KPanels`).
    pub fn matmul_at(&self, level: super::CpuLevel, input: &[f32], m: usize, out: &mut [f32]) {
        self.matmul_by(level, input, m, out, None, Self::dequantize_row, super::RowTiles::All);
    }
}

/// Super-blocks as f32 values, in order.
pub(super) fn dequantize_q5k_blocks(blocks: &[Q5KBlock]) -> Vec<f32> {
    let mut values = Vec::with_capacity(blocks.len() * SUPER);
    for block in blocks {
        for s in 0..8 {
            let (scale, min) = (block.d * f32::from(block.scales[s]), block.dmin * f32::from(block.mins[s]));
            let chunk = &block.qs[32 * (s / 2)..32 * (s / 2 + 1)];
            let shift = 4 * (s % 2);
            values.extend(chunk.iter().zip(&block.qh).map(|(&q, &h)| {
                let q = ((q >> shift) & 0x0F) | (((h >> s) & 1) << 4);
                scale * f32::from(q) - min
            }));
        }
    }
    values
}

/// A GGUF Q5_K block (176 bytes) in our layout.
pub(super) fn unpack_q5k(bytes: &[u8]) -> Q5KBlock {
    let packed = &bytes[4..16];
    let mut block = Q5KBlock {
        d: f16_at(bytes, 0),
        dmin: f16_at(bytes, 2),
        scales: [0; 8],
        mins: [0; 8],
        qh: [0; 32],
        qs: [0; 128],
    };
    for j in 0..8 {
        (block.scales[j], block.mins[j]) = scale_min_k4(j, packed);
    }
    block.qh.copy_from_slice(&bytes[16..48]);
    block.qs.copy_from_slice(&bytes[48..176]);
    block
}

impl Q6KMatrix {
    /// Copies a 2-D Q6_K `QTensor` (`[out, in]`) into our layout.
    pub fn from_qtensor(tensor: &QTensor) -> Result<Self> {
        Self::from_file_blocks(tensor, GgmlDType::Q6K, Q6K_FILE_BYTES, unpack_q6k)
    }

    /// From GGUF Q6_K bytes (`128 bytes ql, 64 bytes qh, 16 int8 scales, f16 d`).
    pub fn from_gguf_bytes(rows: usize, cols: usize, bytes: &[u8]) -> Result<Self> {
        Self::from_bytes(rows, cols, bytes, GgmlDType::Q6K, Q6K_FILE_BYTES, unpack_q6k)
    }

    /// Row `r` as f32.
    pub fn dequantize_row(&self, r: usize) -> Vec<f32> {
        dequantize_q6k_blocks(self.row(r))
    }

    /// `out[i][r] = Σ_c input[i][c] · W[r][c]` with the input quantized per 256 (`input` `[m][cols]`).
    pub fn matmul(&self, input: &[f32], m: usize, out: &mut [f32]) {
        self.matmul_at(super::cpu_level(), input, m, out);
    }

    /// `matmul` on the kernel for `level` (at most `cpu_level()`: tests run every kernel the CPU can).
    pub fn matmul_at(&self, level: super::CpuLevel, input: &[f32], m: usize, out: &mut [f32]) {
        self.matmul_by(level, input, m, out, Self::kernel_for(level), Self::dequantize_row, super::RowTiles::All);
    }

    /// One input row's product with the weight rows `rows` only (ascending, each below `rows()`), written to
    /// those rows of `out` (`[rows()]`, the rest untouched), with the bits `matmul` gives them: a decoding step
    /// whose grammar allows few tokens needs only their logits.
    pub fn matvec_rows(&self, input: &[f32], rows: &[u32], out: &mut [f32]) {
        self.matvec_rows_at(super::cpu_level(), input, rows, out);
    }

    /// `matvec_rows` on the kernel for `level` (at most `cpu_level()`).
    pub fn matvec_rows_at(&self, level: super::CpuLevel, input: &[f32], rows: &[u32], out: &mut [f32]) {
        let runs: Vec<_> = super::runs_of_rows(rows, self.rows).collect();
        let tiles = super::RowTiles::Only(&runs);
        self.matmul_by(level, input, 1, out, Self::kernel_for(level), Self::dequantize_row, tiles);
    }

    /// The fast kernel for `level`; none (the scalar reference) below AVX2. As for Q4_K, AVX-512 VNNI CPUs load
    /// Q6_K weights as panels (`Q6KPanels`), so this one serves them only in tests.
    fn kernel_for(level: super::CpuLevel) -> Option<RowsKernel<Q6KBlock>> {
        match level {
            #[cfg(target_arch = "x86_64")]
            super::CpuLevel::Avx512Vnni | super::CpuLevel::AvxVnni | super::CpuLevel::Avx2 => {
                Some(super::kquants_avx2::q6k_rows)
            }
            _ => None,
        }
    }
}

/// Super-blocks as f32 values, in order.
pub(super) fn dequantize_q6k_blocks(blocks: &[Q6KBlock]) -> Vec<f32> {
    let mut values = vec![0f32; blocks.len() * SUPER];
    for (block, out) in blocks.iter().zip(values.chunks_exact_mut(SUPER)) {
        for h in 0..2 {
            let (ql, qh) = (&block.ql[64 * h..64 * h + 64], &block.qh[32 * h..32 * h + 32]);
            for l in 0..32 {
                let q = [
                    (ql[l] & 0x0F) | ((qh[l] & 3) << 4),
                    (ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4),
                    (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
                    (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4),
                ];
                for (part, &q) in q.iter().enumerate() {
                    let at = 128 * h + 32 * part + l;
                    out[at] = block.d * f32::from(block.scales[at / 16]) * (f32::from(q) - 32.0);
                }
            }
        }
    }
    values
}

/// A GGUF Q6_K block (210 bytes) in our layout.
pub(super) fn unpack_q6k(bytes: &[u8]) -> Q6KBlock {
    let mut block = Q6KBlock { d: f16_at(bytes, 208), scales: [0; 16], ql: [0; 128], qh: [0; 64] };
    block.ql.copy_from_slice(&bytes[..128]);
    block.qh.copy_from_slice(&bytes[128..192]);
    for (scale, &byte) in block.scales.iter_mut().zip(&bytes[192..208]) {
        *scale = byte as i8;
    }
    block
}

/// The definition the fast kernels must match: dequantized weights times dequantized activations, summed in f64.
fn reference_rows<B>(
    w: &KMatrix<B>,
    acts: &KActivations,
    m: usize,
    rows: std::ops::Range<usize>,
    out: &mut [f32],
    dequantize_row: fn(&KMatrix<B>, usize) -> Vec<f32>,
) {
    for r in rows {
        let weights = dequantize_row(w, r);
        for i in 0..m {
            let (quants, scales, _) = acts.row(i, w.cols);
            let sum: f64 = weights
                .iter()
                .zip(quants)
                .enumerate()
                .map(|(c, (&wv, &q))| f64::from(wv) * f64::from(q) * f64::from(scales[c / SUPER]))
                .sum();
            out[i * w.rows + r] = sum as f32;
        }
    }
}

/// The scalar reference product of a Q4_K, Q5_K or Q6_K matrix (tests compare the fast kernels against it).
pub fn reference_matmul<B>(
    w: &KMatrix<B>,
    input: &[f32],
    m: usize,
    dequantize_row: fn(&KMatrix<B>, usize) -> Vec<f32>,
) -> Vec<f32> {
    let mut acts = KActivations::default();
    acts.quantize(input, w.cols);
    let mut out = vec![0f32; m * w.rows];
    reference_rows(w, &acts, m, 0..w.rows, &mut out, dequantize_row);
    out
}
