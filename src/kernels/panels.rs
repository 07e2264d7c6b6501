//! Weight matrices stored as panels of sixteen rows: the layout the panel kernels (`k_panels_vnni`, and for Q4_K
//! on AVX2 CPUs `k_panels_avx2`) read directly, for a decode step as for a prefill.
//!
//! In a row layout a decode step spends a dozen instructions per row and block adding a register's lanes into one
//! sum. In a panel a 512-bit register holds the same four values of sixteen rows, so one `vpdpbusd` adds four
//! products into each of sixteen sums and nothing is added across lanes. The file is repacked once, at load, with
//! its bit packing kept (Q4_K and Q6_K at the file's size, Q5_0 two bytes a block over it); each block type says
//! how (`q4k_panels`, `q6k_panels`, `q5_0_panels`).

use candle_core::quantized::{GgmlDType, QTensor};

use crate::Result;

/// Weight rows per panel: one per i32 lane of a 512-bit register.
pub const PANEL_ROWS: usize = 16;

/// One block of sixteen rows in a panel layout: its values for each row, and the product kernel.
pub trait PanelBlock: Copy + Send + Sync + 'static {
    /// The GGUF type it holds.
    const TYPE: GgmlDType;
    /// Values of one row in one block.
    const VALUES: usize;
    /// GGUF bytes of one row's block.
    const FILE_BYTES: usize;
    /// All rows zero (the lanes past a matrix's last row add nothing).
    const EMPTY: Self;

    /// The lowest CPU level with a kernel for this layout.
    const MIN_LEVEL: super::CpuLevel;

    /// Sets row `lane` from its GGUF block bytes.
    fn set_row(&mut self, lane: usize, gguf: &[u8]);

    /// Appends row `lane`'s values as f32.
    fn dequantize_row(&self, lane: usize, out: &mut Vec<f32>);

    /// `out[i][r] = Σ_c input[i][c] · W[r][c]` on the kernel for `level`, for the weight rows of the panels `tiles`
    /// names (the other outputs untouched; `Panels::product` checks the shapes, that `level` is at least
    /// `MIN_LEVEL`, and that the CPU has it).
    fn matmul(
        panels: &Panels<Self>,
        level: super::CpuLevel,
        input: &[f32],
        m: usize,
        out: &mut [f32],
        tiles: super::RowTiles<'_>,
    );
}

/// A `[rows, cols]` matrix as panels: panel `p` holds rows `16p..16p + 16`, its blocks in order.
#[derive(Debug)]
pub struct Panels<B> {
    rows: usize,
    cols: usize,
    blocks: Vec<B>,
}

impl<B: PanelBlock> Panels<B> {
    /// The lowest CPU level with a kernel for these panels.
    pub const MIN_LEVEL: super::CpuLevel = B::MIN_LEVEL;

    /// Whether this CPU runs a kernel for these panels (`B::MIN_LEVEL` or above, not turned off by
    /// `TANDEM_KERNELS` or `TANDEM_CPU_ISA`).
    pub fn supported() -> bool {
        super::cpu_level() >= B::MIN_LEVEL
    }

    /// Repacks a 2-D `QTensor` (`[out, in]`) of the block's type.
    pub fn from_qtensor(tensor: &QTensor) -> Result<Self> {
        let (rows, cols, bytes) = super::tensor_bytes(tensor, B::TYPE)?;
        Self::from_gguf_bytes(rows, cols, &bytes)
    }

    /// From GGUF bytes of the block's type, row-major.
    pub fn from_gguf_bytes(rows: usize, cols: usize, bytes: &[u8]) -> Result<Self> {
        super::check_layout(rows, cols, bytes.len(), B::VALUES, B::FILE_BYTES, B::TYPE)?;
        let row_bytes = cols / B::VALUES * B::FILE_BYTES;
        Ok(Self::gather(
            rows,
            cols,
            |r| bytes[r * row_bytes..(r + 1) * row_bytes].chunks_exact(B::FILE_BYTES),
            B::set_row,
        ))
    }

    /// A `[rows, cols]` matrix (`cols` a multiple of the block's values) whose row `r` is set, block by block, from
    /// `row_sources(r)` by `set(block, lane, source)`.
    pub(super) fn gather<S, I: Iterator<Item = S>>(
        rows: usize,
        cols: usize,
        row_sources: impl Fn(usize) -> I,
        set: impl Fn(&mut B, usize, S),
    ) -> Self {
        let per_row = cols / B::VALUES;
        // Panel by panel, each block filled on the stack from its sixteen rows and then written once: a load
        // writes the model's size in blocks, and zeroing them all first (then setting each lane in place) cost a
        // second pass over that memory.
        let mut blocks = Vec::with_capacity(rows.div_ceil(PANEL_ROWS) * per_row);
        for first in (0..rows).step_by(PANEL_ROWS) {
            let mut sources: Vec<I> = (first..rows.min(first + PANEL_ROWS)).map(&row_sources).collect();
            for _ in 0..per_row {
                let mut block = B::EMPTY;
                for (lane, source) in sources.iter_mut().enumerate() {
                    if let Some(source) = source.next() {
                        set(&mut block, lane, source);
                    }
                }
                blocks.push(block);
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

    /// Panel `p`'s blocks (rows `16p..16p + 16`).
    pub(crate) fn panel(&self, p: usize) -> &[B] {
        let per_row = self.cols / B::VALUES;
        &self.blocks[p * per_row..(p + 1) * per_row]
    }

    /// Row `r` as f32.
    pub fn dequantize_row(&self, r: usize) -> Vec<f32> {
        let mut values = Vec::with_capacity(self.cols);
        for block in self.panel(r / PANEL_ROWS) {
            block.dequantize_row(r % PANEL_ROWS, &mut values);
        }
        values
    }

    /// `out[i][r] = Σ_c input[i][c] · W[r][c]` with the input quantized as the block type's kernel wants it
    /// (`input` `[m][cols]`).
    ///
    /// # Panics
    /// Where the CPU has no kernel for this layout (see `supported`): load the row layout there.
    pub fn matmul(&self, input: &[f32], m: usize, out: &mut [f32]) {
        self.matmul_at(super::cpu_level(), input, m, out);
    }

    /// `matmul` on the kernel for `level`, between `B::MIN_LEVEL` and `cpu_level()` (tests run every kernel the CPU
    /// can).
    pub fn matmul_at(&self, level: super::CpuLevel, input: &[f32], m: usize, out: &mut [f32]) {
        self.product(level, input, m, out, super::RowTiles::All);
    }

    /// `B::matmul` over the panels `tiles` names, after checking the level and the shapes.
    fn product(&self, level: super::CpuLevel, input: &[f32], m: usize, out: &mut [f32], tiles: super::RowTiles<'_>) {
        assert!(level >= B::MIN_LEVEL, "{:?} panels have no {level:?} kernel; load the row layout there", B::TYPE);
        assert!(level <= super::cpu_level(), "{level:?} kernels on a {:?} CPU", super::cpu_level());
        assert!(level.runs_here(), "{level:?} kernels on a CPU without them");
        assert_eq!(input.len(), m * self.cols, "input is [m][cols]");
        assert_eq!(out.len(), m * self.rows, "out is [m][rows]");
        B::matmul(self, level, input, m, out, tiles);
    }

    /// One input row's product with the weight rows `rows` only (ascending, each below `rows()`), into those rows
    /// of `out` (`[rows()]`, the rest untouched), with the bits `matmul` gives them: the panels holding them are
    /// computed whole, on the calling thread (a decoding step whose grammar allows few tokens).
    pub fn matvec_rows(&self, input: &[f32], rows: &[u32], out: &mut [f32]) {
        self.matvec_rows_at(super::cpu_level(), input, rows, out);
    }

    /// `matvec_rows` on the kernel for `level` (as `matmul_at` allows it).
    pub fn matvec_rows_at(&self, level: super::CpuLevel, input: &[f32], rows: &[u32], out: &mut [f32]) {
        assert_eq!(out.len(), self.rows, "out is [rows]");
        let mut panels: Vec<std::ops::Range<usize>> = Vec::new();
        for run in super::runs_of_rows(rows, self.rows) {
            for panel in run.start / PANEL_ROWS..run.end.div_ceil(PANEL_ROWS) {
                if panels.last().is_none_or(|last| last.start != panel * PANEL_ROWS) {
                    panels.push(panel * PANEL_ROWS..((panel + 1) * PANEL_ROWS).min(self.rows));
                }
            }
        }
        // The kernels write every row of a panel: into a scratch row, then the wanted ones across.
        let mut all = vec![0f32; self.rows];
        self.product(level, input, 1, &mut all, super::RowTiles::Only(&panels));
        for run in super::runs_of_rows(rows, self.rows) {
            out[run.clone()].copy_from_slice(&all[run]);
        }
    }
}

/// Runs `panel_rows(rows, out)` for every panel on the CPU pool, K-quant activations (per 256) quantized first.
#[cfg(target_arch = "x86_64")]
pub(super) fn k_quant_product<B: PanelBlock>(
    panels: &Panels<B>,
    input: &[f32],
    out: &mut [f32],
    tiles: super::RowTiles<'_>,
    panel_rows: impl Fn(&super::k_acts::KActivations, std::ops::Range<usize>, &mut [f32]) + Sync,
) {
    super::k_acts::K_ACTIVATIONS.with(|cell| {
        let mut acts = cell.borrow_mut();
        acts.quantize(input, panels.cols());
        let acts = &*acts;
        super::for_some_row_tiles(tiles, panels.rows(), out, |rows, out| panel_rows(acts, rows, out));
    });
}
