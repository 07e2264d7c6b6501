//! Batching across generations: one thread owns a model that keeps several sequences, each concurrent generation
//! holds a [`SequenceHandle`] (a `LanguageModel` of its own, with its own KV caches), and the thread runs the new
//! tokens of every generation waiting at that moment in one forward pass.
//!
//! Decoding reads every weight once per pass whatever the number of rows, so on a CPU as on a GPU a pass of four
//! sequences' tokens costs little more than one. On our CPU kernels a part of a batched pass gets exactly the
//! logits a pass of its own gives, so batched generations write what they would have written one at a time.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use candle_core::{Device, Tensor};

use super::constraint::GrammarEngine;
use super::{Model, Speculation};
use crate::llm::prefix_store::{KvSnapshot, PrefixStore};
use crate::llm::{ChatTemplate, GgufTokenizer, LanguageModel, LoadedModel, ModelInfo, SequenceId, SequencePass};
use crate::{Error, Result};

/// How long a pass waits for the sequences of the pass before it to come back with their next tokens. A
/// generation samples its token and checks it against its grammar in well under a millisecond or two; one that
/// does not come back in this time has finished (or is running a tool) and the pass goes on without it.
const GATHER: Duration = Duration::from_millis(4);

/// What a generation asks of the model's thread.
enum Request {
    /// A new sequence; its id comes back.
    Open(Sender<SequenceId>),
    /// New tokens of a sequence, to run in the next pass.
    Forward(Waiting),
    /// Anything else a `LanguageModel` does on one sequence (choose a cache slot, clear, export, import), run at
    /// once between passes.
    Call(SequenceId, ModelCall),
    /// The sequence's generation is over for good: free its caches.
    Close(SequenceId),
}

/// Work for the model's thread on one sequence; it sends its own answer.
type ModelCall = Box<dyn FnOnce(&mut dyn LanguageModel) + Send>;

/// A sequence's tokens waiting for the next pass, and where its logits go.
struct Waiting {
    sequence: SequenceId,
    tokens: Vec<u32>,
    pos: usize,
    logits_from: Option<usize>,
    reply: Sender<Result<Tensor>>,
}

/// Counts of the passes run, to report how full they were.
#[derive(Debug, Default)]
struct Counters {
    passes: AtomicU64,
    parts: AtomicU64,
    rows: AtomicU64,
    pass_us: AtomicU64,
    gather_us: AtomicU64,
}

/// How full the batched passes were.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct PassStats {
    /// Forward passes run.
    pub passes: u64,
    /// Sequence parts over all passes (a pass of three generations' tokens counts three).
    pub parts: u64,
    /// Token rows over all passes.
    pub rows: u64,
    /// Seconds spent in passes.
    pub pass_s: f64,
    /// Seconds spent waiting for the sequences of the pass before (see `GATHER`).
    pub gather_s: f64,
}

impl PassStats {
    /// Mean generations served by a pass.
    pub fn parts_per_pass(&self) -> f64 {
        self.parts as f64 / self.passes.max(1) as f64
    }
}

/// A model served by its own thread to any number of concurrent generations.
pub struct SharedModel {
    requests: Sender<Request>,
    counters: Arc<Counters>,
    tokenizer: Arc<GgufTokenizer>,
    chat_template: Option<ChatTemplate>,
    info: ModelInfo,
    device: Device,
    speculation: Speculation,
    narrow_logits: bool,
    prefix_store: Option<PrefixStore>,
    grammar: Arc<OnceLock<GrammarEngine>>,
    facts: Facts,
}

/// What a handle answers without asking the thread.
#[derive(Debug, Clone, Copy)]
struct Facts {
    n_logits: usize,
    context_length: usize,
    batched_logits: bool,
    exact_batches: bool,
}

impl SharedModel {
    /// Moves `model`'s network to a thread of its own. Fails for architectures that keep one sequence.
    pub fn start(mut model: Model) -> Result<Self> {
        if model.weights.multi_sequence().is_none() {
            return Err(Error::Model(format!(
                "{} ({}) keeps one sequence, so generations cannot share its passes; run one goal at a time \
                 (--parallel 1)",
                model.info.path.display(),
                model.info.architecture
            )));
        }
        let Model { loaded, speculation, narrow_logits, grammar } = model;
        let LoadedModel { weights, tokenizer, chat_template, info, device, prefix_store } = loaded;
        let facts = Facts {
            n_logits: weights.n_logits(),
            context_length: weights.context_length(),
            batched_logits: weights.batched_logits(),
            exact_batches: weights.exact_batches(),
        };
        let (requests, inbox) = mpsc::channel();
        let counters = Arc::new(Counters::default());
        let thread_counters = counters.clone();
        // The thread ends (and frees the network) when the last sender is gone: this and every handle.
        std::thread::Builder::new()
            .name("tandem-batching".into())
            .spawn(move || serve(weights, inbox, &thread_counters))
            .map_err(|e| Error::io("starting the model's batching thread".to_string(), e))?;
        Ok(Self {
            requests,
            counters,
            tokenizer,
            chat_template,
            info,
            device,
            speculation,
            narrow_logits,
            prefix_store,
            grammar,
            facts,
        })
    }

    /// A model of its own for one concurrent generation at a time: the shared network on a new sequence.
    pub fn model(&self) -> Result<Model> {
        let (reply, answer) = mpsc::channel();
        self.requests.send(Request::Open(reply)).map_err(|_| thread_gone())?;
        let sequence = answer.recv().map_err(|_| thread_gone())?;
        let handle = SequenceHandle {
            sequence,
            requests: self.requests.clone(),
            tokens: Vec::new(),
            facts: self.facts,
            device: self.device.clone(),
        };
        Ok(Model {
            loaded: LoadedModel {
                weights: Box::new(handle),
                tokenizer: self.tokenizer.clone(),
                chat_template: self.chat_template.clone(),
                info: self.info.clone(),
                device: self.device.clone(),
                prefix_store: self.prefix_store.clone(),
            },
            speculation: self.speculation,
            narrow_logits: self.narrow_logits,
            grammar: self.grammar.clone(),
        })
    }

    /// How full the passes have been so far.
    pub fn stats(&self) -> PassStats {
        PassStats {
            passes: self.counters.passes.load(Ordering::Relaxed),
            parts: self.counters.parts.load(Ordering::Relaxed),
            rows: self.counters.rows.load(Ordering::Relaxed),
            pass_s: self.counters.pass_us.load(Ordering::Relaxed) as f64 / 1e6,
            gather_s: self.counters.gather_us.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }
}

fn thread_gone() -> Error {
    Error::Internal("the model's batching thread has stopped (see the error logged before this one)".into())
}

/// The model's thread: runs calls as they come and forward requests in batched passes, until every sender is gone.
fn serve(mut model: Box<dyn LanguageModel>, inbox: Receiver<Request>, counters: &Counters) {
    let mut waiting: Vec<Waiting> = Vec::new();
    let mut last_pass: HashSet<SequenceId> = HashSet::new();
    loop {
        if waiting.is_empty() {
            match inbox.recv() {
                Ok(request) => take(request, model.as_mut(), &mut waiting, &mut last_pass),
                Err(_) => return,
            }
            continue;
        }
        // The sequences of the last pass usually come back within a token's sampling: wait for them (briefly),
        // so that the pass serves them all instead of splitting into passes of one.
        let gathering = Instant::now();
        let deadline = gathering + GATHER;
        while !last_pass.iter().all(|s| waiting.iter().any(|w| w.sequence == *s)) {
            match inbox.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(request) => take(request, model.as_mut(), &mut waiting, &mut last_pass),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        while let Ok(request) = inbox.try_recv() {
            take(request, model.as_mut(), &mut waiting, &mut last_pass);
        }
        counters.gather_us.fetch_add(gathering.elapsed().as_micros() as u64, Ordering::Relaxed);
        last_pass = waiting.iter().map(|w| w.sequence).collect();
        run_pass(model.as_mut(), std::mem::take(&mut waiting), counters);
    }
}

/// Files one request: a forward waits for the pass; the rest run now.
fn take(request: Request, model: &mut dyn LanguageModel, waiting: &mut Vec<Waiting>, last: &mut HashSet<SequenceId>) {
    let Some(multi) = model.multi_sequence() else { return };
    match request {
        Request::Open(reply) => {
            let _ = reply.send(multi.open_sequence());
        }
        Request::Forward(forward) => waiting.push(forward),
        Request::Call(sequence, call) => {
            // A sequence that is not open drops the call, and with it the reply channel: the caller sees an error.
            if multi.use_sequence(sequence).is_ok() {
                call(model);
            }
        }
        Request::Close(sequence) => {
            multi.close_sequence(sequence);
            last.remove(&sequence);
        }
    }
}

/// One pass over the waiting sequences; each gets its logits or the error. A part past the context is refused
/// alone, before the pass, so one generation's overflow does not fail the others.
fn run_pass(model: &mut dyn LanguageModel, waiting: Vec<Waiting>, counters: &Counters) {
    let context = model.context_length();
    let (fits, too_long): (Vec<Waiting>, Vec<Waiting>) =
        waiting.into_iter().partition(|w| w.pos + w.tokens.len() <= context);
    for w in too_long {
        let message = format!("{} tokens at position {} pass the context of {context}", w.tokens.len(), w.pos);
        let _ = w.reply.send(Err(candle_core::Error::Msg(message).into()));
    }
    if fits.is_empty() {
        return;
    }
    let Some(multi) = model.multi_sequence() else { return };
    let parts: Vec<SequencePass<'_>> = fits
        .iter()
        .map(|w| SequencePass { sequence: w.sequence, tokens: &w.tokens, pos: w.pos, logits_from: w.logits_from })
        .collect();
    let started = Instant::now();
    let result = multi.forward_sequences(&parts).and_then(|logits| {
        logits.first().map(|first| finish_queued_work(first.device())).transpose()?;
        Ok(logits)
    });
    counters.pass_us.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
    counters.passes.fetch_add(1, Ordering::Relaxed);
    counters.parts.fetch_add(parts.len() as u64, Ordering::Relaxed);
    counters.rows.fetch_add(parts.iter().map(|p| p.tokens.len() as u64).sum(), Ordering::Relaxed);
    match result {
        Ok(logits) => {
            for (w, logits) in fits.into_iter().zip(logits) {
                let _ = w.reply.send(Ok(logits));
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, parts = fits.len(), "a batched forward pass failed");
            let message = e.to_string();
            for w in fits {
                let _ = w.reply.send(Err(candle_core::Error::Msg(message.clone()).into()));
            }
        }
    }
}

/// Waits until this thread's queued device work is done (nothing to wait for on the CPU). On CUDA candle queues
/// each host thread's work on that thread's own default stream, so a tensor made on one thread (logits and KV
/// copies on the model's thread, a restored snapshot on a generation's) must be finished before another reads it.
fn finish_queued_work(device: &Device) -> Result<()> {
    Ok(device.synchronize()?)
}

/// One generation's view of a shared model: its own sequence (KV caches, cached token ids) on the model's thread.
pub struct SequenceHandle {
    sequence: SequenceId,
    requests: Sender<Request>,
    /// The token ids the sequence's active cache holds, kept in step with the thread's.
    tokens: Vec<u32>,
    facts: Facts,
    /// Where the network's tensors live (see [`finish_queued_work`]).
    device: Device,
}

impl SequenceHandle {
    /// Runs `call` on the model's thread with this sequence current, and returns what it returns.
    fn call<T: Send + 'static>(&self, call: impl FnOnce(&mut dyn LanguageModel) -> T + Send + 'static) -> Result<T> {
        finish_queued_work(&self.device)?;
        let (reply, answer) = mpsc::channel();
        let device = self.device.clone();
        let call = Box::new(move |model: &mut dyn LanguageModel| {
            let out = call(model);
            // A failed wait shows again at the next pass; the call's own result goes back as it is.
            let _ = finish_queued_work(&device);
            let _ = reply.send(out);
        });
        self.requests.send(Request::Call(self.sequence, call)).map_err(|_| thread_gone())?;
        answer.recv().map_err(|_| thread_gone())
    }

    /// New tokens through the next batched pass.
    fn pass(&mut self, tokens: &[u32], pos: usize, logits_from: Option<usize>) -> Result<Tensor> {
        let (reply, answer) = mpsc::channel();
        let waiting = Waiting { sequence: self.sequence, tokens: tokens.to_vec(), pos, logits_from, reply };
        self.requests.send(Request::Forward(waiting)).map_err(|_| thread_gone())?;
        match answer.recv().map_err(|_| thread_gone())? {
            Ok(logits) => {
                self.tokens.truncate(pos);
                self.tokens.extend_from_slice(tokens);
                Ok(logits)
            }
            Err(e) => {
                // The thread cleared the sequence's caches.
                self.tokens.clear();
                Err(e)
            }
        }
    }
}

impl LanguageModel for SequenceHandle {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor> {
        self.pass(tokens, pos, None)
    }

    fn forward_from(&mut self, tokens: &[u32], pos: usize, first: usize) -> Result<Tensor> {
        self.pass(tokens, pos, Some(first))
    }

    fn batched_logits(&self) -> bool {
        self.facts.batched_logits
    }

    fn exact_batches(&self) -> bool {
        self.facts.exact_batches
    }

    fn select_cache_for(&mut self, prompt: &[u32]) {
        let prompt = prompt.to_vec();
        // Without an answer the thread is gone and the next pass will say so; assume a cold cache meanwhile.
        self.tokens = self
            .call(move |model| {
                model.select_cache_for(&prompt);
                model.cached_tokens().to_vec()
            })
            .unwrap_or_default();
    }

    fn cached_tokens(&self) -> &[u32] {
        &self.tokens
    }

    fn clear_kv_cache(&mut self) {
        let _ = self.call(|model| model.clear_kv_cache());
        self.tokens.clear();
    }

    fn export_kv(&self, len: usize) -> Result<Option<Vec<(Tensor, Tensor)>>> {
        self.call(move |model| model.export_kv(len))?
    }

    fn import_kv(&mut self, snapshot: &KvSnapshot) -> Result<bool> {
        let copy = snapshot.clone();
        let imported = self.call(move |model| model.import_kv(&copy))??;
        if imported {
            self.tokens = snapshot.tokens.clone();
        }
        Ok(imported)
    }

    fn n_logits(&self) -> usize {
        self.facts.n_logits
    }

    fn context_length(&self) -> usize {
        self.facts.context_length
    }
}

impl Drop for SequenceHandle {
    fn drop(&mut self) {
        let _ = self.requests.send(Request::Close(self.sequence));
    }
}
