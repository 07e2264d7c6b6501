//! Rule `replans-from-the-feedback` (run, general): at run time, where no sampled replan of `replans-resampled` is
//! kept, one more round (greedy and two samples) is written from the goal and the last feedback alone, without the
//! earlier plans in the conversation, and its first acceptable candidate is kept.
//!
//! Applied by the planner (`agent::plan::planner::sampled_candidates`) when `replans-resampled` finds nothing.
//!
//! Why: the planner copies its own earlier turn: the 1.5B's three samples were the refused plan word for word.

/// Rule `replans-from-the-feedback` (run, general).
pub struct ReplansFromTheFeedback;

impl super::Rule for ReplansFromTheFeedback {
    fn about(&self) -> super::About {
        super::About {
            name: "replans-from-the-feedback",
            stage: super::Stage::Run,
            profile: super::Profile::General,
            keys_on: "where no sampled replan is kept: one more round written from the goal and the last feedback alone, without the earlier plans",
        }
    }
}
