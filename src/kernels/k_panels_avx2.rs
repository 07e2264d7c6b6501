//! AVX2 panel kernels (no AVX-512): Q4_K weights stored as panels of sixteen rows (`q4k_panels`), read eight rows
//! (one 256-bit register of 32-bit lanes) at a time.
//!
//! Without VNNI every 32 products cost a `maddubs` (unsigned weight bytes × signed activation bytes into i16 pair
//! sums) and then, in a row layout, a `madd` by the sub-block's scale: two multiplies for 32 products, and a
//! register's lanes added into one sum for every row. In a panel each lane is a row, so the pair sums of a whole
//! sub-block (eight `maddubs`, at most 8 · 2 · 15 · 127 = 30,480) add up in i16 before one `madd` applies the eight
//! rows' scales: nine multiplies for 256 products instead of sixteen, and no lanes to add across.
//!
//! The integers are exact and the f32 steps per super-block are those of the AVX-512 VNNI panel kernel (`sum +=
//! dot · (d · d_a)`, then `sum −= min_dot · (dmin · d_a)`, each fused), so both kernels give the same bits, and a
//! row gets the same bits in any batch.

use std::arch::x86_64::*;
use std::ops::Range;

use super::k_acts::{KActivations, SUPER};
use super::panels::PANEL_ROWS;
use super::q4k_panels::{Q4KPanelBlock, Q4KPanels};

/// Activation rows that pass a half panel together (their sums stay in registers: 2 × 4 i16 chains, 4 i32 dots).
const TILE_ACTS: usize = 4;

/// Rows per 256-bit register of 32-bit lanes: half a panel.
const HALF: usize = PANEL_ROWS / 2;

/// Output columns `rows` (one panel: `rows.start` a multiple of 16, at most 16 rows) for the `m` activation rows.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q4k_panel_rows(w: &Q4KPanels, acts: &KActivations, m: usize, rows: Range<usize>, out: &mut [f32]) {
    assert!(rows.start.is_multiple_of(PANEL_ROWS) && rows.len() <= PANEL_ROWS && rows.end <= w.rows());
    let panel = w.panel(rows.start / PANEL_ROWS);
    let mut i = 0;
    while i < m {
        let n = (m - i).min(TILE_ACTS);
        // Both halves for one tile of activation rows, so the second half finds them in L1.
        for half in 0..2 {
            let first = rows.start + HALF * half;
            let lanes = rows.end.saturating_sub(first).min(HALF);
            if lanes == 0 {
                continue;
            }
            match n {
                1 => q4k_tile::<1>(panel, half, w.cols(), acts, out, w.rows(), first, lanes, i),
                2 => q4k_tile::<2>(panel, half, w.cols(), acts, out, w.rows(), first, lanes, i),
                3 => q4k_tile::<3>(panel, half, w.cols(), acts, out, w.rows(), first, lanes, i),
                _ => q4k_tile::<TILE_ACTS>(panel, half, w.cols(), acts, out, w.rows(), first, lanes, i),
            }
        }
        i += n;
    }
}

/// `out[i0 + j][first..first + lanes]` for `j < N`: rows `8 · half..` of the panel (`lanes` of them real).
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4k_tile<const N: usize>(
    panel: &[Q4KPanelBlock],
    half: usize,
    k: usize,
    acts: &KActivations,
    out: &mut [f32],
    n_out: usize,
    first: usize,
    lanes: usize,
    i0: usize,
) {
    let low4 = _mm256_set1_epi8(0x0F);
    let a_rows: [_; N] = std::array::from_fn(|j| acts.row(i0 + j, k));
    let a_quants: [*const i8; N] = std::array::from_fn(|j| a_rows[j].0.as_ptr());
    let mut sums = [_mm256_setzero_ps(); N];
    for (b, block) in panel.iter().enumerate() {
        let [scales, mins] = q4k_scales_and_mins(block, half);
        let mut dots = [_mm256_setzero_si256(); N];
        for c in 0..4 {
            // Sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles): pair sums add up in i16 across the eight words.
            let mut even = [_mm256_setzero_si256(); N];
            let mut odd = [_mm256_setzero_si256(); N];
            for t in 0..8 {
                let q = _mm256_load_si256(block.qs[8 * c + t].as_ptr().add(HALF * half) as *const __m256i);
                let low = _mm256_and_si256(q, low4);
                let high = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
                for j in 0..N {
                    let a = a_quants[j].add(b * SUPER + 64 * c + 4 * t);
                    even[j] = _mm256_add_epi16(even[j], _mm256_maddubs_epi16(low, broadcast_word(a)));
                    odd[j] = _mm256_add_epi16(odd[j], _mm256_maddubs_epi16(high, broadcast_word(a.add(32))));
                }
            }
            let even_scale = lane_byte_paired(scales[c / 2], 2 * c % 4);
            let odd_scale = lane_byte_paired(scales[c / 2], (2 * c + 1) % 4);
            for j in 0..N {
                let scaled =
                    _mm256_add_epi32(_mm256_madd_epi16(even[j], even_scale), _mm256_madd_epi16(odd[j], odd_scale));
                dots[j] = _mm256_add_epi32(dots[j], scaled);
            }
        }
        let mins: [__m256i; 8] = std::array::from_fn(|s| lane_byte_paired(mins[s / 4], s % 4));
        let d = _mm256_cvtph_ps(_mm_load_si128(block.d.as_ptr().add(HALF * half) as *const __m128i));
        let dmin = _mm256_cvtph_ps(_mm_load_si128(block.dmin.as_ptr().add(HALF * half) as *const __m128i));
        for j in 0..N {
            // Σ_s min_s · (sum of sub-block s's activations), the sums of 32 as pairs of the sums of 16.
            let sums16 = a_rows[j].2.as_ptr().add(b * SUPER / 16);
            let mut min_dot = _mm256_setzero_si256();
            for (s, &min) in mins.iter().enumerate() {
                min_dot =
                    _mm256_add_epi32(min_dot, _mm256_madd_epi16(min, broadcast_word(sums16.add(2 * s) as *const i8)));
            }
            let da = _mm256_set1_ps(a_rows[j].1[b]);
            sums[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[j]), _mm256_mul_ps(d, da), sums[j]);
            sums[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min_dot), _mm256_mul_ps(dmin, da), sums[j]);
        }
    }
    for (j, sum) in sums.iter().enumerate() {
        let row = &mut out[(i0 + j) * n_out + first..][..lanes];
        if lanes == HALF {
            _mm256_storeu_ps(row.as_mut_ptr(), *sum);
        } else {
            // The last panel of a matrix whose rows are not a multiple of 16: only its own lanes.
            let mut all = [0f32; HALF];
            _mm256_storeu_ps(all.as_mut_ptr(), *sum);
            row.copy_from_slice(&all[..lanes]);
        }
    }
}

/// Half `half` of a Q4_K panel block's sub-block scales and minimums unpacked from their 6-bit packing:
/// `[scales, mins]`, each two registers whose lanes hold four values (sub-blocks 0–3, then 4–7), one per byte.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn q4k_scales_and_mins(block: &Q4KPanelBlock, half: usize) -> [[__m256i; 2]; 2] {
    let [w0, w1, w2] = block.packed.map(|word| _mm256_load_si256(word.as_ptr().add(HALF * half) as *const __m256i));
    let (low6, low4, top2) = (_mm256_set1_epi8(0x3F), _mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x30));
    // Values 4–7: a low nibble from word 2, the top two bits from bits 6–7 of words 0 and 1, moved to bits 4–5.
    let high_values = |nibbles: __m256i, tops: __m256i| {
        _mm256_or_si256(_mm256_and_si256(nibbles, low4), _mm256_and_si256(_mm256_srli_epi32(tops, 2), top2))
    };
    [
        [_mm256_and_si256(w0, low6), high_values(w2, w0)],
        [_mm256_and_si256(w1, low6), high_values(_mm256_srli_epi32(w2, 4), w1)],
    ]
}

/// Byte `k` of every 32-bit lane of `v` as that lane's value in both 16-bit halves (for `madd` against pairs).
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn lane_byte_paired(v: __m256i, k: usize) -> __m256i {
    // `vpshufb` indexes bytes within each 128-bit lane; an index with the top bit set gives a zero byte.
    let control = |word: i32| {
        let byte = 4 * word + k as i32;
        byte | (byte << 16) | 0x8000_8000u32 as i32
    };
    _mm256_shuffle_epi8(v, _mm256_broadcastsi128_si256(_mm_setr_epi32(control(0), control(1), control(2), control(3))))
}

/// The four bytes at `at` in every 32-bit lane.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn broadcast_word(at: *const i8) -> __m256i {
    _mm256_set1_epi32(std::ptr::read_unaligned(at as *const i32))
}
