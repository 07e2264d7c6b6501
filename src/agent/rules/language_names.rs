//! Rule `language-names` (mend, nestful): the `nestful` direction of [`super::language_codes`]' mend. A language
//! code (`fr`) passed to a language parameter whose description does not ask for a code becomes the language's
//! name: NESTFUL's gold writes names; many APIs take codes without saying so.

use super::language_codes::mend_languages_to_names;
use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// Rule `language-names` (mend, nestful).
pub struct LanguageNames;

impl super::Rule for LanguageNames {
    fn about(&self) -> super::About {
        super::About {
            name: "language-names",
            stage: super::Stage::Mend,
            profile: super::Profile::Nestful,
            keys_on: "a language code passed to a parameter whose description does not ask for a code: the language's name (NESTFUL's gold)",
        }
    }

    fn mend(&self, plan: &mut Plan, tools: &ToolRegistry, _seen: &str) -> Vec<String> {
        mend_languages_to_names(plan, tools)
    }
}
