//! Mends a language the plan passes in the form its parameter does not take: "from English to French" planned as
//! `source_language: "en"`, where the parameter does not ask for a code (the prompt says to copy names in the
//! goal's words; a code for a language the goal does not name becomes its English name), or `"French"` where the
//! parameter's description asks for a code (`fr`).
//!
//! Two directions, two rules, both in the `nestful` profile (they key on words of a parameter's description, which
//! `general` does not): a name where the description asks for a code becomes the code (`language-codes`); a code
//! where the description does not ask for one becomes the name (`language-names`), NESTFUL's gold convention.
//!
//! Why: the 1.5B planner turned the languages of NESTFUL goals into ISO codes that no tool description asked for,
//! against the prompt's rule; what replaying NESTFUL's plans through it gives is in docs/benchmarks.md ("Plans
//! mended where they break the prompt's rules").

use serde_json::Value;

use super::rewrite_arguments;
use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// ISO 639-1 codes of widely used languages with their English names.
const LANGUAGES: &[(&str, &str)] = &[
    ("af", "Afrikaans"),
    ("ar", "Arabic"),
    ("bg", "Bulgarian"),
    ("bn", "Bengali"),
    ("ca", "Catalan"),
    ("cs", "Czech"),
    ("cy", "Welsh"),
    ("da", "Danish"),
    ("de", "German"),
    ("el", "Greek"),
    ("en", "English"),
    ("es", "Spanish"),
    ("et", "Estonian"),
    ("fa", "Persian"),
    ("fi", "Finnish"),
    ("fr", "French"),
    ("ga", "Irish"),
    ("he", "Hebrew"),
    ("hi", "Hindi"),
    ("hr", "Croatian"),
    ("hu", "Hungarian"),
    ("id", "Indonesian"),
    ("is", "Icelandic"),
    ("it", "Italian"),
    ("ja", "Japanese"),
    ("ko", "Korean"),
    ("la", "Latin"),
    ("lt", "Lithuanian"),
    ("lv", "Latvian"),
    ("ms", "Malay"),
    ("nl", "Dutch"),
    ("no", "Norwegian"),
    ("pl", "Polish"),
    ("pt", "Portuguese"),
    ("ro", "Romanian"),
    ("ru", "Russian"),
    ("sk", "Slovak"),
    ("sl", "Slovenian"),
    ("sr", "Serbian"),
    ("sv", "Swedish"),
    ("sw", "Swahili"),
    ("ta", "Tamil"),
    ("th", "Thai"),
    ("tl", "Tagalog"),
    ("tr", "Turkish"),
    ("uk", "Ukrainian"),
    ("ur", "Urdu"),
    ("vi", "Vietnamese"),
    ("zh", "Chinese"),
];

/// Rewrites top-level text arguments of language parameters (a name or description with "lang" in it) into the
/// form the parameter takes. Where the description asks for a code, a language the goal names becomes its code;
/// where it does not, a code (`fr`, `fr-FR`) becomes the name: as the goal writes it where the goal names that
/// language, else the language's English name, unless the goal itself writes the code. Returns one line per mend
/// (`s1: target_language "fr" → "French" (the goal's French)`).
pub fn mend_languages(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    rewrite_languages(plan, registry, None)
}

/// The `general` direction: a language the goal names, passed by name where the parameter's description asks for
/// a code (or ISO code), becomes its code (`s1: target_language "French" → "fr" (the goal's French)`).
pub fn mend_languages_to_codes(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    rewrite_languages(plan, registry, Some(true))
}

/// The `nestful` direction: a code (`fr`, `fr-FR`) where the parameter's description does not ask for a code
/// becomes the language's name.
pub fn mend_languages_to_names(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    rewrite_languages(plan, registry, Some(false))
}

/// Both directions, or only one (`to_code`: `Some(true)` only into codes).
fn rewrite_languages(plan: &mut Plan, registry: &ToolRegistry, to_code: Option<bool>) -> Vec<String> {
    let named = languages_in(&plan.goal);
    let goal_words: Vec<String> =
        plan.goal.split(|c: char| !c.is_alphanumeric()).map(str::to_ascii_lowercase).collect();
    rewrite_arguments(plan, registry, |name, value, description| {
        let written = value.as_str()?.trim();
        if !(name.to_lowercase().contains("lang") || description.contains("lang")) {
            return None;
        }
        let wants_code = description.contains("code") || description.contains("iso");
        if to_code.is_some_and(|direction| direction != wants_code) {
            return None;
        }
        if wants_code {
            let (code, as_written) = named.iter().find(|(_, w)| written.eq_ignore_ascii_case(w))?;
            return Some((Value::String(code.to_string()), format!("the goal's {as_written}")));
        }
        let code = code_of(written)?;
        if let Some((_, as_written)) = named.iter().find(|(c, _)| *c == code) {
            return Some((Value::String(as_written.clone()), format!("the goal's {as_written}")));
        }
        if goal_words.contains(&written.to_ascii_lowercase()) {
            return None;
        }
        let (_, language) = LANGUAGES.iter().find(|(c, _)| *c == code)?;
        Some((Value::String(language.to_string()), format!("{code} is {language}; the parameter asks for no code")))
    })
}

/// Whether a text is a language's English name (`French`, `english`).
pub(super) fn is_language_name(text: &str) -> bool {
    LANGUAGES.iter().any(|(_, name)| text.trim().eq_ignore_ascii_case(name))
}

/// The languages the goal names, as (code, the name as the goal writes it).
fn languages_in(goal: &str) -> Vec<(&'static str, String)> {
    let words: Vec<&str> = goal.split(|c: char| !c.is_alphabetic()).filter(|w| !w.is_empty()).collect();
    LANGUAGES
        .iter()
        .filter_map(|(code, name)| {
            let written = words.iter().find(|w| w.eq_ignore_ascii_case(name))?;
            Some((*code, written.to_string()))
        })
        .collect()
}

/// The ISO 639-1 code a text is, alone or with a region (`fr`, `FR`, `fr-FR`, `pt_BR`).
fn code_of(text: &str) -> Option<String> {
    let language = text.split(['-', '_']).next()?;
    let region_ok = text.len() == language.len() || text.len() == language.len() + 3;
    (language.len() == 2 && region_ok && language.chars().all(|c| c.is_ascii_alphabetic()))
        .then(|| language.to_ascii_lowercase())
}

/// Rule `language-codes` (mend, nestful).
pub struct LanguageCodes;

impl super::Rule for LanguageCodes {
    fn about(&self) -> super::About {
        super::About {
            name: "language-codes",
            stage: super::Stage::Mend,
            profile: super::Profile::Nestful,
            keys_on:
                "a language the goal names, passed by name to a parameter whose description asks for a code: its code",
        }
    }

    fn mend(&self, plan: &mut Plan, tools: &ToolRegistry, _seen: &str) -> Vec<String> {
        mend_languages_to_codes(plan, tools)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_are_named_words_and_codes_may_carry_a_region() {
        assert_eq!(
            languages_in("From english to French, not Frenchman."),
            [("en", "english".into()), ("fr", "French".into())]
        );
        assert_eq!(code_of("fr-FR").as_deref(), Some("fr"));
        assert_eq!(code_of("PT_br").as_deref(), Some("pt"));
        assert_eq!(code_of("French"), None);
        assert_eq!(code_of("en-"), None);
    }
}
