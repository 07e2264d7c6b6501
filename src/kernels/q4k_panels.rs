//! Q4_K weights as panels of sixteen rows (see `panels`), at the file's size: 144 bytes per 256 weights, every
//! field packed as the file packs it.
//!
//! In the row layout (`kquants`) a decode step spent about fifty instructions per row and super-block, a dozen of
//! them adding a register's lanes into one sum; the 1.5B's Q4_K products were bound by those instructions, not by
//! memory. In panels it is about thirteen.

use candle_core::quantized::GgmlDType;
use half::f16;

use super::k_acts::SUPER;
use super::kquants::{pack_scale_min_k4, scale_min_k4, unpack_q4k, Q4KBlock, Q4KMatrix, Q4K_FILE_BYTES};
use super::panels::{PanelBlock, Panels, PANEL_ROWS};

/// One super-block (256 values) of sixteen weight rows; each array's last index is the row (the lane).
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy)]
pub struct Q4KPanelBlock {
    /// Word `i` of every row's 128 nibble bytes: chunk `i / 8` (32 bytes), in its low nibbles values
    /// `4 · (i % 8)..+4` of sub-block `2 · (i / 8)`, in its high nibbles the same values of the next sub-block.
    pub qs: [[u32; PANEL_ROWS]; 32],
    /// The sub-block scales and minimums (6 bits each) packed as in the file: word 0 holds scales 0–3 and the top
    /// two bits of scales 4–7, word 1 the same for the minimums, word 2 the low nibbles of scales 4–7 and, above
    /// them, of minimums 4–7.
    pub packed: [[u32; PANEL_ROWS]; 3],
    /// The super-block scales as the file has them (f16 bits): 8 bytes a row fewer than as f32.
    pub d: [u16; PANEL_ROWS],
    pub dmin: [u16; PANEL_ROWS],
}

impl Q4KPanelBlock {
    /// Row `lane`'s super-block in the row layout.
    fn row_block(&self, lane: usize) -> Q4KBlock {
        let mut block = Q4KBlock {
            d: f16::from_bits(self.d[lane]).to_f32(),
            dmin: f16::from_bits(self.dmin[lane]).to_f32(),
            scales: [0; 8],
            mins: [0; 8],
            qs: [0; 128],
        };
        for (word, bytes) in self.qs.iter().zip(block.qs.chunks_exact_mut(4)) {
            bytes.copy_from_slice(&word[lane].to_le_bytes());
        }
        (block.scales, block.mins) = packed_lane(&self.packed, lane);
        block
    }

    fn set_row_block(&mut self, lane: usize, block: &Q4KBlock) {
        for (word, bytes) in self.qs.iter_mut().zip(block.qs.chunks_exact(4)) {
            word[lane] = u32::from_le_bytes(bytes.try_into().expect("four bytes"));
        }
        set_packed_lane(&mut self.packed, lane, &block.scales, &block.mins);
        // Exact: the row layout's f32 scales came from the file's f16.
        self.d[lane] = f16::from_f32(block.d).to_bits();
        self.dmin[lane] = f16::from_f32(block.dmin).to_bits();
    }
}

impl PanelBlock for Q4KPanelBlock {
    const TYPE: GgmlDType = GgmlDType::Q4K;
    const VALUES: usize = SUPER;
    const FILE_BYTES: usize = Q4K_FILE_BYTES;
    const MIN_LEVEL: super::CpuLevel = super::CpuLevel::Avx2;
    const EMPTY: Self =
        Self { qs: [[0; PANEL_ROWS]; 32], packed: [[0; PANEL_ROWS]; 3], d: [0; PANEL_ROWS], dmin: [0; PANEL_ROWS] };

    fn set_row(&mut self, lane: usize, gguf: &[u8]) {
        self.set_row_block(lane, &unpack_q4k(gguf));
    }

    fn dequantize_row(&self, lane: usize, out: &mut Vec<f32>) {
        out.extend(super::kquants::dequantize_q4k_blocks(&[self.row_block(lane)]));
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
        super::panels::k_quant_product(panels, input, out, tiles, |acts, rows, out| {
            // SAFETY: `Panels::matmul_at` checked that the CPU has `level` (AVX-512 VNNI, AVX-VNNI, or AVX2 with FMA
            // and F16C); `for_row_tiles` hands out whole panels.
            unsafe {
                if level >= super::CpuLevel::Avx512Vnni {
                    super::k_panels_vnni::q4k_panel_rows(panels, acts, m, rows, out)
                } else if level == super::CpuLevel::AvxVnni {
                    super::k_panels_avx2::q4k_panel_rows_avx_vnni(panels, acts, m, rows, out)
                } else {
                    super::k_panels_avx2::q4k_panel_rows(panels, acts, m, rows, out)
                }
            }
        });
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (panels, level, input, m, out, tiles);
    }
}

/// A `[rows, cols]` Q4_K matrix as panels.
pub type Q4KPanels = Panels<Q4KPanelBlock>;

impl Q4KPanels {
    /// The same weights as `matrix` (the row layout), as panels.
    pub fn from_rows(matrix: &Q4KMatrix) -> Self {
        Self::gather(matrix.rows(), matrix.cols(), |r| matrix.row(r).iter(), Q4KPanelBlock::set_row_block)
    }
}

/// Row `lane`'s sub-block scales and minimums from a panel's three words of them (Q4_K's and Q5_K's packing).
pub(super) fn packed_lane(packed: &[[u32; PANEL_ROWS]; 3], lane: usize) -> ([u8; 8], [u8; 8]) {
    let bytes: Vec<u8> = packed.iter().flat_map(|word| word[lane].to_le_bytes()).collect();
    let (mut scales, mut mins) = ([0; 8], [0; 8]);
    for s in 0..8 {
        (scales[s], mins[s]) = scale_min_k4(s, &bytes);
    }
    (scales, mins)
}

/// Sets row `lane` of a panel's three words of scales and minimums, packed as the file packs them.
pub(super) fn set_packed_lane(packed: &mut [[u32; PANEL_ROWS]; 3], lane: usize, scales: &[u8; 8], mins: &[u8; 8]) {
    for (word, bytes) in packed.iter_mut().zip(pack_scale_min_k4(scales, mins).chunks_exact(4)) {
        word[lane] = u32::from_le_bytes(bytes.try_into().expect("four bytes"));
    }
}
