//! Q4_K weights stored as panels of sixteen rows, for AVX-512 VNNI CPUs: the layout the panel kernel reads
//! directly, for a decode step as for a prefill.
//!
//! In the row layout (`kquants`) a decode step spends about fifty instructions per row and super-block, a dozen
//! of them adding a register's lanes into one sum; the 1.5B's Q4_K products were bound by those instructions, not
//! by memory. Here a 512-bit register holds the same four bytes of sixteen rows, so one `vpdpbusd` adds four
//! products into each of sixteen sums and nothing is added across lanes: about thirteen instructions per row and
//! super-block. The prefill kernel used to repack sixteen rows into this form for every product; now the file is
//! repacked once, at load, to the file's size: 144 bytes per 256 weights, every field packed as the file packs it.

use candle_core::quantized::{GgmlDType, QTensor};
use half::f16;

use super::k_acts::SUPER;
use super::kquants::{scale_min_k4, unpack_q4k, Q4KBlock, Q4KMatrix, Q4K_FILE_BYTES};
use crate::Result;

/// Weight rows per panel: one per i32 lane of a 512-bit register.
pub const PANEL_ROWS: usize = 16;

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
    /// Rows past the matrix's end (a last panel of fewer than 16) stay all zero and add nothing.
    const EMPTY: Self =
        Self { qs: [[0; PANEL_ROWS]; 32], packed: [[0; PANEL_ROWS]; 3], d: [0; PANEL_ROWS], dmin: [0; PANEL_ROWS] };

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
        let packed: Vec<u8> = self.packed.iter().flat_map(|word| word[lane].to_le_bytes()).collect();
        for s in 0..8 {
            (block.scales[s], block.mins[s]) = scale_min_k4(s, &packed);
        }
        block
    }

    fn set_row_block(&mut self, lane: usize, block: &Q4KBlock) {
        for (word, bytes) in self.qs.iter_mut().zip(block.qs.chunks_exact(4)) {
            word[lane] = u32::from_le_bytes(bytes.try_into().expect("four bytes"));
        }
        // The inverse of `scale_min_k4`.
        let mut packed = [0u8; 12];
        for j in 0..4 {
            let (scale_high, min_high) = (block.scales[j + 4], block.mins[j + 4]);
            packed[j] = block.scales[j] | (scale_high >> 4) << 6;
            packed[j + 4] = block.mins[j] | (min_high >> 4) << 6;
            packed[j + 8] = (scale_high & 0x0F) | (min_high & 0x0F) << 4;
        }
        for (word, bytes) in self.packed.iter_mut().zip(packed.chunks_exact(4)) {
            word[lane] = u32::from_le_bytes(bytes.try_into().expect("four bytes"));
        }
        // Exact: the row layout's f32 scales came from the file's f16.
        self.d[lane] = f16::from_f32(block.d).to_bits();
        self.dmin[lane] = f16::from_f32(block.dmin).to_bits();
    }
}

/// A `[rows, cols]` Q4_K matrix as panels: panel `p` holds rows `16p..16p + 16`, its super-blocks in order.
#[derive(Debug)]
pub struct Q4KPanels {
    rows: usize,
    cols: usize,
    blocks: Vec<Q4KPanelBlock>,
}

impl Q4KPanels {
    /// Whether this CPU runs the panel kernel (AVX-512 F, BW, VL and VNNI, not turned off by `TANDEM_KERNELS`).
    pub fn supported() -> bool {
        super::cpu_level() >= super::CpuLevel::Avx512Vnni
    }

    /// Repacks a 2-D Q4_K `QTensor` (`[out, in]`).
    pub fn from_qtensor(tensor: &QTensor) -> Result<Self> {
        let (rows, cols, bytes) = super::tensor_bytes(tensor, GgmlDType::Q4K)?;
        Self::from_gguf_bytes(rows, cols, &bytes)
    }

    /// From GGUF Q4_K bytes (`f16 d, f16 dmin, 12 bytes of 6-bit scales and minimums, 128 bytes of nibbles`).
    pub fn from_gguf_bytes(rows: usize, cols: usize, bytes: &[u8]) -> Result<Self> {
        super::check_layout(rows, cols, bytes.len(), SUPER, Q4K_FILE_BYTES, GgmlDType::Q4K)?;
        let row_bytes = cols / SUPER * Q4K_FILE_BYTES;
        Ok(Self::gather(rows, cols, |r| {
            bytes[r * row_bytes..(r + 1) * row_bytes].chunks_exact(Q4K_FILE_BYTES).map(unpack_q4k)
        }))
    }

    /// The same weights as `matrix` (the row layout), as panels.
    pub fn from_rows(matrix: &Q4KMatrix) -> Self {
        Self::gather(matrix.rows(), matrix.cols(), |r| matrix.row(r).iter().copied())
    }

    /// Panels filled from each row's super-blocks, `row_blocks(r)`.
    fn gather<I: Iterator<Item = Q4KBlock>>(rows: usize, cols: usize, row_blocks: impl Fn(usize) -> I) -> Self {
        let per_row = cols / SUPER;
        let mut blocks = vec![Q4KPanelBlock::EMPTY; rows.div_ceil(PANEL_ROWS) * per_row];
        for r in 0..rows {
            let panel = &mut blocks[r / PANEL_ROWS * per_row..][..per_row];
            for (dst, block) in panel.iter_mut().zip(row_blocks(r)) {
                dst.set_row_block(r % PANEL_ROWS, &block);
            }
        }
        Self { rows, cols, blocks }
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Panel `p`'s super-blocks (rows `16p..16p + 16`).
    pub(crate) fn panel(&self, p: usize) -> &[Q4KPanelBlock] {
        let per_row = self.cols / SUPER;
        &self.blocks[p * per_row..(p + 1) * per_row]
    }

    /// Row `r` as f32, the same values `Q4KMatrix::dequantize_row` gives.
    pub fn dequantize_row(&self, r: usize) -> Vec<f32> {
        let blocks: Vec<Q4KBlock> =
            self.panel(r / PANEL_ROWS).iter().map(|block| block.row_block(r % PANEL_ROWS)).collect();
        super::kquants::dequantize_q4k_blocks(&blocks)
    }

    /// `out[i][r] = Σ_c input[i][c] · W[r][c]` with the input quantized per 256 (`input` `[m][cols]`).
    ///
    /// # Panics
    /// Where the CPU lacks AVX-512 VNNI (see `supported`): there is no other kernel for this layout.
    pub fn matmul(&self, input: &[f32], m: usize, out: &mut [f32]) {
        assert!(Self::supported(), "Q4_K panels need AVX-512 VNNI; load Q4KMatrix on this CPU");
        assert_eq!(input.len(), m * self.cols, "input is [m][cols]");
        assert_eq!(out.len(), m * self.rows, "out is [m][rows]");
        #[cfg(target_arch = "x86_64")]
        super::k_acts::K_ACTIVATIONS.with(|cell| {
            let mut acts = cell.borrow_mut();
            acts.quantize(input, self.cols);
            let acts = &*acts;
            super::for_row_tiles(self.rows, out, |rows, out| {
                // SAFETY: `supported` found AVX-512 VNNI; `for_row_tiles` hands out whole panels (16 rows, the last
                // possibly fewer), starting at a multiple of 16.
                unsafe { super::k_panels_vnni::q4k_panel_rows(self, acts, m, rows, out) }
            });
        });
    }
}
