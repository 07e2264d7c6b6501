//! NESTFUL (IBM, arXiv 2409.03797): its non-executable data and tool catalogue, call sequences to and from
//! [`Plan`](crate::agent::Plan)s, and its four scores computed the way IBM's scorer computes them.
//!
//! [`data`] reads the samples, [`catalogue`] the tools (and picks each sample's offer), [`split`] both from a
//! split's directory, [`sequences`] converts call sequences and plans, [`scoring`] holds the scores,
//! [`retrieval`] measures tool retrieval's recall, and [`runner`] runs the suite.

pub mod catalogue;
pub mod data;
pub mod retrieval;
pub mod runner;
pub mod scoring;
pub mod sequences;
pub mod split;

pub use catalogue::{distractor_catalogue, load_tools, Distractors};
pub(crate) use data::{issue, json_lines, read_text, Records};
pub use data::{
    load_samples, BenchDataError, Call, DataIssue, Loaded, Location, NestfulSample, NestfulTool, DATA_FILE, SPEC_FILE,
    VAR_RESULT,
};
pub use retrieval::{retrieval_recall, RecallAtK};
pub use scoring::{macro_scores, score_sample, summarize, MacroScores, NestfulSummary, SampleScore};
pub use sequences::{calls_to_plan, plan_to_calls, ConversionError};
pub use split::{load, NestfulData};
