//! What checking gives: predicted calls, failures by BFCL's `error_type`, verdicts and their summary.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A predicted call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BfclCall {
    /// The function's name.
    pub name: String,
    /// The arguments.
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// Why a prediction failed, by BFCL's `error_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum FailureKind {
    /// `simple`: not exactly one call.
    SimpleWrongCount,
    /// `multiple`: not as many calls as expected.
    MultipleWrongCount,
    /// `parallel`: not as many calls as expected.
    ParallelWrongCount,
    /// `parallel`: an expected call that no remaining call matches.
    ParallelNoMatch,
    /// `irrelevance`: a call where none fits.
    IrrelevanceCalled,
    /// `relevance`: no call where one fits.
    RelevanceNoCall,
    /// The call names another function.
    WrongFunctionName,
    /// A required parameter is missing.
    MissingRequired,
    /// An argument the doc or the answer does not have.
    UnexpectedParameter,
    /// A parameter the answer requires (no `""` among its values) is missing.
    MissingOptional,
    /// An argument of the wrong type.
    SimpleType,
    /// A list whose elements have the wrong type.
    NestedType,
    /// A string not among the accepted ones.
    StringValue,
    /// A list not among the accepted ones.
    ListValue,
    /// A dict with an unexpected or a missing key.
    DictKey,
    /// A dict with a value not accepted.
    DictValue,
    /// A dict parameter with no dict among its accepted values.
    DictUnclear,
    /// A list of dicts of the wrong length.
    ListDictCount,
    /// A list-of-dicts parameter with no list among its accepted values.
    ListDictUnclear,
    /// Any other value not among the accepted ones.
    OtherValue,
    /// The expected function has no doc in the question (cannot happen with loaded cases).
    UnknownFunction,
}

impl FailureKind {
    /// BFCL's `error_type` string.
    pub fn error_type(self) -> &'static str {
        match self {
            FailureKind::SimpleWrongCount => "simple_function_checker:wrong_count",
            FailureKind::MultipleWrongCount => "multiple_function_checker:wrong_count",
            FailureKind::ParallelWrongCount => "parallel_function_checker_no_order:wrong_count",
            FailureKind::ParallelNoMatch => "parallel_function_checker_no_order:cannot_find_match",
            FailureKind::IrrelevanceCalled => "irrelevance_error:decoder_success",
            FailureKind::RelevanceNoCall => "relevance_error:decoder_failed",
            FailureKind::WrongFunctionName => "simple_function_checker:wrong_func_name",
            FailureKind::MissingRequired => "simple_function_checker:missing_required",
            FailureKind::UnexpectedParameter => "simple_function_checker:unexpected_param",
            FailureKind::MissingOptional => "simple_function_checker:missing_optional",
            FailureKind::SimpleType => "type_error:simple",
            FailureKind::NestedType => "type_error:nested",
            FailureKind::StringValue => "value_error:string",
            FailureKind::ListValue => "value_error:list/tuple",
            FailureKind::DictKey => "value_error:dict_key",
            FailureKind::DictValue => "value_error:dict_value",
            FailureKind::DictUnclear => "dict_checker:unclear",
            FailureKind::ListDictCount => "value_error:list_dict_count",
            FailureKind::ListDictUnclear => "list_dict_checker:unclear",
            FailureKind::OtherValue => "value_error:others",
            FailureKind::UnknownFunction => "bench:unknown_function",
        }
    }
}

/// A failed check: its kind and BFCL's message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The kind.
    pub kind: FailureKind,
    /// What is wrong, in BFCL's words.
    pub reason: String,
}

pub(super) fn fail<T>(kind: FailureKind, reason: String) -> Result<T, Failure> {
    Err(Failure { kind, reason })
}

/// The verdict on one question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BfclVerdict {
    /// The question's id.
    pub id: String,
    /// `None` when the prediction is accepted.
    pub failure: Option<Failure>,
}

impl BfclVerdict {
    /// Whether the prediction is accepted.
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }
}

/// Accuracy over verdicts.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BfclSummary {
    /// Questions checked.
    pub total: usize,
    /// Questions accepted.
    pub passed: usize,
    /// `passed / total` (0 for none).
    pub accuracy: f64,
    /// Failures counted by BFCL `error_type`.
    pub failures: BTreeMap<String, usize>,
}

/// Counts verdicts.
pub fn summarize(verdicts: &[BfclVerdict]) -> BfclSummary {
    let passed = verdicts.iter().filter(|v| v.passed()).count();
    let mut failures = BTreeMap::new();
    for failure in verdicts.iter().filter_map(|v| v.failure.as_ref()) {
        *failures.entry(failure.kind.error_type().to_string()).or_insert(0) += 1;
    }
    let accuracy = if verdicts.is_empty() { 0.0 } else { passed as f64 / verdicts.len() as f64 };
    BfclSummary { total: verdicts.len(), passed, accuracy, failures }
}
