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
/// first. Digits inside words such as `s1` or `mp3` are left out.
pub fn numbers_in(text: &str) -> Vec<Number> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_here = chars[i].is_ascii_digit() && (i == 0 || !chars[i - 1].is_alphanumeric());
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
        let word_follows = chars.get(j).is_some_and(|c| c.is_alphabetic());
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
}
