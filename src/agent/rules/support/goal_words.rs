//! Whether the goal mentions a value or a parameter: by its words, compared by their stems, so "drive" mentions
//! `driving` and "maximum results" mentions `max_results`, or by its numbers, compared as values.

use serde_json::Value;

use crate::agent::numbers::{numbers_in, same_value};

/// The goal as the mends read it: its words' stems and its numbers.
pub struct GoalWords {
    lower: String,
    stems: Vec<String>,
    numbers: Vec<f64>,
}

impl GoalWords {
    pub fn new(goal: &str) -> Self {
        let lower = goal.to_lowercase();
        let stems = words(&lower).map(stem).collect();
        let numbers = numbers_in(goal).iter().map(|n| n.value).collect();
        GoalWords { lower, stems, numbers }
    }

    /// Whether the goal writes `value`: a number among its numbers, a text inside it (case aside) or whose every
    /// word it uses, an array or object whose every leaf it writes. `true`, `false` and `null` are no words of a
    /// goal, so they are never mentioned by value.
    pub fn mentions_value(&self, value: &Value) -> bool {
        match value {
            Value::Number(n) => n.as_f64().is_some_and(|v| self.numbers.iter().any(|w| same_value(*w, v))),
            Value::String(text) => {
                let lower = text.trim().to_lowercase();
                !lower.is_empty() && (self.lower.contains(&lower) || self.uses_all(&lower))
            }
            Value::Array(items) => !items.is_empty() && items.iter().all(|v| self.mentions_value(v)),
            Value::Object(map) => !map.is_empty() && map.values().all(|v| self.mentions_value(v)),
            Value::Bool(_) | Value::Null => false,
        }
    }

    /// Whether the goal names a parameter: every word of its name (`max_results`, `includeNumbers`) of three
    /// letters or more, by stem or as the start of a longer word ("max" for "maximum"), leaving out verbs such as
    /// "include" that a goal does not say ("with numbers" names `include_numbers`).
    pub fn mentions_name(&self, name: &str) -> bool {
        let spaced = split_name(name);
        let long: Vec<&str> = words(&spaced).filter(|w| w.len() >= 3).collect();
        let telling: Vec<&str> = long.iter().copied().filter(|w| !SETTING_VERBS.contains(w)).collect();
        let named = if telling.is_empty() { long } else { telling };
        !named.is_empty() && named.iter().all(|w| self.has_word(w))
    }

    /// Whether the goal writes any part of `value`: one of its numbers, or one of its texts' words of three
    /// letters or more or numbers. Looser than [`GoalWords::mentions_value`]: a value with no part in the goal
    /// was made up, and `4*n - 9 = 27` for "Four times a number, minus 9, is 27" is not.
    pub fn mentions_any_part(&self, value: &Value) -> bool {
        match value {
            Value::Number(_) => self.mentions_value(value),
            Value::String(text) => {
                let lower = text.to_lowercase();
                self.mentions_value(value)
                    || words(&lower).any(|w| (w.len() >= 3 && self.has_word(w)) || self.writes_number(w))
            }
            Value::Array(items) => items.iter().any(|v| self.mentions_any_part(v)),
            Value::Object(map) => map.values().any(|v| self.mentions_any_part(v)),
            Value::Bool(_) | Value::Null => false,
        }
    }

    /// How many of a name's words of three letters or more (`average_sales_per_day`: 4) the goal uses, and how
    /// many there are, leaving out `ignored` words.
    pub fn name_words_used(&self, name: &str, ignored: &[&str]) -> (usize, usize) {
        let spaced = split_name(name);
        let named: Vec<&str> = words(&spaced).filter(|w| w.len() >= 3 && !ignored.contains(w)).collect();
        (named.iter().filter(|w| self.has_word(w)).count(), named.len())
    }

    fn writes_number(&self, word: &str) -> bool {
        word.parse::<f64>().is_ok_and(|v| self.numbers.iter().any(|w| same_value(*w, v)))
    }

    fn uses_all(&self, text: &str) -> bool {
        let mut used = words(text).peekable();
        used.peek().is_some() && used.all(|w| self.has_word(w))
    }

    /// Whether the goal uses `word` (a lowercase word), by stem or as the start of a longer word.
    pub fn has_word(&self, word: &str) -> bool {
        let wanted = stem(word);
        self.stems.iter().any(|s| *s == wanted || (wanted.len() >= 3 && s.starts_with(&wanted)))
    }
}

/// Words that parameter names put before what they set (`include_numbers`, `use_cache`, `show_hidden`).
const SETTING_VERBS: &[&str] = &["include", "enable", "use", "allow", "show", "has", "with", "should"];

/// The words of a lowercase text: runs of letters and digits.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty())
}

/// A parameter's name as lowercase words: `_`, `-` and camelCase humps split it.
fn split_name(name: &str) -> String {
    let mut spaced = String::with_capacity(name.len() + 4);
    let mut previous_lower = false;
    for c in name.chars() {
        if c.is_uppercase() && previous_lower {
            spaced.push(' ');
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        spaced.extend(c.to_lowercase());
    }
    spaced
}

/// A crude English stem: enough that "driving", "drives" and "drive" meet, not a linguist's.
fn stem(word: &str) -> String {
    let mut w = word;
    for suffix in ["ing", "ies", "es", "ed", "s", "e"] {
        if w.len() > suffix.len() + 2 {
            if let Some(cut) = w.strip_suffix(suffix) {
                w = cut;
                break;
            }
        }
    }
    w.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_mentioned_by_their_words_or_numbers() {
        let goal = GoalWords::new("Search 5 books on Driving in Paris, at most 1,000 pages; send to 1234567890.");
        assert!(goal.mentions_value(&json!("driving")));
        assert!(goal.mentions_value(&json!("drive")));
        assert!(goal.mentions_value(&json!("paris")));
        assert!(goal.mentions_value(&json!(5)));
        assert!(goal.mentions_value(&json!(1000)));
        assert!(goal.mentions_value(&json!(["Paris", 5])));
        assert!(!goal.mentions_value(&json!(1)), "a digit inside a longer number is not the number");
        assert!(!goal.mentions_value(&json!("walking")));
        assert!(!goal.mentions_value(&json!(true)));
        assert!(!goal.mentions_value(&json!("")));
        assert!(!goal.mentions_value(&json!(["Paris", "QR"])));
    }

    #[test]
    fn parameters_are_mentioned_by_every_word_of_their_name() {
        let goal = GoalWords::new("Give the maximum results, optimize the route, include numbers.");
        assert!(goal.mentions_name("max_results"));
        assert!(goal.mentions_name("optimize_route"));
        assert!(goal.mentions_name("includeNumbers"));
        assert!(!goal.mentions_name("include_lowercase"));
        assert!(!goal.mentions_name("format"));
        assert!(!goal.mentions_name("_"));
        let goal = GoalWords::new("A password with numbers and special characters.");
        assert!(goal.mentions_name("include_numbers") && goal.mentions_name("include_special_characters"));
        assert!(!goal.mentions_name("include_uppercase"));
        assert!(GoalWords::new("Include all of it.").mentions_name("include"), "a name of one such verb is its word");
    }

    #[test]
    fn any_part_of_a_value_or_name_is_looked_for() {
        let goal = GoalWords::new("Four times a number, minus 9, is 27. Then average the sales per day.");
        assert!(goal.mentions_any_part(&json!("4*n - 9 = 27")));
        assert!(goal.mentions_any_part(&json!([{"value": 1000, "kind": "sales"}])));
        assert!(!goal.mentions_any_part(&json!({"basic_salary": 5000, "allowance": 1000})));
        assert!(!goal.mentions_any_part(&json!("current location")));
        assert!(!goal.mentions_any_part(&json!(true)));
        assert_eq!(goal.name_words_used("average_sales_per_day", &[]), (4, 4));
        assert_eq!(goal.name_words_used("calculate_gross_salary", &["calculate"]), (0, 2));
        assert_eq!(goal.name_words_used("totalSales", &[]), (1, 2));
    }
}
