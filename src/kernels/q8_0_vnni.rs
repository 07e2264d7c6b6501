//! The AVX-512 VNNI tile kernel for `Q8_0Matrix`: two 32-wide blocks per 512-bit register, one `vpdpbusd` per
//! (weight row, activation row) pair of blocks.
//!
//! `vpdpbusd` multiplies unsigned bytes by signed bytes and adds groups of four into i32 lanes. The weights are
//! made unsigned by adding 128 (`w ^ 0x80` as u8); the extra `128 · Σ a` of each block is the activations' own,
//! computed once per product (`QuantizedRows::fill_offsets`), so each (weight row, activation row) pair costs one
//! `vpdpbusd` per 64 values. Four blocks' dot products are then summed across their lanes, exactly, and scaled
//! into four f32 sums, one per block position mod 4, with one fused multiply-add: the same steps as the panel
//! kernel (`k_panels_vnni`) takes for many activation rows, so a batch gives every row the bits it gets alone.

use std::arch::x86_64::*;
use std::ops::Range;

use super::k_panels_avx2::PREFETCH_AHEAD;
use super::k_panels_vnni;
use super::q8_0::{Q8_0Matrix, QuantizedRows, BLOCK};
use super::q8_0_avx2::{for_q8_0_tiles, OutColumns};

/// Weight rows per tile.
const TILE_ROWS: usize = 4;
/// Activation rows per tile: 4 × 3 accumulators, 4 × 2 weight registers and 3 × 2 activation registers fit the
/// 32 zmm registers.
const TILE_ACTS: usize = 3;

/// Output columns `rows` for every one of the `m` activation rows.
///
/// # Safety
/// The CPU must support AVX-512 F, BW, VL and VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
pub(super) unsafe fn rows_kernel(w: &Q8_0Matrix, acts: &QuantizedRows, m: usize, rows: Range<usize>, out: &mut [f32]) {
    if m >= k_panels_vnni::MIN_ACT_ROWS && rows.len() == k_panels_vnni::PANEL_ROWS {
        return k_panels_vnni::q8_0_panel_rows(w, acts, m, rows.start, out);
    }
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
    // Lane l of `acc` sums the blocks b with b % 4 == l (see `block_sum_lanes`).
    let mut acc = [[_mm_setzero_ps(); N]; R];
    let mut w_quants = [std::ptr::null::<i8>(); R];
    let mut w_scales = [std::ptr::null::<f32>(); R];
    for x in 0..R {
        w_quants[x] = w.row_quants(r0 + x).as_ptr();
        w_scales[x] = w.row_scales(r0 + x).as_ptr();
    }
    let mut a_quants = [std::ptr::null::<i8>(); N];
    let mut a_scales = [std::ptr::null::<f32>(); N];
    let mut a_offsets = [std::ptr::null::<i32>(); N];
    for j in 0..N {
        a_quants[j] = acts.quants[(i0 + j) * k..(i0 + j + 1) * k].as_ptr();
        a_scales[j] = acts.scales[(i0 + j) * kb..(i0 + j + 1) * kb].as_ptr();
        a_offsets[j] = acts.offsets[(i0 + j) * kb..(i0 + j + 1) * kb].as_ptr();
    }
    let mut b = 0;
    while b < kb {
        // Four blocks, two to a register; past the end, masked loads give zero values and zero scales.
        let count = (kb - b).min(4);
        let lanes: __mmask8 = (1 << count) - 1;
        let first_bytes: __mmask64 = if count >= 2 { !0 } else { 0xFFFF_FFFF };
        let second_bytes: __mmask64 = match count {
            4 => !0,
            3 => 0xFFFF_FFFF,
            _ => 0,
        };
        let mut a = [[_mm512_setzero_si512(); 2]; N];
        let mut ad = [_mm_setzero_ps(); N];
        let mut offsets = [_mm_setzero_si128(); N];
        for j in 0..N {
            let at = a_quants[j].add(b * BLOCK);
            a[j] = [_mm512_maskz_loadu_epi8(first_bytes, at), _mm512_maskz_loadu_epi8(second_bytes, at.add(64))];
            ad[j] = _mm_maskz_loadu_ps(lanes, a_scales[j].add(b));
            offsets[j] = _mm_maskz_loadu_epi32(lanes, a_offsets[j].add(b));
        }
        for x in 0..R {
            // Weights plus 128, unsigned for `vpdpbusd`; the activations' block sums times 128 come off after.
            let at = w_quants[x].add(b * BLOCK);
            if N <= 2 {
                // A decode step streams the weights (one row at a time) and does little else; the masked loads
                // were seen not to keep the hardware prefetcher ahead (a 151936 × 896 product 3.4× the AVX2
                // kernel's time, its samples on the loads): ask for the lines `PREFETCH_AHEAD` on, and the
                // scales' line as far on in their own stream. An address past the weights is only a hint.
                _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(PREFETCH_AHEAD));
                _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(PREFETCH_AHEAD + 64));
                _mm_prefetch::<_MM_HINT_T0>((w_scales[x].add(b) as *const i8).wrapping_add(PREFETCH_AHEAD / 8));
            }
            let first = _mm512_xor_si512(_mm512_maskz_loadu_epi8(first_bytes, at), bias);
            let second = _mm512_xor_si512(_mm512_maskz_loadu_epi8(second_bytes, at.add(64)), bias);
            let wd = _mm_maskz_loadu_ps(lanes, w_scales[x].add(b));
            for j in 0..N {
                let zero = _mm512_setzero_si512();
                let dots =
                    block_sums(_mm512_dpbusd_epi32(zero, first, a[j][0]), _mm512_dpbusd_epi32(zero, second, a[j][1]));
                let dots = _mm_cvtepi32_ps(_mm_sub_epi32(dots, offsets[j]));
                acc[x][j] = _mm_fmadd_ps(dots, _mm_mul_ps(wd, ad[j]), acc[x][j]);
            }
        }
        b += 4;
    }
    for x in 0..R {
        for j in 0..N {
            out[(i0 + j) * columns.width + columns.first + r0 + x] = block_sum_lanes(acc[x][j]);
        }
    }
}

/// The sums of the four blocks in `first` (lanes 0–7, 8–15) and `second`, exactly, in lanes 0–3.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
unsafe fn block_sums(first: __m512i, second: __m512i) -> __m128i {
    let pairs_first = _mm256_hadd_epi32(_mm512_castsi512_si256(first), _mm512_extracti64x4_epi64(first, 1));
    let pairs_second = _mm256_hadd_epi32(_mm512_castsi512_si256(second), _mm512_extracti64x4_epi64(second, 1));
    let quads = _mm256_hadd_epi32(pairs_first, pairs_second);
    _mm_add_epi32(_mm256_castsi256_si128(quads), _mm256_extracti128_si256(quads, 1))
}

/// An output from its four block-class sums: `(s0 + s2) + (s1 + s3)`, the order the panel kernel adds in.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
unsafe fn block_sum_lanes(sums: __m128) -> f32 {
    let halves = _mm_add_ps(sums, _mm_movehl_ps(sums, sums));
    _mm_cvtss_f32(_mm_add_ss(halves, _mm_movehdup_ps(halves)))
}
