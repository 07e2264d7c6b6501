//! Where an answer's names come from: the values an answer writes as names (a run of capitalised words that does
//! not merely open a sentence: "John Doe", "Leeds") or quotes ('Watering'), each of which must be in the goal or in
//! a tool's result ([`unsupported_names`]). A model's reading (an `llm` step's text) is no source: it is what is
//! being checked.
//!
//! Why: over a database's error text ("no such column: signup_date") the 0.5B read "The most recent customer to sign
//! up was John Doe", and over a to-do list it ticked off "the task 'Watering'"; the joiner copied both. Stated on the
//! answer's writing (capitals and quotes, as Latin-script text writes names), never on a list of words; numbers have
//! their own check (`joiner::unsupported_numbers`).

use serde_json::Value;

use crate::agent::records::readable;
use crate::agent::rules::support::forms::{date_names, find_moments, Date, Moment};

/// The longest quoted text checked (a longer one is a sentence quoted, not a value).
const QUOTE_CHARS: usize = 80;

/// What names are looked up in: the goal and each tool result, as returned and as a model reads it
/// ([`readable`]: a literal's rows), with the month and weekday of each date they write (a reading says "December"
/// of `2025-12-05`), lower-cased.
pub fn sources<'a>(goal: &str, results: impl IntoIterator<Item = &'a Value>) -> String {
    let mut sources = goal.to_string();
    for output in results {
        sources.push_str(&format!("\n{output}\n{}", readable(output)));
    }
    let dates: Vec<Date> = find_moments(&sources)
        .into_iter()
        .filter_map(|(_, moment)| match moment {
            Moment::Date(d) | Moment::DateTime(d, _) => Some(d),
            Moment::Time(_) => None,
        })
        .collect();
    for date in dates {
        sources.push_str(&format!("\n{}", date_names(date).join(" ")));
    }
    sources.to_lowercase()
}

/// The names and quoted values of `answer` that `sources` (lower-cased: the goal and the tools' results) does not
/// hold, each once, as the answer writes them.
pub fn unsupported_names(answer: &str, sources: &str) -> Vec<String> {
    let held = |value: &str| {
        let value = value.to_lowercase();
        sources.contains(&value) || value.split_whitespace().all(|word| sources.contains(word))
    };
    let mut unsupported: Vec<String> = Vec::new();
    for value in names(answer).into_iter().chain(quoted(answer)) {
        if !held(&value) && !unsupported.contains(&value) {
            unsupported.push(value);
        }
    }
    unsupported
}

/// The names and quoted texts `text` writes ([`unsupported_names`]' kinds), each once, lower-cased: with the numbers,
/// what two readings of one question are compared on (`agent::run::agreement`).
pub fn names_and_quotes(text: &str) -> Vec<String> {
    let mut values: Vec<String> = Vec::new();
    for value in names(text).into_iter().chain(quoted(text)).map(|v| v.to_lowercase()) {
        if !values.contains(&value) {
            values.push(value);
        }
    }
    values
}

/// Runs of capitalised words (a capital, then at least one lower-case letter), the word that opens a sentence
/// left out.
fn names(text: &str) -> Vec<String> {
    let mut runs = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    let mut sentence_start = true;
    let mut previous_end = 0;
    for (word, ends_sentence) in words(text) {
        // A run is words apart by spaces only: "'John Doe', 'Leeds'" and "Ben Carter, Dev Patel" are two each.
        let start = word.as_ptr() as usize - text.as_ptr() as usize;
        if !text[previous_end..start].trim().is_empty() && !run.is_empty() {
            runs.push(run.join(" "));
            run.clear();
        }
        previous_end = start + word.len();
        let capitalised = word.chars().next().is_some_and(char::is_uppercase) && word.chars().any(char::is_lowercase);
        if capitalised && !sentence_start {
            // "Ben's" names Ben.
            run.push(word.strip_suffix("'s").or_else(|| word.strip_suffix("’s")).unwrap_or(word));
        } else if !run.is_empty() {
            runs.push(run.join(" "));
            run.clear();
        }
        if capitalised && sentence_start && !ends_sentence {
            // The opening word may be a name or mere capitals: the words after it decide.
            sentence_start = false;
            continue;
        }
        if ends_sentence && !run.is_empty() {
            runs.push(run.join(" "));
            run.clear();
        }
        sentence_start = ends_sentence;
    }
    if !run.is_empty() {
        runs.push(run.join(" "));
    }
    runs
}

/// The words of `text` (letters, digits, inner apostrophes and hyphens), each with whether a sentence ends after it.
fn words(text: &str) -> Vec<(&str, bool)> {
    let mut found = Vec::new();
    let mut start: Option<usize> = None;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (i, &(at, c)) in chars.iter().enumerate() {
        let inner = (c == '\'' || c == '-' || c == '’')
            && start.is_some()
            && chars.get(i + 1).is_some_and(|(_, next)| next.is_alphanumeric());
        if c.is_alphanumeric() || inner {
            start.get_or_insert(at);
            continue;
        }
        if let Some(from) = start.take() {
            found.push((&text[from..at], false));
        }
        if matches!(c, '.' | '!' | '?' | '\n') {
            if let Some(last) = found.last_mut() {
                last.1 = true;
            }
        }
    }
    if let Some(from) = start {
        found.push((&text[from..], false));
    }
    found
}

/// Texts in quotes (' " ‘ ’ “ ” `), a quote opening after no letter and closing before none.
fn quoted(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let close = match chars[i] {
            '\'' => '\'',
            '"' => '"',
            '`' => '`',
            '‘' => '’',
            '“' => '”',
            _ => {
                i += 1;
                continue;
            }
        };
        let opens = i == 0 || !chars[i - 1].is_alphanumeric();
        let end = (i + 1..chars.len())
            .find(|&j| chars[j] == close && chars.get(j + 1).is_none_or(|next| !next.is_alphanumeric()));
        match end {
            Some(j) if opens && j > i + 1 => {
                let inside: String = chars[i + 1..j].iter().collect();
                if inside.trim().chars().count() <= QUOTE_CHARS && inside.chars().any(char::is_alphanumeric) {
                    found.push(inside.trim().to_string());
                }
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_quotes_the_results_do_not_hold_are_unsupported() {
        let sources = "customers: ben carter (leeds), farid haddad. goal: who signed up last?".to_lowercase();
        assert_eq!(unsupported_names("The most recent customer to sign up was John Doe.", &sources), ["John Doe"]);
        assert!(unsupported_names("The most recent customer is Farid Haddad.", &sources).is_empty());
        assert!(unsupported_names("Ben Carter lives in Leeds.", &sources).is_empty(), "a name may open a sentence");
        assert_eq!(unsupported_names("John Doe signed up last.", &sources), ["Doe"], "the words after it decide");
        assert_eq!(unsupported_names("The task 'Watering' was ticked off.", &sources), ["Watering"]);
        assert!(unsupported_names("Yes. No orders. I haven't paid, it's Ben's.", &sources).is_empty());
        assert!(unsupported_names("There are 3 things on your list: call the bank.", &sources).is_empty());
        assert!(unsupported_names("It is stored as \"farid haddad\" in the table.", &sources).is_empty());
        // Runs end at punctuation: each name is looked up alone.
        assert_eq!(
            names("Customers: Ben Carter, Dev Patel and 'John Doe', 'Leeds'"),
            ["Ben Carter", "Dev Patel", "John Doe", "Leeds"]
        );
    }

    /// A month or weekday name read from a date a result writes is held by that result; another is not.
    #[test]
    fn the_month_and_weekday_of_a_date_in_a_result_are_held() {
        let result = serde_json::json!({"date": "2026-12-25", "event": "office party"});
        let sources = sources("When is the office party?", [&result]);
        assert!(unsupported_names("The office party is on Friday, December 25.", &sources).is_empty());
        assert_eq!(unsupported_names("The office party is on Monday in March.", &sources), ["Monday", "March"]);
    }

    #[test]
    fn words_know_where_sentences_end_and_keep_their_apostrophes() {
        let found = words("It's Ben's turn. Next: Mia-Rose!");
        assert_eq!(found, [("It's", false), ("Ben's", false), ("turn", true), ("Next", false), ("Mia-Rose", true)]);
        assert_eq!(quoted("Say 'hi' and don't 'forget' \"this one\""), ["hi", "forget", "this one"]);
    }
}
