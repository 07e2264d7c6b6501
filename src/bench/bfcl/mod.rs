//! BFCL (Berkeley Function Calling Leaderboard v4), its single-turn categories (`simple_python`, `multiple`,
//! `parallel`, `parallel_multiple`, `irrelevance` and the `live_*` ones): questions and possible answers, function
//! docs as JSON Schema, and BFCL's AST checkers for predicted calls.
//!
//! [`category`] names the categories and their rules, [`data`] reads questions and answers, [`schema`] turns
//! BFCL's docs into JSON Schema, [`call`] builds what the model is asked and reads its calls back, [`checker`]
//! checks predicted calls into a [`verdict`], and [`runner`] runs the suite.

pub mod call;
pub mod category;
pub mod checker;
pub mod data;
pub mod runner;
pub mod schema;
pub mod verdict;

pub use category::{BfclCategory, CallShape, CheckRule};
pub use checker::{check, check_call, standardize};
pub use data::{load, BfclAnswer, BfclCase, BfclFunction, BfclQuestion, BfclSet, ExpectedCall, Message};
pub use schema::{json_schema_type, to_json_schema};
pub use verdict::{summarize, BfclCall, BfclSummary, BfclVerdict, Failure, FailureKind};
