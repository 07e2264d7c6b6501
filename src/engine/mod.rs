//! The engine: where models are assembled, once per process, from the settings. It applies the compute settings
//! (threads, device), keeps the load options (prefix store, tensor types) and the drafting mode, resolves models
//! through the store and loads them, one at a time (`load`) or as a lazily loaded planner–executor pair that
//! batches of runs can share (`models`). Every command that loads a model goes through here: a new device or a
//! new way of loading is added in this one place (a new model architecture is added in `llm`).

pub mod models;

use std::path::PathBuf;

use candle_core::Device;

use crate::decode::constraint::ConstraintSpec;
use crate::decode::{Model, Speculation};
use crate::llm::{select_device, LoadOptions};
use crate::progress::Reporter;
use crate::settings::{Compute, Drafting, RunnerSettings};
use crate::store::ModelStore;
use crate::Result;
pub use models::{LazyModels, ModelLoad, SharedModels};

/// Compute, caches and drafting, built once from the settings; every model a command loads comes from here.
#[derive(Clone)]
pub struct Engine {
    compute: Compute,
    device: Device,
    options: LoadOptions,
    speculation: Option<Speculation>,
}

impl Engine {
    /// Applies the compute settings and picks the device. The thread count is applied here and nowhere else
    /// (the global pool is built once, before the first tensor operation). Drafting as the settings ask;
    /// prefix store off and tensor types widened where our kernels want them, until set otherwise.
    pub fn new(compute: Compute, drafting: Drafting) -> Result<Self> {
        crate::llm::device::set_threads(compute.threads);
        let device = select_device(compute.device)?;
        Ok(Self { compute, device, options: LoadOptions::default(), speculation: Speculation::from_setting(drafting) })
    }

    /// The engine a run's settings ask for: their compute, drafting and prefix store.
    pub fn for_runner(runner: &RunnerSettings) -> Result<Self> {
        Ok(Self::new(runner.compute, runner.drafting)?.with_prefix_store(runner.prefix_store))
    }

    /// Keeps prompt-prefix KV snapshots in the model cache's prefix directory when `on`, so a new process starts
    /// with a prompt's opening already computed.
    pub fn with_prefix_store(self, on: bool) -> Self {
        self.with_prefix_dir(on.then(crate::store::default_prefix_dir))
    }

    /// Keeps prompt-prefix KV snapshots under `dir` (`None`: no prefix store).
    pub fn with_prefix_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.options.prefix_store = dir;
        self
    }

    /// Keeps prompt-prefix snapshots in this process's memory only, never on disk, when `on` (a server's clients'
    /// prompts), shared by every sequence of the models loaded here.
    pub fn with_prefixes_in_memory(mut self, on: bool) -> Self {
        self.options.prefix_store_in_memory = on;
        self
    }

    /// Keeps up to `bytes` of earlier prompts' keys and values in memory, so a prompt sent again is read back
    /// rather than computed (0: off; see `llm::prompt_cache`).
    pub fn with_prompt_cache(mut self, bytes: usize) -> Self {
        self.options.prompt_cache_bytes = bytes;
        self
    }

    /// Keeps tensor types as stored instead of widening them for our kernels (to compare against candle's).
    pub fn keeping_tensor_types(mut self, keep: bool) -> Self {
        self.options.keep_tensor_types = keep;
        self
    }

    /// The compute settings applied.
    pub fn compute(&self) -> Compute {
        self.compute
    }

    /// The device models load onto.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The load options every model gets.
    pub fn load_options(&self) -> &LoadOptions {
        &self.options
    }

    /// The drafting mode asked for (`None`: where exact).
    pub fn speculation(&self) -> Option<Speculation> {
        self.speculation
    }

    /// The file of a model id or a `.gguf` path, pulled into the store if needed.
    pub fn resolve(&self, model: &str, reporter: &dyn Reporter) -> Result<PathBuf> {
        Ok(ModelStore::open()?.resolve(model, reporter)?.path)
    }

    /// Resolves and loads one model; `grammars` compile beside the load (see `Model::load_warm`). The record
    /// says what was loaded, for logs.
    pub fn load(
        &self,
        model: &str,
        role: &str,
        grammars: &[ConstraintSpec],
        reporter: &dyn Reporter,
    ) -> Result<(Model, ModelLoad)> {
        let resolved = ModelStore::open()?.resolve(model, reporter)?;
        reporter.message(&format!("loading the {role} ({model}) …"));
        let loaded = Model::load_warm(&resolved.path, &self.device, &self.options, self.speculation, grammars)?;
        let record = ModelLoad {
            role: role.to_string(),
            id: model.to_string(),
            path: resolved.path,
            sha256: resolved.sha256,
            ms: loaded.info.load_time.as_millis() as u64,
        };
        Ok((loaded, record))
    }

    /// A planner–executor pair by id or path, loaded on first use (one model when both name the same).
    pub fn models<'r>(&self, planner: &str, executor: &str, reporter: &'r dyn Reporter) -> LazyModels<'r> {
        LazyModels::new(self.clone(), planner, executor, reporter)
    }
}
