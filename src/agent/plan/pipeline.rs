//! The plan pipeline, assembled once for a goal: what the planner is shown of the tools (the catalogue), the plan
//! grammar over it, the planner's writing, and the rule book's mends. `tandem run` (first plans, replans and
//! resampled replans), `tandem plan` and `tandem bench nestful` all plan through it, so a plan is written the same
//! way wherever it is asked for.

use crate::agent::plan::catalogue::planning_catalogue;
use crate::agent::plan::planner::{plan_grammar, revise_plan, sampled_revision, PlanOutcome, Revision, Writing};
use crate::agent::plan::Plan;
use crate::agent::rules::RuleSet;
use crate::decode::constraint::ConstraintSpec;
use crate::decode::Model;
use crate::tools::{ToolRegistry, ToolResult};
use crate::Result;

/// One goal's plan pipeline over a run's tools.
pub struct PlanPipeline<'a> {
    /// Every tool of the run: what plans are validated against and executed with.
    registry: &'a ToolRegistry,
    /// What the planner is shown where retrieval picked some of the tools (`--tools-top-k`); `None`: all.
    shown: Option<ToolRegistry>,
    /// The tools retrieval picked, best match first.
    selected: Option<Vec<String>>,
    /// The rule book's rules the settings turn on.
    rules: RuleSet,
    /// Whether the planner thinks before it writes a plan (`--think`, where its chat template has the switch).
    think: bool,
}

impl<'a> PlanPipeline<'a> {
    /// The pipeline for `goal` over `registry`: the planner is shown the `top_k` tools that best match the goal
    /// (0: all), and its plans are mended by `rules`. The same goal, tools and k select the same tools again (a
    /// resumed run plans with what it started with).
    pub fn new(goal: &str, registry: &'a ToolRegistry, top_k: usize, rules: RuleSet) -> ToolResult<Self> {
        let catalogue = planning_catalogue(goal, registry, top_k)?;
        let (shown, selected) = match catalogue {
            Some(c) => (Some(c.registry), c.selected),
            None => (None, None),
        };
        Ok(Self { registry, shown, selected, rules, think: false })
    }

    /// The same pipeline with the planner thinking before each plan (`--think`): its chat template rendered in
    /// thinking mode and its thought written before the plan, outside the plan's grammar and logged beside it.
    pub fn thinking(mut self, think: bool) -> Self {
        self.think = think;
        self
    }

    /// Every tool of the run.
    pub fn registry(&self) -> &'a ToolRegistry {
        self.registry
    }

    /// The tools the planner is shown.
    pub fn shown(&self) -> &ToolRegistry {
        self.shown.as_ref().unwrap_or(self.registry)
    }

    /// Whether the planner is shown fewer tools than the run has.
    pub fn narrowed(&self) -> bool {
        self.shown.is_some()
    }

    /// The tools retrieval picked, best match first (`None` where the planner is shown all).
    pub fn selected(&self) -> Option<&[String]> {
        self.selected.as_deref()
    }

    /// The rules the plans are mended and checked by.
    pub fn rules(&self) -> RuleSet {
        self.rules
    }

    /// The grammar the planner writes under, to compile beside the planner's load.
    pub fn grammar(&self) -> Result<ConstraintSpec> {
        plan_grammar(self.shown())
    }

    /// A plan for `goal` after the earlier attempts in `history` (none for a first plan), mended by the rules.
    pub fn write(
        &self,
        model: &mut Model,
        goal: &str,
        history: &[Revision],
        max_tokens: usize,
        plans: usize,
    ) -> Result<PlanOutcome> {
        revise_plan(model, goal, self.shown(), history, plans, self.writing(max_tokens))
    }

    /// A plan written by sampling that validates and that `acceptable` takes, mended by the rules; `None` where
    /// no sample does.
    pub fn resample(
        &self,
        model: &mut Model,
        goal: &str,
        history: &[Revision],
        max_tokens: usize,
        acceptable: impl Fn(&Plan) -> bool,
    ) -> Result<Option<PlanOutcome>> {
        sampled_revision(model, goal, self.shown(), history, self.writing(max_tokens), acceptable)
    }

    /// How this pipeline writes a plan of at most `max_tokens`.
    fn writing(&self, max_tokens: usize) -> Writing {
        Writing { max_tokens, rules: self.rules, think: self.think }
    }
}
