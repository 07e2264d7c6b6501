//! A model ready to generate: the loaded network and tokenizer (`llm::LoadedModel`) with the grammar engine built
//! for its tokenizer and the drafting mode its generations use.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use candle_core::Device;

use super::constraint::GrammarEngine;
use super::Speculation;
use crate::llm::{LoadOptions, LoadedModel};
use crate::Result;

/// A ready model: the loaded network, tokenizer, chat template and device (`llm::LoadedModel`, reached through
/// `Deref`: `model.weights`, `model.tokenizer`, …) and what generations share on top.
pub struct Model {
    /// What the loader built.
    pub loaded: LoadedModel,
    /// Drafting for speculative decoding in this model's generations (`Speculation::Off` to compare).
    pub speculation: Speculation,
    /// The grammar engine for this tokenizer, built on first use (its token table takes ~0.4 s) and shared
    /// by every constrained generation on this model.
    pub(crate) grammar: Arc<OnceLock<GrammarEngine>>,
}

impl std::ops::Deref for Model {
    type Target = LoadedModel;
    fn deref(&self) -> &LoadedModel {
        &self.loaded
    }
}

impl std::ops::DerefMut for Model {
    fn deref_mut(&mut self) -> &mut LoadedModel {
        &mut self.loaded
    }
}

impl Model {
    /// Loads a GGUF file (see [`LoadedModel::load`]) and drafts by prompt lookup where the model's batched passes
    /// are exact and not elsewhere.
    pub fn load(path: &Path, device: &Device, options: &LoadOptions) -> Result<Self> {
        Self::load_with(path, device, options, None)
    }

    /// Wraps a loaded model; `speculation` `None` drafts by prompt lookup where batched passes are exact.
    pub fn from_loaded(loaded: LoadedModel, speculation: Option<Speculation>) -> Self {
        let speculation = speculation.unwrap_or(if loaded.weights.exact_batches() {
            Speculation::prompt_lookup()
        } else {
            Speculation::Off
        });
        Self { loaded, speculation, grammar: Arc::new(OnceLock::new()) }
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
