//! Decoder-only transformers from GGUF on our kernels: Qwen2/2.5, Qwen3, Llama (2, 3.x, Mistral, TinyLlama,
//! SmolLM2), SmolLM3, Phi-3/Phi-4-mini and Gemma 3, through one layer path.
//!
//! One path with the architectures' differences as data, not a copy per architecture: `family` holds what a
//! file cannot say (RoPE layout, activation, which layers rotate or slide, embedding scale); everything else (biases,
//! q/k norms, fused projections, post-norms, RoPE frequency factors) follows from the tensors the file has.
//! docs/architecture.md ("Model families") compares this choice with llama.cpp's and candle-transformers'.
//!
//! Ours rather than candle-transformers' so that we control the hot path: a rewindable preallocated KV cache
//! (prompt-prefix reuse), grouped-query attention without copying K/V per head, a quantized embedding table
//! (no 0.5–0.9 GB f32 copy), and a one-time conversion of tensor types that candle's CPU kernels run slowly.
//!
//! [`load`](Decoder::load) reads the weights (`load`, built of `layers`), `pass` runs a forward pass over one or
//! more sequences, `rope` builds and applies the RoPE tables; `gpu` holds everything that needs CUDA (with CPU-build
//! stand-ins).

pub mod family;
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

pub use self::family::{family, Activation, DecoderConfig, Family, FAMILIES};
use self::layers::{Layer, TokenTable};
use self::rope::Rope;
use super::kv_cache::CacheSlots;
use super::prefix_store::{common_prefix, KvSnapshot};
use super::prompt_cache::PromptCache;
use super::{LanguageModel, MultiSequence, SequenceId, SequencePass};
use crate::kernels::QLinear;
use crate::Result;

/// Sequences whose KV caches a model keeps: the planner's and the executor's prompt families when one model
/// plays both roles, and one spare (buffers grow on use, about 25–57 KB a position).
const KV_SLOTS: usize = 3;

/// Rows of a CPU pass the feed-forward block takes at a time (see `Decoder::pass`): a 512-token prompt's
/// intermediates for the 0.5B take 40 MB at once, 10 MB in slices of 128.
const FFN_ROWS_AT_ONCE: usize = 128;

/// The sequence a model uses until told otherwise (see [`MultiSequence::use_sequence`]).
const OWN_SEQUENCE: SequenceId = 0;

/// A loaded decoder with its KV cache.
pub struct Decoder {
    config: DecoderConfig,
    /// The token embedding table (the same matrix as `output` when the model ties them).
    embedding: TokenTable,
    /// Multiplies looked-up embeddings (Gemma's `sqrt(hidden)`).
    embedding_scale: Option<f64>,
    layers: Vec<Layer>,
    norm: Tensor,
    output: QLinear,
    n_logits: usize,
    /// The RoPE of global layers, tables for the positions used so far (grown by `ROPE_GROWTH`).
    rope: Rope,
    /// The RoPE of sliding-window layers, where the family has them.
    local_rope: Option<Rope>,
    /// Additive causal masks by (new tokens, total positions).
    masks: HashMap<(usize, usize), Tensor>,
    device: Device,
    /// Independent sequences (one per concurrent generation when batching across them; the model's own is
    /// [`OWN_SEQUENCE`]), each with KV caches of a few prompt families and the token ids each holds: generation
    /// picks the slot sharing the longest prefix with its prompt and reuses that prefix instead of recomputing it.
    sequences: HashMap<SequenceId, CacheSlots>,
    /// Earlier sequences' keys and values, kept when a new prompt was about to overwrite them (off unless the load
    /// options give it bytes: a server's, see `prompt_cache`).
    prompt_cache: PromptCache,
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

impl Decoder {
    /// The model's hyper-parameters.
    pub fn config(&self) -> &DecoderConfig {
        &self.config
    }
}

impl Decoder {
    /// The current sequence's caches.
    fn caches(&self) -> &CacheSlots {
        self.sequences.get(&self.current).expect("the current sequence is always open")
    }

    /// The current sequence's caches, mutably.
    fn caches_mut(&mut self) -> &mut CacheSlots {
        self.sequences.get_mut(&self.current).expect("the current sequence is always open")
    }

    /// When `prompt` parts from what the current sequence's chosen slot holds before its end (its next pass will
    /// overwrite the rest), keeps the slot's positions in the prompt cache first, unless an entry holds them
    /// already: as llama-server saves a slot's prompt before the slot takes another, so the prompt (with its answer)
    /// can be read back when it comes again.
    fn keep_before_overwrite(&mut self, prompt: &[u32]) -> Result<()> {
        let slot = self.sequences.get(&self.current).expect("the current sequence is always open").active();
        let tokens = &slot.tokens;
        if !self.prompt_cache.is_on() || common_prefix(tokens, prompt) >= tokens.len() {
            return Ok(());
        }
        if self.prompt_cache.covers(tokens) {
            return Ok(());
        }
        match slot.views()? {
            Some(views) => self.prompt_cache.keep(tokens, &views),
            None => Ok(()),
        }
    }

    /// Reuses the longest start of `prompt` cached anywhere: when another sequence's slot (`tandem batch
    /// --parallel`, a server's other generations, idle or not) or the prompt cache holds a longer start than the
    /// current sequence's chosen slot, copies the positions the slot lacks into it. So whichever generation takes a
    /// request reuses what the best slot holds, as a server choosing its most similar idle slot would, and a
    /// long shared opening is computed once instead of once a sequence. Only the missing positions are copied, a
    /// memory copy of their keys and values (25–57 KB each for the 0.5B–1.5B) against a pass through every weight
    /// to compute them, so even one more position is worth it.
    fn borrow_prefix(&mut self, prompt: &[u32]) -> Result<()> {
        // At least one position of the prompt is always computed (its logits are wanted).
        let limit = prompt.len().saturating_sub(1);
        let have = common_prefix(&self.caches().active().tokens, prompt).min(limit);
        let current = self.current;
        let from_sequence = self
            .sequences
            .iter()
            .filter(|(&id, _)| id != current)
            .flat_map(|(_, slots)| slots.slots())
            .map(|slot| (common_prefix(&slot.tokens, prompt).min(limit), slot))
            .max_by_key(|(shared, _)| *shared);
        let from_cache = self.prompt_cache.longest(prompt).map(|(entry, n)| (entry, n.min(limit)));
        let (by_sequence, by_cache) = (from_sequence.map_or(0, |(n, _)| n), from_cache.map_or(0, |(_, n)| n));
        let shared = by_sequence.max(by_cache);
        if shared <= have {
            return Ok(());
        }
        let copies = match (from_sequence, from_cache) {
            (Some((_, slot)), _) if by_sequence >= by_cache => slot.positions(have, shared)?,
            (_, Some((entry, _))) => self.prompt_cache.positions(entry, have, shared, &self.device)?,
            _ => None,
        };
        let Some(copies) = copies else {
            return Ok(());
        };
        let (device, context) = (self.device.clone(), self.config.context_length);
        self.caches_mut().active_mut().splice(have, &copies, &prompt[..shared], &device, context)
    }
}

impl MultiSequence for Decoder {
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

impl LanguageModel for Decoder {
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
        if let Err(e) = self.keep_before_overwrite(prompt) {
            // Only a later repeat of the old prompt is computed again.
            tracing::warn!(error = %e, "keeping a sequence in the prompt cache failed");
        }
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
