//! The agent's data model: plans, references between steps, validation, and the plan JSON Schema the planner's
//! grammar is built from. (The planner, executor and orchestrator build on these.)

pub mod plan;
pub mod planner;
pub mod refs;
pub mod schema;
pub mod validate;

pub use plan::{Plan, PlanError, Step};
pub use refs::{coerce_to_schema, parse_reference, refs_in, resolve_args, Reference};
pub use schema::{plan_json_schema, plan_json_schema_with, PlanSchemaOptions};
pub use validate::{IssueKind, PlanIssue};
