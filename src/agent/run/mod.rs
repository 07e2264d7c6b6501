//! Running a plan: the orchestrator (budgets, approval, replanning, step mode), the executor model's steps, the
//! step evaluation that works calculator steps out again, the readings that pick items of a list (`picking`) and
//! compare, count and add them up by code (`tally`), the second reading and the choice between two (`agreement`), and the joiner that writes the answer, its names checked
//! against the results (`agent::provenance`).

pub mod agreement;
pub mod evaluation;
pub mod executor;
pub mod joiner;
pub mod list_query;
pub mod orchestrator;
pub mod picking;
pub mod repair;
pub mod tally;
