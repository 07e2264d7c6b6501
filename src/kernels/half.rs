//! F16 and BF16 weight matrices kept at two bytes a value, as the file stores them, and their matmul against f32
//! activations. Candle widens such weights to f32 at load (twice the memory, and twice the bytes a decoding step
//! reads); here each weight is widened in registers (F16C's `vcvtph2ps`; BF16 by a 16-bit shift) and the products
//! are summed in f32 with FMA. A tile of four weight rows meets every activation row, so a prefill reads each
//! weight once per tile of tokens.

use candle_core::quantized::GgmlDType;

use crate::Result;

/// Which two-byte float the matrix holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HalfKind {
    /// IEEE half precision (GGUF type F16).
    F16,
    /// bfloat16: the upper half of an f32 (GGUF type BF16).
    Bf16,
}

impl HalfKind {
    /// The GGUF type of this kind.
    pub fn dtype(self) -> GgmlDType {
        match self {
            HalfKind::F16 => GgmlDType::F16,
            HalfKind::Bf16 => GgmlDType::BF16,
        }
    }

    /// One value's bits as f32 (exact: both kinds are subsets of f32).
    #[inline(always)]
    fn widen(self, bits: u16) -> f32 {
        match self {
            HalfKind::F16 => half::f16::from_bits(bits).to_f32(),
            HalfKind::Bf16 => f32::from_bits(u32::from(bits) << 16),
        }
    }

    /// `value` rounded to this kind, as bits (tests and benches build matrices so).
    fn narrow(self, value: f32) -> u16 {
        match self {
            HalfKind::F16 => half::f16::from_f32(value).to_bits(),
            HalfKind::Bf16 => half::bf16::from_f32(value).to_bits(),
        }
    }
}

/// A `[rows, cols]` matrix of F16 or BF16 values, rows = output features, cols = input width.
#[derive(Debug)]
pub struct HalfMatrix {
    kind: HalfKind,
    rows: usize,
    cols: usize,
    /// `[rows][cols]` values' bits, as the file stores them.
    bits: Vec<u16>,
}

/// Weight rows a kernel call computes side by side (each row's sum is computed the same way alone or in a tile).
const TILE: usize = 4;
/// Activation rows a pass over the weight rows of a work item takes (8 rows of 1536 floats: 48 KiB, in L2).
const INPUT_BLOCK: usize = 8;

impl HalfMatrix {
    /// Builds the matrix from GGUF bytes of `kind` (row-major little-endian two-byte values).
    pub fn from_gguf_bytes(kind: HalfKind, rows: usize, cols: usize, bytes: &[u8]) -> Result<Self> {
        super::check_layout(rows, cols, bytes.len(), 1, 2, kind.dtype())?;
        let bits = bytes.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect();
        Ok(Self { kind, rows, cols, bits })
    }

    /// Builds the matrix by rounding f32 values `[rows][cols]` to `kind` (tests and benches).
    pub fn from_f32(kind: HalfKind, rows: usize, cols: usize, values: &[f32]) -> Self {
        assert_eq!(values.len(), rows * cols, "values for a {rows}x{cols} matrix");
        Self { kind, rows, cols, bits: values.iter().map(|&v| kind.narrow(v)).collect() }
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The kernel's name, for load reports.
    pub fn kernel_name(&self) -> &'static str {
        match self.kind {
            HalfKind::F16 => "tandem-f16",
            HalfKind::Bf16 => "tandem-bf16",
        }
    }

    /// Row `r`'s bits.
    fn row(&self, r: usize) -> &[u16] {
        &self.bits[r * self.cols..(r + 1) * self.cols]
    }

    /// Row `r` as f32.
    pub fn dequantize_row(&self, r: usize) -> Vec<f32> {
        self.row(r).iter().map(|&b| self.kind.widen(b)).collect()
    }

    /// `out[i][r] = Σ_c input[i][c] · W[r][c]` for `m` input rows (`input` is `[m][cols]`, `out` `[m][rows]`).
    pub fn matmul(&self, input: &[f32], m: usize, out: &mut [f32]) {
        assert_eq!(input.len(), m * self.cols, "input is [m][cols]");
        assert_eq!(out.len(), m * self.rows, "out is [m][rows]");
        super::for_row_tiles(self.rows, out, |rows, out| self.rows_kernel(input, m, rows, out));
    }

    /// One input row's product with the weight rows `rows` only (ascending, each below `rows()`), into those rows
    /// of `out` (`[rows()]`, the rest untouched), with the bits `matmul` gives them, on the calling thread.
    pub fn matvec_rows(&self, input: &[f32], rows: &[u32], out: &mut [f32]) {
        assert_eq!(input.len(), self.cols, "one input row");
        assert_eq!(out.len(), self.rows, "out is [rows]");
        for run in super::runs_of_rows(rows, self.rows) {
            self.rows_kernel(input, 1, run, out);
        }
    }

    /// The output columns `rows` for every activation row: blocks of [`INPUT_BLOCK`] activation rows (kept in cache
    /// while every weight row of `rows` passes by), in each tiles of [`TILE`] weight rows, then one at a time.
    fn rows_kernel(&self, input: &[f32], m: usize, rows: std::ops::Range<usize>, out: &mut [f32]) {
        for i0 in (0..m).step_by(INPUT_BLOCK) {
            let inputs = i0..(i0 + INPUT_BLOCK).min(m);
            let mut r = rows.start;
            while r + TILE <= rows.end {
                self.tile::<TILE>(input, inputs.clone(), r, out);
                r += TILE;
            }
            for r in r..rows.end {
                self.tile::<1>(input, inputs.clone(), r, out);
            }
        }
    }

    /// Rows `r0..r0 + N` times the activation rows `inputs`, two at a time (each weight widened once for both),
    /// on the fastest kernel this CPU has.
    fn tile<const N: usize>(&self, input: &[f32], inputs: std::ops::Range<usize>, r0: usize, out: &mut [f32]) {
        let weights: [&[u16]; N] = std::array::from_fn(|j| self.row(r0 + j));
        let x = |i: usize| &input[i * self.cols..(i + 1) * self.cols];
        let mut i = inputs.start;
        while i + 2 <= inputs.end {
            let [first, second] = dot_rows2(self.kind, [x(i), x(i + 1)], &weights);
            out[i * self.rows + r0..i * self.rows + r0 + N].copy_from_slice(&first);
            out[(i + 1) * self.rows + r0..(i + 1) * self.rows + r0 + N].copy_from_slice(&second);
            i += 2;
        }
        if i < inputs.end {
            let sums = dot_rows(self.kind, x(i), &weights);
            out[i * self.rows + r0..i * self.rows + r0 + N].copy_from_slice(&sums);
        }
    }
}

/// `x · w[j]` for each row `j`, each summed the same way whatever `N` is (eight lanes, then the lanes in a fixed
/// order, then the tail), so a row has the same bits alone or in a tile.
fn dot_rows<const N: usize>(kind: HalfKind, x: &[f32], w: &[&[u16]; N]) -> [f32; N] {
    #[cfg(target_arch = "x86_64")]
    if has_f16c() {
        // SAFETY: `has_f16c` found AVX2, FMA and F16C at run time.
        return unsafe { avx2::dot_rows(kind, x, w) };
    }
    reference_dot_rows(kind, x, w)
}

/// [`dot_rows`] for two activation rows at once, each sum as [`dot_rows`] computes it.
fn dot_rows2<const N: usize>(kind: HalfKind, x: [&[f32]; 2], w: &[&[u16]; N]) -> [[f32; N]; 2] {
    #[cfg(target_arch = "x86_64")]
    if has_f16c() {
        // SAFETY: `has_f16c` found AVX2, FMA and F16C at run time.
        return unsafe { avx2::dot_rows2(kind, x, w) };
    }
    [reference_dot_rows(kind, x[0], w), reference_dot_rows(kind, x[1], w)]
}

/// [`dot_rows`] in plain Rust, in the lane order the AVX2 kernel sums in.
fn reference_dot_rows<const N: usize>(kind: HalfKind, x: &[f32], w: &[&[u16]; N]) -> [f32; N] {
    let body = x.len() / 8 * 8;
    std::array::from_fn(|j| {
        let mut lanes = [0f32; 8];
        for (xs, ws) in x[..body].chunks_exact(8).zip(w[j][..body].chunks_exact(8)) {
            for l in 0..8 {
                lanes[l] = xs[l].mul_add(kind.widen(ws[l]), lanes[l]);
            }
        }
        let mut sum = lane_sum(lanes);
        for c in body..x.len() {
            sum = x[c].mul_add(kind.widen(w[j][c]), sum);
        }
        sum
    })
}

/// The eight lanes summed pairwise, as the AVX2 kernel's horizontal sum does.
fn lane_sum(l: [f32; 8]) -> f32 {
    let quad = [l[0] + l[4], l[1] + l[5], l[2] + l[6], l[3] + l[7]];
    let pair = [quad[0] + quad[2], quad[1] + quad[3]];
    pair[0] + pair[1]
}

/// Whether this CPU runs the AVX2 kernel (AVX2, FMA and F16C), detected once.
#[cfg(target_arch = "x86_64")]
fn has_f16c() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
    })
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::HalfKind;

    /// Eight weights of `kind` from `p` as f32.
    #[inline(always)]
    unsafe fn widen8(kind: HalfKind, p: *const u16) -> __m256 {
        let raw = _mm_loadu_si128(p as *const __m128i);
        match kind {
            HalfKind::F16 => _mm256_cvtph_ps(raw),
            HalfKind::Bf16 => _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16)),
        }
    }

    /// `super::dot_rows` on AVX2: one accumulator a row, eight lanes wide.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; every row of `w` is as long as `x`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_rows<const N: usize>(kind: HalfKind, x: &[f32], w: &[&[u16]; N]) -> [f32; N] {
        let body = x.len() / 8 * 8;
        let mut acc = [_mm256_setzero_ps(); N];
        let mut c = 0;
        while c < body {
            let xs = _mm256_loadu_ps(x.as_ptr().add(c));
            for j in 0..N {
                acc[j] = _mm256_fmadd_ps(xs, widen8(kind, w[j].as_ptr().add(c)), acc[j]);
            }
            c += 8;
        }
        let mut sums = [0f32; N];
        for j in 0..N {
            let mut lanes = [0f32; 8];
            _mm256_storeu_ps(lanes.as_mut_ptr(), acc[j]);
            let mut sum = super::lane_sum(lanes);
            for c in body..x.len() {
                sum = x[c].mul_add(kind.widen(w[j][c]), sum);
            }
            sums[j] = sum;
        }
        sums
    }

    /// `super::dot_rows2` on AVX2: each weight widened once for both activation rows, one accumulator a row and
    /// activation row, summed as `dot_rows` sums.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; every row of `w` and `x` is as long as `x[0]`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_rows2<const N: usize>(kind: HalfKind, x: [&[f32]; 2], w: &[&[u16]; N]) -> [[f32; N]; 2] {
        let cols = x[0].len();
        let body = cols / 8 * 8;
        let mut acc = [[_mm256_setzero_ps(); N]; 2];
        let mut c = 0;
        while c < body {
            let x0 = _mm256_loadu_ps(x[0].as_ptr().add(c));
            let x1 = _mm256_loadu_ps(x[1].as_ptr().add(c));
            for j in 0..N {
                let wj = widen8(kind, w[j].as_ptr().add(c));
                acc[0][j] = _mm256_fmadd_ps(x0, wj, acc[0][j]);
                acc[1][j] = _mm256_fmadd_ps(x1, wj, acc[1][j]);
            }
            c += 8;
        }
        let mut sums = [[0f32; N]; 2];
        for (a, (xa, sa)) in acc.iter().zip(x.iter().zip(sums.iter_mut())) {
            for j in 0..N {
                let mut lanes = [0f32; 8];
                _mm256_storeu_ps(lanes.as_mut_ptr(), a[j]);
                let mut sum = super::lane_sum(lanes);
                for c in body..cols {
                    sum = xa[c].mul_add(kind.widen(w[j][c]), sum);
                }
                sa[j] = sum;
            }
        }
        sums
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut state = seed | 1;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state as f32 / u32::MAX as f32) * 2.0 - 1.0
            })
            .collect()
    }

    /// Against the f32 product of the same (rounded) weights, summed in f64: close for every kind, width (a tail
    /// of 5 included) and row count (tiles and single rows).
    #[test]
    fn the_product_is_the_widened_weights_product() {
        for kind in [HalfKind::F16, HalfKind::Bf16] {
            for (rows, cols, m) in [(9, 64, 3), (4, 13, 1), (17, 200, 5)] {
                let matrix = HalfMatrix::from_f32(kind, rows, cols, &values(rows * cols, 7));
                let input = values(m * cols, 11);
                let mut out = vec![0f32; m * rows];
                matrix.matmul(&input, m, &mut out);
                for i in 0..m {
                    for r in 0..rows {
                        let want: f64 = (0..cols)
                            .map(|c| f64::from(input[i * cols + c]) * f64::from(matrix.dequantize_row(r)[c]))
                            .sum();
                        let got = out[i * rows + r];
                        assert!(
                            (f64::from(got) - want).abs() < 1e-4,
                            "{kind:?} {rows}x{cols} [{i}][{r}]: {got} {want}"
                        );
                    }
                }
            }
        }
    }

    /// A row has the same bits alone (a grammar's few logits) as in the whole product.
    #[test]
    fn a_row_alone_has_the_bits_of_the_whole_product() {
        let (rows, cols) = (11, 72);
        let matrix = HalfMatrix::from_f32(HalfKind::F16, rows, cols, &values(rows * cols, 3));
        let input = values(cols, 5);
        let mut all = vec![0f32; rows];
        matrix.matmul(&input, 1, &mut all);
        let mut some = vec![f32::NAN; rows];
        matrix.matvec_rows(&input, &[1, 2, 3, 4, 5, 9], &mut some);
        for r in [1, 2, 3, 4, 5, 9] {
            assert_eq!(some[r].to_bits(), all[r].to_bits(), "row {r}");
        }
        assert!(some[0].is_nan(), "rows not asked for are untouched");
        let want: Vec<f32> =
            (0..rows).map(|r| reference_dot_rows(HalfKind::F16, &input, &[matrix.row(r)])[0]).collect();
        assert_eq!(all, want, "the kernel sums as the reference does");
        let three = values(3 * cols, 8);
        let mut together = vec![0f32; 3 * rows];
        matrix.matmul(&three, 3, &mut together);
        for i in 0..3 {
            let mut alone = vec![0f32; rows];
            matrix.matmul(&three[i * cols..(i + 1) * cols], 1, &mut alone);
            assert_eq!(&together[i * rows..(i + 1) * rows], &alone[..], "activation row {i} in a pair");
        }
    }

    #[test]
    fn bytes_of_another_length_are_refused() {
        assert!(HalfMatrix::from_gguf_bytes(HalfKind::Bf16, 2, 3, &[0; 10]).is_err());
        let m = HalfMatrix::from_gguf_bytes(HalfKind::Bf16, 1, 2, &[0x80, 0x3f, 0x00, 0xc0]).unwrap();
        assert_eq!(m.dequantize_row(0), [1.0, -2.0]);
    }
}
