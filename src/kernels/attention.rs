//! Causal grouped-query attention on the CPU in one call, each query row computed alone and in a fixed order.
//!
//! Two reasons to have our own. candle's route is nine ops (two matmuls, scale, mask, softmax, reshapes), each
//! allocating its output while the second core waits: a share of every decode step that does not shrink with the
//! weights. And candle's matmul rounds a row differently depending on how many rows share the call, so a batch of
//! drafted tokens got other logits than one-token passes, and speculative decoding could change the output. Here
//! row `i` of head `h` reads the keys and values of positions `0..=pos + i` and nothing else, in the same order
//! whatever else is in the batch, so its output is bit for bit what it is alone (with our matmul kernels, which
//! have the same property, a whole forward pass does: `tests/it/real_models.rs`).

use std::cell::RefCell;

use candle_core::{CpuStorage, Storage, Tensor};

use crate::Result;

/// Lanes of the partial sums in a dot product: a fixed number, so the order of additions does not depend on the
/// instruction set (no fused multiply-add is used either), and every CPU level gives the same bits.
const LANES: usize = 16;

/// Output values summed at once over the positions (four 512-bit registers).
const OUT_CHUNK: usize = 64;

/// The sizes of one attention call.
#[derive(Debug, Clone, Copy)]
pub struct AttentionDims {
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads; query head `h` uses key/value head `h / (n_head / n_kv_head)`.
    pub n_kv_head: usize,
    /// Values per head.
    pub head_dim: usize,
    /// Query rows (new positions).
    pub seq: usize,
    /// Absolute position of the first query row; the keys hold positions `0..pos + seq`.
    pub pos: usize,
}

/// Cached keys or values: the row of head `g` at position `j` starts at `offset + g * head_stride + j * pos_stride`
/// and holds `head_dim` values (the cache's buffers are wider than the positions in use).
#[derive(Debug, Clone, Copy)]
pub struct KvRows<'a> {
    /// The buffer.
    pub data: &'a [f32],
    /// Where head 0, position 0 starts.
    pub offset: usize,
    /// Distance between heads.
    pub head_stride: usize,
    /// Distance between positions.
    pub pos_stride: usize,
}

impl KvRows<'_> {
    fn row(&self, head: usize, position: usize, head_dim: usize) -> &[f32] {
        let start = self.offset + head * self.head_stride + position * self.pos_stride;
        &self.data[start..start + head_dim]
    }
}

thread_local! {
    /// A group's attention scores (one row per head), reused across calls.
    static SCORES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Positions whose keys (or values) one pass over a group's heads reads: 32 rows of 128 values are 16 KiB, so the
/// group's other heads find them in L1 rather than reading the whole cache again.
const POSITION_BLOCK: usize = 32;

/// Query rows of a pass one work item takes together: they read each block of keys and values once between them,
/// where row by row each read the whole cache again (at 2,333 cached positions a group's keys and values are
/// 2.4 MB, past L2, and a plan's passes carry 2–3 rows). Four keeps the items of a prefill many enough to share out.
const ROWS_TOGETHER: usize = 4;

/// `softmax(q kᵀ · scale, causal) v` for every query row and head. `q` is `[n_head, seq, head_dim]`; `out` is
/// `[seq, n_head, head_dim]` (the layout the output projection reads), fully overwritten.
///
/// The query heads that share a key/value head run together, block of positions by block: each key and value row
/// comes from memory once for the whole group, where head by head it came once per head (on the 1.5B, six heads
/// a group: at 2,300 cached positions each head's 2.4 MB of keys and values does not fit in L2, and attention was a
/// large share of a plan's decoding; docs/performance.md, "Attention"). Every value is computed as head by head:
/// the same additions in the same order.
pub fn attend(q: &[f32], keys: KvRows, values: KvRows, dims: AttentionDims, scale: f32, out: &mut [f32]) {
    let AttentionDims { n_head, n_kv_head, head_dim, seq, pos } = dims;
    assert!(n_kv_head > 0 && n_head.is_multiple_of(n_kv_head), "{n_head} query heads over {n_kv_head} kv heads");
    assert_eq!(q.len(), n_head * seq * head_dim, "query size");
    assert_eq!(out.len(), n_head * seq * head_dim, "output size");
    let n_rep = n_head / n_kv_head;
    // Whole groups per work item, unless there are fewer groups than threads (one decoded row, few key/value
    // heads): then each group splits into as many parts as it takes to give every thread one.
    // The pool's threads and the caller: what `execute_chunked` spreads over (read from the pool, not from the
    // environment as `get_num_threads` does on every call, and which ignores `CANDLE_NUM_THREADS`).
    let threads = candle_core::utils::barrier_pool().n_workers() + 1;
    let row_sets = seq.div_ceil(ROWS_TOGETHER);
    let parts = (1..=n_rep).find(|&p| n_rep.is_multiple_of(p) && n_kv_head * row_sets * p >= threads).unwrap_or(n_rep);
    let heads_per_item = n_rep / parts;
    let out_addr = out.as_mut_ptr() as usize;
    let out_len = out.len();
    // Items run group-major, so the items a thread takes in a row share their keys in cache.
    candle_core::utils::barrier_pool().execute_chunked(n_kv_head * parts * row_sets, |items| {
        for item in items {
            let (heads_item, set) = (item / row_sets, item % row_sets);
            let first_head = heads_item * heads_per_item;
            let rows = set * ROWS_TOGETHER..((set + 1) * ROWS_TOGETHER).min(seq);
            let task = GroupTask {
                queries: q,
                first_head,
                heads: heads_per_item,
                rows: rows.clone(),
                seq,
                pos,
                keys: &keys,
                values: &values,
                kv_head: first_head / n_rep,
                head_dim,
                scale,
            };
            let len = heads_per_item * head_dim;
            let outs: Vec<&mut [f32]> = rows
                .map(|row| {
                    let start = (row * n_head + first_head) * head_dim;
                    debug_assert!(start + len <= out_len);
                    // SAFETY: `out_addr` is `out`'s start, and `out` stays mutably borrowed (alive, touched by
                    // nobody else) until `execute_chunked` returns, after every item is done. `start + len <=
                    // out_len` (`row < seq`, `first_head + heads_per_item <= n_head`, `out_len == n_head * seq *
                    // head_dim`, asserted above), and each item's heads of each of its rows are its own: no two
                    // slices, of one item or of two, overlap.
                    unsafe { std::slice::from_raw_parts_mut((out_addr as *mut f32).add(start), len) }
                })
                .collect();
            attend_group(task, outs);
        }
    });
}

/// Consecutive query rows of consecutive heads sharing a key/value head: what they read.
struct GroupTask<'a> {
    /// All queries, `[n_head, seq, head_dim]`.
    queries: &'a [f32],
    first_head: usize,
    heads: usize,
    /// The query rows, of `0..seq`; row `i` sees positions `0..=pos + i`.
    rows: std::ops::Range<usize>,
    seq: usize,
    pos: usize,
    keys: &'a KvRows<'a>,
    values: &'a KvRows<'a>,
    kv_head: usize,
    head_dim: usize,
    scale: f32,
}

impl GroupTask<'_> {
    /// Head `first_head + h`'s query row `row`.
    fn query(&self, h: usize, row: usize) -> &[f32] {
        &self.queries[((self.first_head + h) * self.seq + row) * self.head_dim..][..self.head_dim]
    }

    /// The positions the `r`th of the task's rows sees.
    fn positions(&self, r: usize) -> usize {
        self.pos + self.rows.start + r + 1
    }
}

thread_local! {
    /// A group's unnormalized value sums, reused across calls.
    static SUMS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// The query rows of a group of heads, each against the positions it sees (`outs`: per row, the heads' outputs
/// one after the other), by the instruction set this CPU has (the same bits on each).
fn attend_group(task: GroupTask, mut outs: Vec<&mut [f32]>) {
    let out = &mut outs[..];
    SCORES.with_borrow_mut(|scores| {
        SUMS.with_borrow_mut(|sums| {
            let slots = task.rows.len() * task.heads;
            scores.clear();
            scores.resize(slots * task.positions(task.rows.len() - 1), 0.0);
            sums.clear();
            sums.resize(slots * task.head_dim, 0.0);
            #[cfg(target_arch = "x86_64")]
            {
                use super::CpuLevel;
                match super::cpu_level() {
                    // SAFETY: `cpu_level` returns `Avx512Vnni` only after runtime detection found AVX-512 F (with
                    // BW, VL and VNNI), the one feature `group_avx512` enables.
                    CpuLevel::Avx512Vnni => return unsafe { group_avx512(&task, scores, sums, out) },
                    // SAFETY: `cpu_level` returns `Avx2` or `AvxVnni` only after runtime detection found AVX2 (and
                    // FMA), the feature `group_avx2` enables.
                    CpuLevel::Avx2 | CpuLevel::AvxVnni => return unsafe { group_avx2(&task, scores, sums, out) },
                    CpuLevel::Portable => {}
                }
            }
            group_portable(&task, scores, sums, out, portable_scores)
        })
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn group_avx512(task: &GroupTask, scores: &mut [f32], sums: &mut [f32], out: &mut [&mut [f32]]) {
    group_portable(task, scores, sums, out, portable_scores)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn group_avx2(task: &GroupTask, scores: &mut [f32], sums: &mut [f32], out: &mut [&mut [f32]]) {
    // SAFETY: this function runs only where AVX2 was detected (see `attend_group`).
    group_portable(task, scores, sums, out, |query, keys, kv_head, positions, scale, out| unsafe {
        avx2_scores(query, keys, kv_head, positions, scale, out)
    })
}

/// Fills `out[j]` with the scaled score of `query` against the key at position `positions.start + j`, by `dot`,
/// position by position.
#[inline(always)]
fn portable_scores(
    query: &[f32],
    keys: &KvRows,
    kv_head: usize,
    positions: std::ops::Range<usize>,
    scale: f32,
    out: &mut [f32],
) {
    for (position, score) in positions.zip(out) {
        *score = dot(query, keys.row(kv_head, position, query.len())) * scale;
    }
}

/// `portable_scores` with AVX2 registers, four positions at a time: the 16 lanes of `dot` are two 256-bit
/// registers, multiplied and added (never fused) and then added in `dot`'s tree, so each score has `dot`'s bits.
/// (The compiler vectorized `dot` on its own two lanes at a time, in 128-bit registers, and at long caches that
/// loop was a large share of a plan's decoding: docs/performance.md, "Attention".)
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2_scores(
    query: &[f32],
    keys: &KvRows,
    kv_head: usize,
    positions: std::ops::Range<usize>,
    scale: f32,
    out: &mut [f32],
) {
    let head_dim = query.len();
    if !head_dim.is_multiple_of(LANES) {
        return portable_scores(query, keys, kv_head, positions, scale, out);
    }
    let mut position = positions.start;
    for scores in out[..positions.len()].chunks_mut(4) {
        match scores.len() {
            4 => scores.copy_from_slice(&avx2_dots::<4>(query, keys, kv_head, position, scale)),
            3 => scores.copy_from_slice(&avx2_dots::<3>(query, keys, kv_head, position, scale)),
            2 => scores.copy_from_slice(&avx2_dots::<2>(query, keys, kv_head, position, scale)),
            _ => scores.copy_from_slice(&avx2_dots::<1>(query, keys, kv_head, position, scale)),
        }
        position += scores.len();
    }
}

/// `dot(query, key) * scale` for the keys at positions `first..first + N` (`query.len()` a multiple of `LANES`).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn avx2_dots<const N: usize>(
    query: &[f32],
    keys: &KvRows,
    kv_head: usize,
    first: usize,
    scale: f32,
) -> [f32; N] {
    use std::arch::x86_64::*;
    let head_dim = query.len();
    let rows: [&[f32]; N] = std::array::from_fn(|j| keys.row(kv_head, first + j, head_dim));
    let (mut low, mut high) = ([_mm256_setzero_ps(); N], [_mm256_setzero_ps(); N]);
    for c in (0..head_dim).step_by(LANES) {
        let q_low = _mm256_loadu_ps(query.as_ptr().add(c));
        let q_high = _mm256_loadu_ps(query.as_ptr().add(c + 8));
        for j in 0..N {
            let k = rows[j].as_ptr().add(c);
            low[j] = _mm256_add_ps(low[j], _mm256_mul_ps(q_low, _mm256_loadu_ps(k)));
            high[j] = _mm256_add_ps(high[j], _mm256_mul_ps(q_high, _mm256_loadu_ps(k.add(8))));
        }
    }
    std::array::from_fn(|j| {
        // `dot`'s tree: lanes l += l + 8, then l += l + 4, l += l + 2, l += l + 1.
        let eight = _mm256_add_ps(low[j], high[j]);
        let four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
        let two = _mm_add_ps(four, _mm_movehl_ps(four, four));
        let one = _mm_add_ss(two, _mm_shuffle_ps(two, two, 1));
        _mm_cvtss_f32(one) * scale
    })
}

/// Scores, then the softmax's weights, then their sum of value rows, each row's and head's in position order (as
/// for that row alone: its blocks of positions are the same, only other rows' work comes between them); `scores`
/// has one slot per row and head of the last row's positions, `sums` one per row, head and value (zeros), `out`
/// one slice per row.
#[inline(always)]
fn group_portable(
    task: &GroupTask,
    scores: &mut [f32],
    sums: &mut [f32],
    out: &mut [&mut [f32]],
    fill_scores: impl Fn(&[f32], &KvRows, usize, std::ops::Range<usize>, f32, &mut [f32]),
) {
    let GroupTask { keys, values, kv_head, head_dim, scale, heads, .. } = *task;
    let rows = task.rows.len();
    let stride = task.positions(rows - 1);
    // Slot `r * heads + h`: the `r`th row's head `h`; its scores start at `slot * stride`.
    let block_of = |b: usize, r: usize| b..(b + POSITION_BLOCK).min(task.positions(r));
    for start in (0..stride).step_by(POSITION_BLOCK) {
        for r in (0..rows).filter(|&r| start < task.positions(r)) {
            let block = block_of(start, r);
            for h in 0..heads {
                let out = &mut scores[(r * heads + h) * stride..][block.clone()];
                fill_scores(task.query(h, task.rows.start + r), keys, kv_head, block.clone(), scale, out);
            }
        }
    }
    let mut inverses = Vec::with_capacity(rows * heads);
    for (slot, slot_scores) in scores.chunks_exact_mut(stride).enumerate() {
        let slot_scores = &mut slot_scores[..task.positions(slot / heads)];
        let max = slot_scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
        let mut total = 0.0f32;
        for score in slot_scores.iter_mut() {
            *score = (*score - max).exp();
            total += *score;
        }
        inverses.push(1.0 / total);
    }
    // The weighted sums by slices of `OUT_CHUNK` values, so that the sums stay in registers across a block's
    // positions (a narrower last slice, if any, takes the general loop; each value is summed in position order
    // either way, block after block).
    for start in (0..stride).step_by(POSITION_BLOCK) {
        for r in (0..rows).filter(|&r| start < task.positions(r)) {
            let block = block_of(start, r);
            for h in 0..heads {
                let slot = r * heads + h;
                let weights = &scores[slot * stride..][block.clone()];
                for (chunk, sums) in sums[slot * head_dim..][..head_dim].chunks_mut(OUT_CHUNK).enumerate() {
                    let (first, width) = (chunk * OUT_CHUNK, sums.len());
                    let row = |position| &values.row(kv_head, position, head_dim)[first..first + width];
                    if let Ok(sums) = <&mut [f32; OUT_CHUNK]>::try_from(&mut *sums) {
                        let mut acc = *sums;
                        for (position, &weight) in block.clone().zip(weights) {
                            let row: &[f32; OUT_CHUNK] = row(position).try_into().expect("a whole slice");
                            for lane in 0..OUT_CHUNK {
                                acc[lane] += weight * row[lane];
                            }
                        }
                        *sums = acc;
                    } else {
                        for (position, &weight) in block.clone().zip(weights) {
                            for (o, &v) in sums.iter_mut().zip(row(position)) {
                                *o += weight * v;
                            }
                        }
                    }
                }
            }
        }
    }
    let slots = sums.chunks_exact(head_dim).zip(inverses);
    for (slot, (sums, inverse)) in slots.enumerate() {
        let (r, h) = (slot / heads, slot % heads);
        for (o, &sum) in out[r][h * head_dim..][..head_dim].iter_mut().zip(sums) {
            *o = sum * inverse;
        }
    }
}

/// A dot product with `LANES` partial sums added in a fixed tree.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let whole = a.len() / LANES * LANES;
    for (x, y) in a[..whole].chunks_exact(LANES).zip(b[..whole].chunks_exact(LANES)) {
        for lane in 0..LANES {
            acc[lane] += x[lane] * y[lane];
        }
    }
    for i in whole..a.len() {
        acc[i % LANES] += a[i] * b[i];
    }
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for lane in 0..width {
            acc[lane] += acc[lane + width];
        }
    }
    acc[0]
}

/// The CPU route for a model's attention: `q` `[1, n_head, seq, head_dim]`, `k` and `v` the cache's views
/// `[1, n_kv_head, pos + seq, head_dim]`, all f32 on the CPU; returns `[1, seq, n_head * head_dim]`.
pub fn causal_attention(q: &Tensor, k: &Tensor, v: &Tensor, pos: usize, scale: f32) -> Result<Tensor> {
    let (_, n_head, seq, head_dim) = q.dims4()?;
    let (_, n_kv_head, total, kv_dim) = k.dims4()?;
    if kv_dim != head_dim || v.dims() != k.dims() || total != pos + seq {
        return Err(candle_core::Error::Msg(format!(
            "attention of {:?} queries at position {pos} over keys {:?} and values {:?}",
            q.dims(),
            k.dims(),
            v.dims()
        ))
        .into());
    }
    // The cache's views are strided along positions only; anything else is copied to that form.
    let rows_in_place = |t: &Tensor| t.layout().stride()[3] == 1;
    let k = if rows_in_place(k) { k.clone() } else { k.contiguous()? };
    let v = if rows_in_place(v) { v.clone() } else { v.contiguous()? };
    let q = q.contiguous()?;
    let (q_storage, q_layout) = q.storage_and_layout();
    let (k_storage, k_layout) = k.storage_and_layout();
    let (v_storage, v_layout) = v.storage_and_layout();
    let (
        Storage::Cpu(CpuStorage::F32(q_data)),
        Storage::Cpu(CpuStorage::F32(k_data)),
        Storage::Cpu(CpuStorage::F32(v_data)),
    ) = (&*q_storage, &*k_storage, &*v_storage)
    else {
        return Err(candle_core::Error::Msg(format!(
            "CPU attention takes f32 tensors on the CPU, got {:?} on {:?}",
            q.dtype(),
            q.device()
        ))
        .into());
    };
    let (q_start, q_end) = q_layout.contiguous_offsets().expect("made contiguous above");
    let dims = AttentionDims { n_head, n_kv_head, head_dim, seq, pos };
    let mut out = vec![0.0f32; n_head * seq * head_dim];
    attend(&q_data[q_start..q_end], kv_rows(k_data, k_layout), kv_rows(v_data, v_layout), dims, scale, &mut out);
    Ok(Tensor::from_vec(out, (1, seq, n_head * head_dim), q.device())?)
}

/// The same attention through candle's ops, for the devices our kernel does not serve (GPUs), and to compare
/// against: `mask` is the additive causal mask `[seq, pos + seq]` (None for one row), `scale` multiplies the scores.
pub fn candle_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scale: f64,
) -> candle_core::Result<Tensor> {
    let (_, n_head, seq, head_dim) = q.dims4()?;
    let (_, n_kv_head, total, _) = k.dims4()?;
    let n_rep = n_head / n_kv_head;
    // Grouped-query attention without repeating K/V: query heads sharing a KV head are stacked along the
    // sequence axis, [1, n_kv, n_rep * seq, head_dim] (query head h uses KV head h / n_rep).
    let q = q.reshape((1, n_kv_head, n_rep * seq, head_dim))?;
    let mut scores = (q.matmul(&k.t()?)? * scale)?; // [1, n_kv, n_rep * seq, total]
    if let Some(mask) = mask {
        scores = scores.reshape((1, n_kv_head, n_rep, seq, total))?.broadcast_add(mask)?.reshape((
            1,
            n_kv_head,
            n_rep * seq,
            total,
        ))?;
    }
    let probs = candle_nn::ops::softmax_last_dim(&scores)?;
    probs
        .matmul(v)? // [1, n_kv, n_rep * seq, head_dim]
        .reshape((1, n_head, seq, head_dim))?
        .transpose(1, 2)?
        .reshape((1, seq, n_head * head_dim))
}

/// A cache view `[1, n_kv_head, positions, head_dim]` with unit stride along `head_dim`.
fn kv_rows<'a>(data: &'a [f32], layout: &candle_core::Layout) -> KvRows<'a> {
    let stride = layout.stride();
    KvRows { data, offset: layout.start_offset(), head_stride: stride[1], pos_stride: stride[2] }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Deterministic values in [-1, 1).
    pub(crate) fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    /// The textbook computation in f64.
    fn reference(q: &[f32], k: &[f32], v: &[f32], dims: AttentionDims, capacity: usize, scale: f32) -> Vec<f32> {
        let AttentionDims { n_head, n_kv_head, head_dim, seq, pos } = dims;
        let mut out = vec![0.0f32; n_head * seq * head_dim];
        for h in 0..n_head {
            let g = h / (n_head / n_kv_head);
            for i in 0..seq {
                let query = &q[(h * seq + i) * head_dim..][..head_dim];
                let kv = |buf: &[f32], j: usize| buf[(g * capacity + j) * head_dim..][..head_dim].to_vec();
                let scores: Vec<f64> = (0..=pos + i)
                    .map(|j| query.iter().zip(kv(k, j)).map(|(&a, b)| a as f64 * b as f64).sum::<f64>() * scale as f64)
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = weights.iter().sum();
                for d in 0..head_dim {
                    let value: f64 = (0..=pos + i).map(|j| weights[j] * kv(v, j)[d] as f64).sum();
                    out[(i * n_head + h) * head_dim + d] = (value / total) as f32;
                }
            }
        }
        out
    }

    fn run(q: &[f32], k: &[f32], v: &[f32], dims: AttentionDims, capacity: usize) -> Vec<f32> {
        let rows = |data| KvRows { data, offset: 0, head_stride: capacity * dims.head_dim, pos_stride: dims.head_dim };
        let mut out = vec![f32::NAN; dims.n_head * dims.seq * dims.head_dim];
        attend(q, rows(k), rows(v), dims, 0.125, &mut out);
        out
    }

    #[test]
    fn matches_the_textbook_computation() {
        let (capacity, head_dim) = (40, 24); // head_dim not a multiple of LANES: the tail path runs too
        let dims = AttentionDims { n_head: 6, n_kv_head: 2, head_dim, seq: 5, pos: 30 };
        let q = values(dims.n_head * dims.seq * head_dim, 1);
        let k = values(dims.n_kv_head * capacity * head_dim, 2);
        let v = values(dims.n_kv_head * capacity * head_dim, 3);
        let ours = run(&q, &k, &v, dims, capacity);
        let expected = reference(&q, &k, &v, dims, capacity, 0.125);
        for (i, (a, b)) in ours.iter().zip(&expected).enumerate() {
            assert!((a - b).abs() < 1e-5, "value {i}: {a} vs {b}");
        }
    }

    /// Several blocks of positions (150 cached, blocks of 64), a head size with a narrower last slice (72 = 64 +
    /// 8), and one decoded row over a single key/value head: the group splits into parts, one per thread.
    #[test]
    fn long_caches_and_split_groups_match_the_textbook_computation() {
        for (n_head, n_kv_head, seq) in [(4, 1, 1), (6, 2, 1), (6, 2, 3), (8, 1, 2)] {
            let (capacity, head_dim) = (160, 72);
            let dims = AttentionDims { n_head, n_kv_head, head_dim, seq, pos: 150 };
            let q = values(n_head * seq * head_dim, 7);
            let k = values(n_kv_head * capacity * head_dim, 8);
            let v = values(n_kv_head * capacity * head_dim, 9);
            let ours = run(&q, &k, &v, dims, capacity);
            let expected = reference(&q, &k, &v, dims, capacity, 0.125);
            for (i, (a, b)) in ours.iter().zip(&expected).enumerate() {
                assert!((a - b).abs() < 1e-5, "{dims:?}: value {i}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn a_row_in_a_batch_equals_the_row_alone() {
        let (capacity, head_dim) = (64, 64);
        let batch = AttentionDims { n_head: 4, n_kv_head: 2, head_dim, seq: 9, pos: 20 };
        let q = values(batch.n_head * batch.seq * head_dim, 4);
        let k = values(batch.n_kv_head * capacity * head_dim, 5);
        let v = values(batch.n_kv_head * capacity * head_dim, 6);
        let together = run(&q, &k, &v, batch, capacity);
        for i in 0..batch.seq {
            let alone = AttentionDims { seq: 1, pos: batch.pos + i, ..batch };
            let query: Vec<f32> =
                (0..batch.n_head).flat_map(|h| q[(h * batch.seq + i) * head_dim..][..head_dim].to_vec()).collect();
            let out = run(&query, &k, &v, alone, capacity);
            let row = &together[i * batch.n_head * head_dim..][..batch.n_head * head_dim];
            assert_eq!(
                out.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                row.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                "row {i}"
            );
        }
    }
}
