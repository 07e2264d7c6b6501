//! Rule `refused-values-not-repeated` (run, general): at run time, a value a tool refused by name (its error quotes
//! exactly one of the failed call's text arguments: `America/Bogotá` in "No time zone found with key
//! America/Bogotá") is not passed again, to any tool: a repair that passes it is skipped for the next candidate, and
//! a replan that passes it is sent back with the refusal. Where the refused value has accents, the repair first
//! calls the tool with them taken off. An error that quotes several arguments refuses none. Stated on results (the
//! error's text and the call's arguments).
//!
//! Applied by the orchestrator's repair (`agent::run::orchestrator::repair`), from the run state's record of
//! refusals (`agent::log::runs::RunState::refused_value_in`).

/// Rule `refused-values-not-repeated` (run, general).
pub struct RefusedValuesNotRepeated;

impl super::Rule for RefusedValuesNotRepeated {
    fn about(&self) -> super::About {
        super::About {
            name: "refused-values-not-repeated",
            stage: super::Stage::Run,
            profile: super::Profile::General,
            keys_on: "a value a tool's error quotes as the one text argument it refused: never passed again, by a repair or a replan",
        }
    }
}
