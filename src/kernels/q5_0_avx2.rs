//! AVX2 + FMA kernels for `Q5_0Matrix`: a decode kernel on the five-bit layout, and a prefill path that unpacks
//! a tile of weight rows to int8 once and hands it to the Q8_0 tile kernel.
//!
//! A block pair's 64 values come from one load: the low nibbles are block 2p, the high nibbles block 2p + 1, and
//! the fifth bits sit at bits 0 and 1 of the group's bit plane once it is shifted right by 2 · (p mod 4), so two
//! shifts and masks move them to bit 4. The values are unsigned (0–31), which `maddubs` takes as they are; the
//! −16 they stand for is subtracted once per output as 16 · Σ_b d_w · (d_a · Σ q).

use std::arch::x86_64::*;
use std::ops::Range;

use super::avx2::horizontal_sum;
use super::q5_0::{Q5Activations, Q5_0Matrix, BLOCKS_PER_GROUP};
use super::q8_0::{Q8_0Matrix, QuantizedRows, BLOCK};
use super::q8_0_avx2::{rows_kernel_into, OutColumns};

/// Block pairs per bit plane.
const PAIRS_PER_GROUP: usize = BLOCKS_PER_GROUP / 2;

thread_local! {
    /// A pool thread's tile of weight rows unpacked to int8 (a prefill's scratch, reused across calls).
    static UNPACKED: std::cell::RefCell<Q8_0Matrix> = std::cell::RefCell::new(Q8_0Matrix::scratch());
}

/// The unsigned values of a block pair: 32 nibble bytes at `nibbles`, and the group's bit plane shifted right by
/// 2 · (pair mod 4).
#[inline(always)]
unsafe fn unpack_pair(nibbles: *const u8, plane: __m256i) -> (__m256i, __m256i) {
    let low4 = _mm256_set1_epi8(0x0F);
    let bit4 = _mm256_set1_epi8(0x10);
    let q = _mm256_loadu_si256(nibbles as *const __m256i);
    // Shifts move bits across the bytes of a 16-bit lane; the masks keep each byte's own.
    let first = _mm256_or_si256(_mm256_and_si256(q, low4), _mm256_and_si256(_mm256_slli_epi16(plane, 4), bit4));
    let second = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi16(q, 4), low4),
        _mm256_and_si256(_mm256_slli_epi16(plane, 3), bit4),
    );
    (first, second)
}

/// Output columns `rows` for each of the `m` activation rows, on the five-bit layout (decode: `m` is small). One
/// weight row at a time, so the weights stream from memory in order (see `q8_0_avx2::rows_kernel_into`), and a
/// row's bytes stay in L1 from one activation row to the next.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn rows_kernel(w: &Q5_0Matrix, acts: &Q5Activations, m: usize, rows: Range<usize>, out: &mut [f32]) {
    for r in rows {
        for i in 0..m {
            row_times_activation(w, r, acts, i, out);
        }
    }
}

/// `out[i][r]`. Two accumulators, one per block of a pair, halve the chain of dependent adds.
#[target_feature(enable = "avx2,fma")]
unsafe fn row_times_activation(w: &Q5_0Matrix, r: usize, acts: &Q5Activations, i: usize, out: &mut [f32]) {
    let k = w.cols();
    let kb = k / BLOCK;
    let ones = _mm256_set1_epi16(1);
    let a_quants = acts.rows.quants[i * k..(i + 1) * k].as_ptr();
    let a_scales = &acts.rows.scales[i * kb..(i + 1) * kb];
    let a_sums = &acts.scaled_sums[i * kb..(i + 1) * kb];
    let (nibbles, planes, scales) = w.row(r);
    let (mut acc_first, mut acc_second) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut p = 0;
    while p < kb / 2 {
        let mut plane = _mm256_loadu_si256(planes.as_ptr().add(32 * (p / PAIRS_PER_GROUP)) as *const __m256i);
        let end = (p + PAIRS_PER_GROUP).min(kb / 2);
        while p < end {
            let a_first = _mm256_loadu_si256(a_quants.add(2 * BLOCK * p) as *const __m256i);
            let a_second = _mm256_loadu_si256(a_quants.add(2 * BLOCK * p + BLOCK) as *const __m256i);
            let (first, second) = unpack_pair(nibbles.as_ptr().add(32 * p), plane);
            plane = _mm256_srli_epi16(plane, 2);
            let d_first = _mm256_madd_epi16(_mm256_maddubs_epi16(first, a_first), ones);
            let d_second = _mm256_madd_epi16(_mm256_maddubs_epi16(second, a_second), ones);
            let scale_first = *scales.get_unchecked(2 * p) * *a_scales.get_unchecked(2 * p);
            let scale_second = *scales.get_unchecked(2 * p + 1) * *a_scales.get_unchecked(2 * p + 1);
            acc_first = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d_first), _mm256_set1_ps(scale_first), acc_first);
            acc_second = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d_second), _mm256_set1_ps(scale_second), acc_second);
            p += 1;
        }
    }
    out[i * w.rows() + r] = horizontal_sum(_mm256_add_ps(acc_first, acc_second)) - 16.0 * dot(scales, a_sums);
}

/// `Σ a[b] · b[b]` over f32 slices of one length.
#[target_feature(enable = "avx2,fma")]
unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sum = _mm256_setzero_ps();
    let whole = a.len() / 8 * 8;
    for c in (0..whole).step_by(8) {
        sum = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(c)), _mm256_loadu_ps(b.as_ptr().add(c)), sum);
    }
    horizontal_sum(sum) + a[whole..].iter().zip(&b[whole..]).map(|(x, y)| x * y).sum::<f32>()
}

/// Output columns `rows` for every activation row: the rows are unpacked to signed int8 (`v − 16`) once, then
/// multiplied by the Q8_0 tile kernel (a prefill: the unpacking is shared by all `m` activation rows).
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn rows_via_int8(
    w: &Q5_0Matrix,
    acts: &QuantizedRows,
    m: usize,
    rows: Range<usize>,
    out: &mut [f32],
) {
    // The thread-local hands its value to a closure, which would not inherit this function's AVX2 target: the
    // work is in functions that have it.
    UNPACKED.with(|cell| {
        let mut unpacked = cell.borrow_mut();
        unpack_rows(w, rows.clone(), &mut unpacked);
        let columns = OutColumns { width: w.rows(), first: rows.start };
        rows_kernel_into(&unpacked, acts, m, 0..rows.len(), out, columns);
    });
}

/// Weight rows `rows` as signed int8 (`v − 16`) with their block scales, into `unpacked`.
#[target_feature(enable = "avx2,fma")]
unsafe fn unpack_rows(w: &Q5_0Matrix, rows: Range<usize>, unpacked: &mut Q8_0Matrix) {
    let (k, kb) = (w.cols(), w.cols() / BLOCK);
    let (quants, scales) = unpacked.refill(rows.len(), k);
    let sixteen = _mm256_set1_epi8(16);
    for (x, r) in rows.enumerate() {
        let (nibbles, high, row_scales) = w.row(r);
        let dst = quants[x * k..(x + 1) * k].as_mut_ptr();
        let mut p = 0;
        while p < kb / 2 {
            let mut plane = _mm256_loadu_si256(high.as_ptr().add(32 * (p / PAIRS_PER_GROUP)) as *const __m256i);
            let end = (p + PAIRS_PER_GROUP).min(kb / 2);
            while p < end {
                let (first, second) = unpack_pair(nibbles.as_ptr().add(32 * p), plane);
                plane = _mm256_srli_epi16(plane, 2);
                _mm256_storeu_si256(dst.add(2 * BLOCK * p) as *mut __m256i, _mm256_sub_epi8(first, sixteen));
                _mm256_storeu_si256(dst.add(2 * BLOCK * p + BLOCK) as *mut __m256i, _mm256_sub_epi8(second, sixteen));
                p += 1;
            }
        }
        scales[x * kb..(x + 1) * kb].copy_from_slice(row_scales);
    }
}
