//! AVX-512 VNNI kernel for Q6_K weights in the row layout against per-256 int8 activations: 64 values per
//! instruction, one weight row × up to four activation rows per tile. (Q4_K weights are stored as panels on these
//! CPUs: `q4k_panels`.)
//!
//! For each 64 values, `vpmaddubsw` multiplies the unsigned weights (0–63) by the signed
//! activations and adds pairs into i16 lanes (at most 2 · 63 · 127 = 16,002, so nothing saturates); every pair
//! lies inside one sub-block, so `vpdpwssd` multiplies each by its sub-block's scale (the scale in both halves of
//! an i32 lane) and adds pairs of those into the super-block's i32 sums: two instructions per 64 values and
//! activation row, where the AVX2 kernel spends six per 64. The offsets are settled from the activations' sums
//! of 16, as in the AVX2 kernels.

use std::arch::x86_64::*;
use std::ops::Range;

use super::k_acts::{KActivations, SUPER};
use super::k_panels_vnni;
use super::kquants::{Q6KBlock, Q6KMatrix};
use super::kquants_avx2::{for_tiles, q6k_scales16};

/// Q6_K output columns `rows` for the `m` activation rows.
///
/// # Safety
/// The CPU must support AVX-512 F, BW, VL and VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
pub(super) unsafe fn q6k_rows(w: &Q6KMatrix, acts: &KActivations, m: usize, rows: Range<usize>, out: &mut [f32]) {
    if m >= k_panels_vnni::MIN_ACT_ROWS && rows.len() == k_panels_vnni::PANEL_ROWS {
        return k_panels_vnni::q6k_panel_rows(w, acts, m, rows.start, out);
    }
    for_tiles!(rows, m, q6k_tile, w, acts, out);
}

/// `out[i0 + j][r]` for `j < N`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
unsafe fn q6k_tile<const N: usize>(w: &Q6KMatrix, acts: &KActivations, out: &mut [f32], r: usize, i0: usize) {
    let k = w.cols();
    let mut sums = [0f32; N];
    let mut a_rows = [(&[][..], &[][..], &[][..]); N];
    for (j, row) in a_rows.iter_mut().enumerate() {
        *row = acts.row(i0 + j, k);
    }
    for (b, block) in w.row(r).iter().enumerate() {
        let mut dots = [_mm512_setzero_si512(); N];
        let scales32 = paired_i16(_mm512_cvtepi8_epi32(_mm_loadu_si128(block.scales.as_ptr() as *const __m128i)));
        for h in 0..2 {
            for (p, &q) in q6k_half(block, h).iter().enumerate() {
                // Values 128h + 64p.. (groups 8h + 4p to 8h + 4p + 3).
                let scale = _mm512_permutexvar_epi32(group_lanes(8 * h + 4 * p), scales32);
                for j in 0..N {
                    let a = a_rows[j].0.as_ptr().add(b * SUPER + 128 * h + 64 * p);
                    let a = _mm512_loadu_si512(a as *const __m512i);
                    dpwssd(&mut dots[j], _mm512_maddubs_epi16(q, a), scale);
                }
            }
        }
        let scales16 = q6k_scales16(block);
        for j in 0..N {
            let dot = q6k_dot(dots[j], scales16, a_rows[j].2[b * SUPER / 16..].as_ptr());
            sums[j] = q6k_step(sums[j], dot, block, a_rows[j].1[b]);
        }
    }
    let n_out = w.rows();
    for (j, sum) in sums.into_iter().enumerate() {
        out[(i0 + j) * n_out + r] = sum;
    }
}

/// One super-block's step of a Q6_K output: `sum + dot · (d · d_a)`, fused. The panel kernel takes the same steps
/// in the same order from the same exact integers, so a batched product equals one-row products bit for bit
/// (speculative decoding's drafts rely on it).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
pub(super) unsafe fn q6k_step(sum: f32, dot: i32, block: &Q6KBlock, da: f32) -> f32 {
    (dot as f32).mul_add(block.d * da, sum)
}

/// The super-block's dot product with Q6_K's −32 offset taken off, exactly:
/// `Σ lanes of dots − 32 · Σ_g scale_g · (sum of the activations of group g)`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
unsafe fn q6k_dot(dots: __m512i, scales16: __m256i, sums16: *const i16) -> i32 {
    let offsets = _mm256_madd_epi16(scales16, _mm256_loadu_si256(sums16 as *const __m256i));
    let terms = _mm256_add_epi32(_mm512_castsi512_si256(dots), _mm512_extracti64x4_epi64(dots, 1));
    let terms = fold_to_128(_mm256_sub_epi32(terms, _mm256_slli_epi32(offsets, 5)));
    let pairs = _mm_hadd_epi32(terms, terms);
    _mm_cvtsi128_si32(_mm_hadd_epi32(pairs, pairs))
}

/// The two 128-bit halves added.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn fold_to_128(v: __m256i) -> __m128i {
    _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1))
}

/// Values `128h..128h + 128` of a Q6_K block as unsigned bytes (0–63), 64 to a register, in order.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
pub(super) unsafe fn q6k_half(block: &Q6KBlock, h: usize) -> [__m512i; 2] {
    let low4 = _mm512_set1_epi8(0x0F);
    let low2 = _mm512_set1_epi8(0x03);
    // `qh` (32 bytes) fills both halves of a register; values 0–31 of a 64 take their top bits from bits 0–1,
    // values 32–63 from bits 2–3 (high nibbles of `ql`: bits 4–5 and 6–7).
    let top_shift_low = _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0);
    let top_shift_high = _mm512_set_epi64(6, 6, 6, 6, 4, 4, 4, 4);
    let ql = _mm512_loadu_si512(block.ql.as_ptr().add(64 * h) as *const __m512i);
    let qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(block.qh.as_ptr().add(32 * h) as *const __m256i));
    // Masked to two bits per byte before the 16-bit shift moves them to bits 4–5 of the same byte.
    let top_low = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(qh, top_shift_low), low2), 4);
    let top_high = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(qh, top_shift_high), low2), 4);
    [
        _mm512_or_si512(_mm512_and_si512(ql, low4), top_low),
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), top_high),
    ]
}

/// `acc += vpdpwssd(pairs, scales)`. Written as the instruction itself: LLVM's generic tuning splits the
/// intrinsic into `vpmaddwd` + `vpaddd`, two instructions where the CPU has one (`cargo bench --bench kernels`,
/// 64 activation rows: Q4_K 8960×1536 8.3 → 7.0 ms, Q6_K 1536×8960 9.7 → 7.4 ms).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
pub(super) unsafe fn dpwssd(acc: &mut __m512i, pairs: __m512i, scales: __m512i) {
    std::arch::asm!(
        "vpdpwssd {acc}, {pairs}, {scales}",
        acc = inout(zmm_reg) *acc,
        pairs = in(zmm_reg) pairs,
        scales = in(zmm_reg) scales,
        options(pure, nomem, nostack),
    );
}

/// Each i32 lane's low 16 bits copied into its high 16 bits: a scale for both i16 halves that `vpdpwssd`
/// multiplies.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn paired_i16(lanes: __m512i) -> __m512i {
    let low = _mm512_and_si512(lanes, _mm512_set1_epi32(0xFFFF));
    _mm512_or_si512(low, _mm512_slli_epi32(low, 16))
}

/// A `vpermd` index giving lane `l` the element `first + l / 4`: each scale spread over the four lanes (16
/// values) of its group.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn group_lanes(first: usize) -> __m512i {
    let spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    _mm512_add_epi32(spread, _mm512_set1_epi32(first as i32))
}
