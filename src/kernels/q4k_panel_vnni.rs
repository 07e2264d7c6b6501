//! AVX-512 VNNI Q4_K kernel for many activation rows (prefill): sixteen weight rows repacked into a panel, so
//! one `vpdpbusd` adds four products into each of sixteen rows' sums.
//!
//! The row-at-a-time kernel (`kquants_vnni`) spends two instructions per 64 products and, for every weight row,
//! super-block and activation row, a dozen more on scales, offsets and sums. Here a 512-bit register holds the
//! same four bytes of sixteen weight rows, and the activations' four bytes are broadcast from memory: one
//! instruction per 64 products, and the per-sub-block work is shared by sixteen rows.
//!
//! No second copy of the weights is kept: each pool work item (16 rows) repacks its rows into a thread-local
//! panel, then runs every activation row past it. The repack moves 32-bit words, in the file's nibble order:
//! bytes `4t..4t + 4` of a block's 32-byte chunk `c` hold, in their low nibbles, values `4t..4t + 4` of
//! sub-block `2c` and, in their high nibbles, the same values of sub-block `2c + 1`; both halves meet four
//! consecutive activations.

use std::arch::x86_64::*;
use std::cell::RefCell;

use super::k_acts::{KActivations, SUPER};
use super::kquants::Q4KMatrix;
use super::kquants_vnni::dpwssd;

/// Weight rows per panel: one per i32 lane of a 512-bit register.
pub(super) const PANEL_ROWS: usize = 16;

/// Fewest activation rows for which the panel pays for its repack (below it, `kquants_vnni` runs).
pub(super) const MIN_ACT_ROWS: usize = 8;

/// Activation rows that pass the panel together (their sums stay in registers).
const TILE_ACTS: usize = 4;

/// One super-block (256 values) of sixteen weight rows; each array's last index is the row.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct PanelBlock {
    /// Word `i` of every row's 128 nibble bytes (chunk `i / 8`, values `4 · (i % 8)..` of its two sub-blocks).
    qs: [[u32; PANEL_ROWS]; 32],
    /// Sub-block scales.
    scales: [[i32; PANEL_ROWS]; 8],
    /// Sub-block minimums in both i16 halves, for `vpdpwssd` against a pair of activation sums of 16.
    mins: [[i32; PANEL_ROWS]; 8],
    d: [f32; PANEL_ROWS],
    dmin: [f32; PANEL_ROWS],
}

impl PanelBlock {
    const EMPTY: Self = Self {
        qs: [[0; PANEL_ROWS]; 32],
        scales: [[0; PANEL_ROWS]; 8],
        mins: [[0; PANEL_ROWS]; 8],
        d: [0.0; PANEL_ROWS],
        dmin: [0.0; PANEL_ROWS],
    };
}

thread_local! {
    /// The current work item's panel, reused across matmuls.
    static PANEL: RefCell<Vec<PanelBlock>> = const { RefCell::new(Vec::new()) };
}

/// Output columns `first..first + 16` for the `m` activation rows.
///
/// # Safety
/// The CPU must support AVX-512 F, BW, VL and VNNI; `first + 16 <= w.rows()`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
pub(super) unsafe fn q4k_panel_rows(w: &Q4KMatrix, acts: &KActivations, m: usize, first: usize, out: &mut [f32]) {
    debug_assert!(first + PANEL_ROWS <= w.rows());
    PANEL.with(|cell| {
        let mut panel = cell.borrow_mut();
        repack(w, first, &mut panel);
        let mut i = 0;
        while i < m {
            match m - i {
                1 => panel_tile::<1>(&panel, w, acts, out, first, i),
                2 => panel_tile::<2>(&panel, w, acts, out, first, i),
                3 => panel_tile::<3>(&panel, w, acts, out, first, i),
                _ => panel_tile::<TILE_ACTS>(&panel, w, acts, out, first, i),
            }
            i += (m - i).min(TILE_ACTS);
        }
    });
}

/// Rows `first..first + 16` of `w`, super-block by super-block.
fn repack(w: &Q4KMatrix, first: usize, panel: &mut Vec<PanelBlock>) {
    let blocks = w.cols() / SUPER;
    panel.clear();
    panel.resize(blocks, PanelBlock::EMPTY);
    for lane in 0..PANEL_ROWS {
        for (dst, block) in panel.iter_mut().zip(w.row(first + lane)) {
            for (word, bytes) in block.qs.chunks_exact(4).enumerate() {
                dst.qs[word][lane] = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            }
            for s in 0..8 {
                dst.scales[s][lane] = i32::from(block.scales[s]);
                dst.mins[s][lane] = i32::from(block.mins[s]) * 0x1_0001;
            }
            dst.d[lane] = block.d;
            dst.dmin[lane] = block.dmin;
        }
    }
}

/// `out[i0 + j][first..first + 16]` for `j < N`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
unsafe fn panel_tile<const N: usize>(
    panel: &[PanelBlock],
    w: &Q4KMatrix,
    acts: &KActivations,
    out: &mut [f32],
    first: usize,
    i0: usize,
) {
    let k = w.cols();
    let low4 = _mm512_set1_epi8(0x0F);
    let mut a_rows = [(&[][..], &[][..], &[][..]); N];
    for (j, row) in a_rows.iter_mut().enumerate() {
        *row = acts.row(i0 + j, k);
    }
    let mut sums = [_mm512_setzero_ps(); N];
    for (b, block) in panel.iter().enumerate() {
        let mut dots = [_mm512_setzero_si512(); N];
        for c in 0..4 {
            // Two chains per activation row (the chunk's two sub-blocks) keep `vpdpbusd`'s latency hidden.
            let mut even = [_mm512_setzero_si512(); N];
            let mut odd = [_mm512_setzero_si512(); N];
            for t in 0..8 {
                let q = _mm512_load_si512(block.qs[8 * c + t].as_ptr() as *const __m512i);
                let low = _mm512_and_si512(q, low4);
                let high = _mm512_and_si512(_mm512_srli_epi32(q, 4), low4);
                for j in 0..N {
                    let a = a_rows[j].0.as_ptr().add(b * SUPER + 64 * c + 4 * t);
                    even[j] = _mm512_dpbusd_epi32(even[j], low, broadcast_word(a));
                    odd[j] = _mm512_dpbusd_epi32(odd[j], high, broadcast_word(a.add(32)));
                }
            }
            let even_scale = _mm512_load_si512(block.scales[2 * c].as_ptr() as *const __m512i);
            let odd_scale = _mm512_load_si512(block.scales[2 * c + 1].as_ptr() as *const __m512i);
            for j in 0..N {
                let scaled =
                    _mm512_add_epi32(_mm512_mullo_epi32(even[j], even_scale), _mm512_mullo_epi32(odd[j], odd_scale));
                dots[j] = _mm512_add_epi32(dots[j], scaled);
            }
        }
        let d = _mm512_load_ps(block.d.as_ptr());
        let dmin = _mm512_load_ps(block.dmin.as_ptr());
        for j in 0..N {
            // Σ_s min[s] · (sum of sub-block s's 32 activations), from the pairs of sums of 16.
            let mut min_dot = _mm512_setzero_si512();
            let sums16 = a_rows[j].2.as_ptr().add(b * SUPER / 16);
            for s in 0..8 {
                let mins = _mm512_load_si512(block.mins[s].as_ptr() as *const __m512i);
                dpwssd(&mut min_dot, mins, broadcast_word(sums16.add(2 * s) as *const i8));
            }
            let da = _mm512_set1_ps(a_rows[j].1[b]);
            sums[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots[j]), _mm512_mul_ps(d, da), sums[j]);
            sums[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(min_dot), _mm512_mul_ps(dmin, da), sums[j]);
        }
    }
    let n_out = w.rows();
    for (j, sum) in sums.iter().enumerate() {
        _mm512_storeu_ps(out.as_mut_ptr().add((i0 + j) * n_out + first), *sum);
    }
}

/// The four bytes at `at` in every 32-bit lane.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn broadcast_word(at: *const i8) -> __m512i {
    _mm512_set1_epi32(std::ptr::read_unaligned(at as *const i32))
}
