//! A preallocated, rewindable key/value cache for one attention layer.
//!
//! Keys and values live in buffers of shape `[1, n_kv_head, capacity, head_dim]`; new positions are written in
//! place (`slice_set`) and reads are narrowed views, so a decode step copies only its own row. Rewinding (for a
//! cached prompt prefix, or rejected speculative tokens) just moves the length back.

use candle_core::{DType, Device, Tensor};

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
        let needed = self.len + seq;
        let capacity = self.k.as_ref().map(|t| t.dim(2)).transpose()?.unwrap_or(0);
        if needed > capacity {
            let new_capacity =
                needed.div_ceil(GROWTH).saturating_mul(GROWTH).max(capacity * 2).min(max_len.max(needed));
            self.k = Some(grow(self.k.as_ref(), self.len, n_kv, new_capacity, head_dim, k.dtype(), k.device())?);
            self.v = Some(grow(self.v.as_ref(), self.len, n_kv, new_capacity, head_dim, v.dtype(), v.device())?);
        }
        let (Some(kb), Some(vb)) = (&self.k, &self.v) else {
            return Err(candle_core::Error::Msg("kv cache buffers missing after allocation".into()).into());
        };
        kb.slice_set(k, 2, self.len)?;
        vb.slice_set(v, 2, self.len)?;
        self.len = needed;
        Ok((kb.narrow(2, 0, self.len)?, vb.narrow(2, 0, self.len)?))
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
