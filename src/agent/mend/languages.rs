//! Mends a language the goal names and the plan passes in the other form: "from English to French" planned as
//! `source_language: "en"`, where the parameter does not ask for a code (the prompt says to copy names in the
//! goal's words), or `"French"` where the parameter's description asks for a code (`fr`).
//!
//! Why: the 1.5B planner turned the languages of eight NESTFUL goals into ISO codes that no tool description asked
//! for, against the prompt's rule, the only wrong value of six of them.

use serde_json::Value;

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

/// Rewrites top-level text arguments of language parameters (a name or description with "lang" in it) that
/// stand for a language the goal names, in the form the parameter does not take: a code (`fr`, `fr-FR`) becomes
/// the name as the goal writes it, unless the description asks for a code, where the name becomes the code.
/// Returns one line per mend (`s1: target_language "fr" → "French" (the goal's French)`).
pub fn mend_languages(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    let named = languages_in(&plan.goal);
    if named.is_empty() {
        return Vec::new();
    }
    let mut mends = Vec::new();
    for step in &mut plan.steps {
        let Some(spec) = registry.spec(&step.tool) else { continue };
        for (name, value) in step.args.iter_mut() {
            let Some(text) = value.as_str() else { continue };
            let description = spec.args_schema["properties"][name.as_str()]["description"].as_str().unwrap_or("");
            let description = description.to_lowercase();
            if !(name.to_lowercase().contains("lang") || description.contains("lang")) {
                continue;
            }
            let wants_code = description.contains("code") || description.contains("iso");
            let written = text.trim();
            let mended = named.iter().find_map(|(code, as_written)| {
                let is_code = code_of(written).is_some_and(|c| c == *code);
                let is_name = written.eq_ignore_ascii_case(as_written);
                if wants_code && is_name {
                    Some((code.to_string(), as_written))
                } else if !wants_code && is_code {
                    Some((as_written.clone(), as_written))
                } else {
                    None
                }
            });
            if let Some((new, as_written)) = mended {
                mends.push(format!("{}: {name} {value} → \"{new}\" (the goal's {as_written})", step.id));
                *value = Value::String(new);
            }
        }
    }
    mends
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
