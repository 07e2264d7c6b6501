//! AVX2 panel kernels (no AVX-512): Q4_K, Q5_K and Q5_0 weights stored as panels of sixteen rows (`q4k_panels`,
//! `q5k_panels`, `q5_0_panels`), eight rows to a 256-bit register of 32-bit lanes (a decode step takes a panel's
//! two registers together), and for Q4_K and Q5_0 the same with AVX-VNNI's `vpdpbusd`.
//!
//! Without VNNI every 32 products cost a `maddubs` (unsigned weight bytes × signed activation bytes into i16 pair
//! sums) and then, in a row layout, a `madd` by the sub-block's scale: two multiplies for 32 products, and a
//! register's lanes added into one sum for every row. In a panel each lane is a row, so the pair sums of a whole
//! sub-block (eight `maddubs`, at most 8 · 2 · 15 · 127 = 30,480) add up in i16 before one `madd` applies the eight
//! rows' scales: nine multiplies for 256 products instead of sixteen, and no lanes to add across.
//!
//! Q5_0 the same way: its values plus 16 (0–31) are unsigned, and the four words of a block half add up in i16
//! (at most 4 · 2 · 31 · 128 = 31,744) before one `madd` by ones widens them. That keeps the weights at five bits
//! in memory, where the int8 widening read 36 bytes per 32 values instead of 22: decode steps read 40 % fewer bytes.
//!
//! The integers are exact and the f32 steps are those of the AVX-512 VNNI panel kernels (Q4_K, per super-block:
//! `sum += dot · (d · d_a)`, then `sum −= min_dot · (dmin · d_a)`, each fused; Q5_0: four sums by block index mod
//! 4), so both kernels give the same bits, and a row gets the same bits in any batch.

use std::arch::x86_64::*;
use std::ops::Range;

use super::k_acts::{KActivations, SUPER};
use super::panels::PANEL_ROWS;
use super::q4k_panels::{Q4KPanelBlock, Q4KPanels};
use super::q5_0_panels::{Q5_0PanelBlock, Q5_0Panels, FIFTH_BIT_SHIFTS};
use super::q5k_panels::{Q5KPanelBlock, Q5KPanels};
use super::q8_0::{QuantizedRows, BLOCK};

/// Activation rows that pass a half panel together (their sums stay in registers: 2 × 4 i16 chains, 4 i32 dots).
const TILE_ACTS: usize = 4;

/// Rows per 256-bit register of 32-bit lanes: half a panel.
const HALF: usize = PANEL_ROWS / 2;

/// How far ahead of its reads the Q4_K both-halves tile asks for the weights (`prefetch`): nearly two panel blocks.
/// The hardware prefetcher alone left a decode step waiting on its loads. 4 KiB is the distance that paid: 1 KiB
/// ahead was slower and 8 KiB no better (docs/performance.md, "AVX2 on AMD Zen 4: panels read in order, weights
/// prefetched").
pub(super) const PREFETCH_AHEAD: usize = 4096;

/// Runs `tile::<N, H, VNNI>(panel, half0, k, acts, out, n_out, first, lanes, i)` over one panel (`rows`:
/// `rows.start` a multiple of 16, at most 16 rows) of `w`, for activation rows `i..i + N`, up to `TILE_ACTS` at a
/// time. One or two activation rows (a decode step, a step with one drafted token) take both halves in one pass
/// (`H` = 2), so the weights stream in order, every byte of a cache line used as it arrives: half a panel at a time
/// read every other 32 bytes and came back for the rest from L2, and memory sat idle through the second half
/// (docs/performance.md, "AVX2 on AMD Zen 4: panels read in order, weights prefetched"). More rows take one half at
/// a time, both halves for one tile of activation rows, so the second half finds them in L1 and the registers hold
/// the tile's sums. The Q4_K both-halves tile also prefetches the weights `PREFETCH_AHEAD` bytes ahead: a decode
/// step streams them and does little else (the Q5_0 tile does not; it was not measured with a prefetch).
/// The tiles are `#[inline(always)]`, so they compile with the target features of the function this runs in.
macro_rules! for_half_tiles {
    ($tile:ident, $vnni:literal, $w:expr, $acts:expr, $m:expr, $rows:expr, $out:expr) => {
        let (w, rows) = ($w, $rows);
        assert!(rows.start.is_multiple_of(PANEL_ROWS) && rows.len() <= PANEL_ROWS && rows.end <= w.rows());
        let panel = w.panel(rows.start / PANEL_ROWS);
        let lanes_of = |half: usize| rows.end.saturating_sub(rows.start + HALF * half).min(HALF);
        if $m <= 2 && lanes_of(1) > 0 {
            let lanes = [lanes_of(0), lanes_of(1)];
            if $m == 1 {
                $tile::<1, 2, $vnni>(panel, 0, w.cols(), $acts, $out, w.rows(), rows.start, lanes, 0);
            } else {
                $tile::<2, 2, $vnni>(panel, 0, w.cols(), $acts, $out, w.rows(), rows.start, lanes, 0);
            }
        } else {
            let mut i = 0;
            while i < $m {
                let n = ($m - i).min(TILE_ACTS);
                for half in 0..2 {
                    let first = rows.start + HALF * half;
                    let lanes = [lanes_of(half)];
                    if lanes[0] == 0 {
                        continue;
                    }
                    match n {
                        1 => $tile::<1, 1, $vnni>(panel, half, w.cols(), $acts, $out, w.rows(), first, lanes, i),
                        2 => $tile::<2, 1, $vnni>(panel, half, w.cols(), $acts, $out, w.rows(), first, lanes, i),
                        3 => $tile::<3, 1, $vnni>(panel, half, w.cols(), $acts, $out, w.rows(), first, lanes, i),
                        _ => {
                            $tile::<TILE_ACTS, 1, $vnni>(panel, half, w.cols(), $acts, $out, w.rows(), first, lanes, i)
                        }
                    }
                }
                i += n;
            }
        }
    };
}

/// Output columns `rows` (one panel: `rows.start` a multiple of 16, at most 16 rows) for the `m` activation rows.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q4k_panel_rows(w: &Q4KPanels, acts: &KActivations, m: usize, rows: Range<usize>, out: &mut [f32]) {
    for_half_tiles!(q4k_tile, false, w, acts, m, rows, out);
}

/// `q4k_panel_rows` on AVX-VNNI.
///
/// # Safety
/// The CPU must support AVX2, FMA, F16C and AVX-VNNI.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub(super) unsafe fn q4k_panel_rows_avx_vnni(
    w: &Q4KPanels,
    acts: &KActivations,
    m: usize,
    rows: Range<usize>,
    out: &mut [f32],
) {
    for_half_tiles!(q4k_tile, true, w, acts, m, rows, out);
}

/// The Q4_K tile, `out[i0 + j][first + 8h..][..lanes[h]]` for `j < N`, `h < H`: rows `8 · half0..8 · (half0 + H)`
/// of the panel (`lanes[h]` of each half real), inlined into `q4k_panel_rows` and `q4k_panel_rows_avx_vnni` and so
/// compiled with each one's features. With `VNNI`, `vpdpbusd` adds 32 products into each sub-block's i32 sums in
/// one instruction where AVX2 takes a `maddubs` and an i16 add, a `mullo` (not a `madd` on i16 sums) applies the
/// sub-block's scales, and `vpdpwssd` the minimums. The integers are the same either way, so the bits are, and
/// the same for one half at a time or both (`H`).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn q4k_tile<const N: usize, const H: usize, const VNNI: bool>(
    panel: &[Q4KPanelBlock],
    half0: usize,
    k: usize,
    acts: &KActivations,
    out: &mut [f32],
    n_out: usize,
    first: usize,
    lanes: [usize; H],
    i0: usize,
) {
    let low4 = _mm256_set1_epi8(0x0F);
    let a_rows: [_; N] = acts.rows(i0, k);
    let mut a_quants = [std::ptr::null::<i8>(); N];
    let mut a_sums32: [&[i16]; N] = [&[]; N];
    for j in 0..N {
        (a_quants[j], a_sums32[j]) = (a_rows[j].0.as_ptr(), acts.sums32_row(i0 + j, k));
    }
    let mut sums = [[_mm256_setzero_ps(); H]; N];
    for (b, block) in panel.iter().enumerate() {
        let scales_and_mins: [_; H] = std::array::from_fn(|h| k_scales_and_mins(&block.packed, half0 + h));
        let mut dots = [[_mm256_setzero_si256(); H]; N];
        for c in 0..4 {
            // Sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles), a chain each: in i16 across the eight words
            // without VNNI, in i32 with it (two chains hide `vpdpbusd`'s latency).
            let mut even = [[_mm256_setzero_si256(); H]; N];
            let mut odd = [[_mm256_setzero_si256(); H]; N];
            for t in 0..8 {
                let word = block.qs[8 * c + t].as_ptr();
                if H == 2 {
                    // One 64-byte line of both halves per step: ask for the one `PREFETCH_AHEAD` on (an address
                    // past the weights is only a hint, never read).
                    _mm_prefetch::<_MM_HINT_T0>((word as *const i8).wrapping_add(PREFETCH_AHEAD));
                }
                for h in 0..H {
                    let q = _mm256_load_si256(word.add(HALF * (half0 + h)) as *const __m256i);
                    let low = _mm256_and_si256(q, low4);
                    let high = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
                    for j in 0..N {
                        let a = a_quants[j].add(b * SUPER + 64 * c + 4 * t);
                        let (even, odd) = (&mut even[j][h], &mut odd[j][h]);
                        if VNNI {
                            *even = _mm256_dpbusd_avx_epi32(*even, low, broadcast_word(a));
                            *odd = _mm256_dpbusd_avx_epi32(*odd, high, broadcast_word(a.add(32)));
                        } else {
                            *even = _mm256_add_epi16(*even, _mm256_maddubs_epi16(low, broadcast_word(a)));
                            *odd = _mm256_add_epi16(*odd, _mm256_maddubs_epi16(high, broadcast_word(a.add(32))));
                        }
                    }
                }
            }
            let (even_byte, odd_byte) = (2 * c % 4, (2 * c + 1) % 4);
            for h in 0..H {
                let scales = scales_and_mins[h][0][c / 2];
                for j in 0..N {
                    let scaled = if VNNI {
                        let (even_scale, odd_scale) =
                            (lane_byte_as_i32(scales, even_byte), lane_byte_as_i32(scales, odd_byte));
                        _mm256_add_epi32(
                            _mm256_mullo_epi32(even[j][h], even_scale),
                            _mm256_mullo_epi32(odd[j][h], odd_scale),
                        )
                    } else {
                        let (even_scale, odd_scale) =
                            (lane_byte_paired(scales, even_byte), lane_byte_paired(scales, odd_byte));
                        _mm256_add_epi32(
                            _mm256_madd_epi16(even[j][h], even_scale),
                            _mm256_madd_epi16(odd[j][h], odd_scale),
                        )
                    };
                    dots[j][h] = _mm256_add_epi32(dots[j][h], scaled);
                }
            }
        }
        let mins = scales_and_mins.map(|[_, mins]| mins);
        let a_scales: [f32; N] = std::array::from_fn(|j| a_rows[j].1[b]);
        add_super_block::<N, H, VNNI>(&mut sums, &dots, mins, (&block.d, &block.dmin), half0, &a_sums32, &a_scales, b);
    }
    store_halves(&sums, out, n_out, first, lanes, i0);
}

/// Output columns `rows` (one panel: `rows.start` a multiple of 16, at most 16 rows) of Q5_K panels for the `m`
/// activation rows. No AVX-VNNI or AVX-512 version: CPUs with those run this one.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q5k_panel_rows(w: &Q5KPanels, acts: &KActivations, m: usize, rows: Range<usize>, out: &mut [f32]) {
    for_half_tiles!(q5k_tile, false, w, acts, m, rows, out);
}

/// The Q5_K tile, as the Q4_K one (`q4k_tile`) with each value's fifth bit joined in as 16: `q = nibble | bit` is
/// 0–31. A `maddubs` pair sum is then up to 2 · 31 · 127 = 7,874, so the i16 chains take four words (31,496), not
/// eight, and each sub-block's two chains are scaled by a `madd` apiece. The super-block's integer dot product is
/// exact, as llama.cpp's `ggml_vec_dot_q5_K_q8_K` computes it, and the f32 steps are the Q4_K tile's. `VNNI` must
/// be false (the macro that runs the tiles passes it): there is no AVX-VNNI Q5_K kernel.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn q5k_tile<const N: usize, const H: usize, const VNNI: bool>(
    panel: &[Q5KPanelBlock],
    half0: usize,
    k: usize,
    acts: &KActivations,
    out: &mut [f32],
    n_out: usize,
    first: usize,
    lanes: [usize; H],
    i0: usize,
) {
    const { assert!(!VNNI, "Q5_K panels have an AVX2 kernel only") };
    let (low4, bit4) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x10));
    let a_rows: [_; N] = acts.rows(i0, k);
    let mut a_quants = [std::ptr::null::<i8>(); N];
    let mut a_sums32: [&[i16]; N] = [&[]; N];
    for j in 0..N {
        (a_quants[j], a_sums32[j]) = (a_rows[j].0.as_ptr(), acts.sums32_row(i0 + j, k));
    }
    let mut sums = [[_mm256_setzero_ps(); H]; N];
    for (b, block) in panel.iter().enumerate() {
        let scales_and_mins: [_; H] = std::array::from_fn(|h| k_scales_and_mins(&block.packed, half0 + h));
        let mut dots = [[_mm256_setzero_si256(); H]; N];
        for c in 0..4 {
            // Sub-block 2c's fifth bits sit at bit 4 + c of each byte, 2c + 1's at bit c (`q5k_panels`).
            let (even_shift, odd_shift) = (_mm_cvtsi32_si128(c as i32), _mm_cvtsi32_si128(4 - c as i32));
            let (even_byte, odd_byte) = (2 * c % 4, (2 * c + 1) % 4);
            let scale_pairs: [_; H] = std::array::from_fn(|h| {
                let scales = scales_and_mins[h][0][c / 2];
                [lane_byte_paired(scales, even_byte), lane_byte_paired(scales, odd_byte)]
            });
            for words in [0..4, 4..8] {
                let mut even = [[_mm256_setzero_si256(); H]; N];
                let mut odd = [[_mm256_setzero_si256(); H]; N];
                for t in words {
                    let word = block.qs[8 * c + t].as_ptr();
                    let top = block.qh[t].as_ptr();
                    if H == 2 {
                        // As in the Q4_K tile: a line of both halves `PREFETCH_AHEAD` on, per line read.
                        _mm_prefetch::<_MM_HINT_T0>((word as *const i8).wrapping_add(PREFETCH_AHEAD));
                        if c == 0 {
                            _mm_prefetch::<_MM_HINT_T0>((top as *const i8).wrapping_add(PREFETCH_AHEAD));
                        }
                    }
                    for h in 0..H {
                        let q = _mm256_load_si256(word.add(HALF * (half0 + h)) as *const __m256i);
                        let bits = _mm256_load_si256(top.add(HALF * (half0 + h)) as *const __m256i);
                        let low = _mm256_or_si256(
                            _mm256_and_si256(q, low4),
                            _mm256_and_si256(_mm256_srl_epi32(bits, even_shift), bit4),
                        );
                        let high = _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16(q, 4), low4),
                            _mm256_and_si256(_mm256_sll_epi32(bits, odd_shift), bit4),
                        );
                        for j in 0..N {
                            let a = a_quants[j].add(b * SUPER + 64 * c + 4 * t);
                            let (even, odd) = (&mut even[j][h], &mut odd[j][h]);
                            *even = _mm256_add_epi16(*even, _mm256_maddubs_epi16(low, broadcast_word(a)));
                            *odd = _mm256_add_epi16(*odd, _mm256_maddubs_epi16(high, broadcast_word(a.add(32))));
                        }
                    }
                }
                for h in 0..H {
                    let [even_scale, odd_scale] = scale_pairs[h];
                    for j in 0..N {
                        let scaled = _mm256_add_epi32(
                            _mm256_madd_epi16(even[j][h], even_scale),
                            _mm256_madd_epi16(odd[j][h], odd_scale),
                        );
                        dots[j][h] = _mm256_add_epi32(dots[j][h], scaled);
                    }
                }
            }
        }
        let mins = scales_and_mins.map(|[_, mins]| mins);
        let a_scales: [f32; N] = std::array::from_fn(|j| a_rows[j].1[b]);
        add_super_block::<N, H, VNNI>(&mut sums, &dots, mins, (&block.d, &block.dmin), half0, &a_sums32, &a_scales, b);
    }
    store_halves(&sums, out, n_out, first, lanes, i0);
}

/// The end of a Q4_K or Q5_K super-block `b` for a tile: `sums[j][h] += dots[j][h] · (d · d_a)`, then
/// `−= min_dot · (dmin · d_a)`, each fused, where `min_dot` is `Σ_s min_s · (sum of sub-block s's activations)`, two
/// sub-blocks a `madd` (or with `VNNI` a `vpdpwssd`). Inlined into the tiles (a closure would not take on their
/// target features, and each call would stay a call).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn add_super_block<const N: usize, const H: usize, const VNNI: bool>(
    sums: &mut [[__m256; H]; N],
    dots: &[[__m256i; H]; N],
    mins: [[__m256i; 2]; H],
    (d, dmin): (&[u16; PANEL_ROWS], &[u16; PANEL_ROWS]),
    half0: usize,
    a_sums32: &[&[i16]; N],
    a_scales: &[f32; N],
    b: usize,
) {
    for h in 0..H {
        // Sub-blocks 2p and 2p + 1's minimums, as the two i16 of each lane.
        let mins = mins[h];
        let min_pairs = [
            lane_bytes_as_i16(mins[0], 0, 1),
            lane_bytes_as_i16(mins[0], 2, 3),
            lane_bytes_as_i16(mins[1], 0, 1),
            lane_bytes_as_i16(mins[1], 2, 3),
        ];
        let offset = HALF * (half0 + h);
        let d = _mm256_cvtph_ps(_mm_load_si128(d.as_ptr().add(offset) as *const __m128i));
        let dmin = _mm256_cvtph_ps(_mm_load_si128(dmin.as_ptr().add(offset) as *const __m128i));
        for j in 0..N {
            let sums32 = a_sums32[j].as_ptr().add(b * SUPER / 32);
            let mut min_dot = _mm256_setzero_si256();
            for (p, &pair) in min_pairs.iter().enumerate() {
                let activations = broadcast_word(sums32.add(2 * p) as *const i8);
                min_dot = if VNNI {
                    _mm256_dpwssd_avx_epi32(min_dot, pair, activations)
                } else {
                    _mm256_add_epi32(min_dot, _mm256_madd_epi16(pair, activations))
                };
            }
            let da = _mm256_set1_ps(a_scales[j]);
            let sum = &mut sums[j][h];
            *sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[j][h]), _mm256_mul_ps(d, da), *sum);
            *sum = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min_dot), _mm256_mul_ps(dmin, da), *sum);
        }
    }
}

/// Output columns `rows` (one panel: `rows.start` a multiple of 16, at most 16 rows) for the `m` activation rows;
/// the activations carry their block offsets (`QuantizedRows::fill_offsets`).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q5_0_panel_rows(
    w: &Q5_0Panels,
    acts: &QuantizedRows,
    m: usize,
    rows: Range<usize>,
    out: &mut [f32],
) {
    assert_eq!(acts.offsets.len(), acts.scales.len(), "Q5_0 panels need the activations' block offsets");
    for_half_tiles!(q5_0_tile, false, w, acts, m, rows, out);
}

/// `q5_0_panel_rows` on AVX-VNNI.
///
/// # Safety
/// The CPU must support AVX2, FMA, F16C and AVX-VNNI.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub(super) unsafe fn q5_0_panel_rows_avx_vnni(
    w: &Q5_0Panels,
    acts: &QuantizedRows,
    m: usize,
    rows: Range<usize>,
    out: &mut [f32],
) {
    assert_eq!(acts.offsets.len(), acts.scales.len(), "Q5_0 panels need the activations' block offsets");
    for_half_tiles!(q5_0_tile, true, w, acts, m, rows, out);
}

/// The Q5_0 tile, `out[i0 + j][first + 8h..][..lanes[h]]` for `j < N`, `h < H`: rows `8 · half0..8 · (half0 + H)`
/// of a panel (`lanes[h]` of each half real), inlined into `q5_0_panel_rows` and `q5_0_panel_rows_avx_vnni`. Each
/// block's integer dot product `Σ (v − 16) · a` is exact (i16 pair sums widened by a `madd` by ones, or with `VNNI`
/// `vpdpbusd` straight into i32); the f32 steps are the VNNI Q5_0 tile's, in its order: a fused
/// `sum += dot · (d · d_a)` into one of four sums by block index mod 4, added pairwise at the end.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn q5_0_tile<const N: usize, const H: usize, const VNNI: bool>(
    panel: &[Q5_0PanelBlock],
    half0: usize,
    k: usize,
    acts: &QuantizedRows,
    out: &mut [f32],
    n_out: usize,
    first: usize,
    lanes: [usize; H],
    i0: usize,
) {
    let (low4, bit4, ones) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x10), _mm256_set1_epi16(1));
    let (a_quants, a_scales, a_offsets) = acts.tile_rows::<N>(i0, k);
    let mut sums = [[[_mm256_setzero_ps(); 4]; H]; N];
    for (b, block) in panel.iter().enumerate() {
        // Blocks are 32-byte aligned and a half is 32 bytes of each row array: aligned loads.
        let fifth_bits: [_; H] = std::array::from_fn(|h| {
            _mm256_load_si256(block.fifth_bits.as_ptr().add(HALF * (half0 + h)) as *const __m256i)
        });
        // The block's two halves (values 0–15, 16–31) in two chains per activation row.
        let mut low = [[_mm256_setzero_si256(); H]; N];
        let mut high = [[_mm256_setzero_si256(); H]; N];
        for t in 0..4 {
            for h in 0..H {
                let q = _mm256_load_si256(block.qs[t].as_ptr().add(HALF * (half0 + h)) as *const __m256i);
                let q0 = _mm256_or_si256(_mm256_and_si256(q, low4), fifth_bits_of(fifth_bits[h], t, bit4));
                let q1 = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(q, 4), low4),
                    fifth_bits_of(fifth_bits[h], 4 + t, bit4),
                );
                for j in 0..N {
                    let a = a_quants[j].add(b * BLOCK + 4 * t);
                    let (low, high) = (&mut low[j][h], &mut high[j][h]);
                    if VNNI {
                        *low = _mm256_dpbusd_avx_epi32(*low, q0, broadcast_word(a));
                        *high = _mm256_dpbusd_avx_epi32(*high, q1, broadcast_word(a.add(16)));
                    } else {
                        *low = _mm256_add_epi16(*low, _mm256_maddubs_epi16(q0, broadcast_word(a)));
                        *high = _mm256_add_epi16(*high, _mm256_maddubs_epi16(q1, broadcast_word(a.add(16))));
                    }
                }
            }
        }
        for h in 0..H {
            // f16 → f32 is exact, so the scales are the values the file's f16 scales always gave.
            let d = _mm256_cvtph_ps(_mm_load_si128(block.d.as_ptr().add(HALF * (half0 + h)) as *const __m128i));
            for j in 0..N {
                // The offsets are 128 · Σ a; the weights carry + 16.
                let pairs = if VNNI {
                    _mm256_add_epi32(low[j][h], high[j][h])
                } else {
                    _mm256_add_epi32(_mm256_madd_epi16(low[j][h], ones), _mm256_madd_epi16(high[j][h], ones))
                };
                let dot = _mm256_sub_epi32(pairs, _mm256_set1_epi32(a_offsets[j][b] >> 3));
                let scale = _mm256_mul_ps(d, _mm256_set1_ps(a_scales[j][b]));
                sums[j][h][b % 4] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, sums[j][h][b % 4]);
            }
        }
    }
    let sums = sums.map(|row| row.map(|[s0, s1, s2, s3]| _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3))));
    store_halves(&sums, out, n_out, first, lanes, i0);
}

/// Nibble group `g`'s fifth bits at bit 4 of each byte, every other bit clear. `FIFTH_BIT_SHIFTS` rotates right;
/// AVX2 has no rotate, but group `g`'s bits sit at bit `g` of each byte, so a shift by `4 − g` never wraps one
/// around the word, and the mask drops what the shift brought in.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn fifth_bits_of(fifth_bits: __m256i, g: usize, bit4: __m256i) -> __m256i {
    debug_assert_eq!(FIFTH_BIT_SHIFTS[g], if g < 4 { 28 + g as u32 } else { g as u32 - 4 });
    let at_bit4 = match g {
        0 => _mm256_slli_epi32(fifth_bits, 4),
        1 => _mm256_slli_epi32(fifth_bits, 3),
        2 => _mm256_slli_epi32(fifth_bits, 2),
        3 => _mm256_slli_epi32(fifth_bits, 1),
        4 => fifth_bits,
        5 => _mm256_srli_epi32(fifth_bits, 1),
        6 => _mm256_srli_epi32(fifth_bits, 2),
        _ => _mm256_srli_epi32(fifth_bits, 3),
    };
    _mm256_and_si256(at_bit4, bit4)
}

/// `out[i0 + j][first + 8h..][..lanes[h]] = sums[j][h]` (rows of `n_out`): each half panel's eight lanes, or fewer
/// in the last panel of a matrix whose rows are not a multiple of 16.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn store_halves<const H: usize>(
    sums: &[[__m256; H]],
    out: &mut [f32],
    n_out: usize,
    first: usize,
    lanes: [usize; H],
    i0: usize,
) {
    for (j, sums) in sums.iter().enumerate() {
        for (h, (sum, &lanes)) in sums.iter().zip(&lanes).enumerate() {
            let row = &mut out[(i0 + j) * n_out + first + HALF * h..][..lanes];
            if lanes == HALF {
                _mm256_storeu_ps(row.as_mut_ptr(), *sum);
            } else {
                let mut all = [0f32; HALF];
                _mm256_storeu_ps(all.as_mut_ptr(), *sum);
                row.copy_from_slice(&all[..lanes]);
            }
        }
    }
}

/// Half `half` of a Q4_K or Q5_K panel block's sub-block scales and minimums unpacked from their 6-bit packing
/// (`packed`): `[scales, mins]`, each two registers whose lanes hold four values (sub-blocks 0–3, then 4–7), one
/// per byte.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn k_scales_and_mins(packed: &[[u32; PANEL_ROWS]; 3], half: usize) -> [[__m256i; 2]; 2] {
    let [w0, w1, w2] = packed.map(|word| _mm256_load_si256(word.as_ptr().add(HALF * half) as *const __m256i));
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
    lane_bytes_as_i16(v, k, k)
}

/// Byte `k` of every 32-bit lane of `v`, zero-extended to the lane.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn lane_byte_as_i32(v: __m256i, k: usize) -> __m256i {
    // Indices with the top bit set give zero bytes (`vpshufb` works within each 128-bit lane).
    let control = |word: i32| (4 * word + k as i32) | 0x8080_8000u32 as i32;
    _mm256_shuffle_epi8(v, _mm256_broadcastsi128_si256(_mm_setr_epi32(control(0), control(1), control(2), control(3))))
}

/// Bytes `low` and `high` of every 32-bit lane of `v`, zero-extended into the lane's low and high 16 bits.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn lane_bytes_as_i16(v: __m256i, low: usize, high: usize) -> __m256i {
    // `vpshufb` indexes bytes within each 128-bit lane; an index with the top bit set gives a zero byte.
    let control = |word: i32| {
        let (low, high) = (4 * word + low as i32, 4 * word + high as i32);
        low | (high << 16) | 0x8000_8000u32 as i32
    };
    _mm256_shuffle_epi8(v, _mm256_broadcastsi128_si256(_mm_setr_epi32(control(0), control(1), control(2), control(3))))
}

/// The four bytes at `at` in every 32-bit lane.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn broadcast_word(at: *const i8) -> __m256i {
    _mm256_set1_epi32(std::ptr::read_unaligned(at as *const i32))
}
