//! A model's prompt cache: the keys and values of earlier prompts (with their answers), kept in this process's
//! memory when a sequence is about to overwrite them, so that a prompt sent again later (a client repeating a
//! question, a conversation coming back after others) is read back instead of computed. Bounded in bytes; the
//! least recently used entries go first. Like llama-server's prompt cache (`--cache-ram`), it holds whole
//! sequences, not only the shared openings the prefix store (`prefix_store`) keeps.
//!
//! Entries live in host memory whatever the device (as llama-server's do), so the bound is RAM, not GPU memory.

use candle_core::{Device, Tensor};

use super::prefix_store::common_prefix;
use crate::Result;

/// One cached sequence: its tokens and, layer by layer, their keys and values `[1, n_kv_head, len, head_dim]`.
#[derive(Debug)]
struct Entry {
    tokens: Vec<u32>,
    layers: Vec<(Tensor, Tensor)>,
    bytes: usize,
}

/// The cached sequences, most recently used first.
#[derive(Debug, Default)]
pub struct PromptCache {
    entries: Vec<Entry>,
    bytes: usize,
    budget: usize,
}

impl PromptCache {
    /// A cache holding at most `budget` bytes of keys and values (0: off, nothing is kept).
    pub fn new(budget: usize) -> Self {
        Self { entries: Vec::new(), bytes: 0, budget }
    }

    /// Whether it keeps anything.
    pub fn is_on(&self) -> bool {
        self.budget > 0
    }

    /// Bytes of keys and values held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry sharing the longest leading run of tokens with `prompt` (the most recently used of the longest):
    /// `(entry, shared length)`; `None` when none shares a token.
    pub fn longest(&self, prompt: &[u32]) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        for (i, entry) in self.entries.iter().enumerate() {
            let shared = common_prefix(&entry.tokens, prompt);
            if shared > 0 && best.is_none_or(|(_, b)| shared > b) {
                best = Some((i, shared));
            }
        }
        best
    }

    /// Copies of positions `from..to` of entry `entry` (as [`PromptCache::longest`] named it), on `device`, and
    /// marks it as just used.
    pub fn positions(
        &mut self,
        entry: usize,
        from: usize,
        to: usize,
        device: &Device,
    ) -> Result<Option<Vec<(Tensor, Tensor)>>> {
        if entry >= self.entries.len() || from >= to || to > self.entries[entry].tokens.len() {
            return Ok(None);
        }
        let used = self.entries.remove(entry);
        self.entries.insert(0, used);
        let mut layers = Vec::with_capacity(self.entries[0].layers.len());
        for (k, v) in &self.entries[0].layers {
            // A copy on every device: the caches write in place, and must never share storage with an entry.
            let copy = |t: &Tensor| -> Result<Tensor> { Ok(t.narrow(2, from, to - from)?.force_contiguous()?) };
            layers.push((copy(k)?.to_device(device)?, copy(v)?.to_device(device)?));
        }
        Ok(Some(layers))
    }

    /// Whether an entry already holds `tokens` (they are its whole token list or its start); if so it is marked as
    /// just used, and there is nothing to keep.
    pub fn covers(&mut self, tokens: &[u32]) -> bool {
        let Some(at) = self.entries.iter().position(|e| e.tokens.starts_with(tokens)) else { return false };
        let used = self.entries.remove(at);
        self.entries.insert(0, used);
        true
    }

    /// Keeps the first `len` positions of `layers` (a sequence's cache buffers, `[1, n_kv_head, ≥ len, head_dim]`)
    /// as the keys and values of `tokens` (`len` of them), copied to host memory; entries it extends (whose tokens
    /// are its start) are dropped, they can serve nothing it cannot; then the least recently used go until the
    /// bytes fit the budget. A sequence larger than the whole budget is not kept.
    pub fn keep(&mut self, tokens: &[u32], layers: &[(Tensor, Tensor)]) -> Result<()> {
        let len = tokens.len();
        let mut bytes = 0;
        for (k, v) in layers {
            bytes += (k.elem_count() / k.dim(2)?.max(1) + v.elem_count() / v.dim(2)?.max(1))
                * len
                * k.dtype().size_in_bytes();
        }
        if !self.is_on() || len == 0 || bytes > self.budget {
            return Ok(());
        }
        let mut copies = Vec::with_capacity(layers.len());
        for (k, v) in layers {
            let copy = |t: &Tensor| -> Result<Tensor> {
                Ok(t.narrow(2, 0, len)?.force_contiguous()?.to_device(&Device::Cpu)?)
            };
            copies.push((copy(k)?, copy(v)?));
        }
        self.entries.retain(|e| !tokens.starts_with(&e.tokens));
        self.entries.insert(0, Entry { tokens: tokens.to_vec(), layers: copies, bytes });
        self.bytes = self.entries.iter().map(|e| e.bytes).sum();
        while self.bytes > self.budget {
            let Some(old) = self.entries.pop() else { break };
            self.bytes -= old.bytes;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use candle_core::DType;

    use super::*;

    /// Two layers of `[1, 2, capacity, 4]` f32 buffers whose every value is `fill`: 128 bytes a position.
    fn layers(capacity: usize, fill: f32) -> Vec<(Tensor, Tensor)> {
        let t = || (Tensor::ones((1, 2, capacity, 4), DType::F32, &Device::Cpu).unwrap() * fill as f64).unwrap();
        vec![(t(), t()), (t(), t())]
    }

    #[test]
    fn the_longest_shared_start_is_chosen_and_only_the_positions_asked_are_copied() {
        let mut cache = PromptCache::new(1 << 20);
        cache.keep(&[1, 2, 3, 4], &layers(8, 1.0)).unwrap();
        cache.keep(&[1, 2, 5, 6, 7], &layers(8, 2.0)).unwrap();
        cache.keep(&[9, 9], &layers(8, 3.0)).unwrap();
        assert_eq!(cache.longest(&[1, 2, 3, 4, 10]), Some((2, 4)));
        assert_eq!(cache.longest(&[1, 2, 5, 6, 0]), Some((1, 4)));
        assert_eq!(cache.longest(&[7]), None);
        // A tie goes to the most recently used.
        cache.keep(&[1, 2, 8], &layers(8, 4.0)).unwrap();
        assert_eq!(cache.longest(&[1, 2, 0]), Some((0, 2)));
        let (entry, shared) = cache.longest(&[1, 2, 5, 6, 0]).unwrap();
        let copied = cache.positions(entry, 1, shared, &Device::Cpu).unwrap().unwrap();
        assert_eq!(copied.len(), 2);
        assert_eq!(copied[0].0.dims(), &[1, 2, 3, 4]);
        assert_eq!(copied[1].1.flatten_all().unwrap().to_vec1::<f32>().unwrap(), vec![2.0; 24]);
        // Using it made it the most recently used.
        assert_eq!(cache.longest(&[1, 2, 5]), Some((0, 3)));
        assert!(cache.positions(0, 2, 9, &Device::Cpu).unwrap().is_none(), "past the entry's end");
    }

    #[test]
    fn the_bytes_stay_within_the_budget_the_least_recently_used_going_first() {
        // 128 bytes a position: room for 10 positions.
        let mut cache = PromptCache::new(1280);
        cache.keep(&[1, 1, 1, 1], &layers(16, 1.0)).unwrap();
        cache.keep(&[2, 2, 2, 2], &layers(16, 2.0)).unwrap();
        assert_eq!(cache.bytes(), 1024, "only the tokens' positions count, not the buffers' capacity");
        assert!(cache.covers(&[1, 1]), "a held start is covered, and marked as used");
        cache.keep(&[3, 3, 3, 3], &layers(16, 3.0)).unwrap();
        assert_eq!(cache.len(), 2);
        assert!(cache.bytes() <= 1280);
        assert!(cache.longest(&[2, 2]).is_none(), "the least recently used went");
        assert!(cache.longest(&[1, 1]).is_some() && cache.longest(&[3, 3]).is_some());
        // Too large for the whole budget: not kept, nothing else dropped.
        cache.keep(&[4; 11], &layers(16, 4.0)).unwrap();
        assert_eq!(cache.len(), 2);
        // An entry extended by a new one is dropped: it could serve nothing the new one cannot.
        cache.keep(&[3, 3, 3, 3, 5], &layers(16, 5.0)).unwrap();
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.longest(&[3, 3, 3, 3, 5]), Some((0, 5)));
        assert!(!cache.covers(&[6]));
    }

    #[test]
    fn off_keeps_nothing() {
        let mut cache = PromptCache::new(0);
        cache.keep(&[1, 2], &layers(4, 1.0)).unwrap();
        assert!(!cache.is_on() && cache.is_empty() && cache.bytes() == 0);
    }

    #[test]
    fn an_entry_never_shares_storage_with_the_buffers_it_was_kept_from() {
        let mut cache = PromptCache::new(1 << 20);
        let source = layers(4, 1.0);
        cache.keep(&[1, 2, 3, 4], &source).unwrap();
        // Overwrite the source in place, as a cache's next pass does.
        source[0].0.slice_set(&Tensor::zeros((1, 2, 4, 4), DType::F32, &Device::Cpu).unwrap(), 2, 0).unwrap();
        let kept = cache.positions(0, 0, 4, &Device::Cpu).unwrap().unwrap();
        assert_eq!(kept[0].0.flatten_all().unwrap().to_vec1::<f32>().unwrap(), vec![1.0; 32]);
    }
}
