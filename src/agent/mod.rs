//! The agent: plans and references (`plan`, `refs`, `validate`, `schema`), the planner and executor model
//! calls, the step evaluation that doubts wrong results, the joiner that writes the answer, the orchestrator that
//! runs a plan with budgets, approval and replanning, the audit log of runs, and batches of goals (`batch`).

pub mod batch;
pub mod batch_merge;
pub mod batch_run;
pub mod evaluation;
pub mod events;
pub mod executor;
pub(crate) mod fault;
pub mod issues;
pub mod joiner;
pub mod mend;
pub mod model_call;
pub mod models;
pub mod numbers;
pub mod orchestrator;
pub mod plan;
pub mod plan_search;
pub mod planner;
pub mod refs;
pub mod runs;
pub mod schema;
pub mod setup;
pub mod summary;
pub mod tool_lines;
pub mod validate;

pub use events::{Event, EventLog, PlanOrigin, Record, RunSettings, StopReason};
pub use issues::{IssueKind, PlanError, PlanIssue};
pub use models::{LazyModels, ModelSource, SharedModels};
pub use orchestrator::{
    in_doubt_steps, Agent, Approval, Approver, AutoApprove, Mode, NoObserver, Observer, PlanDecision, RunOutcome,
};
pub use plan::{refs_in, resolve_args, Plan, Step};
pub use refs::{coerce_to_schema, parse_reference, Reference};
pub use runs::{default_runs_dir, RunState, RunsDir};
pub use schema::{plan_json_schema, plan_json_schema_with, PlanSchemaOptions};
