//! Q5_0 weights stored as panels of sixteen rows at five bits, for the AVX-512 VNNI and AVX2 kernels: 22 bytes
//! per 32 weights, the file's own size, where the int8 widening (`Q8_0Matrix::from_q5_0`) takes 36, so a decode
//! step reads 40 % fewer bytes and the model needs less memory. The block scales stay f16 as in the file (f32 scales took 24
//! bytes per 32: 15 MiB more on the 0.5B); the kernel widens sixteen at once, exactly.
//!
//! As for Q4_K (`q4k_panels`), a 512-bit register holds four values of each of sixteen rows, so one `vpdpbusd`
//! adds four products into each row's sum. A word of nibbles gives, in its low nibbles, four values of the first
//! half of a block and, in its high nibbles, the matching four of the second half; their fifth bits are stored
//! rearranged (`FIFTH_BIT_SHIFTS`) so that one rotate puts the four a word needs at bit 4 of its bytes. Values
//! are unsigned (0–31) for `vpdpbusd`; the −16 is taken back out with the activations' block sums.
//!
//! The kernel computes every block's integer dot product exactly and adds them in the int8 kernels' f32 steps and
//! order, so the products are bit for bit those of the widened matrix: the model's outputs do not change.

use candle_core::quantized::GgmlDType;

use super::panels::{PanelBlock, Panels, PANEL_ROWS};
use super::q8_0::BLOCK;

/// Bytes of one GGUF Q5_0 block: an f16 scale, 32 fifth bits, 16 bytes of nibbles.
const GGUF_BLOCK_BYTES: usize = 2 + 4 + BLOCK / 2;

/// The right rotation that brings the fifth bits of nibble group `g` to bit 4 of each byte. Group `g < 4` is
/// values `4g..4g + 4` (low nibbles of word `g`), group `4 + t` values `16 + 4t..` (high nibbles of word `t`).
/// Value `i` of group `g` keeps its fifth bit at bit `8i + 4 + (g − 4)`: the groups' 32 bits tile the word.
pub const FIFTH_BIT_SHIFTS: [u32; 8] = [28, 29, 30, 31, 0, 1, 2, 3];

/// One block (32 values) of sixteen weight rows; each array's last index is the row (the lane).
///
/// 352 bytes: aligned to 32, not to a cache line (64 would pad it to 384), so the kernel loads it unaligned.
#[repr(C, align(32))]
#[derive(Debug, Clone, Copy)]
pub struct Q5_0PanelBlock {
    /// Word `t` of every row's 16 nibble bytes: low nibbles values `4t..4t + 4`, high nibbles `16 + 4t..`.
    pub qs: [[u32; PANEL_ROWS]; 4],
    /// Every row's 32 fifth bits, placed as `FIFTH_BIT_SHIFTS` says.
    pub fifth_bits: [u32; PANEL_ROWS],
    /// Every row's block scale, f16 bits as in the file.
    pub d: [u16; PANEL_ROWS],
}

impl Q5_0PanelBlock {
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

impl PanelBlock for Q5_0PanelBlock {
    const TYPE: GgmlDType = GgmlDType::Q5_0;
    const VALUES: usize = BLOCK;
    const FILE_BYTES: usize = GGUF_BLOCK_BYTES;
    const MIN_LEVEL: super::CpuLevel = super::CpuLevel::Avx2;
    const EMPTY: Self = Self { qs: [[0; PANEL_ROWS]; 4], fifth_bits: [0; PANEL_ROWS], d: [0; PANEL_ROWS] };

    /// Value `j < 16` is the low nibble of byte `j`, value `j + 16` its high nibble, with bit 4 from bit `j`
    /// (resp. `j + 16`) of the high bits.
    fn set_row(&mut self, lane: usize, gguf: &[u8]) {
        self.d[lane] = u16::from_le_bytes([gguf[0], gguf[1]]);
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

    /// Value × block scale, as the widened matrix gives it.
    fn dequantize_row(&self, lane: usize, out: &mut Vec<f32>) {
        let d = half::f16::from_bits(self.d[lane]).to_f32();
        out.extend(self.row_values(lane).map(|q| f32::from(q) * d));
    }

    fn matmul(
        panels: &Panels<Self>,
        level: super::CpuLevel,
        input: &[f32],
        m: usize,
        out: &mut [f32],
        tiles: super::RowTiles<'_>,
    ) {
        #[cfg(target_arch = "x86_64")]
        super::q8_0::with_quantized(input, panels.cols(), true, |acts| {
            super::for_some_row_tiles(tiles, panels.rows(), out, |rows, out| {
                // SAFETY: `Panels::matmul_at` checked that the CPU has `level` (AVX-512 VNNI, AVX-VNNI, or AVX2 with
                // FMA and F16C); `for_row_tiles` hands out whole panels.
                unsafe {
                    if level >= super::CpuLevel::Avx512Vnni {
                        super::k_panels_vnni::q5_0_panel_rows(panels, acts, m, rows, out)
                    } else if level == super::CpuLevel::AvxVnni {
                        super::k_panels_avx2::q5_0_panel_rows_avx_vnni(panels, acts, m, rows, out)
                    } else {
                        super::k_panels_avx2::q5_0_panel_rows(panels, acts, m, rows, out)
                    }
                }
            });
        });
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (panels, level, input, m, out, tiles);
    }
}

/// A `[rows, cols]` Q5_0 matrix as panels.
pub type Q5_0Panels = Panels<Q5_0PanelBlock>;
