//! Rule `nothing-found-narrowed`: a search that found nothing is asked again with one word of its query at a time
//! (never a tool that says it changes things).

use std::time::Instant;

use serde_json::{Map, Value};

use super::{Agent, Approval};
use crate::agent::plan::refs::holds_nothing;
use crate::agent::plan::Step;
use crate::agent::run::executor::ExecutorCall;
use crate::settings::Mend;
use crate::Result;

/// Narrower queries tried at most, each one tool call.
const MAX_NARROWER: usize = 4;

impl Agent<'_> {
    /// After step `step` called its tool with `args` and found nothing ([`found_nothing`]): where the call has one
    /// text argument of several words, calls the tool again with that argument cut to one of its words
    /// ([`narrower_queries`]) until one finds something. Small planners ask a search tool for the whole question
    /// ("Alice's birthday") where the tool matches a name or a word ("Alice"); given the empty set, the step after
    /// it makes an answer up. Each call is logged (`via: narrowed`); the last output is the step's. Off with
    /// `--mend off`, and where each step is approved before it runs.
    pub(super) fn narrow_search(&mut self, version: u32, step: &Step, args: &Map<String, Value>) -> Result<()> {
        // Never a tool that changes things: its empty answer is no search, and a narrower call would change
        // something else (`delete_entities` of "Bob" for "Bob's files").
        let changes = self.registry.spec(&step.tool).is_none_or(|spec| spec.changes_things == Some(true));
        if self.settings.mend == Mend::Off || self.settings.approve == Approval::Steps || changes {
            return Ok(());
        }
        for narrower in narrower_queries(args) {
            if self.spent_budget(1).is_some() {
                break;
            }
            let started = Instant::now();
            let call = ExecutorCall { tool: step.tool.clone(), args: narrower.clone() };
            let called = self.call_written(version, step, call);
            let ms = started.elapsed().as_millis() as u64;
            match called {
                Ok((narrower, output)) => {
                    let found = !found_nothing(&output);
                    self.finish_step(version, step, narrower, Ok(output), ms, "narrowed")?;
                    if found {
                        return Ok(());
                    }
                }
                // Logged as the call's result; the step keeps the output it had, so a narrower query the tool
                // refuses changes nothing.
                Err(e) => {
                    self.finish_step(version, step, narrower, Err(e.to_string()), ms, "narrowed")?;
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// Whether `output` is a result set with nothing in it: an object whose every field is empty (an empty list or
/// object, an empty string, null) and at least one of them a list or object (`{"entities": [], "relations": []}`).
pub(super) fn found_nothing(output: &Value) -> bool {
    let Value::Object(map) = output else { return false };
    !map.is_empty() && map.values().all(holds_nothing) && map.values().any(|v| v.is_array() || v.is_object())
}

/// Where `args` has exactly one text argument (a text, or a list of one text: `open_nodes` `names: ["Alice's
/// birthday"]`) and it has several words: the same arguments with that text cut to one word (in a list of one
/// where it was in one), names (capitalised words) first, then the other words of four letters or more, each once,
/// at most [`MAX_NARROWER`]. A possessive's `'s` is dropped ("Alice's" → "Alice").
pub(super) fn narrower_queries(args: &Map<String, Value>) -> Vec<Map<String, Value>> {
    let texts: Vec<(&String, &str, bool)> = args
        .iter()
        .filter_map(|(k, v)| match v {
            Value::String(text) => Some((k, text.as_str(), false)),
            Value::Array(items) if items.len() == 1 => Some((k, items[0].as_str()?, true)),
            _ => None,
        })
        .collect();
    let [(name, text, listed)] = texts.as_slice() else { return Vec::new() };
    let words: Vec<String> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’' || c == '-'))
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .map(|w| w.strip_suffix("'s").or_else(|| w.strip_suffix("’s")).unwrap_or(w).to_string())
        .filter(|w| !w.is_empty())
        .collect();
    if words.len() < 2 {
        return Vec::new();
    }
    let is_name = |w: &String| w.chars().next().is_some_and(char::is_uppercase);
    let names = words.iter().filter(|w| is_name(w));
    let others = words.iter().filter(|w| !is_name(w) && w.chars().count() >= 4);
    let mut seen: Vec<String> = Vec::new();
    for word in names.chain(others) {
        if !seen.iter().any(|s| s.eq_ignore_ascii_case(word)) {
            seen.push(word.clone());
        }
    }
    seen.into_iter()
        .take(MAX_NARROWER)
        .map(|word| {
            let mut narrower = args.clone();
            let word = Value::String(word);
            narrower.insert((*name).clone(), if *listed { Value::Array(vec![word]) } else { word });
            narrower
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_result_set_with_nothing_in_it_is_found_nothing_and_anything_else_is_not() {
        assert!(found_nothing(&json!({"entities": [], "relations": []})));
        assert!(found_nothing(&json!({"results": [], "next": null, "note": ""})));
        assert!(!found_nothing(&json!({"entities": [{"name": "Alice"}], "relations": []})));
        assert!(!found_nothing(&json!({"entries": [], "path": "."})), "a listing of an empty folder says where");
        assert!(!found_nothing(&json!({"count": 0, "items": []})));
        assert!(!found_nothing(&json!({"text": ""})), "no list: empty output, judged elsewhere");
        assert!(!found_nothing(&json!([])));
        assert!(!found_nothing(&json!({})));
    }

    #[test]
    fn a_query_of_several_words_is_cut_to_its_names_then_its_longer_words() {
        let queries: Vec<Value> = narrower_queries(&args(json!({"query": "Alice's birthday"})))
            .into_iter()
            .map(|a| a["query"].clone())
            .collect();
        assert_eq!(queries, vec![json!("Alice"), json!("birthday")]);
        let queries: Vec<Value> = narrower_queries(&args(json!({"q": "my next dentist appointment", "limit": 5})))
            .into_iter()
            .map(|a| a["q"].clone())
            .collect();
        assert_eq!(queries, vec![json!("next"), json!("dentist"), json!("appointment")]);
        let cut = narrower_queries(&args(json!({"q": "people who like Jazz and JAZZ", "limit": 5})));
        assert_eq!(cut[0], args(json!({"q": "Jazz", "limit": 5})), "names first, the other arguments kept");
        let words: Vec<&Value> = cut.iter().map(|a| &a["q"]).collect();
        assert_eq!(words, [&json!("Jazz"), &json!("people"), &json!("like")], "each word once, short ones left out");
        assert!(narrower_queries(&args(json!({"query": "Alice"}))).is_empty(), "one word: nothing narrower");
        assert!(narrower_queries(&args(json!({"path": "a b", "content": "c d"}))).is_empty(), "two texts");
        assert!(narrower_queries(&args(json!({"entities": [{"name": "a b"}]}))).is_empty());
        // A list of one name is cut the same way and stays a list; a list of several is left alone.
        let names = narrower_queries(&args(json!({"names": ["Alice's birthday"]})));
        assert_eq!(names[0], args(json!({"names": ["Alice"]})));
        assert!(narrower_queries(&args(json!({"names": ["Alice Smith", "Bob Jones"]}))).is_empty());
        let many = narrower_queries(&args(json!({"query": "Ann Bob Cid Dee Eve"})));
        assert_eq!(many.len(), MAX_NARROWER);
    }
}
