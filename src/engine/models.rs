//! A planner–executor pair loaded on first use: a plan given on the command line with only tool steps loads no
//! model at all, and a pair whose planner and executor are the same model loads it once. A loaded pair can be
//! shared by concurrent runs, their forward passes batched together.

use std::path::PathBuf;

use super::Engine;
use crate::decode::batching::{PassStats, SharedModel};
use crate::decode::constraint::ConstraintSpec;
use crate::decode::Model;
use crate::progress::Reporter;
use crate::Result;

/// What one load brought in, for a run's log.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelLoad {
    /// `planner` or `executor` (or `planner+executor` when one model plays both).
    pub role: String,
    /// Manifest id, or the path given.
    pub id: String,
    /// The file.
    pub path: PathBuf,
    /// Verified SHA-256 (manifest models).
    pub sha256: Option<String>,
    /// Load time; 0 when an earlier run in this process loaded it.
    pub ms: u64,
}

/// Models resolved through the store (pulled if needed) and loaded lazily.
pub struct LazyModels<'r> {
    engine: Engine,
    planner_id: String,
    executor_id: String,
    reporter: &'r dyn Reporter,
    planner: Option<Model>,
    executor: Option<Model>,
    /// Loads not yet taken by [`LazyModels::take_loads`].
    fresh: Vec<ModelLoad>,
    /// Every load so far, for [`LazyModels::begin_run`].
    loaded: Vec<ModelLoad>,
}

impl<'r> LazyModels<'r> {
    /// Models by id or path on `engine`; nothing is loaded yet.
    pub fn new(engine: Engine, planner_id: &str, executor_id: &str, reporter: &'r dyn Reporter) -> Self {
        Self {
            engine,
            planner_id: planner_id.to_string(),
            executor_id: executor_id.to_string(),
            reporter,
            planner: None,
            executor: None,
            fresh: Vec::new(),
            loaded: Vec::new(),
        }
    }

    /// Starts another run on the same models (`tandem batch`, benchmarks): the next [`LazyModels::take_loads`]
    /// also returns each model an earlier run already loaded, with `ms: 0` (nothing was loaded this time), so
    /// every run's log names its models and SHA-256.
    pub fn begin_run(&mut self) {
        self.fresh = self.loaded.iter().map(|load| ModelLoad { ms: 0, ..load.clone() }).collect();
    }

    /// Loads since the last call.
    pub fn take_loads(&mut self) -> Vec<ModelLoad> {
        std::mem::take(&mut self.fresh)
    }

    /// Whether one model plays both roles.
    pub fn shared(&self) -> bool {
        self.planner_id == self.executor_id
    }

    /// Loads both models now and shares each among `runs` concurrent runs: a source per run, whose models are the
    /// same networks on sequences of their own, their forward passes batched together (see `decode::batching`).
    /// The returned [`SharedModels`] tell how full the passes were.
    pub fn share(mut self, runs: usize) -> Result<(Vec<LazyModels<'r>>, SharedModels)> {
        self.planner()?;
        self.executor()?;
        let planner = SharedModel::start(self.planner.take().expect("loaded above"))?;
        let executor = self.executor.take().map(SharedModel::start).transpose()?;
        let mut sources = Vec::with_capacity(runs);
        for _ in 0..runs {
            sources.push(LazyModels {
                engine: self.engine.clone(),
                planner_id: self.planner_id.clone(),
                executor_id: self.executor_id.clone(),
                reporter: self.reporter,
                planner: Some(planner.model()?),
                executor: executor.as_ref().map(SharedModel::model).transpose()?,
                fresh: Vec::new(),
                loaded: self.loaded.clone(),
            });
        }
        Ok((sources, SharedModels { planner, executor }))
    }

    /// The planner model, loaded now if it is not yet; if it loads now, `grammars` (the plan grammar) compile
    /// beside its load, so the first plan does not wait for them.
    pub fn planner_for(&mut self, grammars: &[ConstraintSpec]) -> Result<&mut Model> {
        if self.planner.is_none() {
            let role = if self.shared() { "planner+executor" } else { "planner" };
            let id = self.planner_id.clone();
            self.planner = Some(self.load(&id, role, grammars)?);
        }
        Ok(self.planner.as_mut().expect("loaded above"))
    }

    /// The planner model, loaded now if it is not yet.
    pub fn planner(&mut self) -> Result<&mut Model> {
        self.planner_for(&[])
    }

    /// The executor model (the planner's when one model plays both), loaded now if it is not yet.
    pub fn executor(&mut self) -> Result<&mut Model> {
        if self.shared() {
            return self.planner();
        }
        if self.executor.is_none() {
            let id = self.executor_id.clone();
            self.executor = Some(self.load(&id, "executor", &[])?);
        }
        Ok(self.executor.as_mut().expect("loaded above"))
    }

    fn load(&mut self, id: &str, role: &str, grammars: &[ConstraintSpec]) -> Result<Model> {
        let (model, record) = self.engine.load(id, role, grammars, self.reporter)?;
        self.loaded.push(record.clone());
        self.fresh.push(record);
        Ok(model)
    }
}

/// The models of a batch of concurrent runs, each on its own batching thread.
pub struct SharedModels {
    planner: SharedModel,
    executor: Option<SharedModel>,
}

impl SharedModels {
    /// How full the planner's passes were.
    pub fn planner_stats(&self) -> PassStats {
        self.planner.stats()
    }

    /// How full the executor's passes were (the planner's, when one model plays both roles).
    pub fn executor_stats(&self) -> PassStats {
        self.executor.as_ref().unwrap_or(&self.planner).stats()
    }
}
