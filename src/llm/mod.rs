//! Language models: GGUF loading, architecture dispatch, tokenizer and chat template, behind one `LanguageModel` trait.

pub mod chat;
pub mod decoder;
pub mod device;
pub mod gguf;
pub mod gguf_types;
pub mod kv_cache;
#[cfg(all(test, feature = "cuda"))]
mod kv_cache_gpu_tests;
pub mod load_error;
pub mod mapped_rows;
pub mod packed_strings;
pub mod prefix_store;
pub mod prompt_cache;
pub mod tokenizer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use candle_core::{Device, Tensor};

use crate::Result;
pub use chat::{ChatMessage, ChatTemplate};
pub use device::select_device;
pub use gguf::GgufFile;
pub use load_error::LoadError;
pub use tokenizer::GgufTokenizer;

/// Architectures this build can run, by their `general.architecture` value.
pub fn supported_architectures() -> impl Iterator<Item = &'static str> {
    decoder::FAMILIES.iter().map(|f| f.architecture)
}

/// A decoder-only transformer with its own KV cache.
///
/// Positions are absolute: `forward(tokens, pos)` appends `tokens` at `pos..pos+len` to the cache
/// (dropping whatever the cache held past `pos`) and returns the logits of the last of them.
pub trait LanguageModel: Send {
    /// Runs `tokens` starting at absolute position `pos`; returns the last position's logits, shape `[n_logits]`.
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor>;
    /// Like `forward`, but returns the logits of every position of `tokens`, shape `[tokens.len(), n_logits]`:
    /// what speculative decoding needs to check several drafted tokens in one pass.
    fn forward_all(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor> {
        self.forward_from(tokens, pos, 0)
    }
    /// Like `forward_all`, but returns only the logits of positions `first..tokens.len()`, shape
    /// `[tokens.len() - first, n_logits]` (a `first` past the last position gives the last one's): a drafted pass
    /// opens with tokens the grammar forced, whose logits nobody reads, and each row left out of the (wide) output
    /// projection is time saved. The default runs the tokens one pass each (correct, not faster); see
    /// `batched_logits`.
    fn forward_from(&mut self, tokens: &[u32], pos: usize, first: usize) -> Result<Tensor> {
        let rows =
            tokens.iter().enumerate().map(|(i, &token)| self.forward(&[token], pos + i)).collect::<Result<Vec<_>>>()?;
        // As a batched pass does, at least the last position's logits.
        Ok(Tensor::stack(&rows[first.min(rows.len().saturating_sub(1))..], 0)?)
    }
    /// Like `forward`, but only the logits of `rows` (ascending token ids below `n_logits`) are computed; the
    /// others are −inf. A decoding step whose grammar allows a few tokens (a tool's name, a key, a step id) needs
    /// no more, and the output projection is the widest matrix of a small model (a fifth of the 1.5B's bytes
    /// read per token). The default computes them all and masks (correct, not faster).
    fn forward_rows(&mut self, tokens: &[u32], pos: usize, rows: &[u32]) -> Result<Vec<f32>> {
        let all = self.forward(tokens, pos)?.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?;
        let mut out = vec![f32::NEG_INFINITY; all.len()];
        for &row in rows {
            if let (Some(o), Some(&logit)) = (out.get_mut(row as usize), all.get(row as usize)) {
                *o = logit;
            }
        }
        Ok(out)
    }
    /// Whether `forward_rows` computes fewer logits than `forward` (our CPU kernels): where it does not, narrowing a
    /// step would only add the grammar's mask to it (a GPU's pass is fast enough for that to show).
    fn narrows_logits(&self) -> bool {
        false
    }
    /// Whether `forward_all` gets every position's logits from one batched pass (so drafts are worth checking).
    fn batched_logits(&self) -> bool {
        false
    }
    /// Whether a batched pass gives every position exactly the logits one-token passes give, so that drafted
    /// decoding writes plain decoding's output bit for bit (our CPU kernels and attention do; candle's kernels
    /// round by batch shape).
    fn exact_batches(&self) -> bool {
        false
    }
    /// Before a new prompt: makes active the cached sequence that serves it best, for models that keep several
    /// (so one model serving two prompt families keeps both warm). The default keeps the one cache.
    fn select_cache_for(&mut self, _prompt: &[u32]) {}
    /// The token ids whose positions the active cache holds (what the last passes were given, in order).
    fn cached_tokens(&self) -> &[u32];
    /// Forgets every cached position (of every cached sequence).
    fn clear_kv_cache(&mut self);
    /// Copies of the first `len` cached positions' keys and values, layer by layer (for the on-disk prefix
    /// store); None where the model does not support it or fewer positions are cached.
    fn export_kv(&self, _len: usize) -> Result<Option<Vec<(Tensor, Tensor)>>> {
        Ok(None)
    }
    /// Replaces the cache with a snapshot that `export_kv` made (of the same model); false where the model does
    /// not support it.
    fn import_kv(&mut self, _snapshot: &prefix_store::KvSnapshot) -> Result<bool> {
        Ok(false)
    }
    /// Several independent sequences run in one pass (batching across generations, see `batching`); None where
    /// the model keeps one sequence.
    fn multi_sequence(&mut self) -> Option<&mut dyn MultiSequence> {
        None
    }
    /// Width of the logits (may exceed the tokenizer's vocabulary, as Qwen2's does).
    fn n_logits(&self) -> usize;
    /// The longest sequence the model was trained for.
    fn context_length(&self) -> usize;
}

/// Names one of the independent sequences a [`MultiSequence`] model keeps.
pub type SequenceId = usize;

/// One sequence's share of a pass over several.
#[derive(Debug, Clone, Copy)]
pub struct SequencePass<'a> {
    /// Whose caches the tokens extend.
    pub sequence: SequenceId,
    /// The new tokens.
    pub tokens: &'a [u32],
    /// The absolute position of the first of them (the sequence's cache is cut back to it).
    pub pos: usize,
    /// Which positions' logits to return: `None`, the last one's (`forward`); `Some(first)`, those of positions
    /// `first..` of `tokens` (`forward_from`; `Some(0)` is `forward_all`).
    pub logits_from: Option<usize>,
}

/// A model that keeps several independent sequences, each with its own KV caches, and runs the new tokens of
/// several in one pass: each weight matrix is read once for all of them, which is what decoding is bound by.
pub trait MultiSequence {
    /// A new sequence with empty caches.
    fn open_sequence(&mut self) -> SequenceId;
    /// Frees a sequence's caches (the model's own sequence stays).
    fn close_sequence(&mut self, sequence: SequenceId);
    /// Makes `sequence` the one [`LanguageModel`]'s methods act on.
    fn use_sequence(&mut self, sequence: SequenceId) -> Result<()>;
    /// The sequence [`LanguageModel`]'s methods act on now.
    fn current_sequence(&self) -> SequenceId;
    /// One pass over every part (one part per sequence at most); each part's logits as `forward` (or, with
    /// `logits_from`, `forward_from`) on its sequence alone would give them.
    fn forward_sequences(&mut self, parts: &[SequencePass<'_>]) -> Result<Vec<Tensor>>;
}

/// Options for loading a model.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Keep tensor types as stored instead of widening Q5_0 (to int8 for our kernel, Q8_0 for candle's).
    pub keep_tensor_types: bool,
    /// Stack the query/key/value and the gate/up matmuls into one each where types allow; `None` decides by
    /// device (on a GPU yes, on the CPU no: see `qwen2::StackedLinear`).
    pub stack_projections: Option<bool>,
    /// Keep prompt-prefix KV snapshots under this directory, so a new process starts warm (see `prefix_store`).
    pub prefix_store: Option<PathBuf>,
    /// Keep the prefix store's snapshots in memory only: nothing is read from or written to its directory (see
    /// `prefix_store::PrefixStore::in_memory`).
    pub prefix_store_in_memory: bool,
    /// Bytes of earlier sequences' keys and values to keep in memory for prompts sent again (0: none; see
    /// `prompt_cache`).
    pub prompt_cache_bytes: usize,
}

/// What is known about a loaded model, for logs, the audit trail and benchmarks.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    /// The GGUF file.
    pub path: PathBuf,
    /// `general.architecture`.
    pub architecture: String,
    /// `general.name`, when present.
    pub name: Option<String>,
    /// File size in bytes.
    pub file_size: u64,
    /// Wall time from opening the file to a ready model.
    pub load_time: Duration,
    /// Tensors converted to a faster type at load, e.g. `Q5_0→int8 (exact, tandem kernel): 132 tensors`.
    pub conversions: Vec<String>,
}

/// A loaded model: weights, tokenizer, optional chat template, device. Decoding wraps it (`decode::Model`) with
/// what generations need on top: the grammar engine and the drafting mode.
pub struct LoadedModel {
    /// The network.
    pub weights: Box<dyn LanguageModel>,
    /// Shared: grammar engines are built from it.
    pub tokenizer: Arc<GgufTokenizer>,
    /// From `tokenizer.chat_template` (or a built-in one for known architectures).
    pub chat_template: Option<ChatTemplate>,
    /// Facts about the file and the load.
    pub info: ModelInfo,
    /// Where the tensors live.
    pub device: Device,
    /// Prompt-prefix KV snapshots on disk, when the load options asked for them.
    pub prefix_store: Option<prefix_store::PrefixStore>,
}

impl LoadedModel {
    /// The model's tool-call format (its template's, told when the template was compiled at load; Hermes without
    /// one) with its markers looked up in this vocabulary.
    pub fn call_syntax(&self) -> chat::CallSyntax {
        let format = self.chat_template.as_ref().map_or(chat::CallFormat::Hermes, ChatTemplate::call_format);
        chat::CallSyntax::new(format, &self.tokenizer)
    }

    /// Loads a GGUF file: memory-maps it, checks it, dispatches on `general.architecture`.
    pub fn load(path: &Path, device: &Device, options: &LoadOptions) -> Result<Self> {
        Ok(Self::load_beside(path, device, options, |_, _| ())?.0)
    }

    /// [`LoadedModel::load`], running `beside` on a thread of its own once the tokenizer is built, while the
    /// weights load: it gets the tokenizer and the number of logits the file's embedding table gives (0 if it has
    /// none), and what it returns comes back with the model. The tokenizer is built there too: reading a vocabulary
    /// of 150,000 tokens is single-threaded work that would otherwise keep the weights waiting.
    pub fn load_beside<T: Send>(
        path: &Path,
        device: &Device,
        options: &LoadOptions,
        beside: impl FnOnce(&Arc<GgufTokenizer>, usize) -> T + Send,
    ) -> Result<(Self, T)> {
        let started = Instant::now();
        let mut file = GgufFile::open(path)?;
        let architecture = file.architecture()?.to_string();
        let chat_template = ChatTemplate::from_gguf(&file.content.metadata, &architecture)?;
        // A malformed table without dimensions gives 0 here; the weights' load reports it.
        let n_logits =
            file.content.tensor_infos.get("token_embd.weight").and_then(|info| info.shape.dims().first().copied());
        let n_logits = n_logits.unwrap_or(0);
        let mut conversions = Vec::new();
        let (weights, side) = std::thread::scope(|scope| {
            let metadata = &file.content.metadata;
            let side = scope.spawn(move || -> Result<_> {
                let tokenizer = Arc::new(GgufTokenizer::from_gguf(metadata)?);
                let extra = beside(&tokenizer, n_logits);
                Ok((tokenizer, extra))
            });
            let weights = load_weights(&file, path, &architecture, device, options, &mut conversions);
            (weights, side.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        });
        // A tokenizer that cannot be read says so before anything the weights found, as when it was read first.
        let (tokenizer, extra) = side?;
        let weights = weights?;
        file.forget_tokenizer_arrays();
        let info = ModelInfo {
            path: path.to_path_buf(),
            name: file.string("general.name").ok().map(str::to_string),
            architecture,
            file_size: file.file_size(),
            load_time: started.elapsed(),
            conversions,
        };
        // The file's header and the conversions' scratch are freed now; glibc would keep their pages (16 MiB for
        // the 0.5B) resident.
        drop(file);
        crate::memory::release_freed();
        tracing::info!(path = %path.display(), load_ms = info.load_time.as_millis() as u64, "model loaded");
        let loaded = Self {
            weights,
            tokenizer,
            chat_template,
            info,
            device: device.clone(),
            prefix_store: match &options.prefix_store {
                Some(root) if options.prefix_store_in_memory => {
                    Some(prefix_store::PrefixStore::new(root, path, device)?.in_memory())
                }
                Some(root) => Some(prefix_store::PrefixStore::new(root, path, device)?),
                None => None,
            },
        };
        Ok((loaded, extra))
    }
}

/// The network of a GGUF file, by its architecture.
fn load_weights(
    file: &GgufFile,
    path: &Path,
    architecture: &str,
    device: &Device,
    options: &LoadOptions,
    conversions: &mut Vec<String>,
) -> Result<Box<dyn LanguageModel>> {
    match decoder::family(architecture) {
        Some(family) => Ok(Box::new(decoder::Decoder::load(file, family, device, options, conversions)?)),
        None => Err(LoadError::UnsupportedArchitecture {
            path: path.to_path_buf(),
            architecture: architecture.to_string(),
            supported: supported_architectures().collect::<Vec<_>>().join(", "),
        }
        .into()),
    }
}
