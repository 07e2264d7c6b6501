//! The AVX-512 VNNI tile kernel for `Q8_0Matrix`: two 32-wide blocks per 512-bit register, one `vpdpbusd` per
//! (weight row, activation row) pair of blocks.
//!
//! `vpdpbusd` multiplies unsigned bytes by signed bytes and adds groups of four into i32 lanes. The activations
//! are made unsigned by adding 128 (`a ^ 0x80` as u8); the extra `128 · Σ w` of each lane is computed once per
//! weight register (a `vpdpbusd` of 0x80 bytes by the weights) and starts the sum negated, so each (weight row,
//! activation row) pair costs one `vpdpbusd`, one conversion, one scale product and one FMA per 64 values, where
//! the AVX2 kernel spends about six instructions per 32.

use std::arch::x86_64::*;
use std::ops::Range;

use super::q8_0::{Q8_0Matrix, QuantizedRows, BLOCK};
use super::q8_0_avx2::{for_q8_0_tiles, OutColumns};

/// Weight rows per tile.
const TILE_ROWS: usize = 4;
/// Activation rows per tile: 4 × 3 accumulators, 4 weight registers with their offsets and scales, 3 activation
/// registers with their scales fit the 32 zmm registers.
const TILE_ACTS: usize = 3;

/// Output columns `rows` for every one of the `m` activation rows.
///
/// # Safety
/// The CPU must support AVX-512 F, BW, VL and VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
pub(super) unsafe fn rows_kernel(w: &Q8_0Matrix, acts: &QuantizedRows, m: usize, rows: Range<usize>, out: &mut [f32]) {
    let columns = OutColumns { width: w.rows(), first: 0 };
    // One weight row at a time for a decode step: one sequential stream for the prefetcher (see the AVX2 kernel).
    for_q8_0_tiles!(tile, TILE_ROWS, TILE_ACTS, w, acts, m, rows, out, columns);
}

/// `out[i0 + j][columns.first + r0 + x]` for `x < R`, `j < N`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
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
    let bias = _mm512_set1_epi8(0x80u8 as i8);
    let mut acc = [[_mm512_setzero_ps(); N]; R];
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
    let mut b = 0;
    while b < kb {
        // Two blocks, or the last one alone (the upper half masked to zero, its scale zero).
        let pair = kb - b >= 2;
        let bytes: __mmask64 = if pair { !0 } else { 0xFFFF_FFFF };
        let mut a = [_mm512_setzero_si512(); N];
        let mut ad = [_mm512_setzero_ps(); N];
        for j in 0..N {
            let q = _mm512_maskz_loadu_epi8(bytes, a_quants[j].add(b * BLOCK));
            a[j] = _mm512_xor_si512(q, bias);
            ad[j] = block_scales(a_scales[j].add(b), pair);
        }
        for x in 0..R {
            let wv = _mm512_maskz_loadu_epi8(bytes, w_quants[x].add(b * BLOCK));
            let offset =
                _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, wv));
            let wd = block_scales(w_scales[x].add(b), pair);
            for j in 0..N {
                let dot = _mm512_dpbusd_epi32(offset, a[j], wv);
                acc[x][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(wd, ad[j]), acc[x][j]);
            }
        }
        b += 2;
    }
    for x in 0..R {
        for j in 0..N {
            out[(i0 + j) * columns.width + columns.first + r0 + x] = _mm512_reduce_add_ps(acc[x][j]);
        }
    }
}

/// The scales of blocks `b` and `b + 1` (`pair`) or of `b` alone, each across the 8 lanes of its block.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
unsafe fn block_scales(scales: *const f32, pair: bool) -> __m512 {
    let two = if pair { _mm_castsi128_ps(_mm_loadl_epi64(scales as *const __m128i)) } else { _mm_load_ss(scales) };
    _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), _mm512_castps128_ps512(two))
}
