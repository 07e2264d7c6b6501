//! Q5_0 weight matrices kept at five bits a weight, and their matmul against int8 activations.
//!
//! The 0.5B executor stores most of its matrices as Q5_0 (22 bytes per 32 weights). Widened to int8 they cost 36
//! bytes per 32, and a decode step reads every weight once: where it is bound by memory, five bits read less.
//! Our layout repacks each row so that AVX2 rebuilds 64 weights from one 32-byte load of nibbles and a shift of a
//! shared bit plane (24 bytes per 32 weights, scales as f32):
//!
//! ```text
//! nibbles  [rows][cols / 2]        byte i of pair p: low nibble = value i of block 2p, high = value i of 2p + 1
//! high     [rows][groups][32]      bit t of byte i of group g: bit 4 of value i of block 8g + t
//! scales   [rows][cols / 32]       f32
//! ```
//!
//! Values are unsigned 0–31 and stand for `d · (v − 16)`; the −16 is settled once per row from the activations'
//! block sums. A prefill (several activation rows) unpacks a tile of weight rows to int8 once and runs the Q8_0
//! tile kernel on it, so the unpacking is paid once per tile of tokens.
//!
//! Opt-in (`TANDEM_KERNELS=q5_0`): the widened int8 layout still decoded faster, since with row kernels decode is
//! bound by instructions more than by bytes (docs/performance.md, "What was tried and dropped").

use candle_core::quantized::{GgmlDType, QTensor};

use super::q8_0::{self, QuantizedRows, BLOCK};
use crate::Result;

/// Blocks whose fifth bits share one 32-byte plane.
pub const BLOCKS_PER_GROUP: usize = 8;
/// Bytes of one GGUF Q5_0 block: an f16 scale, 32 high bits, 16 bytes of nibbles.
const GGUF_BLOCK_BYTES: usize = 2 + 4 + BLOCK / 2;
/// From this many activation rows on, a tile of weight rows is unpacked to int8 for the Q8_0 kernel.
pub const UNPACK_FROM_ROWS: usize = 4;

/// A `[rows, cols]` Q5_0 matrix (cols a multiple of 64) in our layout.
#[derive(Debug)]
pub struct Q5_0Matrix {
    rows: usize,
    cols: usize,
    nibbles: Vec<u8>,
    high: Vec<u8>,
    scales: Vec<f32>,
}

/// Activation rows for Q5_0 weights: int8 per 32 (as for Q8_0) and each block's `d · Σ q`, which pays for the
/// weights' −16.
#[derive(Debug, Default)]
pub struct Q5Activations {
    /// The int8 rows and their block scales.
    pub rows: QuantizedRows,
    /// `[rows][cols / 32]`: block scale × sum of the block's int8 values.
    pub scaled_sums: Vec<f32>,
}

impl Q5Activations {
    /// Quantizes `values` (`[m][cols]`).
    pub fn quantize(&mut self, values: &[f32], cols: usize) {
        q8_0::quantize_rows(values, cols, &mut self.rows);
        self.scaled_sums.clear();
        self.scaled_sums.extend(
            self.rows
                .quants
                .chunks_exact(BLOCK)
                .zip(&self.rows.scales)
                .map(|(q, &d)| d * q.iter().map(|&v| i32::from(v)).sum::<i32>() as f32),
        );
    }
}

impl Q5_0Matrix {
    /// Copies a 2-D Q5_0 `QTensor` (`[out, in]`) into our layout.
    pub fn from_qtensor(tensor: &QTensor) -> Result<Self> {
        let (rows, cols, bytes) = super::tensor_bytes(tensor, GgmlDType::Q5_0)?;
        Self::from_gguf_bytes(rows, cols, &bytes)
    }

    /// Whether a `[rows, cols]` Q5_0 matrix fits our layout (blocks come in pairs).
    pub fn fits(cols: usize) -> bool {
        cols.is_multiple_of(2 * BLOCK)
    }

    /// From GGUF Q5_0 bytes: per block `f16 d, u32 high bits, 16 bytes`, where value j (< 16) is the low nibble
    /// of byte j and value j + 16 its high nibble, each with bit 4 from bit j (resp. j + 16) of the high bits.
    pub fn from_gguf_bytes(rows: usize, cols: usize, bytes: &[u8]) -> Result<Self> {
        let blocks = super::check_layout(rows, cols, bytes.len(), BLOCK, GGUF_BLOCK_BYTES, GgmlDType::Q5_0)?;
        if !Self::fits(cols) {
            return Err(candle_core::Error::Msg(format!("Q5_0 width {cols} is not a multiple of 64")).into());
        }
        let kb = cols / BLOCK;
        let groups = kb.div_ceil(BLOCKS_PER_GROUP);
        let mut matrix = Self {
            rows,
            cols,
            nibbles: vec![0; rows * cols / 2],
            high: vec![0; rows * groups * 32],
            scales: Vec::with_capacity(blocks),
        };
        for (b, block) in bytes.chunks_exact(GGUF_BLOCK_BYTES).enumerate() {
            let (r, kb_in_row) = (b / kb, b % kb);
            matrix.scales.push(half::f16::from_le_bytes([block[0], block[1]]).to_f32());
            let bits = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
            let low = &block[6..];
            let nibbles = &mut matrix.nibbles[r * cols / 2 + (kb_in_row / 2) * 32..][..32];
            let plane = &mut matrix.high[(r * groups + kb_in_row / BLOCKS_PER_GROUP) * 32..][..32];
            let bit_in_plane = kb_in_row % BLOCKS_PER_GROUP;
            for i in 0..BLOCK {
                let nibble = if i < 16 { low[i] & 0x0F } else { low[i - 16] >> 4 };
                nibbles[i] |= if kb_in_row % 2 == 0 { nibble } else { nibble << 4 };
                plane[i] |= (((bits >> i) & 1) as u8) << bit_in_plane;
            }
        }
        Ok(matrix)
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `r`'s nibbles, bit planes and block scales.
    pub(crate) fn row(&self, r: usize) -> (&[u8], &[u8], &[f32]) {
        let kb = self.cols / BLOCK;
        let plane_bytes = kb.div_ceil(BLOCKS_PER_GROUP) * 32;
        (
            &self.nibbles[r * self.cols / 2..(r + 1) * self.cols / 2],
            &self.high[r * plane_bytes..(r + 1) * plane_bytes],
            &self.scales[r * kb..(r + 1) * kb],
        )
    }

    /// Row `r`'s values as unsigned 0–31 (value c stands for `d · (v − 16)`).
    pub fn unsigned_row(&self, r: usize) -> Vec<u8> {
        let (nibbles, high, _) = self.row(r);
        (0..self.cols)
            .map(|c| {
                let (block, i) = (c / BLOCK, c % BLOCK);
                let byte = nibbles[(block / 2) * 32 + i];
                let nibble = if block % 2 == 0 { byte & 0x0F } else { byte >> 4 };
                let bit = (high[(block / BLOCKS_PER_GROUP) * 32 + i] >> (block % BLOCKS_PER_GROUP)) & 1;
                nibble | (bit << 4)
            })
            .collect()
    }

    /// Row `r` as f32.
    pub fn dequantize_row(&self, r: usize) -> Vec<f32> {
        let scales = self.row(r).2;
        self.unsigned_row(r).iter().enumerate().map(|(c, &v)| scales[c / BLOCK] * (f32::from(v) - 16.0)).collect()
    }

    /// `out[i][r] = Σ_c input[i][c] · W[r][c]` for `m` input rows, the input quantized to int8 per 32.
    pub fn matmul(&self, input: &[f32], m: usize, out: &mut [f32]) {
        assert_eq!(input.len(), m * self.cols, "input is [m][cols]");
        assert_eq!(out.len(), m * self.rows, "out is [m][rows]");
        ACTIVATIONS.with(|cell| {
            let mut acts = cell.borrow_mut();
            acts.quantize(input, self.cols);
            let acts = &*acts;
            super::for_row_tiles(self.rows, out, |rows, out| {
                #[cfg(target_arch = "x86_64")]
                if super::cpu_level() >= super::CpuLevel::Avx2 {
                    // SAFETY: `cpu_level` checked that the CPU has AVX2 and FMA.
                    unsafe {
                        if m >= UNPACK_FROM_ROWS {
                            super::q5_0_avx2::rows_via_int8(self, &acts.rows, m, rows, out);
                        } else {
                            super::q5_0_avx2::rows_kernel(self, acts, m, rows, out);
                        }
                    }
                    return;
                }
                reference_rows(self, acts, m, rows, out);
            });
        });
    }
}

thread_local! {
    /// The quantized activations of the current Q5_0 matmul, reused so a decode step allocates nothing.
    static ACTIVATIONS: std::cell::RefCell<Q5Activations> = std::cell::RefCell::new(Q5Activations::default());
}

/// The scalar definition the fast kernels must match: `Σ_b d_w · d_a · Σ (v − 16) · q` per output.
pub fn reference_rows(w: &Q5_0Matrix, acts: &Q5Activations, m: usize, rows: std::ops::Range<usize>, out: &mut [f32]) {
    let kb = w.cols / BLOCK;
    for r in rows {
        let (values, scales) = (w.unsigned_row(r), w.row(r).2);
        for i in 0..m {
            let quants = &acts.rows.quants[i * w.cols..(i + 1) * w.cols];
            let a_scales = &acts.rows.scales[i * kb..(i + 1) * kb];
            let mut sum = 0f32;
            for b in 0..kb {
                let dot: i32 = (0..BLOCK)
                    .map(|j| (i32::from(values[b * BLOCK + j]) - 16) * i32::from(quants[b * BLOCK + j]))
                    .sum();
                sum += dot as f32 * scales[b] * a_scales[b];
            }
            out[i * w.rows + r] = sum;
        }
    }
}

/// The whole product by the scalar reference (tests compare the fast kernels against it).
pub fn reference_matmul(w: &Q5_0Matrix, input: &[f32], m: usize) -> Vec<f32> {
    let mut acts = Q5Activations::default();
    acts.quantize(input, w.cols);
    let mut out = vec![0f32; m * w.rows];
    reference_rows(w, &acts, m, 0..w.rows, &mut out);
    out
}
