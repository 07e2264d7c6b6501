//! Numbers as a text writes them (`1,250.50`, `-8`, not the `3` of `mp3`) and when two numbers are the same: what
//! the joiner checks an answer's numbers with, and what the plan mends compare a plan's values to the goal's with.

/// A number as written and as a value.
#[derive(Debug, Clone, PartialEq)]
pub struct Number {
    /// Its value.
    pub value: f64,
    /// How it was written (thousands separators removed).
    pub text: String,
    /// Written with a minus sign of its own (`-8`, `(-5)`, `: -37`), not after a word or a bracket as in
    /// `9-17`, where the minus is a subtraction's; a JSON number below zero.
    pub negative: bool,
}

impl Number {
    /// Decimal places as written.
    pub fn decimals(&self) -> usize {
        self.text.split_once('.').map_or(0, |(_, fraction)| fraction.len())
    }
}

/// The numbers written in `text`: digits with optional `,` thousands groups and a decimal part, as magnitudes
/// (an answer may say "a loss of 5" for -5) marked [`Number::negative`] where a minus sign of their own comes
/// first. Digits inside words such as `s1` or `mp3` and ordinals (`7th`) are left out; a number with a unit glued
/// on (`4.0h`, `8am`, `5km`) is a number, and so are the day and the hour of a timestamp (`2026-11-30T03:15`).
pub fn numbers_in(text: &str) -> Vec<Number> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_here =
            chars[i].is_ascii_digit() && (i == 0 || !chars[i - 1].is_alphanumeric() || timestamp_t(&chars, i - 1));
        if !starts_here {
            i += 1;
            continue;
        }
        let mut j = i;
        let mut digits = String::new();
        while j < chars.len() {
            let c = chars[j];
            let next_is_digit = chars.get(j + 1).is_some_and(char::is_ascii_digit);
            if c.is_ascii_digit() {
                digits.push(c);
            } else if c == ','
                && next_is_digit
                && chars.get(j + 1..j + 4).is_some_and(|g| g.iter().all(char::is_ascii_digit))
                && !chars.get(j + 4).is_some_and(char::is_ascii_digit)
                && !digits.contains('.')
            {
                // A thousands separator: exactly three digits follow.
            } else if c == '.' && next_is_digit && !digits.contains('.') {
                digits.push(c);
            } else {
                break;
            }
            j += 1;
        }
        let word_follows =
            chars.get(j).is_some_and(|c| c.is_alphabetic()) && !timestamp_t(&chars, j) && !unit_at(&chars, j);
        if !word_follows {
            if let Ok(value) = digits.parse::<f64>() {
                let negative = i > 0
                    && chars[i - 1] == '-'
                    && (i == 1 || !(chars[i - 2].is_alphanumeric() || matches!(chars[i - 2], ')' | ']' | '.')));
                found.push(Number { value, text: digits, negative });
            }
        }
        i = j.max(i + 1);
    }
    found
}

/// Whether `chars[at]` is the `T` between a timestamp's date and time (`30T03`): a separator, not a word.
fn timestamp_t(chars: &[char], at: usize) -> bool {
    chars[at] == 'T' && at > 0 && chars[at - 1].is_ascii_digit() && chars.get(at + 1).is_some_and(char::is_ascii_digit)
}

/// Units people and tools glue to a number (`+4.0h` from a time server, `8am`, `5km`, `2GB`), case aside: the
/// letters at `at` are one of them and end there. Ordinals (`7th`) and names (`mp3`, `v2`) are not numbers.
const GLUED_UNITS: &[&str] = &[
    "am", "pm", "h", "hr", "hrs", "min", "mins", "s", "sec", "ms", "km", "m", "cm", "mm", "kg", "g", "mg", "l", "ml",
    "kb", "mb", "gb", "tb", "k", "x",
];

fn unit_at(chars: &[char], at: usize) -> bool {
    let letters: String = chars[at..].iter().take_while(|c| c.is_alphabetic()).collect::<String>().to_lowercase();
    GLUED_UNITS.contains(&letters.as_str())
        && !chars.get(at + letters.chars().count()).is_some_and(|c| c.is_ascii_digit())
}

/// Whether `x` and `y` are the same number, up to a float's error relative to `x` (at least 1e-9).
pub fn same_value(x: f64, y: f64) -> bool {
    (x - y).abs() <= 1e-9 * x.abs().max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> Vec<String> {
        numbers_in(text).into_iter().map(|n| n.text).collect()
    }

    #[test]
    fn numbers_are_read_as_written_without_ids_or_units_glued_to_words() {
        assert_eq!(texts("It costs 1,250.50 dollars, 3 each; s1 gave 48."), ["1250.50", "3", "48"]);
        assert_eq!(texts("mp3 v2 and 7th"), Vec::<String>::new());
        assert_eq!(texts("A loss of -5 at 12:30"), ["5", "12", "30"]);
        assert_eq!(texts("1,2,3 and 10,000"), ["1", "2", "3", "10000"]);
        assert_eq!(texts("The end is 15."), ["15"]);
    }

    #[test]
    fn timestamps_and_units_glued_on_are_read_but_not_ordinals() {
        assert_eq!(texts("2026-11-30T03:15:00+08:00"), ["2026", "11", "30", "03", "15", "00", "08", "00"]);
        assert!(numbers_in("2026-11-30T03:15:00-05:00").iter().all(|n| !n.negative));
        assert_eq!(texts("+4.0h, at 8am, 5km and 2GB"), ["4.0", "8", "5", "2"]);
        assert_eq!(texts("the 7th, 2nd run, mp3, v2, 5x4y and 3rd"), Vec::<String>::new());
    }
}
