//! Drops an optional argument the goal mentions neither by its value nor by the parameter's name: the planner
//! prompt says to leave those out, and the tool's default is then what the user asked for.
//!
//! Rule `optional`, profile `nestful` only: the schema says the argument may be left out, not that it should be;
//! dropping it matches NESTFUL's gold, which leaves such arguments out, while on a real tool a sensible value the
//! planner chose (a unit, a format) would be lost.
//!
//! Why: the 1.5B planner filled optional parameters with values of its own (`max_results: 10`, `format: "QR"`,
//! `mode: "driving"`, `include_lowercase: true`; docs/benchmarks.md, "Plans mended where they break the prompt's
//! rules"). On a real tool such a value changes what the tool does without the user having asked. An argument the goal names either way is kept, whatever its value ("optimize the route for time"
//! keeps `optimize_route`), and so is one that takes an earlier step's result.

use super::leave_out_unasked;
use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// Removes the optional arguments (declared by the tool, not in its `required` list) that the goal mentions
/// neither by value nor by name and that hold no reference; returns one line per argument dropped
/// (`s1: max_results 10 left out (optional, and the goal names neither it nor 10)`).
pub fn drop_unmentioned_optional(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    leave_out_unasked(plan, registry, |_, _| Some(String::new()))
}

/// Rule `optional` (mend, nestful).
pub struct Optional;

impl super::Rule for Optional {
    fn about(&self) -> super::About {
        super::About {
            name: "optional",
            stage: super::Stage::Mend,
            profile: super::Profile::Nestful,
            keys_on: "an optional argument the goal names neither by value nor by the parameter's name: left out (NESTFUL's gold)",
        }
    }

    fn mend(&self, plan: &mut Plan, tools: &ToolRegistry, _seen: &str) -> Vec<String> {
        drop_unmentioned_optional(plan, tools)
    }
}
