//! Q5_0 weights stored as panels of sixteen rows at five bits, for AVX-512 VNNI CPUs: 24 bytes per 32 weights
//! where the int8 widening (`Q8_0Matrix::from_q5_0`) takes 36, so a decode step reads a third fewer bytes and the
//! model needs less memory.
//!
//! As for Q4_K (`q4k_panels`), a 512-bit register holds four values of each of sixteen rows, so one `vpdpbusd`
//! adds four products into each row's sum. A word of nibbles gives, in its low nibbles, four values of the first
//! half of a block and, in its high nibbles, the matching four of the second half; their fifth bits are stored
//! rearranged (`FIFTH_BIT_SHIFTS`) so that one rotate puts the four a word needs at bit 4 of its bytes. Values
//! are unsigned (0–31) for `vpdpbusd`; the −16 is taken back out with the activations' block sums.
//!
//! The kernel computes every block's integer dot product exactly and adds them in the int8 kernels' f32 steps and
//! order, so the products are bit for bit those of the widened matrix: the model's outputs do not change.

use candle_core::quantized::{GgmlDType, QTensor};

use super::q4k_panels::PANEL_ROWS;
use super::q8_0::BLOCK;
use crate::Result;

/// Bytes of one GGUF Q5_0 block: an f16 scale, 32 fifth bits, 16 bytes of nibbles.
const GGUF_BLOCK_BYTES: usize = 2 + 4 + BLOCK / 2;

/// The right rotation that brings the fifth bits of nibble group `g` to bit 4 of each byte. Group `g < 4` is
/// values `4g..4g + 4` (low nibbles of word `g`), group `4 + t` values `16 + 4t..` (high nibbles of word `t`).
/// Value `i` of group `g` keeps its fifth bit at bit `8i + 4 + (g − 4)`: the groups' 32 bits tile the word.
pub const FIFTH_BIT_SHIFTS: [u32; 8] = [28, 29, 30, 31, 0, 1, 2, 3];

/// One block (32 values) of sixteen weight rows; each array's last index is the row (the lane).
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy)]
pub struct Q5_0PanelBlock {
    /// Word `t` of every row's 16 nibble bytes: low nibbles values `4t..4t + 4`, high nibbles `16 + 4t..`.
    pub qs: [[u32; PANEL_ROWS]; 4],
    /// Every row's 32 fifth bits, placed as `FIFTH_BIT_SHIFTS` says.
    pub fifth_bits: [u32; PANEL_ROWS],
    pub d: [f32; PANEL_ROWS],
}

impl Q5_0PanelBlock {
    /// Rows past the matrix's end (a last panel of fewer than 16) stay all zero and add nothing.
    const EMPTY: Self = Self { qs: [[0; PANEL_ROWS]; 4], fifth_bits: [0; PANEL_ROWS], d: [0.0; PANEL_ROWS] };

    /// Sets row `lane` from a GGUF block: value `j < 16` is the low nibble of byte `j`, value `j + 16` its high
    /// nibble, with bit 4 from bit `j` (resp. `j + 16`) of the high bits.
    fn set_row(&mut self, lane: usize, gguf: &[u8]) {
        self.d[lane] = half::f16::from_le_bytes([gguf[0], gguf[1]]).to_f32();
        let high = u32::from_le_bytes([gguf[2], gguf[3], gguf[4], gguf[5]]);
        for (t, word) in self.qs.iter_mut().enumerate() {
            word[lane] = u32::from_le_bytes(gguf[6 + 4 * t..10 + 4 * t].try_into().expect("four bytes"));
        }
        let mut placed = 0u32;
        for (g, shift) in FIFTH_BIT_SHIFTS.iter().enumerate() {
            let first_value = if g < 4 { 4 * g } else { 16 + 4 * (g - 4) };
            for i in 0..4 {
                let bit = (high >> (first_value + i)) & 1;
                placed |= bit << ((8 * i as u32 + 4 + shift) % 32);
            }
        }
        self.fifth_bits[lane] = placed;
    }

    /// Row `lane`'s 32 values as signed integers (−16 to 15).
    fn row_values(&self, lane: usize) -> [i8; BLOCK] {
        std::array::from_fn(|v| {
            let (word, nibble_shift, g) = if v < 16 { (v / 4, 0, v / 4) } else { ((v - 16) / 4, 4, 4 + (v - 16) / 4) };
            let nibble = (self.qs[word][lane] >> (8 * (v % 4) + nibble_shift)) & 0x0F;
            let fifth = (self.fifth_bits[lane].rotate_right(FIFTH_BIT_SHIFTS[g]) >> (8 * (v % 4) + 4)) & 1;
            (nibble | fifth << 4) as i8 - 16
        })
    }
}

/// A `[rows, cols]` Q5_0 matrix as panels: panel `p` holds rows `16p..16p + 16`, its blocks in order.
#[derive(Debug)]
pub struct Q5_0Panels {
    rows: usize,
    cols: usize,
    blocks: Vec<Q5_0PanelBlock>,
}

impl Q5_0Panels {
    /// Whether this CPU runs the panel kernels (see `Q4KPanels::supported`).
    pub fn supported() -> bool {
        super::Q4KPanels::supported()
    }

    /// Repacks a 2-D Q5_0 `QTensor` (`[out, in]`).
    pub fn from_qtensor(tensor: &QTensor) -> Result<Self> {
        let (rows, cols, bytes) = super::tensor_bytes(tensor, GgmlDType::Q5_0)?;
        Self::from_gguf_bytes(rows, cols, &bytes)
    }

    /// From GGUF Q5_0 bytes (per block: `f16 d, u32 high bits, 16 bytes of nibbles`).
    pub fn from_gguf_bytes(rows: usize, cols: usize, bytes: &[u8]) -> Result<Self> {
        super::check_layout(rows, cols, bytes.len(), BLOCK, GGUF_BLOCK_BYTES, GgmlDType::Q5_0)?;
        let per_row = cols / BLOCK;
        let mut blocks = vec![Q5_0PanelBlock::EMPTY; rows.div_ceil(PANEL_ROWS) * per_row];
        for (r, row) in bytes.chunks_exact(per_row * GGUF_BLOCK_BYTES).enumerate() {
            let panel = &mut blocks[r / PANEL_ROWS * per_row..][..per_row];
            for (dst, gguf) in panel.iter_mut().zip(row.chunks_exact(GGUF_BLOCK_BYTES)) {
                dst.set_row(r % PANEL_ROWS, gguf);
            }
        }
        Ok(Self { rows, cols, blocks })
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Panel `p`'s blocks (rows `16p..16p + 16`).
    pub(crate) fn panel(&self, p: usize) -> &[Q5_0PanelBlock] {
        let per_row = self.cols / BLOCK;
        &self.blocks[p * per_row..(p + 1) * per_row]
    }

    /// Row `r` as f32 (value × block scale, as the widened matrix gives it).
    pub fn dequantize_row(&self, r: usize) -> Vec<f32> {
        let lane = r % PANEL_ROWS;
        self.panel(r / PANEL_ROWS)
            .iter()
            .flat_map(|block| block.row_values(lane).map(|q| f32::from(q) * block.d[lane]))
            .collect()
    }

    /// `out[i][r] = Σ_c input[i][c] · W[r][c]` with the input quantized per 32 (`input` `[m][cols]`).
    ///
    /// # Panics
    /// Where the CPU lacks AVX-512 VNNI (see `supported`): there is no other kernel for this layout.
    pub fn matmul(&self, input: &[f32], m: usize, out: &mut [f32]) {
        assert!(Self::supported(), "Q5_0 panels need AVX-512 VNNI; widen to Q8_0Matrix on this CPU");
        assert_eq!(input.len(), m * self.cols, "input is [m][cols]");
        assert_eq!(out.len(), m * self.rows, "out is [m][rows]");
        #[cfg(target_arch = "x86_64")]
        super::q8_0::with_quantized(input, self.cols, true, |acts| {
            super::for_row_tiles(self.rows, out, |rows, out| {
                // SAFETY: `supported` found AVX-512 VNNI; `for_row_tiles` hands out whole panels.
                unsafe { super::k_panels_vnni::q5_0_panel_rows(self, acts, m, rows, out) }
            });
        });
    }
}
