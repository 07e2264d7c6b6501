//! Activations for K-quant weights (Q4_K, Q5_K, Q6_K): int8 with one scale per 256 values and sums per 16.
//!
//! One scale per 256 lets a kernel add the eight or sixteen sub-block products of a super-block in integers and
//! scale once (llama.cpp's `block_q8_K`); the per-16 sums pay for the weights' offsets (Q4_K's minimums, Q6_K's
//! −32) without touching the activations again.

/// Values per super-block.
pub const SUPER: usize = 256;

/// Rows of activations quantized per 256-wide super-block.
#[derive(Debug, Default)]
pub struct KActivations {
    /// `[rows][cols]` int8 values.
    pub quants: Vec<i8>,
    /// `[rows][cols / 256]` scales.
    pub scales: Vec<f32>,
    /// `[rows][cols / 16]` sums of 16 consecutive int8 values.
    pub sums16: Vec<i16>,
    /// `[rows][cols / 32]` sums of 32 (each two sums of 16; at most 32 · 127, so i16 holds them): Q4_K's
    /// sub-blocks are 32 wide, and an AVX2 `madd` takes two of them at once.
    pub sums32: Vec<i16>,
}

impl KActivations {
    /// Quantizes `values` (`[rows][cols]`, `cols` a multiple of 256): d = max |x| / 127, q = round(x / d).
    pub fn quantize(&mut self, values: &[f32], cols: usize) {
        debug_assert_eq!(cols % SUPER, 0);
        self.quants.resize(values.len(), 0);
        self.scales.resize(values.len() / SUPER, 0.0);
        self.sums16.resize(values.len() / 16, 0);
        self.sums32.resize(values.len() / 32, 0);
        for ((((src, dst), scale), sums), sums32) in values
            .chunks_exact(SUPER)
            .zip(self.quants.chunks_exact_mut(SUPER))
            .zip(self.scales.iter_mut())
            .zip(self.sums16.chunks_exact_mut(SUPER / 16))
            .zip(self.sums32.chunks_exact_mut(SUPER / 32))
        {
            *scale = super::q8_0::quantize_block(src, dst);
            for (sum, group) in sums.iter_mut().zip(dst.chunks_exact(16)) {
                *sum = group.iter().map(|&q| i16::from(q)).sum();
            }
            for (sum32, pair) in sums32.iter_mut().zip(sums.chunks_exact(2)) {
                *sum32 = pair[0] + pair[1];
            }
        }
    }

    /// Row `i`'s values for width `cols`. Inlined: the kernels call it for every tile, and as a call (it did not
    /// inline into them by itself) it showed in an AVX2 prefill's profile (docs/performance.md, "Work beside the
    /// kernels").
    #[inline]
    pub fn row(&self, i: usize, cols: usize) -> (&[i8], &[f32], &[i16]) {
        (
            &self.quants[i * cols..(i + 1) * cols],
            &self.scales[i * cols / SUPER..(i + 1) * cols / SUPER],
            &self.sums16[i * cols / 16..(i + 1) * cols / 16],
        )
    }

    /// Rows `i0..i0 + N` as `row` gives them, for a kernel's tile. A loop, not `array::from_fn`: its closure
    /// stayed a call in the kernels (closures do not take on their target features), once per row and tile.
    #[inline(always)]
    pub fn rows<const N: usize>(&self, i0: usize, cols: usize) -> [(&[i8], &[f32], &[i16]); N] {
        let mut rows: [(&[i8], &[f32], &[i16]); N] = [(&[], &[], &[]); N];
        for (j, row) in rows.iter_mut().enumerate() {
            *row = self.row(i0 + j, cols);
        }
        rows
    }

    /// Row `i`'s sums of 32 for width `cols`.
    #[inline]
    pub fn sums32_row(&self, i: usize, cols: usize) -> &[i16] {
        &self.sums32[i * cols / 32..(i + 1) * cols / 32]
    }
}

thread_local! {
    /// The quantized activations of the current K-quant matmul, reused so a decode step allocates nothing.
    pub(crate) static K_ACTIVATIONS: std::cell::RefCell<KActivations> = std::cell::RefCell::new(KActivations::default());
}
