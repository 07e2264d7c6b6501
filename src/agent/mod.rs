//! The agent, in rooms that follow the life of a goal:
//!
//! - `plan`: the plan itself (steps, references, validation, the plan grammar's schema), the planner model's
//!   calls, plan search and the tool lines it reads;
//! - `rules`: the rule book, every rule that mends, checks or steers a written plan, one file per rule;
//! - `run`: the orchestrator that runs a plan with budgets, approval and replanning, the executor, the step
//!   evaluation that doubts wrong results and the joiner that writes the answer;
//! - `log`: the append-only audit log of runs (events), the runs directory and run summaries;
//! - `batch`: many goals in one process (goal and results files, merging shards).
//!
//! Beside the rooms: the model calls and usage every room shares (`model_call`, `usage`), the numbers found in
//! text (`numbers`), results as a model reads them (`records`), where an answer's or a call's names come from
//! (`provenance`), the run's models (`models`) and what a run starts from (`setup`).

pub mod asks;
pub mod batch;
pub mod log;
pub mod model_call;
pub mod models;
pub mod numbers;
pub mod plan;
pub mod provenance;
pub mod records;
pub mod rules;
pub mod run;
pub mod setup;
pub mod usage;

pub use log::events::{Event, EventLog, PlanOrigin, Record, RunSettings, StopReason};
pub use log::runs::{default_runs_dir, RunState, RunsDir};
pub use models::{LazyModels, ModelSource, SharedModels};
pub use plan::issues::{IssueKind, PlanError, PlanIssue};
pub use plan::refs::{coerce_to_schema, parse_reference, Reference};
pub use plan::schema::{plan_json_schema, plan_json_schema_with, PlanSchemaOptions};
pub use plan::{refs_in, resolve_args, Plan, Step};
pub use run::orchestrator::{
    in_doubt_steps, Agent, Approval, Approver, AutoApprove, Mode, NoObserver, Observer, Pause, PlanDecision,
    RunOutcome, RunParts,
};
