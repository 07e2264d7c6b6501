//! A model whose generation can be stopped from outside: its next forward pass fails once the slot's halt flag or
//! the current job's cancel flag is set. The generation loop has no cancel hook of its own; a stop sequence that
//! appeared sets the halt flag, a client that went away sets its job's cancel flag, and the loop ends at its next
//! pass instead of running to its token budget. A long prompt is run in chunks, each a pass, so a client that
//! leaves while its prompt is prefilled stops the prefill at the next chunk, not at the first token.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use candle_core::Tensor;

use crate::decode::Model;
use crate::llm::prefix_store::KvSnapshot;
use crate::llm::LanguageModel;
use crate::Result;

/// What stops a slot's passes: the slot's own halt flag, and the cancel flag of the job it runs now.
pub struct Stops {
    /// Set by the slot (a stop sequence, the end of a shutdown's grace period, a run's stop).
    halt: Arc<AtomicBool>,
    /// The running job's cancel flag (set when its client goes away); `None` between jobs.
    job: Mutex<Option<Arc<AtomicBool>>>,
    /// Tokens run through the model (prompt chunks and answer tokens), shared with the server's counters.
    evaluated: Arc<AtomicU64>,
}

impl Stops {
    /// The slot's `halt` flag; passes count their tokens into `evaluated`.
    pub fn new(halt: Arc<AtomicBool>, evaluated: Arc<AtomicU64>) -> Stops {
        Stops { halt, job: Mutex::new(None), evaluated }
    }

    /// The job the slot runs now (its cancel flag), or none.
    pub fn watch(&self, cancel: Option<Arc<AtomicBool>>) {
        *self.job.lock().unwrap_or_else(|p| p.into_inner()) = cancel;
    }

    fn stopped(&self) -> bool {
        self.halt.load(Ordering::Relaxed)
            || self.job.lock().unwrap_or_else(|p| p.into_inner()).as_ref().is_some_and(|c| c.load(Ordering::Relaxed))
    }
}

/// Wraps `model`'s network so that its passes fail once `stops` says so.
pub fn make_haltable(model: &mut Model, stops: Arc<Stops>) {
    let inner = std::mem::replace(&mut model.loaded.weights, Box::new(Detached));
    model.loaded.weights = Box::new(Haltable { inner, stops });
}

/// The message of the error a halted pass returns.
const HALTED: &str = "generation halted";

/// Most prompt tokens run in one pass: a longer prompt goes in chunks, and a cancel is seen between them. 512 is
/// llama.cpp's default physical batch (`-ub`), and large enough that a chunk keeps the kernels' rows full.
pub const PREFILL_CHUNK: usize = 512;

struct Haltable {
    inner: Box<dyn LanguageModel>,
    stops: Arc<Stops>,
}

impl Haltable {
    fn check(&self) -> Result<()> {
        if self.stops.stopped() {
            return Err(candle_core::Error::Msg(HALTED.into()).into());
        }
        Ok(())
    }

    fn ran(&self, tokens: usize) {
        self.stops.evaluated.fetch_add(tokens as u64, Ordering::Relaxed);
    }
}

impl LanguageModel for Haltable {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor> {
        // A prompt: every chunk but the last fills the cache; the last one's logits are the answer's start.
        let mut start = 0;
        while tokens.len() - start > PREFILL_CHUNK {
            self.check()?;
            self.inner.forward(&tokens[start..start + PREFILL_CHUNK], pos + start)?;
            self.ran(PREFILL_CHUNK);
            start += PREFILL_CHUNK;
        }
        self.check()?;
        let logits = self.inner.forward(&tokens[start..], pos + start)?;
        self.ran(tokens.len() - start);
        Ok(logits)
    }
    fn forward_from(&mut self, tokens: &[u32], pos: usize, first: usize) -> Result<Tensor> {
        self.check()?;
        let logits = self.inner.forward_from(tokens, pos, first)?;
        self.ran(tokens.len());
        Ok(logits)
    }
    fn forward_rows(&mut self, tokens: &[u32], pos: usize, rows: &[u32]) -> Result<Vec<f32>> {
        self.check()?;
        let logits = self.inner.forward_rows(tokens, pos, rows)?;
        self.ran(tokens.len());
        Ok(logits)
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
