//! Q6_K weights as panels of sixteen rows (see `panels`), at the file's size: 210 bytes per 256 weights.
//!
//! The file's words move unchanged, in the order the kernel reads them. For half `h` of a super-block and `t < 8`,
//! word `16h + t` of `ql` holds in its low nibbles the low bits of values `128h + 4t..+4` and in its high nibbles
//! those of `128h + 64 + 4t..`; word `16h + 8 + t` the same for `128h + 32 + 4t..` and `128h + 96 + 4t..`; word
//! `8h + t` of `qh` holds the top two bits of all four sets (bits 0–1, 2–3, 4–5, 6–7 of each byte). The kernel
//! joins them into bytes (0–63) with a shift and one ternary logic op each. Stored as the file orders them, the
//! three words sat 512 and 2048 bytes apart, and a decode step from memory ran far slower than in reading order
//! (docs/performance.md, "Panels from the load on").

use candle_core::quantized::GgmlDType;
use half::f16;

use super::k_acts::SUPER;
use super::kquants::{unpack_q6k, Q6KBlock, Q6KMatrix, Q6K_FILE_BYTES};
use super::panels::{PanelBlock, Panels, PANEL_ROWS};

/// One super-block (256 values) of sixteen weight rows; each array's last index is the row (the lane).
#[repr(C, align(32))]
#[derive(Debug, Clone, Copy)]
pub struct Q6KPanelBlock {
    /// For `s = 8h + t`: words `16h + t` and `16h + 8 + t` of every row's 128 bytes of low nibbles, then word
    /// `8h + t` of its 64 bytes of top bits.
    pub words: [[[u32; PANEL_ROWS]; 3]; 16],
    /// The scales of groups `2p` and `2p + 1` (16 values each) of every row, side by side: sign-extended to i16
    /// they make the pair `vpdpwssd` multiplies against two activation sums of 16.
    pub scale_pairs: [[[i8; 2]; PANEL_ROWS]; 8],
    /// The super-block scale as the file has it (f16 bits).
    pub d: [u16; PANEL_ROWS],
}

impl Q6KPanelBlock {
    /// Row `lane`'s super-block in the row layout.
    fn row_block(&self, lane: usize) -> Q6KBlock {
        let mut block =
            Q6KBlock { d: f16::from_bits(self.d[lane]).to_f32(), scales: [0; 16], ql: [0; 128], qh: [0; 64] };
        for (s, [low, low_next, top]) in self.words.iter().enumerate() {
            let (h, t) = (s / 8, s % 8);
            block.ql[64 * h + 4 * t..][..4].copy_from_slice(&low[lane].to_le_bytes());
            block.ql[64 * h + 32 + 4 * t..][..4].copy_from_slice(&low_next[lane].to_le_bytes());
            block.qh[32 * h + 4 * t..][..4].copy_from_slice(&top[lane].to_le_bytes());
        }
        for (p, pair) in self.scale_pairs.iter().enumerate() {
            [block.scales[2 * p], block.scales[2 * p + 1]] = pair[lane];
        }
        block
    }

    fn set_row_block(&mut self, lane: usize, block: &Q6KBlock) {
        let word = |bytes: &[u8]| u32::from_le_bytes(bytes[..4].try_into().expect("four bytes"));
        for (s, [low, low_next, top]) in self.words.iter_mut().enumerate() {
            let (h, t) = (s / 8, s % 8);
            low[lane] = word(&block.ql[64 * h + 4 * t..]);
            low_next[lane] = word(&block.ql[64 * h + 32 + 4 * t..]);
            top[lane] = word(&block.qh[32 * h + 4 * t..]);
        }
        for (p, pair) in self.scale_pairs.iter_mut().enumerate() {
            pair[lane] = [block.scales[2 * p], block.scales[2 * p + 1]];
        }
        // Exact: the row layout's f32 scale came from the file's f16.
        self.d[lane] = f16::from_f32(block.d).to_bits();
    }
}

impl PanelBlock for Q6KPanelBlock {
    const TYPE: GgmlDType = GgmlDType::Q6K;
    const VALUES: usize = SUPER;
    const FILE_BYTES: usize = Q6K_FILE_BYTES;
    const MIN_LEVEL: super::CpuLevel = super::CpuLevel::Avx512Vnni;
    const EMPTY: Self =
        Self { words: [[[0; PANEL_ROWS]; 3]; 16], scale_pairs: [[[0; 2]; PANEL_ROWS]; 8], d: [0; PANEL_ROWS] };

    fn set_row(&mut self, lane: usize, gguf: &[u8]) {
        self.set_row_block(lane, &unpack_q6k(gguf));
    }

    fn dequantize_row(&self, lane: usize, out: &mut Vec<f32>) {
        out.extend(super::kquants::dequantize_q6k_blocks(&[self.row_block(lane)]));
    }

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
            // SAFETY: `Panels::matmul` checked for AVX-512 VNNI; `for_row_tiles` hands out whole panels.
            unsafe { super::k_panels_vnni::q6k_panel_rows(panels, acts, m, rows, out) }
        });
        // Elsewhere `Panels::matmul_at` refuses before this (no CPU level has a kernel for it).
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (panels, input, m, out, tiles);
    }
}

/// A `[rows, cols]` Q6_K matrix as panels.
pub type Q6KPanels = Panels<Q6KPanelBlock>;

impl Q6KPanels {
    /// The same weights as `matrix` (the row layout), as panels.
    pub fn from_rows(matrix: &Q6KMatrix) -> Self {
        Self::gather(matrix.rows(), matrix.cols(), |r| matrix.row(r).iter(), Q6KPanelBlock::set_row_block)
    }
}
