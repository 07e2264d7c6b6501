//! Q5_K weights as panels of sixteen rows (see `panels`), at the file's size: 176 bytes per 256 weights.
//!
//! Q5_K is Q4_K with a fifth bit per weight, so the panels are Q4_K's (`q4k_panels`: the nibble words, the packed
//! 6-bit scales and minimums, the f16 super-block scales) plus every row's 32 bytes of fifth bits. Those keep the
//! file's size but not its bit order: in the file bit `s` of byte `l` is value `l` of sub-block `s`; here
//! sub-block `2c` (the low nibbles of chunk `c`) sits at bit `4 + c` and sub-block `2c + 1` (the high nibbles) at
//! bit `c`. So chunk `c`'s bits reach bit 4 of each byte by a right shift by `c` and a left shift by `4 − c`, the
//! same direction for every chunk, with no bit crossing into a neighbouring byte where it lands.

use candle_core::quantized::GgmlDType;
use half::f16;

use super::k_acts::SUPER;
use super::kquants::{unpack_q5k, Q5KBlock, Q5KMatrix, Q5K_FILE_BYTES};
use super::panels::{PanelBlock, Panels, PANEL_ROWS};
use super::q4k_panels::{packed_lane, set_packed_lane};

/// One super-block (256 values) of sixteen weight rows; each array's last index is the row (the lane). 2,816
/// bytes, 44 cache lines.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy)]
pub struct Q5KPanelBlock {
    /// As in `Q4KPanelBlock`: word `i` of every row's 128 nibble bytes, chunk `i / 8`, values `4 · (i % 8)..+4`
    /// of sub-blocks `2 · (i / 8)` (low nibbles) and `2 · (i / 8) + 1` (high nibbles).
    pub qs: [[u32; PANEL_ROWS]; 32],
    /// Word `t` of every row's 32 bytes of fifth bits (values `4t..4t + 4` of every sub-block), each byte's bits
    /// placed by `to_panel_bits`.
    pub qh: [[u32; PANEL_ROWS]; 8],
    /// The sub-block scales and minimums packed as in the file (see `Q4KPanelBlock::packed`).
    pub packed: [[u32; PANEL_ROWS]; 3],
    /// The super-block scales as the file has them (f16 bits).
    pub d: [u16; PANEL_ROWS],
    pub dmin: [u16; PANEL_ROWS],
}

/// A file byte of fifth bits (bit `s` for sub-block `s`) in the panel's order: sub-block `2c` at bit `4 + c`,
/// `2c + 1` at bit `c`.
fn to_panel_bits(file: u8) -> u8 {
    (0..4).fold(0, |bits, c| bits | ((file >> (2 * c)) & 1) << (4 + c) | ((file >> (2 * c + 1)) & 1) << c)
}

/// The inverse of `to_panel_bits`.
fn to_file_bits(panel: u8) -> u8 {
    (0..4).fold(0, |bits, c| bits | ((panel >> (4 + c)) & 1) << (2 * c) | ((panel >> c) & 1) << (2 * c + 1))
}

impl Q5KPanelBlock {
    /// Row `lane`'s super-block in the row layout.
    fn row_block(&self, lane: usize) -> Q5KBlock {
        let (scales, mins) = packed_lane(&self.packed, lane);
        let mut block = Q5KBlock {
            d: f16::from_bits(self.d[lane]).to_f32(),
            dmin: f16::from_bits(self.dmin[lane]).to_f32(),
            scales,
            mins,
            qh: [0; 32],
            qs: [0; 128],
        };
        for (word, bytes) in self.qs.iter().zip(block.qs.chunks_exact_mut(4)) {
            bytes.copy_from_slice(&word[lane].to_le_bytes());
        }
        for (word, bytes) in self.qh.iter().zip(block.qh.chunks_exact_mut(4)) {
            bytes.copy_from_slice(&word[lane].to_le_bytes().map(to_file_bits));
        }
        block
    }

    fn set_row_block(&mut self, lane: usize, block: &Q5KBlock) {
        for (word, bytes) in self.qs.iter_mut().zip(block.qs.chunks_exact(4)) {
            word[lane] = u32::from_le_bytes(bytes.try_into().expect("four bytes"));
        }
        for (word, bytes) in self.qh.iter_mut().zip(block.qh.chunks_exact(4)) {
            let bytes: [u8; 4] = bytes.try_into().expect("four bytes");
            word[lane] = u32::from_le_bytes(bytes.map(to_panel_bits));
        }
        set_packed_lane(&mut self.packed, lane, &block.scales, &block.mins);
        // Exact: the row layout's f32 scales came from the file's f16.
        self.d[lane] = f16::from_f32(block.d).to_bits();
        self.dmin[lane] = f16::from_f32(block.dmin).to_bits();
    }
}

impl PanelBlock for Q5KPanelBlock {
    const TYPE: GgmlDType = GgmlDType::Q5K;
    const VALUES: usize = SUPER;
    const FILE_BYTES: usize = Q5K_FILE_BYTES;
    const MIN_LEVEL: super::CpuLevel = super::CpuLevel::Avx2;
    const EMPTY: Self = Self {
        qs: [[0; PANEL_ROWS]; 32],
        qh: [[0; PANEL_ROWS]; 8],
        packed: [[0; PANEL_ROWS]; 3],
        d: [0; PANEL_ROWS],
        dmin: [0; PANEL_ROWS],
    };

    fn set_row(&mut self, lane: usize, gguf: &[u8]) {
        self.set_row_block(lane, &unpack_q5k(gguf));
    }

    fn dequantize_row(&self, lane: usize, out: &mut Vec<f32>) {
        out.extend(super::kquants::dequantize_q5k_blocks(&[self.row_block(lane)]));
    }

    /// The AVX2 kernel at every level. Q4_K has AVX-VNNI and AVX-512 VNNI kernels too; Q5_K has none yet (they
    /// were not written where no CPU could run them), so those CPUs run this one, which their AVX2 allows.
    fn matmul(
        panels: &Panels<Self>,
        _level: super::CpuLevel,
        input: &[f32],
        m: usize,
        out: &mut [f32],
        tiles: super::RowTiles<'_>,
    ) {
        #[cfg(target_arch = "x86_64")]
        super::panels::k_quant_product(panels, input, out, tiles, |acts, rows, out| {
            // SAFETY: `Panels::matmul_at` checked that the CPU has at least AVX2 with FMA and F16C (every level
            // from `MIN_LEVEL` up includes them); `for_row_tiles` hands out whole panels.
            unsafe { super::k_panels_avx2::q5k_panel_rows(panels, acts, m, rows, out) }
        });
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (panels, input, m, out, tiles);
    }
}

/// A `[rows, cols]` Q5_K matrix as panels.
pub type Q5KPanels = Panels<Q5KPanelBlock>;

impl Q5KPanels {
    /// The same weights as `matrix` (the row layout), as panels.
    pub fn from_rows(matrix: &Q5KMatrix) -> Self {
        Self::gather(matrix.rows(), matrix.cols(), |r| matrix.row(r).iter(), Q5KPanelBlock::set_row_block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panel_bits_round_trip_and_put_each_chunk_where_the_kernel_shifts_from() {
        for byte in 0..=255u8 {
            let panel = to_panel_bits(byte);
            assert_eq!(to_file_bits(panel), byte);
            for c in 0..4 {
                // The kernel: `(panel >> c) & 0x10` and `(panel << (4 − c)) & 0x10`.
                assert_eq!((panel >> c) & 0x10 != 0, byte & (1 << (2 * c)) != 0, "byte {byte:#x}, chunk {c} low");
                assert_eq!((panel << (4 - c)) & 0x10 != 0, byte & (1 << (2 * c + 1)) != 0, "byte {byte:#x}, {c} high");
            }
        }
    }
}
