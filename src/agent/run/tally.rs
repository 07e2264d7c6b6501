//! Lists and numbers by code: how two values compare ([`order`]), the item with the lowest or highest value of a
//! field ([`extreme`]), and the sum of a field over items ([`total`]). The planner model only writes what to work
//! out (agent::run::list_query); the comparing and the adding are done here, so a reading cannot name a dearer offer
//! as the cheapest or add two prices wrongly.
//!
//! A value compares where it is a number (a JSON number, or a text that is one with a currency sign, a unit after it
//! or thousands separators: `$1,299.50`, `19 EUR`) or a date written year first (`2026-12-06`, `2026-12-06T08:30`),
//! which orders as text does.

use std::cmp::Ordering;

use serde_json::Value;

/// One value, ready to compare.
#[derive(Debug, Clone, PartialEq)]
enum Key {
    Number(f64),
    Date(String),
}

/// The index of the item with the lowest (`highest` false) or highest value of `field`; the first such item on a
/// tie. `None` where no item holds a comparable value of it.
pub fn extreme(items: &[Value], field: &str, highest: bool) -> Option<usize> {
    let mut best: Option<(usize, &Value)> = None;
    for (i, item) in items.iter().enumerate() {
        let Some(value) = item.get(field).filter(|v| order(v, v).is_some()) else { continue };
        let better = match best {
            None => true,
            // A number beside a date: the field has no one order.
            Some((_, held)) => order(value, held)? == if highest { Ordering::Greater } else { Ordering::Less },
        };
        if better {
            best = Some((i, value));
        }
    }
    best.map(|(i, _)| i)
}

/// The sum of `field` over `items` as text, with as many decimals as the most any value writes (19.99 + 5.01 is
/// 25.00, not 25.000000000000004). `None` where an item lacks a number there.
pub fn total(items: &[Value], field: &str) -> Option<String> {
    let mut sum = 0.0;
    let mut decimals = 0;
    for item in items {
        let text = number_text(item.get(field)?)?;
        decimals = decimals.max(text.split_once('.').map_or(0, |(_, fraction)| fraction.len()));
        sum += text.parse::<f64>().ok()?;
    }
    Some(format!("{sum:.decimals$}"))
}

/// How two values compare where both are numbers, or both dates written year first; `None` otherwise.
pub fn order(a: &Value, b: &Value) -> Option<Ordering> {
    match (key(a)?, key(b)?) {
        (Key::Number(x), Key::Number(y)) => x.partial_cmp(&y),
        (Key::Date(x), Key::Date(y)) => Some(x.cmp(&y)),
        _ => None,
    }
}

/// A value as a key to compare by, where it is a number or a date written year first.
fn key(value: &Value) -> Option<Key> {
    if let Some(text) = number_text(value) {
        return text.parse().ok().map(Key::Number);
    }
    let text = value.as_str()?.trim();
    let bytes = text.as_bytes();
    let date = bytes.len() >= 10
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[5..7].iter().all(u8::is_ascii_digit)
        && bytes[7] == b'-'
        && bytes[8..10].iter().all(u8::is_ascii_digit);
    date.then(|| Key::Date(text.to_string()))
}

/// The plain decimal a value writes: a JSON number, or a text that is one number with a currency sign or a unit
/// beside it and thousands separators (`$1,299.50` → `1299.50`). A text with two numbers, or none, is no number.
fn number_text(value: &Value) -> Option<String> {
    match value {
        Value::Number(n) => Some(n.to_string()),
        Value::String(text) => {
            let text = text.trim();
            let numeric = |c: char| c.is_ascii_digit() || matches!(c, '.' | ',' | '-');
            let start = text.find(|c: char| c.is_ascii_digit() || c == '-')?;
            let end = text[start..].find(|c: char| !numeric(c)).map_or(text.len(), |at| start + at);
            let digits: String = text[start..end].chars().filter(|c| *c != ',').collect();
            // A sign or a unit, not words: at most four characters either side, none of them a digit.
            let unit = |side: &str| side.trim().chars().count() <= 4 && !side.chars().any(|c| c.is_ascii_digit());
            (unit(&text[..start]) && unit(&text[end..]) && digits.parse::<f64>().is_ok()).then_some(digits)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn offers() -> Vec<Value> {
        json!([
            {"name": "Harbour Ferry", "price": 31, "on": "2026-12-09"},
            {"name": "Night Coach", "price": "$19.50", "on": "2026-12-07"},
            {"name": "Fast Rail", "price": "1,042 EUR", "on": "2026-12-08T09:00"},
        ])
        .as_array()
        .unwrap()
        .clone()
    }

    #[test]
    fn numbers_compare_by_value_and_dates_year_first() {
        assert_eq!(order(&json!("$1,042"), &json!(31)), Some(Ordering::Greater));
        assert_eq!(order(&json!("2026-12-08T09:00"), &json!("2026-12-09")), Some(Ordering::Less));
        assert_eq!(order(&json!("free"), &json!(3)), None);
        assert_eq!(order(&json!("2026-12-08"), &json!(3)), None);
    }

    #[test]
    fn the_extremes_are_found_by_value_not_by_text() {
        let items = offers();
        assert_eq!(extreme(&items, "price", false), Some(1));
        assert_eq!(extreme(&items, "price", true), Some(2), "1,042 is more than 31");
        assert_eq!(extreme(&items, "on", false), Some(1));
        assert_eq!(extreme(&items, "on", true), Some(0));
        assert_eq!(extreme(&items, "name", true), None);
    }

    #[test]
    fn totals_keep_the_decimals_the_values_write() {
        let items = json!([{"p": 19.99}, {"p": "5.01"}, {"p": 2}]);
        assert_eq!(total(items.as_array().unwrap(), "p").as_deref(), Some("27.00"));
        let missing = json!([{"p": 1}, {"q": 2}]);
        assert_eq!(total(missing.as_array().unwrap(), "p"), None);
        assert_eq!(number_text(&json!("12 apples and 3 pears")), None);
        assert_eq!(number_text(&json!("-4")).as_deref(), Some("-4"));
    }
}
