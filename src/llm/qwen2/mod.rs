//! Qwen2 / Qwen2.5 (and -Coder) from GGUF: our own forward pass on candle ops.
//!
//! Ours rather than candle-transformers' so that we control the hot path: a rewindable preallocated KV cache
//! (prompt-prefix reuse), grouped-query attention without copying K/V per head, a quantized embedding table
//! (no 0.5–0.9 GB f32 copy), and a one-time conversion of tensor types that candle's CPU kernels run slowly.
//!
//! [`load`](Qwen2::load) reads the weights (`load`, built of `layers`), `pass` runs a forward pass over one or more
//! sequences, `rope` builds the RoPE tables; `gpu` holds everything that needs CUDA (with CPU-build stand-ins).

mod layers;
mod load;
mod pass;
mod rope;

#[cfg(feature = "cuda")]
#[path = "gpu.rs"]
mod gpu;
#[cfg(not(feature = "cuda"))]
#[path = "gpu_off.rs"]
mod gpu;

use std::collections::HashMap;

use candle_core::{Device, Tensor};

use self::layers::{Layer, TokenTable};
use super::gguf::{GgufFile, LoadError};
use super::kv_cache::CacheSlots;
use super::prefix_store::{common_prefix, KvSnapshot};
use super::{LanguageModel, MultiSequence, SequenceId, SequencePass};
use crate::kernels::QLinear;
use crate::Result;

/// Sequences whose KV caches a model keeps: the planner's and the executor's prompt families when one model
/// plays both roles, and one spare (buffers grow on use, about 25–57 KB a position).
const KV_SLOTS: usize = 3;

/// Positions another sequence must cache beyond the current slot's for [`Qwen2::borrow_prefix`] to copy them:
/// fewer are computed about as fast as copied.
const MIN_BORROWED: usize = 16;

/// Rows of a CPU pass the feed-forward block takes at a time (see `Qwen2::pass`): a 512-token prompt's
/// intermediates for the 0.5B take 40 MB at once, 10 MB in slices of 128.
const FFN_ROWS_AT_ONCE: usize = 128;

/// The sequence a model uses until told otherwise (see [`MultiSequence::use_sequence`]).
const OWN_SEQUENCE: SequenceId = 0;

/// Hyper-parameters read from `qwen2.*` metadata.
#[derive(Debug, Clone)]
pub struct Qwen2Config {
    pub n_layer: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub hidden: usize,
    pub head_dim: usize,
    pub context_length: usize,
    pub rms_eps: f32,
    pub rope_base: f32,
}

impl Qwen2Config {
    fn from_gguf(file: &GgufFile) -> Result<Self, LoadError> {
        let hidden = file.usize("qwen2.embedding_length")?;
        let n_head = file.usize("qwen2.attention.head_count")?;
        let n_kv_head = file.usize("qwen2.attention.head_count_kv").unwrap_or(n_head);
        if n_head == 0 || n_kv_head == 0 || hidden % n_head != 0 || n_head % n_kv_head != 0 {
            return Err(LoadError::BadHeader {
                path: file.path().to_path_buf(),
                message: format!("inconsistent head counts: hidden {hidden}, heads {n_head}, kv heads {n_kv_head}"),
            });
        }
        Ok(Self {
            n_layer: file.usize("qwen2.block_count")?,
            n_head,
            n_kv_head,
            hidden,
            head_dim: hidden / n_head,
            context_length: file.usize("qwen2.context_length").unwrap_or(32768),
            rms_eps: file.f32("qwen2.attention.layer_norm_rms_epsilon").unwrap_or(1e-6),
            rope_base: file.f32("qwen2.rope.freq_base").unwrap_or(1_000_000.0),
        })
    }
}

/// A loaded Qwen2 model with its KV cache.
pub struct Qwen2 {
    config: Qwen2Config,
    /// The token embedding table (the same matrix as `output` when the model ties them).
    embedding: TokenTable,
    layers: Vec<Layer>,
    norm: Tensor,
    output: QLinear,
    n_logits: usize,
    /// RoPE tables, `[positions, head_dim / 2]`, for the positions used so far (grown by `ROPE_GROWTH`).
    cos: Tensor,
    sin: Tensor,
    /// Additive causal masks by (new tokens, total positions).
    masks: HashMap<(usize, usize), Tensor>,
    device: Device,
    /// Independent sequences (one per concurrent generation when batching across them; the model's own is
    /// [`OWN_SEQUENCE`]), each with KV caches of a few prompt families and the token ids each holds: generation
    /// picks the slot sharing the longest prefix with its prompt and reuses that prefix instead of recomputing it.
    sequences: HashMap<SequenceId, CacheSlots>,
    /// The sequence that `LanguageModel`'s methods act on.
    current: SequenceId,
    /// The id the next opened sequence gets.
    next_sequence: SequenceId,
    /// Whether every product runs on our kernels on the CPU (with our attention), so batches are exact.
    exact_batches: bool,
    /// Whether passes take our GPU attention for every sequence of a pass ([`gpu::ours_on_gpu`]; never without
    /// CUDA).
    gpu_attention: bool,
    /// Whether passes take our fused GPU elementwise steps ([`gpu::ours_on_gpu`]).
    gpu_fused: bool,
}

impl Qwen2 {
    /// The model's hyper-parameters.
    pub fn config(&self) -> &Qwen2Config {
        &self.config
    }
}

impl Qwen2 {
    /// The current sequence's caches.
    fn caches(&self) -> &CacheSlots {
        self.sequences.get(&self.current).expect("the current sequence is always open")
    }

    /// The current sequence's caches, mutably.
    fn caches_mut(&mut self) -> &mut CacheSlots {
        self.sequences.get_mut(&self.current).expect("the current sequence is always open")
    }

    /// When another sequence caches a longer start of `prompt` than the current sequence's chosen slot, copies
    /// those positions' keys and values into the slot: generations running side by side (`tandem batch
    /// --parallel`) then compute their prompt family's long shared opening once instead of once each. A copy
    /// costs far less than the pass it saves (about 57 KB a position for the 1.5B against a prefill's compute).
    fn borrow_prefix(&mut self, prompt: &[u32]) -> Result<()> {
        let have = common_prefix(&self.caches().active().tokens, prompt);
        let best = self
            .sequences
            .iter()
            .filter(|(&id, _)| id != self.current)
            .flat_map(|(_, slots)| slots.slots())
            .map(|slot| (common_prefix(&slot.tokens, prompt), slot))
            .max_by_key(|(shared, _)| *shared);
        // At least one position of the prompt is always computed (its logits are wanted).
        let Some((shared, source)) = best.map(|(n, slot)| (n.min(prompt.len().saturating_sub(1)), slot)) else {
            return Ok(());
        };
        if shared < have + MIN_BORROWED {
            return Ok(());
        }
        let Some(copies) = source.prefix(shared)? else {
            return Ok(());
        };
        let (device, context) = (self.device.clone(), self.config.context_length);
        self.caches_mut().active_mut().replace(&copies, &prompt[..shared], &device, context)
    }
}

impl MultiSequence for Qwen2 {
    fn open_sequence(&mut self) -> SequenceId {
        let id = self.next_sequence;
        self.next_sequence += 1;
        self.sequences.insert(id, CacheSlots::new(KV_SLOTS, self.layers.len()));
        id
    }

    fn close_sequence(&mut self, sequence: SequenceId) {
        if sequence != OWN_SEQUENCE {
            self.sequences.remove(&sequence);
            if self.current == sequence {
                self.current = OWN_SEQUENCE;
            }
        }
    }

    fn use_sequence(&mut self, sequence: SequenceId) -> Result<()> {
        if !self.sequences.contains_key(&sequence) {
            return Err(candle_core::Error::Msg(format!("sequence {sequence} is not open")).into());
        }
        self.current = sequence;
        Ok(())
    }

    fn current_sequence(&self) -> SequenceId {
        self.current
    }

    fn forward_sequences(&mut self, parts: &[SequencePass<'_>]) -> Result<Vec<Tensor>> {
        self.forward_parts(parts)
    }
}

impl LanguageModel for Qwen2 {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor> {
        self.forward_current(tokens, pos, None)
    }

    fn forward_from(&mut self, tokens: &[u32], pos: usize, first: usize) -> Result<Tensor> {
        self.forward_current(tokens, pos, Some(first))
    }

    fn forward_rows(&mut self, tokens: &[u32], pos: usize, rows: &[u32]) -> Result<Vec<f32>> {
        let part = SequencePass { sequence: self.current, tokens, pos, logits_from: None };
        let mut logits = vec![f32::NEG_INFINITY; self.n_logits];
        self.forward_parts_into(&[part], Some((rows, &mut logits)))?;
        Ok(logits)
    }

    fn narrows_logits(&self) -> bool {
        self.device.is_cpu() && matches!(self.output, QLinear::Ours(_))
    }

    fn batched_logits(&self) -> bool {
        true
    }

    fn exact_batches(&self) -> bool {
        self.exact_batches
    }

    fn multi_sequence(&mut self) -> Option<&mut dyn MultiSequence> {
        Some(self)
    }

    fn select_cache_for(&mut self, prompt: &[u32]) {
        self.caches_mut().select_for(prompt);
        if let Err(e) = self.borrow_prefix(prompt) {
            // The slot is left empty (or as it was): the prompt is then computed, not copied.
            tracing::warn!(error = %e, "copying a cached prefix from another sequence failed");
        }
    }

    fn cached_tokens(&self) -> &[u32] {
        &self.caches().active().tokens
    }

    fn clear_kv_cache(&mut self) {
        self.caches_mut().clear_all();
    }

    fn export_kv(&self, len: usize) -> Result<Option<Vec<(Tensor, Tensor)>>> {
        self.caches().active().prefix(len)
    }

    fn import_kv(&mut self, snapshot: &KvSnapshot) -> Result<bool> {
        let c = &self.config;
        let expected = [1, c.n_kv_head, snapshot.tokens.len(), c.head_dim];
        let fits = snapshot.layers.len() == self.layers.len()
            && snapshot.layers.iter().all(|(k, v)| k.dims() == expected && v.dims() == expected);
        if !fits || snapshot.tokens.is_empty() {
            return Ok(false);
        }
        let (device, context) = (self.device.clone(), c.context_length);
        self.caches_mut().active_mut().replace(&snapshot.layers, &snapshot.tokens, &device, context)?;
        Ok(true)
    }

    fn n_logits(&self) -> usize {
        self.n_logits
    }

    fn context_length(&self) -> usize {
        self.config.context_length
    }
}
