//! Rule `same-results-answer` (run, general): where the joiner judges a plan's results not to meet the goal and
//! every tool result of that plan (tool and output, `llm` steps aside) is one of a plan it already judged not met in
//! the run, no revision is asked for: the same results have given it nothing new, so the run answers with the
//! steps' results, as when the replans run out after a doubt, and the `joined` event's text names the rule. Stated
//! on results.
//!
//! Applied by the orchestrator's judging (`agent::run::orchestrator::judging`), from the run state's record of
//! judged results (rebuilt from the log, so a resumed run keeps it).

/// Rule `same-results-answer` (run, general).
pub struct SameResultsAnswer;

impl super::Rule for SameResultsAnswer {
    fn about(&self) -> super::About {
        super::About {
            name: "same-results-answer",
            stage: super::Stage::Run,
            profile: super::Profile::General,
            keys_on: "a plan judged not met whose tool results were all judged not met before: no revision asked, the run answers with its results",
        }
    }
}
