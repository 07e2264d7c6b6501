//! Rule `replans-resampled` (run, general): at run time, a replan whose greedy plan cannot run (validation
//! problems), makes the calls of the plan just refused (the same tools with the same arguments), repeats a call
//! that failed or breaks a check that sends plans back is written again by sampling (three
//! candidates), and the first valid one that does none of these is kept; without one, the greedy plan is recorded
//! and sent back as before. Where no sample is kept, one more round (greedy and two samples) is written from the goal
//! and the last feedback alone, without the earlier plans in the conversation, and its first acceptable candidate is
//! kept: the planner copies its own earlier turn (the 1.5B's three samples were the refused plan word for word).
//! Stated on the plans (calls and arguments) and the run's results.
//!
//! Applied by the orchestrator's planning (`agent::run::orchestrator::planning`) through the planner's
//! `sampled_revision` (the last round in `sampled_candidates`).

/// Rule `replans-resampled` (run, general).
pub struct ReplansResampled;

impl super::Rule for ReplansResampled {
    fn about(&self) -> super::About {
        super::About {
            name: "replans-resampled",
            stage: super::Stage::Run,
            profile: super::Profile::General,
            keys_on: "a replan that cannot run, repeats the refused plan's calls or a failed call or breaks a check: written again by sampling, then from the goal and feedback alone",
        }
    }
}
