//! What one model call cost: its tokens and time, as every room reports them (the planner, the executor, the
//! evaluation and the joiner make calls; the audit log records them).

use serde::{Deserialize, Serialize};

/// Token counts and time of one model call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelUsage {
    /// Prompt tokens.
    pub tokens_in: usize,
    /// Generated tokens.
    pub tokens_out: usize,
    /// Wall time in milliseconds.
    pub ms: u64,
}
