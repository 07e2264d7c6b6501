//! The AVX2 + FMA kernel for Q6_K weights in rows against per-256 int8 activations: one weight row × up to four
//! activation rows per tile. (Q4_K weights are stored as panels on AVX2 CPUs too, `k_panels_avx2`; a Q6_K panel
//! kernel was no faster there.)
//!
//! Weights are small unsigned integers (0–63), so `maddubs` multiplies them by signed activations without
//! overflowing its i16 pair sums; `madd` by the group scales (broadcast as i16) widens to i32 and applies the scale
//! in the same instruction. A super-block's groups add up in i32; the −32 offset, from the activations' sums of 16,
//! is taken off in i32 too, and the difference becomes f32 once, times `d_w × d_a`.
//!
//! From `BYTES_MIN_ACTS` activation rows on (prefill), a work item first unpacks its weight rows to one byte a
//! value, so the bits are unpacked once per weight row rather than once per tile of activation rows; the integers
//! and f32 steps are the same, so a row gets the same bits either way.

use std::arch::x86_64::*;
use std::cell::RefCell;
use std::ops::Range;

use super::avx2::horizontal_sum;
use super::k_acts::{KActivations, SUPER};
use super::kquants::{Q6KBlock, Q6KMatrix};

/// Activation rows per tile.
const TILE_ACTS: usize = 4;

/// Activation rows that meet the same weight rows before moving on: 8 rows of 1536 int8 values and 16 weight
/// rows of 1536 K-quant values together fit a 32 KiB L1 cache.
const ACT_BLOCK: usize = 8;

/// Activation rows from which the weight rows are unpacked to bytes once per work item. Below it (decode steps,
/// drafted tokens) each tile unpacks its weight row as it goes: with one tile of 1–4 rows a weight row is unpacked
/// once either way, so the bytes would only add a write and a reread. 16 (four full tiles) is a choice, not a
/// measured crossover.
const BYTES_MIN_ACTS: usize = 16;

thread_local! {
    /// The current work item's Q6_K weight rows, one byte a value (0–63) in the rows' order, reused across calls.
    static Q6K_BYTES: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `tile::<N>(r, i)` over weight rows `rows` and every activation row, four at a time, in blocks of
/// `ACT_BLOCK` activation rows.
macro_rules! for_tiles {
    ($rows:expr, $m:expr, $tile:ident, $($arg:expr),*) => {
        let mut block = 0;
        while block < $m {
            let end = $m.min(block + super::kquants_avx2::ACT_BLOCK);
            for r in $rows.clone() {
                let mut i = block;
                while i < end {
                    match end - i {
                        1 => $tile::<1>($($arg,)* r, i),
                        2 => $tile::<2>($($arg,)* r, i),
                        3 => $tile::<3>($($arg,)* r, i),
                        _ => $tile::<{ super::kquants_avx2::TILE_ACTS }>($($arg,)* r, i),
                    }
                    i += (end - i).min(super::kquants_avx2::TILE_ACTS);
                }
            }
            block = end;
        }
    };
}

/// Q6_K output columns `rows` for the `m` activation rows.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn q6k_rows(w: &Q6KMatrix, acts: &KActivations, m: usize, rows: Range<usize>, out: &mut [f32]) {
    if m < BYTES_MIN_ACTS {
        for_tiles!(rows, m, q6k_tile, w, acts, out);
        return;
    }
    Q6K_BYTES.with(|cell| {
        let mut bytes = cell.borrow_mut();
        let k = w.cols();
        bytes.resize(rows.len() * k, 0);
        // A loop, not a closure: closures do not inherit `target_feature`, and would call out for each block.
        for (row_bytes, r) in bytes.chunks_exact_mut(k).zip(rows.clone()) {
            q6k_row_bytes(w, r, row_bytes);
        }
        let bytes = &bytes[..];
        for_tiles!(rows, m, q6k_bytes_tile, w, bytes, rows.start, acts, out);
    });
}

/// Weight row `r`'s values, unpacked to one byte each (0–63), into `out` (`w.cols()` bytes).
#[target_feature(enable = "avx2,fma")]
unsafe fn q6k_row_bytes(w: &Q6KMatrix, r: usize, out: &mut [u8]) {
    assert_eq!(out.len(), w.cols());
    for (block, out) in w.row(r).iter().zip(out.chunks_exact_mut(SUPER)) {
        for h in 0..2 {
            for (p, values) in q6k_half_values(block, h).into_iter().enumerate() {
                _mm256_storeu_si256(out.as_mut_ptr().add(128 * h + 32 * p) as *mut __m256i, values);
            }
        }
    }
}

/// `q6k_tile` on weight rows unpacked to bytes (`bytes`: the rows from `first` on, `w.cols()` bytes each): the
/// same registers in the same order, so the same bits.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe fn q6k_bytes_tile<const N: usize>(
    w: &Q6KMatrix,
    bytes: &[u8],
    first: usize,
    acts: &KActivations,
    out: &mut [f32],
    r: usize,
    i0: usize,
) {
    let k = w.cols();
    q6k_tile_from::<N, true>(w, &bytes[(r - first) * k..][..k], acts, out, r, i0)
}

/// `out[i0 + j][r]` for `j < N`.
#[target_feature(enable = "avx2,fma")]
unsafe fn q6k_tile<const N: usize>(w: &Q6KMatrix, acts: &KActivations, out: &mut [f32], r: usize, i0: usize) {
    q6k_tile_from::<N, false>(w, &[], acts, out, r, i0)
}

/// The Q6_K tile, `out[i0 + j][r]` for `j < N`: weight row `r` unpacked from the block as it goes, or, with
/// `BYTES`, read from `row_bytes` (the row's `w.cols()` values, one byte each).
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn q6k_tile_from<const N: usize, const BYTES: bool>(
    w: &Q6KMatrix,
    row_bytes: &[u8],
    acts: &KActivations,
    out: &mut [f32],
    r: usize,
    i0: usize,
) {
    let k = w.cols();
    assert_eq!(row_bytes.len(), if BYTES { k } else { 0 });
    let mut sums = [_mm256_setzero_ps(); N];
    let a_rows: [_; N] = acts.rows(i0, k);
    for (b, block) in w.row(r).iter().enumerate() {
        let mut dots = [_mm256_setzero_si256(); N];
        for h in 0..2 {
            let scales16 = half_scales16(block, h);
            let unpacked = if BYTES { [_mm256_setzero_si256(); 4] } else { q6k_half_values(block, h) };
            for (p, &unpacked) in unpacked.iter().enumerate() {
                // Values 128h + 32p.. of the block; 0–15 of them belong to group 8h + 2p (the low 128-bit lane
                // of the maddubs result), 16–31 to the next group.
                let at = b * SUPER + 128 * h + 32 * p;
                let q = if BYTES { _mm256_loadu_si256(row_bytes.as_ptr().add(at) as *const __m256i) } else { unpacked };
                let scale = _mm256_shuffle_epi8(scales16, pick_i16(2 * p, 2 * p + 1));
                for j in 0..N {
                    let a = _mm256_loadu_si256(a_rows[j].0.as_ptr().add(at) as *const __m256i);
                    dots[j] = _mm256_add_epi32(dots[j], _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), scale));
                }
            }
        }
        add_block(block, b, &a_rows, &dots, &mut sums);
    }
    let n_out = w.rows();
    for j in 0..N {
        out[(i0 + j) * n_out + r] = horizontal_sum(sums[j]);
    }
}

/// One activation row as `KActivations::row` gives it: int8 values, per-256 scales, sums of 16.
type ActRow<'a> = (&'a [i8], &'a [f32], &'a [i16]);

/// Adds super-block `b` to the f32 sums: its integer dot products (`dots`, one per activation row) less the −32
/// offset, `32 · Σ_g scale_g · (sum of the activations of group g)`, settled in integers (both are exact in i32:
/// at most 2^25 and 2^24), then times `d_w × d_a`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn add_block<const N: usize>(
    block: &Q6KBlock,
    b: usize,
    a_rows: &[ActRow; N],
    dots: &[__m256i; N],
    sums: &mut [__m256; N],
) {
    let scales = q6k_scales16(block);
    for j in 0..N {
        let sums16 = _mm256_loadu_si256(a_rows[j].2[b * SUPER / 16..].as_ptr() as *const __m256i);
        let offset = _mm256_slli_epi32(_mm256_madd_epi16(scales, sums16), 5);
        let dot = _mm256_cvtepi32_ps(_mm256_sub_epi32(dots[j], offset));
        sums[j] = _mm256_fmadd_ps(dot, _mm256_set1_ps(block.d * a_rows[j].1[b]), sums[j]);
    }
}

/// Half `h` of a Q6_K block's values (128) as bytes 0–63, in four registers: register `p` holds values
/// `128h + 32p ..` in order.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn q6k_half_values(block: &Q6KBlock, h: usize) -> [__m256i; 4] {
    let low4 = _mm256_set1_epi8(0x0F);
    let bits45 = _mm256_set1_epi8(0x30);
    let ql0 = _mm256_loadu_si256(block.ql.as_ptr().add(64 * h) as *const __m256i);
    let ql1 = _mm256_loadu_si256(block.ql.as_ptr().add(64 * h + 32) as *const __m256i);
    let qh = _mm256_loadu_si256(block.qh.as_ptr().add(32 * h) as *const __m256i);
    // Each pair of high bits shifted straight to bits 4–5 and masked there: shifts are per 16-bit lane, and the
    // bits one brings over from the neighbouring byte land outside 4–5, so the mask drops them.
    let top0 = _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45);
    let top1 = _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45);
    let top2 = _mm256_and_si256(qh, bits45);
    let top3 = _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45);
    [
        _mm256_or_si256(_mm256_and_si256(ql0, low4), top0),
        _mm256_or_si256(_mm256_and_si256(ql1, low4), top1),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), top2),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), top3),
    ]
}

/// Half `h`'s eight group scales as i16 in both 128-bit lanes, for `vpshufb` to pick from.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn half_scales16(block: &Q6KBlock, h: usize) -> __m256i {
    _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64(block.scales.as_ptr().add(8 * h) as *const __m128i)))
}

/// A Q6_K block's sixteen scales as i16.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn q6k_scales16(block: &Q6KBlock) -> __m256i {
    _mm256_cvtepi8_epi16(_mm_loadu_si128(block.scales.as_ptr() as *const __m128i))
}

/// A `vpshufb` control that fills the low 128-bit lane with i16 element `low` and the high lane with `high`.
#[inline(always)]
fn pick_i16(low: usize, high: usize) -> __m256i {
    // SAFETY: `PICK_I16[low][high]` is a `[u8; 32]` (indexing panics out of range), so the unaligned 32-byte load
    // stays inside it. The AVX2 load is only reached from this file's `avx2,fma` kernels, into which it inlines,
    // and those run only after `cpu_level` found AVX2.
    unsafe { _mm256_loadu_si256(PICK_I16[low][high].as_ptr() as *const __m256i) }
}

/// `PICK_I16[l][h]`: the `vpshufb` controls for `pick_i16`, built at compile time.
static PICK_I16: [[[u8; 32]; 8]; 8] = {
    let mut table = [[[0u8; 32]; 8]; 8];
    let mut l = 0;
    while l < 8 {
        let mut h = 0;
        while h < 8 {
            let mut i = 0;
            while i < 16 {
                let (lane_low, lane_high) = if i % 2 == 0 { (2 * l, 2 * h) } else { (2 * l + 1, 2 * h + 1) };
                table[l][h][i] = lane_low as u8;
                table[l][h][16 + i] = lane_high as u8;
                i += 1;
            }
            h += 1;
        }
        l += 1;
    }
    table
};
