//! AVX2 helpers shared by the kernels: lane sums of the f32 accumulators, and the int8 quantization of activations.

use std::arch::x86_64::*;

/// The sum of the 8 lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn horizontal_sum(v: __m256) -> f32 {
    horizontal_sum_128(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)))
}

/// The sum of the 4 lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn horizontal_sum_128(v: __m128) -> f32 {
    let pair = _mm_add_ps(v, _mm_movehl_ps(v, v));
    _mm_cvtss_f32(_mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 1)))
}

/// `f32::round` of each lane (halves away from zero, as the scalar path and candle round): truncate, then step
/// away from zero where the dropped fraction, exact for these magnitudes, is at least one half.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn round_half_away(v: __m256) -> __m256 {
    let truncated = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFF_FFFF));
    let fraction = _mm256_and_ps(_mm256_sub_ps(v, truncated), abs_mask);
    let half_or_more = _mm256_cmp_ps(fraction, _mm256_set1_ps(0.5), _CMP_GE_OQ);
    let step = _mm256_or_ps(_mm256_andnot_ps(abs_mask, v), _mm256_set1_ps(1.0)); // ±1 with v's sign
    _mm256_add_ps(truncated, _mm256_and_ps(half_or_more, step))
}

/// `q8_0::quantize_block_scalar` eight values at a time: `src.len()` a multiple of 32, `dst` as long.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn quantize_block(src: &[f32], dst: &mut [i8]) -> f32 {
    debug_assert!(src.len().is_multiple_of(32) && dst.len() >= src.len());
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFF_FFFF));
    let mut amax = _mm256_setzero_ps();
    for chunk in src.chunks_exact(8) {
        amax = _mm256_max_ps(amax, _mm256_and_ps(_mm256_loadu_ps(chunk.as_ptr()), abs_mask));
    }
    let pair = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    let pair = _mm_max_ps(pair, _mm_movehl_ps(pair, pair));
    let amax = _mm_cvtss_f32(_mm_max_ss(pair, _mm_shuffle_ps(pair, pair, 1)));
    let d = amax / 127.0;
    let inv = _mm256_set1_ps(if d > 0.0 { 1.0 / d } else { 0.0 });
    // `vpackssdw`/`vpacksswb` interleave 128-bit lanes; this permutation puts the 32 values back in order.
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (chunk, out) in src.chunks_exact(32).zip(dst.chunks_exact_mut(32)) {
        let mut ints = [_mm256_setzero_si256(); 4];
        for (k, int) in ints.iter_mut().enumerate() {
            let scaled = _mm256_mul_ps(_mm256_loadu_ps(chunk.as_ptr().add(8 * k)), inv);
            *int = _mm256_cvtps_epi32(round_half_away(scaled));
        }
        let words = _mm256_packs_epi16(_mm256_packs_epi32(ints[0], ints[1]), _mm256_packs_epi32(ints[2], ints[3]));
        _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, _mm256_permutevar8x32_epi32(words, order));
    }
    d
}
