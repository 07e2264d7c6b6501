//! Our CPU matmul kernels for quantized weights, chosen per weight matrix at load and per CPU feature at run time.
//!
//! candle 0.11's CPU path runs Q8_0 weights through one dot product per (row, column) pair unless the width is a
//! multiple of 256 and the CPU has AVX-512 VNNI; the 0.5B executor (width 896, Q5_0/Q8_0 tensors) never gets
//! there, so its prefill fell far behind llama.cpp's (docs/performance.md, "Side by side with llama.cpp (CPU)").
//! `QLinear` wraps a weight matrix: our tiled kernels for Q8_0, Q5_0, Q4_K, Q5_K, Q6_K, Q4_0 and Q4_1 where they
//! apply (x86-64 with AVX2 + FMA; Q4_K, Q5_K and Q5_0 are stored as panels of 16 rows, and on AVX-512 VNNI CPUs
//! Q6_K too), candle's `QMatMul` everywhere else (other types, GPUs, other CPUs). Every fast path has a test
//! against a scalar reference. `TANDEM_CPU_ISA` picks a lower instruction set than the CPU's, to test and measure each path on one
//! machine.

pub mod attention;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(feature = "cuda")]
pub mod gpu;
#[cfg(feature = "cuda")]
pub mod gpu_attention;
#[cfg(feature = "cuda")]
pub mod gpu_fused;
pub mod half;
pub mod k_acts;
#[cfg(target_arch = "x86_64")]
mod k_panels_avx2;
#[cfg(target_arch = "x86_64")]
mod k_panels_vnni;
pub mod kquants;
#[cfg(target_arch = "x86_64")]
mod kquants_avx2;
pub mod panels;
pub mod q4;
#[cfg(target_arch = "x86_64")]
mod q4_avx2;
pub mod q4k_panels;
pub mod q5_0;
#[cfg(target_arch = "x86_64")]
mod q5_0_avx2;
pub mod q5_0_panels;
pub mod q5k_panels;
pub mod q6k_panels;
pub mod q8_0;
#[cfg(target_arch = "x86_64")]
mod q8_0_avx2;
#[cfg(target_arch = "x86_64")]
mod q8_0_vnni;
pub mod silu_mul;

use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{CpuStorage, CustomOp1, Layout, Module, Shape, Tensor};

pub use half::{HalfKind, HalfMatrix};
pub use kquants::{Q4KMatrix, Q5KMatrix, Q6KMatrix};
pub use q4::{Q4Kind, Q4Matrix};
pub use q4k_panels::Q4KPanels;
pub use q5_0::Q5_0Matrix;
pub use q5_0_panels::Q5_0Panels;
pub use q5k_panels::Q5KPanels;
pub use q6k_panels::Q6KPanels;
pub use q8_0::Q8_0Matrix;

use crate::Result;

/// Weight rows one pool work item covers: its rows stay in L1/L2 while every activation row passes by. One Q4_K
/// panel, so an item never splits one.
const ROWS_PER_ITEM: usize = panels::PANEL_ROWS;

/// Runs `kernel(rows, out)` for tiles of `ROWS_PER_ITEM` weight rows on candle's CPU thread pool (the threads
/// candle's own kernels use, so `--threads` governs both). `out` is `[m][n_rows]`; each call writes only the
/// columns of its own rows.
pub(crate) fn for_row_tiles(
    n_rows: usize,
    out: &mut [f32],
    kernel: impl Fn(std::ops::Range<usize>, &mut [f32]) + Sync,
) {
    let items = n_rows.div_ceil(ROWS_PER_ITEM);
    let out_addr = out.as_mut_ptr() as usize;
    let out_len = out.len();
    candle_core::utils::barrier_pool().execute_chunked(items, |range| {
        // SAFETY: `out_addr` and `out_len` describe `out`, which stays mutably borrowed by this function (alive,
        // and touched by nobody else) until `execute_chunked` returns, after every item is done. Each item's
        // kernel writes only the columns of its own weight rows, `first..first + ROWS_PER_ITEM`, which no other
        // item covers, so no element is accessed by two threads. (The threads' slices overlap as ranges even
        // though their accesses do not, which the aliasing model does not strictly allow; handing the kernels a
        // pointer instead of a slice would remove that.)
        let out = unsafe { std::slice::from_raw_parts_mut(out_addr as *mut f32, out_len) };
        for item in range {
            let first = item * ROWS_PER_ITEM;
            kernel(first..(first + ROWS_PER_ITEM).min(n_rows), out);
        }
    });
}

/// Which weight rows a product computes.
#[derive(Clone, Copy)]
pub enum RowTiles<'a> {
    /// Every row, in tiles of `ROWS_PER_ITEM` shared out on the CPU pool.
    All,
    /// Only these runs of rows, on the calling thread (for a panel layout, whole panels, as `for_row_tiles` hands
    /// them out).
    Only(&'a [std::ops::Range<usize>]),
}

/// `for_row_tiles` over the tiles `which` names.
pub(crate) fn for_some_row_tiles(
    which: RowTiles<'_>,
    n_rows: usize,
    out: &mut [f32],
    kernel: impl Fn(std::ops::Range<usize>, &mut [f32]) + Sync,
) {
    match which {
        RowTiles::All => for_row_tiles(n_rows, out, kernel),
        RowTiles::Only(tiles) => {
            for tile in tiles {
                kernel(tile.clone(), out);
            }
        }
    }
}

/// `rows` (ascending weight rows, each below `n_rows`) as runs of consecutive rows, so a kernel takes each run in
/// one call.
pub(crate) fn runs_of_rows(rows: &[u32], n_rows: usize) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let mut rest = rows;
    std::iter::from_fn(move || {
        let (&first, _) = rest.split_first()?;
        let len = rest.iter().enumerate().take_while(|&(i, &r)| r as usize == first as usize + i).count();
        rest = &rest[len..];
        let run = first as usize..first as usize + len;
        assert!(run.end <= n_rows, "weight row {} of {n_rows}", run.end - 1);
        Some(run)
    })
}

/// Runs `work(start, part)` on candle's CPU thread pool for consecutive parts of `out`, `chunk` elements each (the
/// last one shorter), `start` being the part's first index: elementwise work that would otherwise leave the other
/// cores waiting.
pub(crate) fn for_chunks_mut<T: Send>(out: &mut [T], chunk: usize, work: impl Fn(usize, &mut [T]) + Sync) {
    assert!(chunk > 0, "chunks of no elements");
    if out.len() <= chunk {
        // One part: waking the pool would cost more than it saves.
        work(0, out);
        return;
    }
    let (len, addr) = (out.len(), out.as_mut_ptr() as usize);
    candle_core::utils::barrier_pool().execute_chunked(len.div_ceil(chunk), |items| {
        for item in items {
            let start = item * chunk;
            let part_len = chunk.min(len - start);
            // SAFETY: `out` stays mutably borrowed by this function until `execute_chunked` returns, after every
            // item is done; items are handed out once each, and item `i`'s part, `i · chunk..` for `part_len`
            // elements, lies inside `out` and overlaps no other item's part.
            let part = unsafe { std::slice::from_raw_parts_mut((addr as *mut T).add(start), part_len) };
            work(start, part);
        }
    });
}

/// A 2-D quantized tensor's shape and bytes, checked to be of type `dtype`.
fn tensor_bytes(tensor: &QTensor, dtype: GgmlDType) -> Result<(usize, usize, std::borrow::Cow<'_, [u8]>)> {
    if tensor.dtype() != dtype {
        return Err(candle_core::Error::Msg(format!("expected a {dtype:?} tensor, got {:?}", tensor.dtype())).into());
    }
    let (rows, cols) = tensor.shape().dims2()?;
    Ok((rows, cols, tensor.data()?))
}

/// Checks that `len` bytes of blocks (`block_values` values in `block_bytes` bytes each) make a `[rows, cols]`
/// matrix of type `kind`; returns the block count.
fn check_layout(
    rows: usize,
    cols: usize,
    len: usize,
    block_values: usize,
    block_bytes: usize,
    kind: GgmlDType,
) -> Result<usize> {
    if !cols.is_multiple_of(block_values) {
        return Err(
            candle_core::Error::Msg(format!("{kind:?} width {cols} is not a multiple of {block_values}")).into()
        );
    }
    let blocks = rows * cols / block_values;
    if len != blocks * block_bytes {
        return Err(candle_core::Error::Msg(format!(
            "{kind:?} data of {len} bytes for a {rows}x{cols} matrix (expected {})",
            blocks * block_bytes
        ))
        .into());
    }
    Ok(blocks)
}

/// The instruction sets our kernels can use on this CPU, detected once; each level includes the ones before it,
/// except that AVX-512 VNNI does not imply AVX-VNNI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CpuLevel {
    /// Anything else: candle's kernels run.
    Portable,
    /// x86-64 with AVX2 and FMA: our tiled kernels run.
    Avx2,
    /// AVX2 plus AVX-VNNI (the 256-bit `vpdpbusd` of Intel laptop cores since Alder Lake, and AMD Zen 5): the Q4_K
    /// panels add 32 products an instruction where AVX2 takes two. A CPU with AVX-512 VNNI may lack it (Ice Lake,
    /// Zen 4); it runs the wider kernels anyway, and tests skip this level there.
    AvxVnni,
    /// AVX2 plus AVX-512 (F, BW, VL) with VNNI: the Q8_0, Q4_K and Q6_K kernels take 64 bytes per instruction.
    Avx512Vnni,
}

impl CpuLevel {
    /// This level and every one below it that has kernels of ours and this CPU runs (tests run each fast path the
    /// CPU allows).
    pub fn with_lower_levels(self) -> Vec<CpuLevel> {
        [CpuLevel::Avx2, CpuLevel::AvxVnni, CpuLevel::Avx512Vnni]
            .into_iter()
            .filter(|&level| level <= self && level.runs_here())
            .collect()
    }

    /// Whether this CPU runs this level: it is at most the detected one, and AVX-VNNI (which AVX-512 VNNI does not
    /// imply) is there if asked for.
    pub fn runs_here(self) -> bool {
        self <= detected_level() && (self != CpuLevel::AvxVnni || has_avx_vnni())
    }
}

/// Whether this CPU has AVX-VNNI (with the AVX2, FMA and F16C the `AvxVnni` level also needs).
pub fn has_avx_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    return is_x86_feature_detected!("avxvnni") && detected_level() >= CpuLevel::Avx2;
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Which weight types run on our kernels, from `TANDEM_KERNELS`: `all` (default), `q5_0` (all, with Q5_0 kept at
/// five bits in rows rather than panels or widened to int8: opt-in, since the row kernel is bound by instructions
/// more than by bytes and both decoded and prefilled slower than the widened layout; docs/performance.md, "What was
/// tried and dropped"), `q8_0` (Q8_0, and Q5_0 widened exactly to int8, only: candle runs Q4_K, Q5_K, Q6_K, Q4_0
/// and Q4_1) or `candle` (none).
pub fn kernel_choice() -> &'static str {
    static CHOICE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CHOICE.get_or_init(|| crate::settings::env::kernels().unwrap_or_else(|| "all".into()))
}

/// The instruction sets `TANDEM_CPU_ISA` can name, each with the level it runs.
const ISA_NAMES: [(&str, CpuLevel); 4] = [
    ("avx512", CpuLevel::Avx512Vnni),
    ("avxvnni", CpuLevel::AvxVnni),
    ("avx2", CpuLevel::Avx2),
    ("scalar", CpuLevel::Portable),
];

/// What this CPU supports, detected: AVX2 with FMA and F16C for our kernels, AVX-VNNI beside them, AVX-512 F, BW, VL
/// and VNNI for the wider ones.
pub fn detected_level() -> CpuLevel {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c") {
        let avx512_vnni = is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512vnni");
        return match (avx512_vnni, is_x86_feature_detected!("avxvnni")) {
            (true, _) => CpuLevel::Avx512Vnni,
            (false, true) => CpuLevel::AvxVnni,
            (false, false) => CpuLevel::Avx2,
        };
    }
    CpuLevel::Portable
}

/// The level `TANDEM_CPU_ISA` asks for (`avx512`, `avxvnni`, `avx2` or `scalar`: candle's portable kernels, none of
/// ours), if set; an unknown name or an instruction set this CPU lacks is an error that says which ones it runs.
pub fn requested_level() -> Result<Option<CpuLevel>> {
    let Some(name) = crate::settings::env::cpu_isa() else { return Ok(None) };
    let names = ISA_NAMES.map(|(name, _)| name).join(", ");
    let Some(&(_, level)) = ISA_NAMES.iter().find(|(known, _)| known.eq_ignore_ascii_case(name.trim())) else {
        return Err(crate::Error::Usage(format!("TANDEM_CPU_ISA={name} is not one of {names}")));
    };
    if !level.runs_here() {
        let has: Vec<&str> = ISA_NAMES.iter().filter(|(_, l)| l.runs_here()).map(|(name, _)| *name).collect();
        return Err(crate::Error::Usage(format!(
            "TANDEM_CPU_ISA={name}: this CPU lacks it (it runs {}); unset TANDEM_CPU_ISA or pick one of those",
            has.join(", ")
        )));
    }
    Ok(Some(level))
}

/// The level our kernels run at: the CPU's, or lower where `TANDEM_CPU_ISA` (or `TANDEM_KERNELS=avx2`, or
/// `TANDEM_KERNELS=candle` for none of ours) asks. A `TANDEM_CPU_ISA` that `requested_level` rejects is ignored
/// here (the CLI refuses it before loading anything).
pub fn cpu_level() -> CpuLevel {
    static LEVEL: std::sync::OnceLock<CpuLevel> = std::sync::OnceLock::new();
    *LEVEL.get_or_init(|| {
        let mut level = detected_level();
        if let Ok(Some(requested)) = requested_level() {
            level = requested;
        }
        match kernel_choice() {
            "candle" => CpuLevel::Portable,
            "avx2" => level.min(CpuLevel::Avx2),
            _ => level,
        }
    })
}

/// A weight matrix one of our kernels multiplies.
pub trait CpuMatmul: Send + Sync {
    /// Output features.
    fn rows(&self) -> usize;
    /// Input width.
    fn cols(&self) -> usize;
    /// `out[i][r] = Σ_c input[i][c] · W[r][c]` for `m` input rows (`input` `[m][cols]`, `out` `[m][rows]`).
    fn matmul(&self, input: &[f32], m: usize, out: &mut [f32]);
    /// Row `r` as f32 (an embedding lookup).
    fn dequantize_row(&self, r: usize) -> Vec<f32>;
    /// The kernel's name, for load reports.
    fn kernel_name(&self) -> &'static str;
    /// One input row (`[cols]`) times the weight rows `rows` only (ascending, each below `rows()`), into those
    /// rows of `out` (`[rows()]`; the rest untouched), with the bits `matmul` gives them. The default computes
    /// every row and copies the wanted ones (correct, not faster); kernels that can skip rows override it.
    fn matvec_rows(&self, input: &[f32], rows: &[u32], out: &mut [f32]) {
        let mut all = vec![0f32; self.rows()];
        self.matmul(input, 1, &mut all);
        for run in runs_of_rows(rows, self.rows()) {
            out[run.clone()].copy_from_slice(&all[run]);
        }
    }
}

/// `CpuMatmul` for a matrix type whose inherent methods have the trait's names. The kernel's name is a literal, or
/// `by PATH`: a function of the matrix (a type that holds several kinds names each).
macro_rules! cpu_matmul_by_inherent_methods {
    (@named $matrix:ty, $name:expr, matvec_rows) => {
        cpu_matmul_by_inherent_methods!(@named $matrix, $name, fn matvec_rows(&self, input: &[f32], rows: &[u32], out: &mut [f32]) {
            self.matvec_rows(input, rows, out)
        });
    };
    (@named $matrix:ty, $name:expr $(, $($extra:tt)+)?) => {
        impl CpuMatmul for $matrix {
            $($($extra)+)?
            fn rows(&self) -> usize {
                self.rows()
            }
            fn cols(&self) -> usize {
                self.cols()
            }
            fn matmul(&self, input: &[f32], m: usize, out: &mut [f32]) {
                self.matmul(input, m, out)
            }
            fn dequantize_row(&self, r: usize) -> Vec<f32> {
                self.dequantize_row(r)
            }
            fn kernel_name(&self) -> &'static str {
                ($name)(self)
            }
        }
    };
    ($matrix:ty, by $name:path $(, $($rest:tt)+)?) => {
        cpu_matmul_by_inherent_methods!(@named $matrix, $name $(, $($rest)+)?);
    };
    ($matrix:ty, $name:literal $(, $($rest:tt)+)?) => {
        cpu_matmul_by_inherent_methods!(@named $matrix, |_: &$matrix| $name $(, $($rest)+)?);
    };
}

cpu_matmul_by_inherent_methods!(Q8_0Matrix, "tandem-q8_0", matvec_rows);
cpu_matmul_by_inherent_methods!(Q5_0Matrix, "tandem-q5_0");
cpu_matmul_by_inherent_methods!(Q4KMatrix, "tandem-q4_k");
cpu_matmul_by_inherent_methods!(Q4KPanels, "tandem-q4_k-panels", matvec_rows);
cpu_matmul_by_inherent_methods!(Q5_0Panels, "tandem-q5_0-panels", matvec_rows);
cpu_matmul_by_inherent_methods!(Q5KPanels, "tandem-q5_k-panels", matvec_rows);
cpu_matmul_by_inherent_methods!(Q6KPanels, "tandem-q6_k-panels", matvec_rows);
cpu_matmul_by_inherent_methods!(Q6KMatrix, "tandem-q6_k", matvec_rows);

cpu_matmul_by_inherent_methods!(Q4Matrix, by Q4Matrix::kernel_name, matvec_rows);
cpu_matmul_by_inherent_methods!(HalfMatrix, by HalfMatrix::kernel_name, matvec_rows);

/// A linear layer without bias, `y = x Wᵀ`, over a quantized weight `W` of shape `[out, in]`.
#[derive(Clone)]
pub enum QLinear {
    /// candle's quantized matmul (any type, any device).
    Candle(QMatMul),
    /// One of our CPU kernels.
    Ours(Arc<dyn CpuMatmul>),
}

/// The token ids of an embedding lookup, flattened, each checked to name one of the table's `rows`.
pub(crate) fn embedding_ids(ids: &Tensor, rows: usize) -> candle_core::Result<Vec<u32>> {
    let picked = ids.flatten_all()?.to_dtype(candle_core::DType::U32)?.to_vec1::<u32>()?;
    if let Some(id) = picked.iter().find(|&&id| id as usize >= rows) {
        candle_core::bail!("token id {id} outside the embedding's {rows} rows");
    }
    Ok(picked)
}

impl QLinear {
    /// Wraps `weight` in our kernel when the device is the CPU, this CPU has one, and we have one for the type
    /// (Q8_0, Q4_K, Q5_K, Q6_K, Q4_0, Q4_1, F16, BF16); in candle's `QMatMul` otherwise.
    pub fn new(weight: QTensor) -> Result<Self> {
        match Self::ours(&weight, false)? {
            Some(ours) => Ok(ours),
            None => Ok(Self::Candle(QMatMul::from_qtensor(weight)?)),
        }
    }

    /// Like `new`, and Q5_0 weights (which candle's CPU kernels run slowly) take ours too: as five-bit panels, or
    /// kept at five bits in rows with `TANDEM_KERNELS=q5_0` where the width is a multiple of 64. `None` when this CPU has no kernel of ours for the type: the caller
    /// picks another route.
    pub fn widened(weight: &QTensor) -> Result<Option<Self>> {
        Self::ours(weight, true)
    }

    /// Like `new` for a weight shared with another use (the embedding table tied to the output projection).
    pub fn from_arc(weight: Arc<QTensor>) -> Result<Self> {
        match Self::ours(&weight, false)? {
            Some(ours) => Ok(ours),
            None => Ok(Self::Candle(QMatMul::from_arc(weight)?)),
        }
    }

    /// Like `new`, from a `[rows, cols]` matrix's GGUF bytes of type `dtype`; `None` where no kernel of ours takes
    /// it (the caller loads candle's). The tied embedding table is built so: read into a `QTensor` first, the
    /// file's copy and ours were both alive at once (30 MB more at the load's peak on SmolLM2-135M).
    pub fn from_gguf_bytes(dtype: GgmlDType, rows: usize, cols: usize, bytes: &[u8]) -> Result<Option<Self>> {
        Self::ours_from_bytes(dtype, rows, cols, bytes, false)
    }

    /// Like `widened`, from a `[rows, cols]` matrix's GGUF bytes of type `dtype` (a mapped file's, copied once
    /// into our layout instead of first into a `QTensor`).
    pub fn widened_from_gguf_bytes(dtype: GgmlDType, rows: usize, cols: usize, bytes: &[u8]) -> Result<Option<Self>> {
        Self::ours_from_bytes(dtype, rows, cols, bytes, true)
    }

    fn ours(weight: &QTensor, widen_q5_0: bool) -> Result<Option<Self>> {
        if !weight.device().is_cpu() || weight.shape().rank() != 2 {
            return Ok(None);
        }
        let (rows, cols) = weight.shape().dims2()?;
        Self::ours_from_bytes(weight.dtype(), rows, cols, &weight.data()?, widen_q5_0)
    }

    fn ours_from_bytes(
        dtype: GgmlDType,
        rows: usize,
        cols: usize,
        bytes: &[u8],
        widen_q5_0: bool,
    ) -> Result<Option<Self>> {
        if cpu_level() < CpuLevel::Avx2 {
            return Ok(None);
        }
        let ours: Arc<dyn CpuMatmul> = match dtype {
            GgmlDType::Q8_0 => Arc::new(Q8_0Matrix::from_gguf_bytes(rows, cols, bytes)?),
            GgmlDType::Q5_0 if widen_q5_0 && kernel_choice() == "q5_0" && Q5_0Matrix::fits(cols) => {
                Arc::new(Q5_0Matrix::from_gguf_bytes(rows, cols, bytes)?)
            }
            // Panels on every CPU with kernels of ours; the int8 widening only when asked for (`q8_0`).
            GgmlDType::Q5_0 if widen_q5_0 && kernel_choice() != "q8_0" => {
                Arc::new(Q5_0Panels::from_gguf_bytes(rows, cols, bytes)?)
            }
            GgmlDType::Q5_0 if widen_q5_0 => Arc::new(Q8_0Matrix::from_q5_0_bytes(rows, cols, bytes)?),
            GgmlDType::Q4K | GgmlDType::Q5K | GgmlDType::Q6K | GgmlDType::Q4_0 | GgmlDType::Q4_1
                if kernel_choice() == "q8_0" =>
            {
                return Ok(None)
            }
            // In rows, in llama.cpp's arithmetic (`q4`); AVX-512 CPUs run the AVX2 kernel.
            // Kept at two bytes a value (candle widens them to f32).
            GgmlDType::F16 => Arc::new(HalfMatrix::from_gguf_bytes(HalfKind::F16, rows, cols, bytes)?),
            GgmlDType::BF16 => Arc::new(HalfMatrix::from_gguf_bytes(HalfKind::Bf16, rows, cols, bytes)?),
            GgmlDType::Q4_0 => Arc::new(Q4Matrix::from_gguf_bytes(Q4Kind::Q4_0, rows, cols, bytes)?),
            GgmlDType::Q4_1 => Arc::new(Q4Matrix::from_gguf_bytes(Q4Kind::Q4_1, rows, cols, bytes)?),
            // Panels on every CPU with kernels of ours (checked above).
            GgmlDType::Q4K if cols.is_multiple_of(k_acts::SUPER) => {
                Arc::new(Q4KPanels::from_gguf_bytes(rows, cols, bytes)?)
            }
            // Panels on every CPU with kernels of ours, on the AVX2 kernel at every level (`q5k_panels`).
            GgmlDType::Q5K if cols.is_multiple_of(k_acts::SUPER) => {
                Arc::new(Q5KPanels::from_gguf_bytes(rows, cols, bytes)?)
            }
            GgmlDType::Q6K if cols.is_multiple_of(k_acts::SUPER) => {
                if Q6KPanels::supported() {
                    Arc::new(Q6KPanels::from_gguf_bytes(rows, cols, bytes)?)
                } else {
                    Arc::new(Q6KMatrix::from_gguf_bytes(rows, cols, bytes)?)
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(Self::Ours(ours)))
    }

    /// One input row `x` (`[..., in]` with one row) times the weight rows `rows` only (ascending, each below the
    /// output width), into those entries of `out` (`[out]`; the rest untouched), as `forward` computes them: the
    /// logits of the few tokens a grammar allows, at a sliver of the output projection's cost on our kernels
    /// (candle's computes them all and keeps these).
    pub fn forward_rows(&self, x: &Tensor, rows: &[u32], out: &mut [f32]) -> Result<()> {
        let width = match self {
            Self::Candle(m) => match m {
                QMatMul::QTensor(t) => t.shape().dims2()?.0,
                QMatMul::Tensor(t) | QMatMul::TensorF16(t) => t.dims2()?.0,
            },
            Self::Ours(w) => w.rows(),
        };
        if out.len() != width || rows.iter().any(|&r| r as usize >= width) {
            return Err(candle_core::Error::Msg(format!(
                "logits of {} rows into {} values from an output projection {width} wide",
                rows.len(),
                out.len()
            ))
            .into());
        }
        match self {
            Self::Ours(w) => {
                let input = x.flatten_all()?.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?;
                if input.len() != w.cols() {
                    return Err(candle_core::Error::Msg(format!(
                        "one input row of {} values, got {:?}",
                        w.cols(),
                        x.dims()
                    ))
                    .into());
                }
                w.matvec_rows(&input, rows, out);
            }
            Self::Candle(_) => {
                let all = self.forward(x)?.flatten_all()?.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?;
                if all.len() != width {
                    return Err(candle_core::Error::Msg(format!("one row's logits, not {}", all.len())).into());
                }
                for run in runs_of_rows(rows, width) {
                    out[run.clone()].copy_from_slice(&all[run]);
                }
            }
        }
        Ok(())
    }

    /// Rows of the weight picked by `ids` as f32, shape `ids.dims() ++ [in]`: the embedding lookup, so a table
    /// tied to the output projection is stored once.
    pub fn embedding(&self, ids: &Tensor) -> Result<Tensor> {
        match self {
            Self::Candle(m) => Ok(m.embedding(ids)?),
            Self::Ours(w) => {
                let picked = embedding_ids(ids, w.rows())?;
                let mut values = Vec::with_capacity(picked.len() * w.cols());
                for id in picked {
                    values.extend(w.dequantize_row(id as usize));
                }
                let mut dims = ids.dims().to_vec();
                dims.push(w.cols());
                Ok(Tensor::from_vec(values, dims, ids.device())?)
            }
        }
    }

    /// Which kernel runs this layer, for load reports.
    pub fn kernel_name(&self) -> &'static str {
        match self {
            Self::Candle(_) => "candle",
            Self::Ours(w) => w.kernel_name(),
        }
    }
}

impl Module for QLinear {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Self::Candle(m) => m.forward(xs),
            Self::Ours(w) => xs.contiguous()?.apply_op1_no_bwd(&OursOp(w.clone())),
        }
    }
}

/// The candle op that runs one of our kernels on a CPU tensor `[..., in]` → `[..., out]`.
struct OursOp(Arc<dyn CpuMatmul>);

impl CustomOp1 for OursOp {
    fn name(&self) -> &'static str {
        self.0.kernel_name()
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let weight = &self.0;
        let name = weight.kernel_name();
        let dims = layout.shape().dims();
        let Some((&k, batch)) = dims.split_last() else { candle_core::bail!("{name}: a scalar input") };
        if k != weight.cols() {
            candle_core::bail!("{name}: input width {k}, weight is {}x{}", weight.rows(), weight.cols())
        }
        let Some(offsets) = layout.contiguous_offsets() else { candle_core::bail!("{name}: input is not contiguous") };
        let input = match storage {
            CpuStorage::F32(values) => &values[offsets.0..offsets.1],
            other => {
                use candle_core::backend::BackendStorage;
                candle_core::bail!("{name}: input is {:?}, expected f32", other.dtype())
            }
        };
        let m = input.len() / k;
        let mut out = vec![0f32; m * weight.rows()];
        weight.matmul(input, m, &mut out);
        let mut out_dims = batch.to_vec();
        out_dims.push(weight.rows());
        Ok((CpuStorage::F32(out), Shape::from(out_dims)))
    }
}
