//! BFCL (Berkeley Function Calling Leaderboard v4), categories `simple_python` and `multiple`: questions and
//! possible answers, function docs as JSON Schema, and BFCL's AST checker for a predicted call.
//!
//! [`data`] reads questions and answers, [`schema`] turns BFCL's docs into JSON Schema, [`checker`] checks a
//! predicted call into a [`verdict`], and [`runner`] runs the suite.

pub mod checker;
pub mod data;
pub mod runner;
pub mod schema;
pub mod verdict;

pub use checker::{check, check_call, standardize};
pub use data::{load, BfclAnswer, BfclCase, BfclCategory, BfclFunction, BfclQuestion, BfclSet, ExpectedCall, Message};
pub use schema::{json_schema_type, to_json_schema};
pub use verdict::{summarize, BfclCall, BfclSummary, BfclVerdict, Failure, FailureKind};
