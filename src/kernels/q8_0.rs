//! Q8_0 weight matrices (int8 values with one scale per 32) and their matmul against f32 activations.
//!
//! Activations are quantized the same way (int8 per 32 with a scale), so each 32-wide block is an integer dot
//! product scaled by `d_weight × d_activation` — what llama.cpp does, and what candle does with its `BlockQ8_0`.
//! Ours differs in the loop: a tile of weight rows meets a tile of activation rows, so a prefill reads each
//! weight byte once per tile of tokens instead of once per token, and any width divisible by 32 qualifies.

use candle_core::quantized::{GgmlDType, QTensor};

use crate::Result;

/// Values per quantization block.
pub const BLOCK: usize = 32;
/// Bytes of one GGUF Q8_0 block: an f16 scale and 32 int8 values.
const GGUF_BLOCK_BYTES: usize = 2 + BLOCK;

/// A `[rows, cols]` Q8_0 matrix, rows = output features, cols = input width (a multiple of 32).
#[derive(Debug)]
pub struct Q8_0Matrix {
    rows: usize,
    cols: usize,
    /// `[rows][cols]` int8 values.
    quants: Vec<i8>,
    /// `[rows][cols / 32]` block scales as f32 (the file's f16, widened once at load).
    scales: Vec<f32>,
}

/// Activation rows quantized to int8 per 32-wide block.
#[derive(Debug, Default)]
pub struct QuantizedRows {
    /// `[rows][cols]` int8 values.
    pub quants: Vec<i8>,
    /// `[rows][cols / 32]` block scales.
    pub scales: Vec<f32>,
    /// `[rows][cols / 32]` block sums times 128: what adding 128 to every weight of a block adds to its dot
    /// product (the AVX-512 kernels make the weights unsigned so). Filled by `fill_offsets`, only for them.
    pub offsets: Vec<i32>,
}

impl QuantizedRows {
    /// Rows `i0..i0 + N` of width `k`, for a kernel's tile: each row's values, block scales and block offsets
    /// (empty unless `fill_offsets` ran). A loop, not `array::from_fn`: its closures stayed calls in the kernels
    /// (closures do not take on their target features).
    #[allow(clippy::type_complexity)]
    #[inline(always)]
    pub(crate) fn tile_rows<const N: usize>(&self, i0: usize, k: usize) -> ([*const i8; N], [&[f32]; N], [&[i32]; N]) {
        let kb = k / BLOCK;
        let mut rows: ([*const i8; N], [&[f32]; N], [&[i32]; N]) = ([std::ptr::null(); N], [&[]; N], [&[]; N]);
        for j in 0..N {
            let i = i0 + j;
            rows.0[j] = self.quants[i * k..(i + 1) * k].as_ptr();
            rows.1[j] = &self.scales[i * kb..(i + 1) * kb];
            if !self.offsets.is_empty() {
                rows.2[j] = &self.offsets[i * kb..(i + 1) * kb];
            }
        }
        rows
    }

    /// Computes `offsets` from `quants`.
    pub fn fill_offsets(&mut self) {
        self.offsets.clear();
        self.offsets
            .extend(self.quants.chunks_exact(BLOCK).map(|q| 128 * q.iter().map(|&v| i32::from(v)).sum::<i32>()));
    }
}

impl Q8_0Matrix {
    /// Copies a 2-D Q8_0 `QTensor` (`[out, in]`) into our layout.
    pub fn from_qtensor(tensor: &QTensor) -> Result<Self> {
        let (rows, cols, bytes) = super::tensor_bytes(tensor, GgmlDType::Q8_0)?;
        Self::from_gguf_bytes(rows, cols, &bytes)
    }

    /// Builds the matrix from GGUF Q8_0 block bytes (row-major blocks of `f16 scale, 32 × i8`).
    pub fn from_gguf_bytes(rows: usize, cols: usize, bytes: &[u8]) -> Result<Self> {
        let blocks = super::check_layout(rows, cols, bytes.len(), BLOCK, GGUF_BLOCK_BYTES, GgmlDType::Q8_0)?;
        let mut quants = Vec::with_capacity(rows * cols);
        let mut scales = Vec::with_capacity(blocks);
        for block in bytes.chunks_exact(GGUF_BLOCK_BYTES) {
            scales.push(half::f16::from_le_bytes([block[0], block[1]]).to_f32());
            quants.extend(block[2..].iter().map(|&b| b as i8));
        }
        Ok(Self { rows, cols, quants, scales })
    }

    /// Widens a 2-D Q5_0 `QTensor` to our layout. Q5_0 values are integers in [-16, 15] times a block scale, so
    /// int8 with the same scale holds them exactly: the products are the ones llama.cpp computes from Q5_0.
    pub fn from_q5_0(tensor: &QTensor) -> Result<Self> {
        let (rows, cols, bytes) = super::tensor_bytes(tensor, GgmlDType::Q5_0)?;
        Self::from_q5_0_bytes(rows, cols, &bytes)
    }

    /// Builds the matrix from GGUF Q5_0 block bytes: `f16 scale, u32 high bits, 16 bytes of low nibbles`, where
    /// value j (< 16) is the low nibble of byte j and value j + 16 its high nibble, each with bit 4 from the high
    /// bits (bit j, resp. j + 16), minus 16.
    pub fn from_q5_0_bytes(rows: usize, cols: usize, bytes: &[u8]) -> Result<Self> {
        const Q5_0_BLOCK_BYTES: usize = 2 + 4 + BLOCK / 2;
        let blocks = super::check_layout(rows, cols, bytes.len(), BLOCK, Q5_0_BLOCK_BYTES, GgmlDType::Q5_0)?;
        let mut quants = Vec::with_capacity(rows * cols);
        let mut scales = Vec::with_capacity(blocks);
        for block in bytes.chunks_exact(Q5_0_BLOCK_BYTES) {
            scales.push(half::f16::from_le_bytes([block[0], block[1]]).to_f32());
            let high = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
            let low = &block[6..];
            let value = |nibble: u8, bit: usize| ((nibble | ((((high >> bit) & 1) as u8) << 4)) as i8) - 16;
            quants.extend((0..BLOCK / 2).map(|j| value(low[j] & 0x0F, j)));
            quants.extend((0..BLOCK / 2).map(|j| value(low[j] >> 4, j + BLOCK / 2)));
        }
        Ok(Self { rows, cols, quants, scales })
    }

    /// Builds the matrix by quantizing f32 values `[rows][cols]` (tests and benches).
    pub fn quantize(rows: usize, cols: usize, values: &[f32]) -> Self {
        assert_eq!(values.len(), rows * cols, "values for a {rows}x{cols} matrix");
        assert_eq!(cols % BLOCK, 0, "width a multiple of {BLOCK}");
        let mut q = QuantizedRows::default();
        quantize_rows(values, cols, &mut q);
        Self { rows, cols, quants: q.quants, scales: q.scales }
    }

    /// An empty matrix, to be filled by `refill` (a scratch tile of unpacked rows; the x86-64 Q5_0 row kernel's).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) fn scratch() -> Self {
        Self { rows: 0, cols: 0, quants: Vec::new(), scales: Vec::new() }
    }

    /// Reshapes this matrix to `[rows, cols]`, keeping its allocations, and hands out its values and scales to
    /// be overwritten.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) fn refill(&mut self, rows: usize, cols: usize) -> (&mut [i8], &mut [f32]) {
        (self.rows, self.cols) = (rows, cols);
        self.quants.resize(rows * cols, 0);
        self.scales.resize(rows * cols / BLOCK, 0.0);
        (&mut self.quants, &mut self.scales)
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `r`'s int8 values.
    pub(crate) fn row_quants(&self, r: usize) -> &[i8] {
        &self.quants[r * self.cols..(r + 1) * self.cols]
    }

    /// Row `r`'s block scales.
    pub(crate) fn row_scales(&self, r: usize) -> &[f32] {
        let kb = self.cols / BLOCK;
        &self.scales[r * kb..(r + 1) * kb]
    }

    /// Row `r` as f32.
    pub fn dequantize_row(&self, r: usize) -> Vec<f32> {
        self.row_quants(r)
            .chunks_exact(BLOCK)
            .zip(self.row_scales(r))
            .flat_map(|(b, &d)| b.iter().map(move |&q| f32::from(q) * d))
            .collect()
    }

    /// `out[i][r] = Σ_c input[i][c] · W[r][c]` for `m` input rows (`input` is `[m][cols]`, `out` `[m][rows]`),
    /// with the input quantized to int8 per block like the weights. Uses the fastest kernel this CPU has.
    pub fn matmul(&self, input: &[f32], m: usize, out: &mut [f32]) {
        self.matmul_at(super::cpu_level(), input, m, out);
    }

    /// `matmul` on the kernel for `level` (at most `cpu_level()`: tests run every kernel the CPU can).
    pub fn matmul_at(&self, level: super::CpuLevel, input: &[f32], m: usize, out: &mut [f32]) {
        self.product(level, input, m, out, super::RowTiles::All);
    }

    /// One input row's product with the weight rows `rows` only (ascending, each below `rows()`), into those rows
    /// of `out` (`[rows()]`, the rest untouched), with the bits `matmul` gives them, on the calling thread: a
    /// decoding step whose grammar allows few tokens needs only their logits.
    pub fn matvec_rows(&self, input: &[f32], rows: &[u32], out: &mut [f32]) {
        self.matvec_rows_at(super::cpu_level(), input, rows, out);
    }

    /// `matvec_rows` on the kernel for `level` (at most `cpu_level()`).
    pub fn matvec_rows_at(&self, level: super::CpuLevel, input: &[f32], rows: &[u32], out: &mut [f32]) {
        let runs: Vec<_> = super::runs_of_rows(rows, self.rows).collect();
        self.product(level, input, 1, out, super::RowTiles::Only(&runs));
    }

    /// Quantizes `input` and runs the kernel for `level` over the weight rows `tiles` names (each row is computed
    /// alone, so it has the same bits whatever else is computed).
    fn product(&self, level: super::CpuLevel, input: &[f32], m: usize, out: &mut [f32], tiles: super::RowTiles<'_>) {
        assert!(level <= super::cpu_level(), "{level:?} kernels on a {:?} CPU", super::cpu_level());
        assert_eq!(input.len(), m * self.cols, "input is [m][cols]");
        assert_eq!(out.len(), m * self.rows, "out is [m][rows]");
        with_quantized(input, self.cols, level == super::CpuLevel::Avx512Vnni, |acts| {
            super::for_some_row_tiles(tiles, self.rows, out, |rows, out| self.rows_kernel(level, acts, m, rows, out));
        });
    }

    /// Computes the output columns `rows` for every activation row on the kernel for `level`.
    fn rows_kernel(
        &self,
        level: super::CpuLevel,
        acts: &QuantizedRows,
        m: usize,
        rows: std::ops::Range<usize>,
        out: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        match level {
            // SAFETY: `level` is at most `cpu_level()` (asserted in `product`, the only caller), and `cpu_level` returns
            // `Avx512Vnni` only after runtime detection found AVX-512 F, BW, VL and VNNI plus AVX2 and FMA.
            super::CpuLevel::Avx512Vnni => return unsafe { super::q8_0_vnni::rows_kernel(self, acts, m, rows, out) },
            super::CpuLevel::Avx2 | super::CpuLevel::AvxVnni => {
                // SAFETY: as above: a level of `Avx2` or more means runtime detection found AVX2 and FMA.
                return unsafe { super::q8_0_avx2::rows_kernel(self, acts, m, rows, out) };
            }
            super::CpuLevel::Portable => {}
        }
        // Other CPUs have no level above `Portable` (`cpu_level`), so the reference runs.
        #[cfg(not(target_arch = "x86_64"))]
        let _ = level;
        reference_rows(self, acts, m, rows, out);
    }
}

thread_local! {
    /// The quantized activations of the current matmul, reused so a decode step allocates nothing.
    static ACTIVATIONS: std::cell::RefCell<QuantizedRows> = std::cell::RefCell::new(QuantizedRows::default());
}

/// Runs `product` on `input` (`[m][cols]`) quantized per 32 into this thread's reused buffer, with the block
/// offsets filled where `offsets` asks for them (the AVX-512 kernels).
pub(super) fn with_quantized(input: &[f32], cols: usize, offsets: bool, product: impl FnOnce(&QuantizedRows)) {
    ACTIVATIONS.with(|cell| {
        let mut acts = cell.borrow_mut();
        quantize_rows(input, cols, &mut acts);
        if offsets {
            acts.fill_offsets();
        }
        product(&acts);
    });
}

/// Quantizes `values` (`[rows][cols]`) to int8 per 32-wide block as llama.cpp's `quantize_row_q8_0` does:
/// d = max |x| / 127, q = round(x / d), and d is kept rounded to f16 (so our sums match llama.cpp's).
pub fn quantize_rows(values: &[f32], cols: usize, out: &mut QuantizedRows) {
    let blocks = values.len() / BLOCK;
    debug_assert_eq!(cols % BLOCK, 0);
    out.quants.resize(values.len(), 0);
    out.scales.resize(blocks, 0.0);
    for ((src, dst), scale) in
        values.chunks_exact(BLOCK).zip(out.quants.chunks_exact_mut(BLOCK)).zip(out.scales.iter_mut())
    {
        *scale = half::f16::from_f32(quantize_block(src, dst)).to_f32();
    }
}

/// Symmetric int8 quantization of one block (any multiple of 32 values): d = max |x| / 127, q = round(x / d)
/// with halves away from zero (as candle rounds; on the 0.5B's close "12*4+5" case, ties to even turned the
/// greedy answer from llama.cpp's "50" to "56"); returns d (0 for all zeros). On AVX2 CPUs, eight values per
/// instruction (the activations of every matmul pass through here, on one thread).
#[inline]
pub(crate) fn quantize_block(src: &[f32], dst: &mut [i8]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if super::cpu_level() >= super::CpuLevel::Avx2 && src.len().is_multiple_of(BLOCK) {
        // SAFETY: `cpu_level` found AVX2 and FMA; the length is a multiple of 32 as the kernel needs.
        return unsafe { super::avx2::quantize_block(src, dst) };
    }
    quantize_block_scalar(src, dst)
}

/// `quantize_block` one value at a time (other CPUs, and the definition the AVX2 version is tested against).
pub(crate) fn quantize_block_scalar(src: &[f32], dst: &mut [i8]) -> f32 {
    let amax = src.iter().fold(0f32, |m, x| m.max(x.abs()));
    let d = amax / 127.0;
    let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
    for (q, x) in dst.iter_mut().zip(src) {
        *q = (x * inv).round() as i8;
    }
    d
}

/// The scalar definition every fast kernel must match: output columns `rows` for every activation row.
pub fn reference_rows(w: &Q8_0Matrix, acts: &QuantizedRows, m: usize, rows: std::ops::Range<usize>, out: &mut [f32]) {
    let kb = w.cols / BLOCK;
    for i in 0..m {
        let a_quants = &acts.quants[i * w.cols..(i + 1) * w.cols];
        let a_scales = &acts.scales[i * kb..(i + 1) * kb];
        for r in rows.clone() {
            let (w_quants, w_scales) = (w.row_quants(r), w.row_scales(r));
            let mut sum = 0f32;
            for b in 0..kb {
                let dot: i32 =
                    (0..BLOCK).map(|j| i32::from(w_quants[b * BLOCK + j]) * i32::from(a_quants[b * BLOCK + j])).sum();
                sum += dot as f32 * w_scales[b] * a_scales[b];
            }
            out[i * w.rows + r] = sum;
        }
    }
}

/// The whole product by the scalar reference (tests compare the fast kernels against it).
pub fn reference_matmul(w: &Q8_0Matrix, input: &[f32], m: usize) -> Vec<f32> {
    let mut acts = QuantizedRows::default();
    quantize_rows(input, w.cols, &mut acts);
    let mut out = vec![0f32; m * w.rows];
    reference_rows(w, &acts, m, 0..w.rows, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 quantizer gives the scalar one's values and scale, ties and zeros included.
    #[test]
    fn simd_quantization_matches_the_scalar_definition() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut blocks: Vec<Vec<f32>> = (0..50)
            .map(|_| {
                (0..256)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 8.0
                    })
                    .collect()
            })
            .collect();
        blocks.push(vec![0.0; 32]);
        // Exact halves after scaling by 127 / 127 go away from zero; values just below a half stay below.
        blocks.push((0..32).map(|i| if i == 0 { 127.0 } else { (i % 8) as f32 + 0.5 }).collect());
        blocks.push((0..32).map(|i| if i == 0 { -127.0 } else { -((i % 8) as f32 + 0.5) }).collect());
        blocks.push((0..32).map(|i| if i == 0 { 127.0 } else { (i % 8) as f32 + 0.499_999_97 }).collect());
        blocks.push((0..64).map(|i| -(i as f32)).collect());
        for block in blocks {
            let (mut fast, mut scalar) = (vec![0i8; block.len()], vec![0i8; block.len()]);
            let d_fast = quantize_block(&block, &mut fast);
            let d_scalar = quantize_block_scalar(&block, &mut scalar);
            assert_eq!(d_fast.to_bits(), d_scalar.to_bits());
            assert_eq!(fast, scalar);
        }
    }
}
