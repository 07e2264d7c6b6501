//! Rule `percentages-as-written` (mend, nestful): the `nestful` direction of [`super::percentages_as_fractions`]'s
//! mend. A percentage passed as its fraction (`0.05` for "5%") to a parameter whose description says neither
//! "decimal" nor "fraction" becomes the number as written (`5`): NESTFUL's gold convention, not the schema's word;
//! an API that takes 0.05 would get 5, a 100× error.

use super::percentages_as_fractions::mend_percentages_as_written;
use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// Rule `percentages-as-written` (mend, nestful).
pub struct PercentagesAsWritten;

impl super::Rule for PercentagesAsWritten {
    fn about(&self) -> super::About {
        super::About {
            name: "percentages-as-written",
            stage: super::Stage::Mend,
            profile: super::Profile::Nestful,
            keys_on: "a percentage passed as its fraction to a parameter whose description says neither decimal nor fraction: the number as written (NESTFUL's gold)",
        }
    }

    fn mend(&self, plan: &mut Plan, tools: &ToolRegistry, _seen: &str) -> Vec<String> {
        mend_percentages_as_written(plan, tools)
    }
}
