//! AVX-512 VNNI panel kernels: sixteen weight rows side by side, so one `vpdpbusd` adds four products into each
//! of sixteen rows' sums. Q4_K, Q6_K and Q5_0 for any number of activation rows; Q8_0 for many (prefill).
//!
//! A row-at-a-time kernel spends two instructions per 64 products and, for every weight row, block and
//! activation row, a dozen more on scales, offsets and adding a register's lanes into one sum. Here a 512-bit
//! register holds the same four values of sixteen weight rows, and the activations' four bytes are broadcast from
//! memory: one instruction per 64 products, and the per-block work is shared by sixteen rows.
//!
//! Q4_K, Q6_K and Q5_0 weights are stored as panels from the load on (`panels`), in their files' bit packing;
//! the kernels rebuild bytes from nibbles and top bits as they go (Q6_K, for eight or more activation rows, once
//! per work item into a thread-local buffer). Q8_0 weights stay in rows: for eight or more activation rows each
//! pool work item (16 rows) repacks its rows into a thread-local panel, bytes plus 128 (`vpdpbusd` wants its
//! weights unsigned), and the activations' block sums times 128 (`QuantizedRows::offsets`) take it back out.
//!
//! Every (super-)block's integer dot product is exact, and the f32 steps that scale and add them are the same for
//! any number of activation rows (K-quants: fused multiply-adds super-block by super-block; Q8_0 and Q5_0: four
//! sums by block index mod 4, as the Q8_0 row kernel adds them), so that any batch gives a row the bits it gets
//! alone.

use std::arch::x86_64::*;
use std::cell::RefCell;
use std::ops::Range;

use super::k_acts::{KActivations, SUPER};
use super::k_panels_avx2::PREFETCH_AHEAD;
pub(super) use super::panels::PANEL_ROWS;
use super::q4k_panels::{Q4KPanelBlock, Q4KPanels};
use super::q5_0_panels::{Q5_0PanelBlock, Q5_0Panels, FIFTH_BIT_SHIFTS};
use super::q6k_panels::{Q6KPanelBlock, Q6KPanels};
use super::q8_0::{Q8_0Matrix, QuantizedRows, BLOCK};

/// Fewest activation rows for which a Q8_0 panel pays for its repack (below it, the row kernel runs). On a matrix
/// streamed from memory, panels cost more than the row kernel below four activation rows: sixteen rows repacked at
/// once are sixteen streams for the prefetcher, the row kernel's one. From four rows on the row kernel, three
/// activation rows a tile, reads the weights twice, and panels cost less. Drafts and sequences decoded together run
/// at these sizes. (The two paths alternating in one process: docs/performance.md, "Thresholds between paths", AMD
/// Zen 4.)
pub(super) const MIN_ACT_ROWS: usize = 4;

/// Fewest activation rows for which a Q6_K panel pays for unpacking its values to bytes first: the unpacking writes
/// and rereads every weight of a work item, which only many activation rows sharing the bytes repay (the packed
/// tiles stayed ahead up to 64 rows and fell behind from 128: docs/performance.md, "Thresholds between paths").
const MIN_ROWS_FOR_Q6K_BYTES: usize = 96;

/// Activation rows that pass the panel together (their sums stay in registers).
const TILE_ACTS: usize = 4;

/// One Q8_0 block (32 values) of sixteen weight rows.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Q8_0PanelBlock {
    /// Word `t` of every row's block, each byte plus 128.
    qs: [[u32; PANEL_ROWS]; BLOCK / 4],
    d: [f32; PANEL_ROWS],
}

impl Q8_0PanelBlock {
    const EMPTY: Self = Self { qs: [[0; PANEL_ROWS]; BLOCK / 4], d: [0.0; PANEL_ROWS] };
}

thread_local! {
    /// The current work item's panels, reused across matmuls.
    static Q8_0_PANEL: RefCell<Vec<Q8_0PanelBlock>> = const { RefCell::new(Vec::new()) };
    /// The current work item's Q6_K values as bytes.
    static Q6K_BYTES: RefCell<Vec<Q6KBytes>> = const { RefCell::new(Vec::new()) };
}

/// Runs `tile::<N>(i)` for every activation row `i`, up to `TILE_ACTS` at a time.
macro_rules! for_act_tiles {
    ($m:expr, $tile:ident, $($arg:expr),*) => {
        let mut i = 0;
        while i < $m {
            match $m - i {
                1 => $tile::<1>($($arg,)* i),
                2 => $tile::<2>($($arg,)* i),
                3 => $tile::<3>($($arg,)* i),
                _ => $tile::<TILE_ACTS>($($arg,)* i),
            }
            i += ($m - i).min(TILE_ACTS);
        }
    };
}

/// Output columns `rows` (one panel: `rows.start` a multiple of 16, at most 16 rows) for the `m` activation rows.
///
/// # Safety
/// The CPU must support AVX-512 F, BW, VL and VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
pub(super) unsafe fn q4k_panel_rows(w: &Q4KPanels, acts: &KActivations, m: usize, rows: Range<usize>, out: &mut [f32]) {
    let (panel, lanes) = panel_of(rows, w.rows());
    for_act_tiles!(m, q4k_tile, w.panel(panel), w, acts, out, panel * PANEL_ROWS, lanes);
}

/// Output columns `rows` (one panel) for the `m` activation rows.
///
/// # Safety
/// The CPU must support AVX-512 F, BW, VL and VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
pub(super) unsafe fn q5_0_panel_rows(
    w: &Q5_0Panels,
    acts: &QuantizedRows,
    m: usize,
    rows: Range<usize>,
    out: &mut [f32],
) {
    let (panel, lanes) = panel_of(rows, w.rows());
    for_act_tiles!(m, q5_0_tile, w.panel(panel), w, acts, out, panel * PANEL_ROWS, lanes);
}

/// Output columns `rows` (one panel) for the `m` activation rows.
///
/// # Safety
/// The CPU must support AVX-512 F, BW, VL and VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
pub(super) unsafe fn q6k_panel_rows(w: &Q6KPanels, acts: &KActivations, m: usize, rows: Range<usize>, out: &mut [f32]) {
    let (panel, lanes) = panel_of(rows, w.rows());
    if m < MIN_ROWS_FOR_Q6K_BYTES {
        for_act_tiles!(m, q6k_tile, w.panel(panel), w, acts, out, panel * PANEL_ROWS, lanes);
        return;
    }
    // Many activation rows: the values are unpacked to bytes once, not once per tile of activation rows.
    Q6K_BYTES.with(|cell| {
        let mut bytes = cell.borrow_mut();
        bytes.clear();
        // A loop, not a closure: closures do not inherit `target_feature`, and would call out for each block.
        for block in w.panel(panel) {
            bytes.push(q6k_bytes(block));
        }
        for_act_tiles!(m, q6k_bytes_tile, w.panel(panel), &bytes, w, acts, out, panel * PANEL_ROWS, lanes);
    });
}

/// The panel that output columns `rows` make up, and a mask of its lanes that hold rows of the matrix.
fn panel_of(rows: Range<usize>, n_rows: usize) -> (usize, __mmask16) {
    assert!(rows.start.is_multiple_of(PANEL_ROWS) && rows.len() <= PANEL_ROWS && rows.end <= n_rows);
    // The last panel of a matrix whose rows are not a multiple of 16 stores only its own lanes.
    let lanes = if rows.len() == PANEL_ROWS { !0 } else { (1 << rows.len()) - 1 };
    (rows.start / PANEL_ROWS, lanes)
}

/// Output columns `first..first + 16` for the `m` activation rows.
///
/// # Safety
/// The CPU must support AVX-512 F, BW, VL and VNNI; `first + 16 <= w.rows()`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
pub(super) unsafe fn q8_0_panel_rows(w: &Q8_0Matrix, acts: &QuantizedRows, m: usize, first: usize, out: &mut [f32]) {
    debug_assert!(first + PANEL_ROWS <= w.rows());
    Q8_0_PANEL.with(|cell| {
        let mut panel = cell.borrow_mut();
        repack_q8_0(w, first, &mut panel);
        for_act_tiles!(m, q8_0_tile, &panel, w, acts, out, first);
    });
}

/// Rows `first..first + 16` of `w`, two blocks (64 bytes) at a time.
///
/// # Safety
/// The CPU must support AVX-512 F, BW, VL and VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
unsafe fn repack_q8_0(w: &Q8_0Matrix, first: usize, panel: &mut Vec<Q8_0PanelBlock>) {
    let blocks = w.cols() / BLOCK;
    panel.resize(blocks, Q8_0PanelBlock::EMPTY);
    let bias = _mm512_set1_epi8(0x80u8 as i8);
    let mut columns = [[0u32; PANEL_ROWS]; PANEL_ROWS];
    for b in (0..blocks).step_by(2) {
        // The last block of an odd count alone: the upper half loads as zeros and is not stored.
        let bytes: __mmask64 = if b + 1 < blocks { !0 } else { 0xFFFF_FFFF };
        let mut words = [_mm512_setzero_si512(); PANEL_ROWS];
        for (lane, word) in words.iter_mut().enumerate() {
            let quants = w.row_quants(first + lane).as_ptr().add(b * BLOCK);
            // The panel's rows are one contiguous stretch of the matrix, read across its rows a line at a time:
            // masked loads do not keep the hardware prefetcher ahead of that, so ask for the line
            // `PREFETCH_AHEAD` on (the next panels' rows; an address past the weights is only a hint).
            _mm_prefetch::<_MM_HINT_T0>(quants.wrapping_add(PREFETCH_AHEAD));
            *word = _mm512_xor_si512(_mm512_maskz_loadu_epi8(bytes, quants), bias);
        }
        store_transposed(words, &mut columns);
        for (half, dst) in panel[b..blocks.min(b + 2)].iter_mut().enumerate() {
            dst.qs.copy_from_slice(&columns[8 * half..8 * half + 8]);
            for lane in 0..PANEL_ROWS {
                dst.d[lane] = w.row_scales(first + lane)[b + half];
            }
        }
    }
}

/// Stores the 16 × 16 matrix of 32-bit words `rows` (one register per row) as `out[column][row]`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn store_transposed(rows: [__m512i; PANEL_ROWS], out: &mut [[u32; PANEL_ROWS]]) {
    debug_assert_eq!(out.len(), PANEL_ROWS);
    // Within each 128-bit lane L: pairs of rows interleaved by word, then by pairs of words, give for rows
    // 4g..4g + 4 and j < 4 a register `by_column[g][j]` whose lane L holds column 4L + j of those four rows.
    let mut by_column = [[_mm512_setzero_si512(); 4]; 4];
    for g in 0..4 {
        let r = &rows[4 * g..4 * g + 4];
        let (lo01, hi01) = (_mm512_unpacklo_epi32(r[0], r[1]), _mm512_unpackhi_epi32(r[0], r[1]));
        let (lo23, hi23) = (_mm512_unpacklo_epi32(r[2], r[3]), _mm512_unpackhi_epi32(r[2], r[3]));
        by_column[g] = [
            _mm512_unpacklo_epi64(lo01, lo23),
            _mm512_unpackhi_epi64(lo01, lo23),
            _mm512_unpacklo_epi64(hi01, hi23),
            _mm512_unpackhi_epi64(hi01, hi23),
        ];
    }
    // Then a 4 × 4 transpose of 128-bit lanes: column 4L + j takes lane L of by_column[g][j] into its lane g.
    for j in 0..4 {
        let [v0, v1, v2, v3] = [by_column[0][j], by_column[1][j], by_column[2][j], by_column[3][j]];
        let low01 = _mm512_shuffle_i32x4::<0b01_00_01_00>(v0, v1);
        let high01 = _mm512_shuffle_i32x4::<0b11_10_11_10>(v0, v1);
        let low23 = _mm512_shuffle_i32x4::<0b01_00_01_00>(v2, v3);
        let high23 = _mm512_shuffle_i32x4::<0b11_10_11_10>(v2, v3);
        let columns = [
            _mm512_shuffle_i32x4::<0b10_00_10_00>(low01, low23),
            _mm512_shuffle_i32x4::<0b11_01_11_01>(low01, low23),
            _mm512_shuffle_i32x4::<0b10_00_10_00>(high01, high23),
            _mm512_shuffle_i32x4::<0b11_01_11_01>(high01, high23),
        ];
        for (l, column) in columns.into_iter().enumerate() {
            _mm512_storeu_si512(out[4 * l + j].as_mut_ptr() as *mut __m512i, column);
        }
    }
}

/// `out[i0 + j][first..first + 16]` for `j < N`, the lanes in `lanes` only.
///
/// Per super-block and row, in this order: the exact integer dot product `Σ_s scale_s · Σ q · a`, the exact
/// `Σ_s min_s · (sum of sub-block s's activations)`, then `sum += dot · (d · d_a)` and `sum −= min_dot · (dmin ·
/// d_a)`, each fused. Nothing depends on the other activation rows of the tile, so a row gets the same bits in any
/// batch (speculative decoding checks its drafts in one).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
unsafe fn q4k_tile<const N: usize>(
    panel: &[Q4KPanelBlock],
    w: &Q4KPanels,
    acts: &KActivations,
    out: &mut [f32],
    first: usize,
    lanes: __mmask16,
    i0: usize,
) {
    let k = w.cols();
    let low4 = _mm512_set1_epi8(0x0F);
    let a_rows: [_; N] = acts.rows(i0, k);
    let mut sums = [_mm512_setzero_ps(); N];
    for (b, block) in panel.iter().enumerate() {
        let [scales, mins] = q4k_scales_and_mins(block);
        let mut dots = [_mm512_setzero_si512(); N];
        for c in 0..4 {
            // Two chains per activation row (the chunk's two sub-blocks) keep `vpdpbusd`'s latency hidden.
            let mut even = [_mm512_setzero_si512(); N];
            let mut odd = [_mm512_setzero_si512(); N];
            for t in 0..8 {
                let word = block.qs[8 * c + t].as_ptr();
                if N <= 2 {
                    // A decode step streams the weights and does little else: ask for the line `PREFETCH_AHEAD` on,
                    // as the AVX2 tile does (an address past the weights is only a hint, never read).
                    _mm_prefetch::<_MM_HINT_T0>((word as *const i8).wrapping_add(PREFETCH_AHEAD));
                }
                let q = _mm512_load_si512(word as *const __m512i);
                let low = _mm512_and_si512(q, low4);
                let high = _mm512_and_si512(_mm512_srli_epi32(q, 4), low4);
                for j in 0..N {
                    let a = a_rows[j].0.as_ptr().add(b * SUPER + 64 * c + 4 * t);
                    even[j] = _mm512_dpbusd_epi32(even[j], low, broadcast_word(a));
                    odd[j] = _mm512_dpbusd_epi32(odd[j], high, broadcast_word(a.add(32)));
                }
            }
            let even_scale = lane_byte(scales[c / 2], 2 * c % 4, false);
            let odd_scale = lane_byte(scales[c / 2], (2 * c + 1) % 4, false);
            for j in 0..N {
                let scaled =
                    _mm512_add_epi32(_mm512_mullo_epi32(even[j], even_scale), _mm512_mullo_epi32(odd[j], odd_scale));
                dots[j] = _mm512_add_epi32(dots[j], scaled);
            }
        }
        // Each minimum in both i16 halves of its lane, for `vpdpwssd` against a pair of activation sums of 16.
        // Written out: a closure would not take on this function's target features and would stay a call.
        let mins = [
            lane_byte(mins[0], 0, true),
            lane_byte(mins[0], 1, true),
            lane_byte(mins[0], 2, true),
            lane_byte(mins[0], 3, true),
            lane_byte(mins[1], 0, true),
            lane_byte(mins[1], 1, true),
            lane_byte(mins[1], 2, true),
            lane_byte(mins[1], 3, true),
        ];
        let d = _mm512_cvtph_ps(_mm256_loadu_si256(block.d.as_ptr() as *const __m256i));
        let dmin = _mm512_cvtph_ps(_mm256_loadu_si256(block.dmin.as_ptr() as *const __m256i));
        for j in 0..N {
            let mut min_dot = _mm512_setzero_si512();
            let sums16 = a_rows[j].2.as_ptr().add(b * SUPER / 16);
            for (s, &min) in mins.iter().enumerate() {
                dpwssd(&mut min_dot, min, broadcast_word(sums16.add(2 * s) as *const i8));
            }
            let da = _mm512_set1_ps(a_rows[j].1[b]);
            sums[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots[j]), _mm512_mul_ps(d, da), sums[j]);
            sums[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(min_dot), _mm512_mul_ps(dmin, da), sums[j]);
        }
    }
    store_tile(&sums, out, w.rows(), first, lanes, i0);
}

/// A Q4_K panel block's sub-block scales and minimums unpacked from their 6-bit packing: `[scales, mins]`, each
/// two registers whose lanes hold four values (sub-blocks 0–3, then 4–7), one per byte.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn q4k_scales_and_mins(block: &Q4KPanelBlock) -> [[__m512i; 2]; 2] {
    let [w0, w1, w2] = block.packed.map(|word| _mm512_load_si512(word.as_ptr() as *const __m512i));
    let (low6, low4, top2) = (_mm512_set1_epi8(0x3F), _mm512_set1_epi8(0x0F), _mm512_set1_epi8(0x30));
    // Values 4–7: a low nibble from word 2, the top two bits from bits 6–7 of words 0 and 1, moved to bits 4–5.
    let high_values = |nibbles: __m512i, tops: __m512i| {
        _mm512_ternarylogic_epi32::<0xF8>(_mm512_and_si512(nibbles, low4), _mm512_srli_epi32(tops, 2), top2)
    };
    [
        [_mm512_and_si512(w0, low6), high_values(w2, w0)],
        [_mm512_and_si512(w1, low6), high_values(_mm512_srli_epi32(w2, 4), w1)],
    ]
}

/// Byte `k` of every 32-bit lane of `v` as that lane's value (`paired`: in both 16-bit halves, for `vpdpwssd`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn lane_byte(v: __m512i, k: usize, paired: bool) -> __m512i {
    // `vpshufb` indexes bytes within each 128-bit lane; an index with the top bit set gives a zero byte.
    let control = |word: i32| {
        let byte = 4 * word + k as i32;
        byte | if paired { byte << 16 } else { 0 } | if paired { 0x8000_8000u32 as i32 } else { 0x8080_8000u32 as i32 }
    };
    _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(_mm_setr_epi32(control(0), control(1), control(2), control(3))))
}

/// `out[i0 + j][first..first + 16]` for `j < N`, the lanes in `lanes` only.
///
/// Per super-block and row: the exact integer dot product `Σ_g scale_g · Σ (q − 32) · a`, then `sum += dot · (d ·
/// d_a)`, fused. As for Q4_K, a row gets the same bits in any batch.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
unsafe fn q6k_tile<const N: usize>(
    panel: &[Q6KPanelBlock],
    w: &Q6KPanels,
    acts: &KActivations,
    out: &mut [f32],
    first: usize,
    lanes: __mmask16,
    i0: usize,
) {
    let k = w.cols();
    let a_rows: [_; N] = acts.rows(i0, k);
    let mut sums = [_mm512_setzero_ps(); N];
    for (b, block) in panel.iter().enumerate() {
        let mut dots = [_mm512_setzero_si512(); N];
        for h in 0..2 {
            for quarter in 0..2 {
                // Words t = 4 · quarter..+4 of half h: part p (values 128h + 32p + 4t..) lies in group
                // 8h + 2p + quarter, one chain per part and activation row.
                let mut parts = [[_mm512_setzero_si512(); 4]; N];
                for t in 4 * quarter..4 * quarter + 4 {
                    if N <= 2 {
                        // A decode step streams the weights: the three lines of this word `PREFETCH_AHEAD` on.
                        let line = block.words[8 * h + t].as_ptr() as *const i8;
                        for at in [0, 64, 128] {
                            _mm_prefetch::<_MM_HINT_T0>(line.wrapping_add(PREFETCH_AHEAD + at));
                        }
                    }
                    let values = q6k_values(block, 8 * h + t);
                    for j in 0..N {
                        let a = a_rows[j].0.as_ptr().add(b * SUPER + 128 * h + 4 * t);
                        for (p, &v) in values.iter().enumerate() {
                            parts[j][p] = _mm512_dpbusd_epi32(parts[j][p], v, broadcast_word(a.add(32 * p)));
                        }
                    }
                }
                // Group 8h + 2p + quarter's scale: the low (quarter 0) or high i16 of pair 4h + p, sign-extended.
                // A loop, not `array::from_fn`: its closure would not take on the target features.
                let mut scales = [_mm512_setzero_si512(); 4];
                for (p, scale) in scales.iter_mut().enumerate() {
                    let pair = q6k_scale_pair(block, 4 * h + p);
                    let high = if quarter == 0 { _mm512_slli_epi32(pair, 16) } else { pair };
                    *scale = _mm512_srai_epi32(high, 16);
                }
                for (dot, parts) in dots.iter_mut().zip(&parts) {
                    for (&part, &scale) in parts.iter().zip(&scales) {
                        *dot = _mm512_add_epi32(*dot, _mm512_mullo_epi32(part, scale));
                    }
                }
            }
        }
        for j in 0..N {
            sums[j] = q6k_step(block, dots[j], a_rows[j].2[b * SUPER / 16..].as_ptr(), a_rows[j].1[b], sums[j]);
        }
    }
    store_tile(&sums, out, w.rows(), first, lanes, i0);
}

/// One Q6_K super-block's step for one activation row: `sum + (dot − 32 · Σ_g scale_g · sums16_g) · (d · d_a)`,
/// fused (the weights are q − 32, so 32 · Σ_g scale_g · (sum of group g's activations) comes off the exact dot).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
unsafe fn q6k_step(block: &Q6KPanelBlock, dot: __m512i, sums16: *const i16, da: f32, sum: __m512) -> __m512 {
    let mut offset = _mm512_setzero_si512();
    for p in 0..8 {
        dpwssd(&mut offset, q6k_scale_pair(block, p), broadcast_word(sums16.add(2 * p) as *const i8));
    }
    let dot = _mm512_sub_epi32(dot, _mm512_slli_epi32(offset, 5));
    let d = _mm512_cvtph_ps(_mm256_loadu_si256(block.d.as_ptr() as *const __m256i));
    _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(d, _mm512_set1_ps(da)), sum)
}

/// One Q6_K super-block of sixteen rows with its values as bytes (0–63): word `i` holds values `4i..4i + 4` of
/// every row.
#[repr(C, align(64))]
struct Q6KBytes {
    qs: [[u32; PANEL_ROWS]; 64],
}

/// The four sets of values that words `s = 8h + t` of a Q6_K panel block hold, as bytes: values `128h + 32p +
/// 4t..+4` in register `p`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn q6k_values(block: &Q6KPanelBlock, s: usize) -> [__m512i; 4] {
    let (low4, top2) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(0x30));
    let [ql0, ql1, qh] = block.words[s].map(|word| _mm512_loadu_si512(word.as_ptr() as *const __m512i));
    // Low nibble | top two bits moved to bits 4–5, by one ternary logic op: a | (b & c).
    let join = |nibbles: __m512i, tops: __m512i| {
        _mm512_ternarylogic_epi32::<0xF8>(_mm512_and_si512(nibbles, low4), tops, top2)
    };
    [
        join(ql0, _mm512_slli_epi32(qh, 4)),
        join(ql1, _mm512_slli_epi32(qh, 2)),
        join(_mm512_srli_epi32(ql0, 4), qh),
        join(_mm512_srli_epi32(ql1, 4), _mm512_srli_epi32(qh, 2)),
    ]
}

/// A Q6_K panel block's values as bytes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn q6k_bytes(block: &Q6KPanelBlock) -> Q6KBytes {
    let mut bytes = Q6KBytes { qs: [[0; PANEL_ROWS]; 64] };
    for s in 0..16 {
        let (h, t) = (s / 8, s % 8);
        for (p, values) in q6k_values(block, s).into_iter().enumerate() {
            _mm512_store_si512(bytes.qs[32 * h + 8 * p + t].as_mut_ptr() as *mut __m512i, values);
        }
    }
    bytes
}

/// `q6k_tile` on values unpacked to bytes (`bytes[b]` for `panel[b]`): the same exact integers and f32 steps, so
/// the same bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn q6k_bytes_tile<const N: usize>(
    panel: &[Q6KPanelBlock],
    bytes: &[Q6KBytes],
    w: &Q6KPanels,
    acts: &KActivations,
    out: &mut [f32],
    first: usize,
    lanes: __mmask16,
    i0: usize,
) {
    let k = w.cols();
    let a_rows: [_; N] = acts.rows(i0, k);
    let mut sums = [_mm512_setzero_ps(); N];
    for (b, (block, values)) in panel.iter().zip(bytes).enumerate() {
        let mut dots = [_mm512_setzero_si512(); N];
        for g in (0..16).step_by(2) {
            // Groups g and g + 1 in two chains per activation row.
            let mut first_group = [_mm512_setzero_si512(); N];
            let mut second_group = [_mm512_setzero_si512(); N];
            for t in 0..4 {
                let q0 = _mm512_load_si512(values.qs[4 * g + t].as_ptr() as *const __m512i);
                let q1 = _mm512_load_si512(values.qs[4 * g + 4 + t].as_ptr() as *const __m512i);
                for j in 0..N {
                    let a = a_rows[j].0.as_ptr().add(b * SUPER + 16 * g + 4 * t);
                    first_group[j] = _mm512_dpbusd_epi32(first_group[j], q0, broadcast_word(a));
                    second_group[j] = _mm512_dpbusd_epi32(second_group[j], q1, broadcast_word(a.add(16)));
                }
            }
            // The pair's low and high i16, sign-extended.
            let pair = q6k_scale_pair(block, g / 2);
            let scale0 = _mm512_srai_epi32(_mm512_slli_epi32(pair, 16), 16);
            let scale1 = _mm512_srai_epi32(pair, 16);
            for j in 0..N {
                let scaled = _mm512_add_epi32(
                    _mm512_mullo_epi32(first_group[j], scale0),
                    _mm512_mullo_epi32(second_group[j], scale1),
                );
                dots[j] = _mm512_add_epi32(dots[j], scaled);
            }
        }
        for j in 0..N {
            sums[j] = q6k_step(block, dots[j], a_rows[j].2[b * SUPER / 16..].as_ptr(), a_rows[j].1[b], sums[j]);
        }
    }
    store_tile(&sums, out, w.rows(), first, lanes, i0);
}

/// `out[i0 + j][first..first + 16]` for `j < N`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
unsafe fn q8_0_tile<const N: usize>(
    panel: &[Q8_0PanelBlock],
    w: &Q8_0Matrix,
    acts: &QuantizedRows,
    out: &mut [f32],
    first: usize,
    i0: usize,
) {
    let (a_quants, a_scales, a_offsets) = acts.tile_rows::<N>(i0, w.cols());
    // Four sums per output, one per block position mod 4, added as the row kernel adds them (`block_sum_lanes`).
    let mut sums = [[_mm512_setzero_ps(); 4]; N];
    for (quad, blocks) in panel.chunks(4).enumerate() {
        for (l, block) in blocks.iter().enumerate() {
            let b = 4 * quad + l;
            // Two chains per activation row (the block's two halves) keep `vpdpbusd`'s latency hidden.
            let mut low = [_mm512_setzero_si512(); N];
            let mut high = [_mm512_setzero_si512(); N];
            for t in 0..4 {
                let q0 = _mm512_load_si512(block.qs[t].as_ptr() as *const __m512i);
                let q1 = _mm512_load_si512(block.qs[t + 4].as_ptr() as *const __m512i);
                for j in 0..N {
                    let a = a_quants[j].add(b * BLOCK + 4 * t);
                    low[j] = _mm512_dpbusd_epi32(low[j], q0, broadcast_word(a));
                    high[j] = _mm512_dpbusd_epi32(high[j], q1, broadcast_word(a.add(16)));
                }
            }
            let d = _mm512_load_ps(block.d.as_ptr());
            for j in 0..N {
                let dot = _mm512_sub_epi32(_mm512_add_epi32(low[j], high[j]), _mm512_set1_epi32(a_offsets[j][b]));
                let scale = _mm512_mul_ps(d, _mm512_set1_ps(a_scales[j][b]));
                sums[j][l] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, sums[j][l]);
            }
        }
    }
    let sums = sums.map(|[s0, s1, s2, s3]| _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3)));
    store_tile(&sums, out, w.rows(), first, !0, i0);
}

/// `out[i0 + j][first..first + 16]` for `j < N`, the lanes in `lanes` only.
///
/// Each block's integer dot product `Σ (v − 16) · a` is exact; the f32 steps are `q8_0_tile`'s (and the Q8_0 row
/// kernel's), in the same order, so the products equal the widened matrix's bit for bit.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
unsafe fn q5_0_tile<const N: usize>(
    panel: &[Q5_0PanelBlock],
    w: &Q5_0Panels,
    acts: &QuantizedRows,
    out: &mut [f32],
    first: usize,
    lanes: __mmask16,
    i0: usize,
) {
    let low4 = _mm512_set1_epi8(0x0F);
    let bit4 = _mm512_set1_epi8(0x10);
    let (a_quants, a_scales, a_offsets) = acts.tile_rows::<N>(i0, w.cols());
    let mut sums = [[_mm512_setzero_ps(); 4]; N];
    for (quad, blocks) in panel.chunks(4).enumerate() {
        for (l, block) in blocks.iter().enumerate() {
            let b = 4 * quad + l;
            if N <= 2 {
                // A decode step streams the weights: the block's lines `PREFETCH_AHEAD` on (its fifth bits, then
                // its four words of nibbles), as the Q4_K tile does.
                let start = block.fifth_bits.as_ptr() as *const i8;
                _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(PREFETCH_AHEAD));
                for word in &block.qs {
                    _mm_prefetch::<_MM_HINT_T0>((word.as_ptr() as *const i8).wrapping_add(PREFETCH_AHEAD));
                }
            }
            // Blocks are 32-byte aligned (see `Q5_0PanelBlock`): unaligned loads.
            let fifth_bits = _mm512_loadu_si512(block.fifth_bits.as_ptr() as *const __m512i);
            // The block's two halves in two chains per activation row.
            let mut low = [_mm512_setzero_si512(); N];
            let mut high = [_mm512_setzero_si512(); N];
            for t in 0..4 {
                let q = _mm512_loadu_si512(block.qs[t].as_ptr() as *const __m512i);
                // Nibbles, with each byte's fifth bit put in by one ternary logic op: a | (b & c).
                let q0 = _mm512_ternarylogic_epi32::<0xF8>(
                    _mm512_and_si512(q, low4),
                    rotate_right(fifth_bits, FIFTH_BIT_SHIFTS[t]),
                    bit4,
                );
                let q1 = _mm512_ternarylogic_epi32::<0xF8>(
                    _mm512_and_si512(_mm512_srli_epi32(q, 4), low4),
                    rotate_right(fifth_bits, FIFTH_BIT_SHIFTS[4 + t]),
                    bit4,
                );
                for j in 0..N {
                    let a = a_quants[j].add(b * BLOCK + 4 * t);
                    low[j] = _mm512_dpbusd_epi32(low[j], q0, broadcast_word(a));
                    high[j] = _mm512_dpbusd_epi32(high[j], q1, broadcast_word(a.add(16)));
                }
            }
            // f16 → f32 is exact, so the scales are the values the file's f16 scales always gave.
            let d = _mm512_cvtph_ps(_mm256_loadu_si256(block.d.as_ptr() as *const __m256i));
            for j in 0..N {
                // The offsets are 128 · Σ a; the weights carry + 16.
                let offset = _mm512_set1_epi32(a_offsets[j][b] >> 3);
                let dot = _mm512_sub_epi32(_mm512_add_epi32(low[j], high[j]), offset);
                let scale = _mm512_mul_ps(d, _mm512_set1_ps(a_scales[j][b]));
                sums[j][l] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, sums[j][l]);
            }
        }
    }
    let sums = sums.map(|[s0, s1, s2, s3]| _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3)));
    store_tile(&sums, out, w.rows(), first, lanes, i0);
}

/// Every lane of `v` rotated right by `bits` (a constant once the caller's loop is unrolled).
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn rotate_right(v: __m512i, bits: u32) -> __m512i {
    match bits {
        0 => v,
        1 => _mm512_ror_epi32::<1>(v),
        2 => _mm512_ror_epi32::<2>(v),
        3 => _mm512_ror_epi32::<3>(v),
        28 => _mm512_ror_epi32::<28>(v),
        29 => _mm512_ror_epi32::<29>(v),
        30 => _mm512_ror_epi32::<30>(v),
        _ => _mm512_ror_epi32::<31>(v),
    }
}

/// The scales of groups `2p` and `2p + 1` as the i16 halves of each lane (loaded where used: held in registers
/// across the super-block, the eight spilled the activation tile's sums).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn q6k_scale_pair(block: &Q6KPanelBlock, p: usize) -> __m512i {
    _mm512_cvtepi8_epi16(_mm256_loadu_si256(block.scale_pairs[p].as_ptr() as *const __m256i))
}

/// `acc += vpdpwssd(pairs, scales)`. Written as the instruction itself: LLVM's generic tuning splits the
/// intrinsic into `vpmaddwd` + `vpaddd`, two instructions where the CPU has one.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
unsafe fn dpwssd(acc: &mut __m512i, pairs: __m512i, scales: __m512i) {
    std::arch::asm!(
        "vpdpwssd {acc}, {pairs}, {scales}",
        acc = inout(zmm_reg) *acc,
        pairs = in(zmm_reg) pairs,
        scales = in(zmm_reg) scales,
        options(pure, nomem, nostack),
    );
}

/// `out[i0 + j][first..first + 16] = sums[j]` (rows of `n_out`), the lanes in `lanes` only.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn store_tile(sums: &[__m512], out: &mut [f32], n_out: usize, first: usize, lanes: __mmask16, i0: usize) {
    for (j, sum) in sums.iter().enumerate() {
        assert!((i0 + j) * n_out + first + (16 - lanes.leading_zeros() as usize) <= out.len());
        _mm512_mask_storeu_ps(out.as_mut_ptr().add((i0 + j) * n_out + first), lanes, *sum);
    }
}

/// The four bytes at `at` in every 32-bit lane.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn broadcast_word(at: *const i8) -> __m512i {
    _mm512_set1_epi32(std::ptr::read_unaligned(at as *const i32))
}
