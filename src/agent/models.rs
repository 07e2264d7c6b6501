//! Where the orchestrator gets its models: the [`ModelSource`] it asks, which the engine's lazily loaded pair
//! (`engine::LazyModels`) answers, its loads turned into the audit log's `ModelLoaded` events.

use crate::agent::log::events::Event;
use crate::decode::constraint::ConstraintSpec;
use crate::decode::Model;
pub use crate::engine::{LazyModels, SharedModels};
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

impl ModelSource for LazyModels<'_> {
    fn planner(&mut self) -> Result<&mut Model> {
        LazyModels::planner(self)
    }

    fn planner_for(&mut self, grammars: &[ConstraintSpec]) -> Result<&mut Model> {
        LazyModels::planner_for(self, grammars)
    }

    fn executor(&mut self) -> Result<&mut Model> {
        LazyModels::executor(self)
    }

    fn take_load_events(&mut self) -> Vec<Event> {
        self.take_loads()
            .into_iter()
            .map(|load| Event::ModelLoaded {
                role: load.role,
                id: load.id,
                path: load.path,
                sha256: load.sha256,
                ms: load.ms,
            })
            .collect()
    }
}
