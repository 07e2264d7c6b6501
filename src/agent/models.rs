//! The run's two models, loaded on first use: a plan given on the command line with only tool steps loads no
//! model at all, and a run whose planner and executor are the same model loads it once.

use candle_core::Device;

use super::events::Event;
use crate::decode::batching::{PassStats, SharedModel};
use crate::decode::constraint::ConstraintSpec;
use crate::decode::{Model, Speculation};
use crate::llm::LoadOptions;
use crate::progress::Reporter;
use crate::store::ModelStore;
use crate::Result;

/// Where the orchestrator gets its models.
pub trait ModelSource {
    /// The planner model (loaded now if it is not yet).
    fn planner(&mut self) -> Result<&mut Model>;
    /// The planner model; if it loads now, `grammars` (the plan grammar) compile beside its load, so the first
    /// plan does not wait for them (see `Model::load_warm`).
    fn planner_for(&mut self, grammars: &[ConstraintSpec]) -> Result<&mut Model> {
        let _ = grammars;
        self.planner()
    }
    /// The executor model (loaded now if it is not yet).
    fn executor(&mut self) -> Result<&mut Model>;
    /// `ModelLoaded` events for loads since the last call, for the audit log.
    fn take_load_events(&mut self) -> Vec<Event>;
}

/// Models resolved through the store (pulled if needed) and loaded lazily.
pub struct LazyModels<'r> {
    planner_id: String,
    executor_id: String,
    device: Device,
    options: LoadOptions,
    speculation: Option<Speculation>,
    reporter: &'r dyn Reporter,
    planner: Option<Model>,
    executor: Option<Model>,
    events: Vec<Event>,
    /// Every load so far, for [`LazyModels::begin_run`].
    loaded: Vec<Event>,
}

impl<'r> LazyModels<'r> {
    /// Models by id or path; nothing is loaded yet. `speculation` `None` drafts where exact.
    pub fn new(
        planner_id: &str,
        executor_id: &str,
        device: Device,
        options: LoadOptions,
        speculation: Option<Speculation>,
        reporter: &'r dyn Reporter,
    ) -> Self {
        Self {
            planner_id: planner_id.to_string(),
            executor_id: executor_id.to_string(),
            device,
            options,
            speculation,
            reporter,
            planner: None,
            executor: None,
            events: Vec::new(),
            loaded: Vec::new(),
        }
    }

    /// Starts another run on the same models (`tandem batch`, benchmarks): the next
    /// [`ModelSource::take_load_events`] also returns a `ModelLoaded` event for each model an earlier run already
    /// loaded, with `ms: 0` (nothing was loaded this time), so every run's log names its models and SHA-256.
    pub fn begin_run(&mut self) {
        let already = self.loaded.iter().map(|event| match event {
            Event::ModelLoaded { role, id, path, sha256, .. } => Event::ModelLoaded {
                role: role.clone(),
                id: id.clone(),
                path: path.clone(),
                sha256: sha256.clone(),
                ms: 0,
            },
            other => other.clone(),
        });
        self.events = already.collect();
    }

    fn shared(&self) -> bool {
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
                planner_id: self.planner_id.clone(),
                executor_id: self.executor_id.clone(),
                device: self.device.clone(),
                options: self.options.clone(),
                speculation: self.speculation,
                reporter: self.reporter,
                planner: Some(planner.model()?),
                executor: executor.as_ref().map(SharedModel::model).transpose()?,
                events: Vec::new(),
                loaded: self.loaded.clone(),
            });
        }
        Ok((sources, SharedModels { planner, executor }))
    }

    fn load(&mut self, id: &str, role: &str, grammars: &[ConstraintSpec]) -> Result<Model> {
        let resolved = ModelStore::open()?.resolve(id, self.reporter)?;
        self.reporter.message(&format!("loading the {role} ({id}) …"));
        let model = Model::load_warm(&resolved.path, &self.device, &self.options, self.speculation, grammars)?;
        let event = Event::ModelLoaded {
            role: role.to_string(),
            id: id.to_string(),
            path: resolved.path,
            sha256: resolved.sha256,
            ms: model.info.load_time.as_millis() as u64,
        };
        self.loaded.push(event.clone());
        self.events.push(event);
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

impl ModelSource for LazyModels<'_> {
    fn planner(&mut self) -> Result<&mut Model> {
        self.planner_for(&[])
    }

    fn planner_for(&mut self, grammars: &[ConstraintSpec]) -> Result<&mut Model> {
        if self.planner.is_none() {
            let role = if self.shared() { "planner+executor" } else { "planner" };
            let id = self.planner_id.clone();
            self.planner = Some(self.load(&id, role, grammars)?);
        }
        Ok(self.planner.as_mut().expect("loaded above"))
    }

    fn executor(&mut self) -> Result<&mut Model> {
        if self.shared() {
            return self.planner();
        }
        if self.executor.is_none() {
            let id = self.executor_id.clone();
            self.executor = Some(self.load(&id, "executor", &[])?);
        }
        Ok(self.executor.as_mut().expect("loaded above"))
    }

    fn take_load_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
}
