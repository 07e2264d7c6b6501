//! Rule `prompts-read-whole-results` (run, general): at run time, a model prompt's reference, inside its text, to a
//! short field (160 characters or fewer as JSON, or empty) of a result that has other fields holding something other
//! than that field restated, and is 3000 characters or fewer as JSON, reads the whole result
//! (`What time is it in Istanbul? $s1.time_difference$` gets the conversion with its target time, not `+6.0h`); a
//! long field (a file's content) is what its prompt is about and stays. Stated on the plan (a reference in a
//! prompt) and the result (its fields and sizes).
//!
//! Applied where references resolve (`agent::plan::refs::Resolution::widen_short_fields`), logged by the
//! orchestrator (`agent::run::orchestrator::execution`).
//!
//! Why: a planner picks one field of a result it has not seen (`$s1.entities$` of a memory search whose answer is
//! in `relations`).

/// Rule `prompts-read-whole-results` (run, general).
pub struct PromptsReadWholeResults;

impl super::Rule for PromptsReadWholeResults {
    fn about(&self) -> super::About {
        super::About {
            name: "prompts-read-whole-results",
            stage: super::Stage::Run,
            profile: super::Profile::General,
            keys_on: "a model prompt's reference, inside its text, to a short field of a small result with other fields: the whole result",
        }
    }
}
