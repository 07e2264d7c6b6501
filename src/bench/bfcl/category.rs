//! BFCL's single-turn categories: their names, their files, how many calls an answer holds and which of BFCL's
//! checkers scores them.

use serde::{Deserialize, Serialize};

/// A BFCL test category this module reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BfclCategory {
    /// One function, one call.
    SimplePython,
    /// Several functions, one call of the right one.
    Multiple,
    /// One function, several calls of it (in any order).
    Parallel,
    /// Several functions, several calls (in any order).
    ParallelMultiple,
    /// Functions that do not fit the request: the right answer is no call.
    Irrelevance,
    /// User-contributed questions, one function, one call.
    LiveSimple,
    /// User-contributed, several functions, one call.
    LiveMultiple,
    /// User-contributed, several calls of one function.
    LiveParallel,
    /// User-contributed, several functions, several calls.
    LiveParallelMultiple,
    /// User-contributed, no function fits: no call.
    LiveIrrelevance,
    /// User-contributed, some function fits: any call counts.
    LiveRelevance,
}

/// Which of BFCL's checkers scores a category.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckRule {
    /// Exactly one call, checked against the one possible answer (`simple_function_checker`).
    Simple,
    /// As many calls as the answer lists (one), the first checked (`multiple_function_checker`).
    Multiple,
    /// As many calls as the answer lists, each answer matched to a different call in any order
    /// (`parallel_function_checker_no_order`).
    Parallel,
    /// Right when there is no call at all (BFCL's relevance runner for `irrelevance`).
    NoCall,
    /// Right when there is at least one call, whatever it is (the relevance runner for `relevance`).
    AnyCall,
}

/// How many calls the model may write for a category. The count is part of the question for the call
/// categories (BFCL's category says it), but never for the two relevance categories: there the model must decide
/// itself whether to call, so both share one shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallShape {
    /// One call object.
    One,
    /// A list of one or more calls.
    Several,
    /// A list of any number of calls, `[]` being "no call".
    AnyNumber,
}

impl BfclCategory {
    /// Every category, in BFCL's order.
    pub const ALL: [BfclCategory; 11] = [
        BfclCategory::SimplePython,
        BfclCategory::Multiple,
        BfclCategory::Parallel,
        BfclCategory::ParallelMultiple,
        BfclCategory::Irrelevance,
        BfclCategory::LiveSimple,
        BfclCategory::LiveMultiple,
        BfclCategory::LiveParallel,
        BfclCategory::LiveParallelMultiple,
        BfclCategory::LiveIrrelevance,
        BfclCategory::LiveRelevance,
    ];

    /// BFCL's name of the category.
    pub fn name(self) -> &'static str {
        match self {
            BfclCategory::SimplePython => "simple_python",
            BfclCategory::Multiple => "multiple",
            BfclCategory::Parallel => "parallel",
            BfclCategory::ParallelMultiple => "parallel_multiple",
            BfclCategory::Irrelevance => "irrelevance",
            BfclCategory::LiveSimple => "live_simple",
            BfclCategory::LiveMultiple => "live_multiple",
            BfclCategory::LiveParallel => "live_parallel",
            BfclCategory::LiveParallelMultiple => "live_parallel_multiple",
            BfclCategory::LiveIrrelevance => "live_irrelevance",
            BfclCategory::LiveRelevance => "live_relevance",
        }
    }

    /// The category BFCL names so.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The file name of its questions (and, under `possible_answer/`, of its answers).
    pub fn file_name(self) -> String {
        format!("BFCL_v4_{}.json", self.name())
    }

    /// The checker that scores it (BFCL picks it by the words in the category's name).
    pub fn rule(self) -> CheckRule {
        let name = self.name();
        if name.contains("irrelevance") {
            CheckRule::NoCall
        } else if name.contains("relevance") {
            CheckRule::AnyCall
        } else if name.contains("parallel") {
            CheckRule::Parallel
        } else if name.contains("multiple") {
            CheckRule::Multiple
        } else {
            CheckRule::Simple
        }
    }

    /// Whether it has a `possible_answer` file (the relevance categories have none: the rule is the answer).
    pub fn has_answers(self) -> bool {
        matches!(self.rule(), CheckRule::Simple | CheckRule::Multiple | CheckRule::Parallel)
    }

    /// What the model may write.
    pub fn call_shape(self) -> CallShape {
        match self.rule() {
            CheckRule::Simple | CheckRule::Multiple => CallShape::One,
            CheckRule::Parallel => CallShape::Several,
            CheckRule::NoCall | CheckRule::AnyCall => CallShape::AnyNumber,
        }
    }
}
