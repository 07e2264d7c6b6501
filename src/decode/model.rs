//! A model ready to generate: the loaded network and tokenizer (`llm::LoadedModel`) with the grammar engine built
//! for its tokenizer and the drafting mode its generations use.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use candle_core::Device;

use super::constraint::GrammarEngine;
use super::Speculation;
use crate::llm::prefix_store::PrefixStore;
use crate::llm::{ChatTemplate, GgufTokenizer, LanguageModel, LoadOptions, LoadedModel, ModelInfo};
use crate::Result;

/// A ready model: weights, tokenizer, optional chat template, device, and what generations share on top.
pub struct Model {
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
    /// Drafting for speculative decoding in this model's generations (`Speculation::Off` to compare).
    pub speculation: Speculation,
    /// Prompt-prefix KV snapshots on disk, when the load options asked for them.
    pub prefix_store: Option<PrefixStore>,
    /// The grammar engine for this tokenizer, built on first use (its token table takes ~0.4 s) and shared
    /// by every constrained generation on this model.
    pub(crate) grammar: Arc<OnceLock<GrammarEngine>>,
}

impl Model {
    /// Loads a GGUF file (see [`LoadedModel::load`]) and drafts by prompt lookup where the model's batched passes
    /// are exact and not elsewhere.
    pub fn load(path: &Path, device: &Device, options: &LoadOptions) -> Result<Self> {
        Self::load_with(path, device, options, None)
    }

    /// Wraps a loaded model; `speculation` `None` drafts by prompt lookup where batched passes are exact.
    pub fn from_loaded(loaded: LoadedModel, speculation: Option<Speculation>) -> Self {
        let LoadedModel { weights, tokenizer, chat_template, info, device, prefix_store } = loaded;
        let speculation = speculation.unwrap_or(if weights.exact_batches() {
            Speculation::prompt_lookup()
        } else {
            Speculation::Off
        });
        Self {
            weights,
            tokenizer,
            chat_template,
            info,
            device,
            speculation,
            prefix_store,
            grammar: Arc::new(OnceLock::new()),
        }
    }

    /// The same as `load`, with drafting as asked (`None`: where exact).
    pub fn load_with(
        path: &Path,
        device: &Device,
        options: &LoadOptions,
        speculation: Option<Speculation>,
    ) -> Result<Self> {
        Ok(Self::from_loaded(LoadedModel::load(path, device, options)?, speculation))
    }

    /// The grammar engine for this model's tokenizer and logits width, built once.
    pub fn grammar_engine(&self) -> Result<GrammarEngine> {
        if let Some(engine) = self.grammar.get() {
            return Ok(engine.clone());
        }
        let engine = GrammarEngine::new(self.tokenizer.clone(), self.weights.n_logits())?;
        Ok(self.grammar.get_or_init(|| engine).clone())
    }
}
