//! A model whose generation can be stopped from outside: its next forward pass fails once the flag is set. The
//! generation loop has no cancel hook of its own; a client that went away or a stop sequence that appeared sets
//! the flag, and the loop ends at its next token instead of running to its token budget.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use candle_core::Tensor;

use crate::decode::Model;
use crate::llm::prefix_store::KvSnapshot;
use crate::llm::LanguageModel;
use crate::Result;

/// Wraps `model`'s network so that its passes fail while `halt` is set.
pub fn make_haltable(model: &mut Model, halt: Arc<AtomicBool>) {
    let inner = std::mem::replace(&mut model.loaded.weights, Box::new(Detached));
    model.loaded.weights = Box::new(Haltable { inner, halt });
}

/// The message of the error a halted pass returns.
const HALTED: &str = "generation halted";

struct Haltable {
    inner: Box<dyn LanguageModel>,
    halt: Arc<AtomicBool>,
}

impl Haltable {
    fn check(&self) -> Result<()> {
        if self.halt.load(Ordering::Relaxed) {
            return Err(candle_core::Error::Msg(HALTED.into()).into());
        }
        Ok(())
    }
}

impl LanguageModel for Haltable {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor> {
        self.check()?;
        self.inner.forward(tokens, pos)
    }
    fn forward_from(&mut self, tokens: &[u32], pos: usize, first: usize) -> Result<Tensor> {
        self.check()?;
        self.inner.forward_from(tokens, pos, first)
    }
    fn forward_rows(&mut self, tokens: &[u32], pos: usize, rows: &[u32]) -> Result<Vec<f32>> {
        self.check()?;
        self.inner.forward_rows(tokens, pos, rows)
    }
    fn narrows_logits(&self) -> bool {
        self.inner.narrows_logits()
    }
    fn batched_logits(&self) -> bool {
        self.inner.batched_logits()
    }
    fn exact_batches(&self) -> bool {
        self.inner.exact_batches()
    }
    fn select_cache_for(&mut self, prompt: &[u32]) {
        self.inner.select_cache_for(prompt)
    }
    fn cached_tokens(&self) -> &[u32] {
        self.inner.cached_tokens()
    }
    fn clear_kv_cache(&mut self) {
        self.inner.clear_kv_cache()
    }
    fn export_kv(&self, len: usize) -> Result<Option<Vec<(Tensor, Tensor)>>> {
        self.inner.export_kv(len)
    }
    fn import_kv(&mut self, snapshot: &KvSnapshot) -> Result<bool> {
        self.inner.import_kv(snapshot)
    }
    fn n_logits(&self) -> usize {
        self.inner.n_logits()
    }
    fn context_length(&self) -> usize {
        self.inner.context_length()
    }
}

/// Holds a network's place for the instant it is being wrapped.
struct Detached;

impl LanguageModel for Detached {
    fn forward(&mut self, _tokens: &[u32], _pos: usize) -> Result<Tensor> {
        Err(crate::Error::Internal("a detached model was run".into()))
    }
    fn cached_tokens(&self) -> &[u32] {
        &[]
    }
    fn clear_kv_cache(&mut self) {}
    fn n_logits(&self) -> usize {
        0
    }
    fn context_length(&self) -> usize {
        0
    }
}
