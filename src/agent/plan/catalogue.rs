//! What the planner is shown of the run's tools for a goal: all of them, or those tool retrieval picks
//! (`--tools-top-k`). Validation and execution still know every tool.
//!
//! (The rules that once hid tools for a goal by its words, `tools-the-goal-allows` with `questions-only-read`
//! and `deletions-asked`, were English word lists and are gone; see docs/rules.md.)

use crate::tools::retrieval::planning_selection;
use crate::tools::{ToolRegistry, ToolResult};

/// The tools the planner is shown for a goal, where they are not all of the run's: those tool retrieval picks
/// (`--tools-top-k`).
pub struct Catalogue {
    /// The tools shown.
    pub registry: ToolRegistry,
    /// The tools retrieval picked, best match first.
    pub selected: Option<Vec<String>>,
}

/// What the planner sees of `registry` for `goal`; `None` where it sees every tool. Validation and execution
/// still know every tool.
pub fn planning_catalogue(goal: &str, registry: &ToolRegistry, top_k: usize) -> ToolResult<Option<Catalogue>> {
    Ok(planning_selection(goal, registry, top_k)?
        .map(|selection| Catalogue { registry: selection.registry, selected: Some(selection.tools) }))
}
