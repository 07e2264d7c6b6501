//! A preallocated, rewindable key/value cache for one attention layer.
//!
//! Keys and values live in buffers of shape `[1, n_kv_head, capacity, head_dim]`; new positions are written in
//! place (`slice_set`) and reads are narrowed views, so a decode step copies only its own row. Rewinding (for a
//! cached prompt prefix, or rejected speculative tokens) just moves the length back. A model holds a few whole
//! sequences of them ([`CacheSlots`]), one per prompt family it serves.

use candle_core::{DType, Device, Tensor};

use super::prefix_store::common_prefix;

use crate::Result;

/// Capacity added when a cache is first used or grows; a multiple of it is allocated.
const GROWTH: usize = 512;

/// The cache of one layer.
#[derive(Debug, Default)]
pub struct KvCache {
    k: Option<Tensor>,
    v: Option<Tensor>,
    len: usize,
}

impl KvCache {
    /// Number of cached positions.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets positions from `len` on.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Copies of the first `len` cached positions, `[1, n_kv_head, len, head_dim]` each (None if fewer are cached).
    pub fn prefix(&self, len: usize) -> Result<Option<(Tensor, Tensor)>> {
        match (&self.k, &self.v) {
            (Some(k), Some(v)) if len <= self.len => {
                Ok(Some((k.narrow(2, 0, len)?.contiguous()?, v.narrow(2, 0, len)?.contiguous()?)))
            }
            _ => Ok(None),
        }
    }

    /// Copies of positions `from..to` (None if fewer are cached). Always copies: a view of a one-head cache would
    /// otherwise share the buffer the next pass writes.
    pub fn positions(&self, from: usize, to: usize) -> Result<Option<(Tensor, Tensor)>> {
        match (&self.k, &self.v) {
            (Some(k), Some(v)) if from < to && to <= self.len => Ok(Some((
                k.narrow(2, from, to - from)?.force_contiguous()?,
                v.narrow(2, from, to - from)?.force_contiguous()?,
            ))),
            _ => Ok(None),
        }
    }

    /// Views of the cached positions, `[1, n_kv_head, len, head_dim]` (no copy: the next pass may overwrite them).
    pub fn view(&self) -> Result<Option<(Tensor, Tensor)>> {
        match (&self.k, &self.v) {
            (Some(k), Some(v)) if self.len > 0 => Ok(Some((k.narrow(2, 0, self.len)?, v.narrow(2, 0, self.len)?))),
            _ => Ok(None),
        }
    }

    /// Replaces the cache's contents with `k` and `v` (as [`KvCache::prefix`] gave them).
    pub fn replace(&mut self, k: &Tensor, v: &Tensor, max_len: usize) -> Result<()> {
        self.len = 0;
        self.append(k, v, max_len)?;
        Ok(())
    }

    /// Appends `k` and `v` (`[1, n_kv_head, seq, head_dim]`, contiguous) and returns views of every cached
    /// position, `[1, n_kv_head, len, head_dim]`.
    pub fn append(&mut self, k: &Tensor, v: &Tensor, max_len: usize) -> Result<(Tensor, Tensor)> {
        let (_, n_kv, seq, head_dim) = k.dims4()?;
        let (kb, vb) = self.reserve(self.len + seq, (n_kv, head_dim), k.dtype(), k.device(), max_len)?;
        kb.slice_set(k, 2, self.len)?;
        vb.slice_set(v, 2, self.len)?;
        self.advance(seq);
        Ok((kb.narrow(2, 0, self.len)?, vb.narrow(2, 0, self.len)?))
    }

    /// Makes room for `needed` positions of `(n_kv_head, head_dim)` rows, growing the buffers as appends do, and
    /// returns them (`[1, n_kv_head, capacity, head_dim]`): for writers that fill positions themselves (the GPU's
    /// pass attention) and then [`KvCache::advance`].
    pub fn reserve(
        &mut self,
        needed: usize,
        (n_kv, head_dim): (usize, usize),
        dtype: DType,
        device: &Device,
        max_len: usize,
    ) -> Result<(Tensor, Tensor)> {
        let capacity = self.k.as_ref().map(|t| t.dim(2)).transpose()?.unwrap_or(0);
        if needed > capacity {
            let new_capacity =
                needed.div_ceil(GROWTH).saturating_mul(GROWTH).max(capacity * 2).min(max_len.max(needed));
            self.k = Some(grow(self.k.as_ref(), self.len, n_kv, new_capacity, head_dim, dtype, device)?);
            self.v = Some(grow(self.v.as_ref(), self.len, n_kv, new_capacity, head_dim, dtype, device)?);
        }
        match (&self.k, &self.v) {
            (Some(kb), Some(vb)) => Ok((kb.clone(), vb.clone())),
            _ => Err(candle_core::Error::Msg("kv cache buffers missing after allocation".into()).into()),
        }
    }

    /// Counts `n` more positions as cached, after a writer filled them in the buffers [`KvCache::reserve`] gave.
    pub fn advance(&mut self, n: usize) {
        self.len += n;
    }
}

/// A new zeroed buffer of `capacity` positions holding the first `keep` positions of `old`.
fn grow(
    old: Option<&Tensor>,
    keep: usize,
    n_kv: usize,
    capacity: usize,
    head_dim: usize,
    dtype: DType,
    device: &Device,
) -> Result<Tensor> {
    let buffer = Tensor::zeros((1, n_kv, capacity, head_dim), dtype, device)?;
    if let (Some(old), true) = (old, keep > 0) {
        buffer.slice_set(&old.narrow(2, 0, keep)?.contiguous()?, 2, 0)?;
    }
    Ok(buffer)
}

/// One sequence's cache: a [`KvCache`] per layer and the token ids whose positions they hold.
#[derive(Debug, Default)]
pub struct SequenceCache {
    /// One cache per layer.
    pub layers: Vec<KvCache>,
    /// The token ids whose positions the layers hold, in order.
    pub tokens: Vec<u32>,
    last_used: u64,
}

impl SequenceCache {
    fn new(n_layers: usize) -> Self {
        Self { layers: (0..n_layers).map(|_| KvCache::default()).collect(), tokens: Vec::new(), last_used: 0 }
    }

    /// Forgets every position.
    pub fn clear(&mut self) {
        for layer in &mut self.layers {
            layer.truncate(0);
        }
        self.tokens.clear();
    }

    /// Copies of the first `len` positions' keys and values, layer by layer (None if fewer are cached).
    pub fn prefix(&self, len: usize) -> Result<Option<Vec<(Tensor, Tensor)>>> {
        let mut layers = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            match layer.prefix(len)? {
                Some(kv) => layers.push(kv),
                None => return Ok(None),
            }
        }
        Ok(Some(layers))
    }

    /// Copies of positions `from..to`, layer by layer (None if fewer are cached).
    pub fn positions(&self, from: usize, to: usize) -> Result<Option<Vec<(Tensor, Tensor)>>> {
        let mut layers = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            match layer.positions(from, to)? {
                Some(kv) => layers.push(kv),
                None => return Ok(None),
            }
        }
        Ok(Some(layers))
    }

    /// Views of every cached position, layer by layer (None when empty); see [`KvCache::view`].
    pub fn views(&self) -> Result<Option<Vec<(Tensor, Tensor)>>> {
        let mut layers = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            match layer.view()? {
                Some(kv) => layers.push(kv),
                None => return Ok(None),
            }
        }
        Ok(Some(layers))
    }

    /// Keeps the first `keep` positions and appends `layers` (the positions after them, as
    /// [`SequenceCache::positions`] gave them), moved to `device`, as those of `tokens[keep..]` (`tokens`: every
    /// position's token). Only the new positions are copied. On an error the sequence is left empty, never half
    /// written.
    pub fn splice(
        &mut self,
        keep: usize,
        layers: &[(Tensor, Tensor)],
        tokens: &[u32],
        device: &Device,
        max_len: usize,
    ) -> Result<()> {
        let keep = keep.min(self.tokens.len());
        for layer in &mut self.layers {
            layer.truncate(keep);
        }
        self.tokens.truncate(keep);
        let appended = self.layers.iter_mut().zip(layers).try_for_each(|(cache, (k, v))| {
            cache.append(&k.to_device(device)?.contiguous()?, &v.to_device(device)?.contiguous()?, max_len).map(|_| ())
        });
        if let Err(e) = appended {
            self.clear();
            return Err(e);
        }
        self.tokens.extend_from_slice(&tokens[keep..]);
        Ok(())
    }

    /// Replaces the contents with `layers` (as [`SequenceCache::prefix`] gave them), moved to `device`, which hold
    /// the positions of `tokens`. On an error the sequence is left empty, never half replaced.
    pub fn replace(
        &mut self,
        layers: &[(Tensor, Tensor)],
        tokens: &[u32],
        device: &Device,
        max_len: usize,
    ) -> Result<()> {
        self.clear();
        let replaced = self
            .layers
            .iter_mut()
            .zip(layers)
            .try_for_each(|(cache, (k, v))| cache.replace(&k.to_device(device)?, &v.to_device(device)?, max_len));
        if let Err(e) = replaced {
            self.clear();
            return Err(e);
        }
        self.tokens = tokens.to_vec();
        Ok(())
    }
}

/// Leading tokens a prompt must share with a slot to be served by it rather than by the least recently used one:
/// more than a chat template's opening (`<|im_start|>system` and the like), so a new family keeps off a warm slot.
const MIN_SHARED_FOR_SLOT: usize = 16;

/// Several sequences' caches, one active. A model that serves two prompt families in turn (the planner's and the
/// executor's, when one model plays both) keeps each warm instead of computing it again at every switch.
#[derive(Debug)]
pub struct CacheSlots {
    slots: Vec<SequenceCache>,
    active: usize,
    clock: u64,
}

impl CacheSlots {
    /// `n_slots` empty sequences (at least one) for a model of `n_layers` layers; buffers are allocated on use.
    pub fn new(n_slots: usize, n_layers: usize) -> Self {
        Self { slots: (0..n_slots.max(1)).map(|_| SequenceCache::new(n_layers)).collect(), active: 0, clock: 0 }
    }

    /// The sequence that forward passes read and extend.
    pub fn active(&self) -> &SequenceCache {
        &self.slots[self.active]
    }

    /// The active sequence, mutably.
    pub fn active_mut(&mut self) -> &mut SequenceCache {
        &mut self.slots[self.active]
    }

    /// Makes active the slot sharing the longest leading run of tokens with `prompt`; when none shares at least
    /// [`MIN_SHARED_FOR_SLOT`], the least recently used slot (an empty one first), so that a new prompt family
    /// does not overwrite a warm one.
    pub fn select_for(&mut self, prompt: &[u32]) {
        let (best, best_shared) = self
            .slots
            .iter()
            .enumerate()
            .map(|(i, slot)| (i, common_prefix(&slot.tokens, prompt)))
            .max_by_key(|&(i, n)| (n, usize::from(i == self.active)))
            .unwrap_or((0, 0));
        self.active = if best_shared >= MIN_SHARED_FOR_SLOT.min(prompt.len()) && best_shared > 0 {
            best
        } else {
            self.slots.iter().enumerate().min_by_key(|(_, slot)| slot.last_used).map_or(0, |(i, _)| i)
        };
        self.clock += 1;
        self.slots[self.active].last_used = self.clock;
    }

    /// Every slot.
    pub fn slots(&self) -> &[SequenceCache] {
        &self.slots
    }

    /// Forgets every position of every slot.
    pub fn clear_all(&mut self) {
        for slot in &mut self.slots {
            slot.clear();
        }
    }
}
