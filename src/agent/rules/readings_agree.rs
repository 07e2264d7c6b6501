//! Rule `readings-agree` (run, general): the answer's reading (an `llm` step no step reads) of a goal that asks a
//! question (its `?`), over results a tool other than the calculator gave, where it is written in free text by an
//! executor that is not the planner's model, is written by the planner's model too; where the two readings name
//! different values (names, quoted texts, numbers beside the question's), or, naming none, say different words, the
//! planner's model is shown both beside the question and the results and chooses one. A `rule_applied` event
//! records which path answered: the two agreed, or the model chose the executor's or its own reading (with both
//! readings). Stated on the readings' values, the goal's `?` and the plan (what reads what), no word list.
//!
//! Applied by the orchestrator where it writes an `llm` step's text (`agent::run::orchestrator::readings`), with
//! `agent::run::agreement`; a reading already worked out from a list (rule `reading-asks-the-goal`) is not read
//! again.

/// Rule `readings-agree` (run, general).
pub struct ReadingsAgree;

impl super::Rule for ReadingsAgree {
    fn about(&self) -> super::About {
        super::About {
            name: "readings-agree",
            stage: super::Stage::Run,
            profile: super::Profile::General,
            keys_on: "the answer's free-text reading of a question (a goal with a '?') over tool results other than the calculator's: written by the planner's model too; where the two name different values (or, naming none, say different words), the planner's model chooses one",
        }
    }
}
