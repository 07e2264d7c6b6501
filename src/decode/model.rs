//! A model ready to generate: the loaded network and tokenizer (`llm::LoadedModel`) with the grammar engine built
//! for its tokenizer and the drafting mode its generations use.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use candle_core::Device;

use super::constraint::{ConstraintSpec, GrammarEngine};
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
    /// Whether a greedy step under a grammar that allows few tokens computes only their logits (the same choice,
    /// less of the output projection read); on by default, off to compare (`tandem bench drafts`).
    pub narrow_logits: bool,
    /// The grammar engine for this tokenizer, built on first use (its token table walks the whole vocabulary;
    /// docs/performance.md, "Grammar cost") and shared by every constrained generation on this model.
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
        Self { loaded, speculation, narrow_logits: true, grammar: Arc::new(OnceLock::new()) }
    }

    /// The same as `load`, with drafting as asked (`None`: where exact), for generations under a grammar: the
    /// grammar engine's token table (a walk over the whole vocabulary on one core) is built on a thread of its own
    /// while the weights load, so the first constrained generation does not wait for it.
    pub fn load_with(
        path: &Path,
        device: &Device,
        options: &LoadOptions,
        speculation: Option<Speculation>,
    ) -> Result<Self> {
        Self::load_warm(path, device, options, speculation, &[])
    }

    /// [`Model::load_with`], also compiling `grammars` into the engine's cache beside the weights' load: a caller
    /// that knows its first grammar (the planner's, from the tool catalogue) gets it ready-made. A grammar that
    /// does not compile is left for its first use to report.
    pub fn load_warm(
        path: &Path,
        device: &Device,
        options: &LoadOptions,
        speculation: Option<Speculation>,
        grammars: &[ConstraintSpec],
    ) -> Result<Self> {
        let (loaded, (engine, width)) = LoadedModel::load_beside(path, device, options, |tokenizer, n_logits| {
            let engine = GrammarEngine::new(tokenizer.clone(), n_logits).ok();
            if let Some(engine) = &engine {
                for spec in grammars {
                    let _ = engine.matcher(spec);
                }
            }
            (engine, n_logits)
        })?;
        let model = Self::from_loaded(loaded, speculation);
        // An engine built beside is kept if it has the network's logits width (both read the embedding table's);
        // one that failed is built again on first use, and that use reports the error.
        if let Some(engine) = engine.filter(|_| width == model.weights.n_logits()) {
            let _ = model.grammar.set(engine);
        }
        Ok(model)
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
