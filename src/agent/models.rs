//! The run's two models, loaded on first use: a plan given on the command line with only tool steps loads no
//! model at all, and a run whose planner and executor are the same model loads it once.

use candle_core::Device;

use super::events::Event;
use crate::llm::{LoadOptions, Model};
use crate::progress::Reporter;
use crate::store::ModelStore;
use crate::Result;

/// Where the orchestrator gets its models.
pub trait ModelSource {
    /// The planner model (loaded now if it is not yet).
    fn planner(&mut self) -> Result<&mut Model>;
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
    reporter: &'r dyn Reporter,
    planner: Option<Model>,
    executor: Option<Model>,
    events: Vec<Event>,
    /// Every load so far, for [`LazyModels::begin_run`].
    loaded: Vec<Event>,
}

impl<'r> LazyModels<'r> {
    /// Models by id or path; nothing is loaded yet.
    pub fn new(
        planner_id: &str,
        executor_id: &str,
        device: Device,
        options: LoadOptions,
        reporter: &'r dyn Reporter,
    ) -> Self {
        Self {
            planner_id: planner_id.to_string(),
            executor_id: executor_id.to_string(),
            device,
            options,
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

    fn load(&mut self, id: &str, role: &str) -> Result<Model> {
        let resolved = ModelStore::open()?.resolve(id, self.reporter)?;
        self.reporter.message(&format!("loading the {role} ({id}) …"));
        let model = Model::load(&resolved.path, &self.device, &self.options)?;
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

impl ModelSource for LazyModels<'_> {
    fn planner(&mut self) -> Result<&mut Model> {
        if self.planner.is_none() {
            let role = if self.shared() { "planner+executor" } else { "planner" };
            let id = self.planner_id.clone();
            self.planner = Some(self.load(&id, role)?);
        }
        Ok(self.planner.as_mut().expect("loaded above"))
    }

    fn executor(&mut self) -> Result<&mut Model> {
        if self.shared() {
            return self.planner();
        }
        if self.executor.is_none() {
            let id = self.executor_id.clone();
            self.executor = Some(self.load(&id, "executor")?);
        }
        Ok(self.executor.as_mut().expect("loaded above"))
    }

    fn take_load_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
}
