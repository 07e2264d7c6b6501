//! AVX2 helpers shared by the kernels: lane sums of the f32 accumulators.

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
