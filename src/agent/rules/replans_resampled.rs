//! Rule `replans-resampled` (run, general): at run time, a replan whose greedy plan cannot run (validation
//! problems), makes the calls of the plan just refused (the same tools with the same arguments), repeats a call
//! that failed, passes a refused value or breaks a check that sends plans back is written again by sampling (three
//! candidates), and the first valid one that does none of these is kept; without one, the greedy plan is recorded
//! and sent back as before. Stated on the plans (calls and arguments) and the run's results.
//!
//! Applied by the orchestrator's planning (`agent::run::orchestrator::planning`) through the planner's
//! `sampled_revision`.

/// Rule `replans-resampled` (run, general).
pub struct ReplansResampled;

impl super::Rule for ReplansResampled {
    fn about(&self) -> super::About {
        super::About {
            name: "replans-resampled",
            stage: super::Stage::Run,
            profile: super::Profile::General,
            keys_on: "a replan that cannot run, repeats the refused plan's calls or a failed call, passes a refused value or breaks a check: written again by sampling",
        }
    }
}
