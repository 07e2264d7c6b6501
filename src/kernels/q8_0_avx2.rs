//! The AVX2 + FMA tile kernel for `Q8_0Matrix`: 4 weight rows × 2 activation rows per tile.
//!
//! Per 32-wide block, an int8 × int8 dot product takes three instructions: `maddubs` multiplies unsigned by
//! signed bytes, so the weight's sign moves onto the activation (`sign`) and its magnitude stays (`|w| ≤ 127`,
//! so pair sums stay below i16's limit); `madd` with ones widens the pairs to i32. The i32 lanes are scaled by
//! `d_w × d_a` into f32 accumulators, one per (weight row, activation row), summed across lanes once at the end.
//! Each loaded weight block serves every activation row of the tile, and each activation block every weight row.

use std::arch::x86_64::*;
use std::ops::Range;

use super::avx2::horizontal_sum;
use super::q8_0::{Q8_0Matrix, QuantizedRows, BLOCK};

/// Weight rows per tile.
const TILE_ROWS: usize = 4;
/// Activation rows per tile (4 × 2 accumulators plus operands fit the 16 ymm registers).
const TILE_ACTS: usize = 2;

/// Output columns `rows` for every one of the `m` activation rows.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn rows_kernel(w: &Q8_0Matrix, acts: &QuantizedRows, m: usize, rows: Range<usize>, out: &mut [f32]) {
    rows_kernel_into(w, acts, m, rows, out, OutColumns { width: w.rows(), first: 0 });
}

/// Where a tile's outputs go: weight row `r` writes column `first + r` of an output `width` columns wide (a
/// matrix of a few unpacked rows writes into the whole product's output).
#[derive(Clone, Copy)]
pub(super) struct OutColumns {
    pub width: usize,
    pub first: usize,
}

/// `rows_kernel` writing through `columns`.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn rows_kernel_into(
    w: &Q8_0Matrix,
    acts: &QuantizedRows,
    m: usize,
    rows: Range<usize>,
    out: &mut [f32],
    columns: OutColumns,
) {
    // Few activation rows (a decode step): the weights come from memory, and one row at a time reads them as one
    // sequential stream, which the hardware prefetcher follows; four rows read in step are four short streams it
    // does not, and a product over a matrix from memory then waits on its loads (docs/performance.md, "Decode reads
    // weights one row at a time").
    for_q8_0_tiles!(tile, TILE_ROWS, TILE_ACTS, w, acts, m, rows, out, columns);
}

/// Walks `tile::<R, N>(w, r, acts, i, out, columns)` over weight rows `rows` (`tile_rows` at a time, or one at a
/// time when `m < tile_rows`) and activation rows (up to `tile_acts` at a time); the AVX2 and VNNI kernels share it.
macro_rules! for_q8_0_tiles {
    ($tile:ident, $tile_rows:expr, $tile_acts:expr, $w:expr, $acts:expr, $m:expr, $rows:expr, $out:expr, $columns:expr) => {
        let row_tiles = $m >= $tile_rows;
        let mut r = $rows.start;
        while r < $rows.end {
            let full_tile = row_tiles && $rows.end - r >= $tile_rows;
            let mut i = 0;
            while i < $m {
                let n = ($m - i).min($tile_acts);
                match (full_tile, n) {
                    (true, 1) => $tile::<{ $tile_rows }, 1>($w, r, $acts, i, $out, $columns),
                    (true, 2) => $tile::<{ $tile_rows }, 2>($w, r, $acts, i, $out, $columns),
                    (true, _) => $tile::<{ $tile_rows }, { $tile_acts }>($w, r, $acts, i, $out, $columns),
                    (false, 1) => $tile::<1, 1>($w, r, $acts, i, $out, $columns),
                    (false, 2) => $tile::<1, 2>($w, r, $acts, i, $out, $columns),
                    (false, _) => $tile::<1, { $tile_acts }>($w, r, $acts, i, $out, $columns),
                }
                i += n;
            }
            r += if full_tile { $tile_rows } else { 1 };
        }
    };
}
pub(super) use for_q8_0_tiles;

/// `out[i0 + j][columns.first + r0 + x]` for `x < R`, `j < N`.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile<const R: usize, const N: usize>(
    w: &Q8_0Matrix,
    r0: usize,
    acts: &QuantizedRows,
    i0: usize,
    out: &mut [f32],
    columns: OutColumns,
) {
    let k = w.cols();
    let kb = k / BLOCK;
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); N]; R];
    let mut w_quants = [std::ptr::null::<i8>(); R];
    let mut w_scales = [std::ptr::null::<f32>(); R];
    for x in 0..R {
        w_quants[x] = w.row_quants(r0 + x).as_ptr();
        w_scales[x] = w.row_scales(r0 + x).as_ptr();
    }
    let mut a_quants = [std::ptr::null::<i8>(); N];
    let mut a_scales = [std::ptr::null::<f32>(); N];
    for j in 0..N {
        a_quants[j] = acts.quants[(i0 + j) * k..(i0 + j + 1) * k].as_ptr();
        a_scales[j] = acts.scales[(i0 + j) * kb..(i0 + j + 1) * kb].as_ptr();
    }
    for b in 0..kb {
        let mut a = [_mm256_setzero_si256(); N];
        let mut ad = [0f32; N];
        for j in 0..N {
            a[j] = _mm256_loadu_si256(a_quants[j].add(b * BLOCK) as *const __m256i);
            ad[j] = *a_scales[j].add(b);
        }
        for x in 0..R {
            let wv = _mm256_loadu_si256(w_quants[x].add(b * BLOCK) as *const __m256i);
            let w_abs = _mm256_sign_epi8(wv, wv);
            let wd = *w_scales[x].add(b);
            for j in 0..N {
                let signed = _mm256_sign_epi8(a[j], wv);
                let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, signed), ones);
                acc[x][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(wd * ad[j]), acc[x][j]);
            }
        }
    }
    for x in 0..R {
        for j in 0..N {
            out[(i0 + j) * columns.width + columns.first + r0 + x] = horizontal_sum(acc[x][j]);
        }
    }
}
