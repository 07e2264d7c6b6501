//! The AVX2 + FMA tile kernel for `Q4Matrix`: 4 weight rows × 2 activation rows a tile, each pair's block steps
//! those of llama.cpp's `ggml_vec_dot_q4_0_q8_0` / `ggml_vec_dot_q4_1_q8_1` on AVX2 (`q4::reference_rows` spells
//! them out), so a tile changes which loads are shared, never an output's bits. And the activations' Q8_1
//! quantization, as llama.cpp's `quantize_row_q8_1` does it on AVX2.
//!
//! Per block the 16 nibble bytes unpack to 32 bytes (low nibbles, then high), in the activations' order. Q4_1's
//! values are unsigned and go straight into `maddubs`; Q4_0's, minus 8, move their sign onto the activation first.
//! The block's f16 scale (and minimum), read beside its nibbles, widen with one `vcvtph2ps`.

use std::arch::x86_64::*;
use std::ops::Range;

use super::avx2::horizontal_sum;
use super::q4::{Q4Kind, Q4Matrix, Q8Acts, BLOCK};
use super::q8_0_avx2::{for_q8_0_tiles, OutColumns};

/// Weight rows per tile.
const TILE_ROWS: usize = 4;
/// Activation rows per tile.
const TILE_ACTS: usize = 2;

/// One block of `q4::quantize_q8_1` (`src` and `dst` 32 long) eight values at a time: its `d` (before the f16
/// rounding) and `Σ q`. The products and the rounding (to nearest, ties to even: `vroundps`) are the scalar
/// loop's, value for value, so the bits are.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn quantize_q8_1_block(src: &[f32], dst: &mut [i8]) -> (f32, i32) {
    assert!(src.len() == BLOCK && dst.len() == BLOCK, "one block of {BLOCK} values");
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFF_FFFF));
    let mut v = [_mm256_setzero_ps(); 4];
    let mut amax = _mm256_setzero_ps();
    for (k, lanes) in v.iter_mut().enumerate() {
        *lanes = _mm256_loadu_ps(src.as_ptr().add(8 * k));
        amax = _mm256_max_ps(amax, _mm256_and_ps(*lanes, abs_mask));
    }
    let pair = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    let pair = _mm_max_ps(pair, _mm_movehl_ps(pair, pair));
    let amax = _mm_cvtss_f32(_mm_max_ss(pair, _mm_shuffle_ps(pair, pair, 1)));
    let d = amax / 127.0;
    let id = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
    let mut ints = [_mm256_setzero_si256(); 4];
    let mut sums = _mm256_setzero_si256();
    for (int, lanes) in ints.iter_mut().zip(v) {
        let rounded = _mm256_round_ps(_mm256_mul_ps(lanes, id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        *int = _mm256_cvtps_epi32(rounded);
        sums = _mm256_add_epi32(sums, *int);
    }
    // `vpackssdw`/`vpacksswb` interleave 128-bit lanes; this permutation puts the 32 values back in order.
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let words = _mm256_packs_epi16(_mm256_packs_epi32(ints[0], ints[1]), _mm256_packs_epi32(ints[2], ints[3]));
    _mm256_storeu_si256(dst.as_mut_ptr() as *mut __m256i, _mm256_permutevar8x32_epi32(words, order));
    let mut lanes = [0i32; 8];
    _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, sums);
    (d, lanes.iter().sum())
}

/// Output columns `rows` for every one of the `m` activation rows.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
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

#[target_feature(enable = "avx2,fma,f16c")]
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

#[target_feature(enable = "avx2,fma,f16c")]
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
#[target_feature(enable = "avx2,fma,f16c")]
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
    let (block_bytes, nibbles_at) = (w.kind().block_bytes(), w.kind().nibbles_at());
    let mut w_blocks = [std::ptr::null::<u8>(); R];
    for (x, row) in w_blocks.iter_mut().enumerate() {
        *row = w.row_blocks(r0 + x).as_ptr();
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
            let block = w_blocks[x].add(b * block_bytes);
            let bytes = _mm_loadu_si128(block.add(nibbles_at) as *const __m128i);
            let q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes), low);
            // The scale (and the minimum after it) as f32: f16 → f32 is exact.
            let halves = if MIN {
                (block as *const i32).read_unaligned()
            } else {
                i32::from((block as *const u16).read_unaligned())
            };
            let scale_min = _mm_cvtph_ps(_mm_cvtsi32_si128(halves));
            let wd = _mm_cvtss_f32(scale_min);
            if MIN {
                let wm = _mm_cvtss_f32(_mm_movehdup_ps(scale_min));
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
