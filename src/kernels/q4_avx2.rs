//! The AVX2 + FMA tile kernel for `Q4Matrix`: 4 weight rows × 2 activation rows a tile, each pair's block steps
//! those of llama.cpp's `ggml_vec_dot_q4_0_q8_0` / `ggml_vec_dot_q4_1_q8_1` on AVX2 (`q4::reference_rows` spells
//! them out), so a tile changes which loads are shared, never an output's bits.
//!
//! Per block the 16 nibble bytes unpack to 32 bytes (low nibbles, then high), in the activations' order. Q4_1's
//! values are unsigned and go straight into `maddubs`; Q4_0's, minus 8, move their sign onto the activation first.

use std::arch::x86_64::*;
use std::ops::Range;

use super::avx2::horizontal_sum;
use super::q4::{Q4Kind, Q4Matrix, Q8Acts, BLOCK};
use super::q8_0_avx2::{for_q8_0_tiles, OutColumns};

/// Weight rows per tile.
const TILE_ROWS: usize = 4;
/// Activation rows per tile.
const TILE_ACTS: usize = 2;

/// Output columns `rows` for every one of the `m` activation rows.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn rows_kernel(w: &Q4Matrix, acts: &Q8Acts, m: usize, rows: Range<usize>, out: &mut [f32]) {
    let columns = OutColumns { width: w.rows(), first: 0 };
    match w.kind() {
        Q4Kind::Q4_0 => {
            for_q8_0_tiles!(tile_q4_0, TILE_ROWS, TILE_ACTS, w, acts, m, rows, out, columns);
        }
        Q4Kind::Q4_1 => {
            for_q8_0_tiles!(tile_q4_1, TILE_ROWS, TILE_ACTS, w, acts, m, rows, out, columns);
        }
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn tile_q4_0<const R: usize, const N: usize>(
    w: &Q4Matrix,
    r0: usize,
    acts: &Q8Acts,
    i0: usize,
    out: &mut [f32],
    columns: OutColumns,
) {
    tile::<R, N, false>(w, r0, acts, i0, out, columns)
}

#[target_feature(enable = "avx2,fma")]
unsafe fn tile_q4_1<const R: usize, const N: usize>(
    w: &Q4Matrix,
    r0: usize,
    acts: &Q8Acts,
    i0: usize,
    out: &mut [f32],
    columns: OutColumns,
) {
    tile::<R, N, true>(w, r0, acts, i0, out, columns)
}

/// `out[i0 + j][columns.first + r0 + x]` for `x < R`, `j < N`; `MIN`: Q4_1 (unsigned values and a minimum).
#[target_feature(enable = "avx2,fma")]
unsafe fn tile<const R: usize, const N: usize, const MIN: bool>(
    w: &Q4Matrix,
    r0: usize,
    acts: &Q8Acts,
    i0: usize,
    out: &mut [f32],
    columns: OutColumns,
) {
    let k = w.cols();
    let kb = k / BLOCK;
    let low = _mm256_set1_epi8(0x0F);
    let eight = _mm256_set1_epi8(8);
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); N]; R];
    let mut mins = [[0f32; N]; R];
    let mut w_nibbles = [std::ptr::null::<u8>(); R];
    let mut w_scales = [std::ptr::null::<f32>(); R];
    let mut w_mins = [std::ptr::null::<f32>(); R];
    for x in 0..R {
        w_nibbles[x] = w.row_nibbles(r0 + x).as_ptr();
        w_scales[x] = w.row_scales(r0 + x).as_ptr();
        if MIN {
            w_mins[x] = w.row_mins(r0 + x).as_ptr();
        }
    }
    let mut a_quants = [std::ptr::null::<i8>(); N];
    let mut a_scales = [std::ptr::null::<f32>(); N];
    let mut a_sums = [std::ptr::null::<f32>(); N];
    for j in 0..N {
        a_quants[j] = acts.quants[(i0 + j) * k..(i0 + j + 1) * k].as_ptr();
        a_scales[j] = acts.scales[(i0 + j) * kb..(i0 + j + 1) * kb].as_ptr();
        a_sums[j] = acts.sums[(i0 + j) * kb..(i0 + j + 1) * kb].as_ptr();
    }
    for b in 0..kb {
        let mut a = [_mm256_setzero_si256(); N];
        let mut ad = [0f32; N];
        for j in 0..N {
            a[j] = _mm256_loadu_si256(a_quants[j].add(b * BLOCK) as *const __m256i);
            ad[j] = *a_scales[j].add(b);
        }
        for x in 0..R {
            let bytes = _mm_loadu_si128(w_nibbles[x].add(b * BLOCK / 2) as *const __m128i);
            let q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes), low);
            let wd = *w_scales[x].add(b);
            if MIN {
                let wm = *w_mins[x].add(b);
                for j in 0..N {
                    mins[x][j] = wm.mul_add(*a_sums[j].add(b), mins[x][j]);
                    let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(q, a[j]), ones);
                    acc[x][j] = _mm256_fmadd_ps(_mm256_set1_ps(wd * ad[j]), _mm256_cvtepi32_ps(dot), acc[x][j]);
                }
            } else {
                let signed = _mm256_sub_epi8(q, eight);
                let magnitude = _mm256_sign_epi8(signed, signed);
                for j in 0..N {
                    let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(a[j], signed)), ones);
                    acc[x][j] = _mm256_fmadd_ps(_mm256_set1_ps(wd * ad[j]), _mm256_cvtepi32_ps(dot), acc[x][j]);
                }
            }
        }
    }
    for x in 0..R {
        for j in 0..N {
            let lanes = horizontal_sum(acc[x][j]);
            out[(i0 + j) * columns.width + columns.first + r0 + x] = if MIN { lanes + mins[x][j] } else { lanes };
        }
    }
}
