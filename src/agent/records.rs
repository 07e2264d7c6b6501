//! Results as a model reads them ([`readable`]): a list counted by code and shown one item a line, numbered; a
//! record's fields that hold nothing left out (a record without a list stays compact JSON); and a text that is a whole JSON or Python literal (many MCP servers
//! answer `str(rows)`: `[{'name': 'Ben Carter', 'city': 'Leeds'}]`) read as the data it writes.
//!
//! Why: shown compact JSON, the 0.5B counted "3 things you still have to do" in a list of 6 open items and the
//! joiner, shown its first 600 characters, copied the count; a list with its count written by code, one item a
//! line, leaves a small model nothing to count and less to mix up. The counts are numbers an answer may give
//! ([`list_lengths`]), so the joiner's number check accepts a count the code made and no other.

use serde_json::{Map, Value};

/// Characters of one value inside a row (a long text is the gist of a row, not all of it).
const CELL_CHARS: usize = 200;

/// `value` as a model reads it: see the module's documentation. A string that is no literal is itself.
pub fn readable(value: &Value) -> String {
    match value {
        Value::String(text) => match structured(text) {
            Some(data) => readable(&data),
            None => text.clone(),
        },
        Value::Array(items) => list(None, items),
        // A tool's lone text (`{"text": …}`) is that text, read as the rest.
        Value::Object(map) if map.len() == 1 && map.values().all(Value::is_string) => {
            readable(map.values().next().expect("one value"))
        }
        // Where a record holds a list, the list is what a reader counts and compares: it is shown counted, one
        // item a line. A record of plain values (a calculation's `{"result": 42}`) stays compact JSON.
        Value::Object(map) if map.values().any(holds_list) => object(map),
        other => other.to_string(),
    }
}

/// Whether a field is a list, or a text that writes one.
fn holds_list(value: &Value) -> bool {
    match value {
        Value::Array(_) => true,
        Value::String(text) => structured(text).is_some_and(|data| data.is_array()),
        _ => false,
    }
}

/// The data a text writes, where the whole text is one JSON or Python literal of a list or a dict (a tuple is a
/// list); `None` for any other text.
pub fn structured(text: &str) -> Option<Value> {
    let text = text.trim();
    if !(text.starts_with(['[', '{', '(']) && text.ends_with([']', '}', ')'])) {
        return None;
    }
    if let Ok(value @ (Value::Array(_) | Value::Object(_))) = serde_json::from_str::<Value>(text) {
        return Some(value);
    }
    let mut parser = PythonLiteral { chars: text.chars().collect(), at: 0 };
    let value = parser.value()?;
    parser.blank();
    (parser.at == parser.chars.len()).then_some(value)
}

/// The length of every list in `value` (and in the literals its strings write): counts a code made, which an
/// answer may give.
pub fn list_lengths(value: &Value) -> Vec<usize> {
    let mut lengths = Vec::new();
    collect_lengths(value, &mut lengths);
    lengths
}

fn collect_lengths(value: &Value, into: &mut Vec<usize>) {
    match value {
        Value::Array(items) => {
            into.push(items.len());
            items.iter().for_each(|item| collect_lengths(item, into));
        }
        Value::Object(map) => map.values().for_each(|v| collect_lengths(v, into)),
        Value::String(text) => {
            if let Some(data) = structured(text) {
                collect_lengths(&data, into);
            }
        }
        _ => {}
    }
}

/// The items of the one list `value` holds: the value itself where it is a list, the list a text writes, or the one
/// field of a record that holds a list; `None` where it holds no list, or several. Each item reads as [`row`] shows
/// it (one line, without its number), and is there for code to compare, count and add up.
pub fn list_items(value: &Value) -> Option<Vec<Value>> {
    match value {
        Value::Array(items) => Some(items.clone()),
        Value::String(text) => list_items(&structured(text)?),
        Value::Object(map) => {
            let mut lists = map.values().filter(|v| holds_list(v));
            let one = lists.next()?;
            lists.next().is_none().then(|| list_items(one)).flatten()
        }
        _ => None,
    }
}

/// Whether a value holds nothing a reader needs: null, a blank text, an empty list or record.
pub fn holds_nothing(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

/// A record's fields, one a line; a field that is a list is counted and its items follow, one a line.
fn object(map: &Map<String, Value>) -> String {
    let mut lines = Vec::new();
    for (key, value) in map.iter().filter(|(_, v)| !holds_nothing(v)) {
        match value {
            Value::Array(items) => lines.push(list(Some(key), items)),
            Value::String(text) => match structured(text) {
                Some(Value::Array(items)) => lines.push(list(Some(key), &items)),
                Some(data) => lines.push(format!("{key}: {}", cell(&data))),
                None => lines.push(format!("{key}: {text}")),
            },
            other => lines.push(format!("{key}: {}", cell(other))),
        }
    }
    lines.join("\n")
}

/// A list: its items one a line, numbered from 1, then its count. The count comes last: written first ("todos (2
/// items):"), the 1.5B answered "Which of my tasks are phone calls?" with "There are 2 phone calls".
fn list(key: Option<&str>, items: &[Value]) -> String {
    let noun = if items.len() == 1 { "item" } else { "items" };
    let head = key.map(|key| format!("{key}:"));
    let rows = items.iter().enumerate().map(|(i, item)| format!("{}. {}", i + 1, row(item)));
    let count = format!("({} {noun})", items.len());
    head.into_iter().chain(rows).chain(std::iter::once(count)).collect::<Vec<_>>().join("\n")
}

/// One item on one line: a record's fields that hold something as `key: value`, separated by `; `.
pub fn row(item: &Value) -> String {
    match item {
        Value::Object(map) => map
            .iter()
            .filter(|(_, v)| !holds_nothing(v))
            .map(|(key, value)| format!("{key}: {}", cell(value)))
            .collect::<Vec<_>>()
            .join("; "),
        other => cell(other),
    }
}

/// A value inside a row: a text as itself, a list of plain values joined by commas, anything else compact JSON;
/// clipped.
fn cell(value: &Value) -> String {
    let text = match value {
        Value::String(s) => s.replace('\n', " "),
        Value::Array(items) if items.iter().all(|v| !v.is_array() && !v.is_object()) => {
            items.iter().map(value_text).collect::<Vec<_>>().join(", ")
        }
        other => other.to_string(),
    };
    clip(&text, CELL_CHARS)
}

/// `text` cut to `chars` characters, an ellipsis marking the cut.
pub fn clip(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((cut, _)) => format!("{} …", &text[..cut]),
        None => text.to_string(),
    }
}

/// The text a value takes inside a longer string: a string as itself, anything else as compact JSON.
pub fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A reader of Python's literals as `repr` writes them: dicts, lists, tuples, strings in either quote, numbers,
/// `None`, `True`, `False`. Anything else (a call, a name, a set) is no literal.
struct PythonLiteral {
    chars: Vec<char>,
    at: usize,
}

impl PythonLiteral {
    fn blank(&mut self) {
        while self.chars.get(self.at).is_some_and(|c| c.is_whitespace()) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.blank();
        self.chars.get(self.at).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        let here = self.peek() == Some(c);
        self.at += usize::from(here);
        here
    }

    fn value(&mut self) -> Option<Value> {
        match self.peek()? {
            '{' => self.dict(),
            '[' => self.sequence('[', ']'),
            '(' => self.sequence('(', ')'),
            '\'' | '"' => self.string().map(Value::String),
            c if c.is_ascii_digit() || c == '-' || c == '.' => self.number(),
            _ => self.word(),
        }
    }

    fn sequence(&mut self, open: char, close: char) -> Option<Value> {
        self.eat(open);
        let mut items = Vec::new();
        loop {
            if self.eat(close) {
                return Some(Value::Array(items));
            }
            items.push(self.value()?);
            if !self.eat(',') {
                return self.eat(close).then_some(Value::Array(items));
            }
        }
    }

    fn dict(&mut self) -> Option<Value> {
        self.eat('{');
        let mut map = Map::new();
        loop {
            if self.eat('}') {
                return Some(Value::Object(map));
            }
            let key = match self.value()? {
                Value::String(s) => s,
                other => other.to_string(),
            };
            if !self.eat(':') {
                return None;
            }
            let value = self.value()?;
            map.insert(key, value);
            if !self.eat(',') {
                return self.eat('}').then_some(Value::Object(map));
            }
        }
    }

    fn string(&mut self) -> Option<String> {
        let quote = self.chars[self.at];
        self.at += 1;
        let mut text = String::new();
        while let Some(&c) = self.chars.get(self.at) {
            self.at += 1;
            match c {
                '\\' => {
                    let escaped = *self.chars.get(self.at)?;
                    self.at += 1;
                    text.push(match escaped {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        other => other,
                    });
                }
                c if c == quote => return Some(text),
                c => text.push(c),
            }
        }
        None
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.at;
        while self.chars.get(self.at).is_some_and(|c| c.is_ascii_alphanumeric() || "+-.".contains(*c)) {
            self.at += 1;
        }
        let written: String = self.chars[start..self.at].iter().collect();
        if let Ok(whole) = written.parse::<i64>() {
            return Some(Value::from(whole));
        }
        written.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number)
    }

    fn word(&mut self) -> Option<Value> {
        let start = self.at;
        while self.chars.get(self.at).is_some_and(|c| c.is_ascii_alphabetic()) {
            self.at += 1;
        }
        match self.chars[start..self.at].iter().collect::<String>().as_str() {
            "None" => Some(Value::Null),
            "True" => Some(Value::Bool(true)),
            "False" => Some(Value::Bool(false)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rows(value: &Value) -> Option<Vec<String>> {
        list_items(value).map(|items| items.iter().map(row).collect())
    }

    #[test]
    fn the_rows_of_a_results_one_list_are_its_items_as_shown() {
        let listed = json!({"content": "[{'name': 'Ann', 'price': 3}, {'name': 'Bo', 'price': 2}]"});
        assert_eq!(rows(&listed).unwrap(), ["name: Ann; price: 3", "name: Bo; price: 2"]);
        assert_eq!(rows(&json!(["a", "b"])).unwrap(), ["a", "b"]);
        assert_eq!(rows(&json!({"result": 4})), None);
        assert_eq!(rows(&json!({"a": [1], "b": [2]})), None, "two lists: none is the one");
    }

    #[test]
    fn a_list_is_counted_and_shown_one_item_a_line_without_empty_fields() {
        let todos = json!({"todos": [
            {"id": "0", "text": "Call the dentist", "completed": false, "priority": "A", "due": null, "projects": ["health"]},
            {"id": "1", "text": "Water the plants", "completed": false, "priority": null, "contexts": []}
        ], "note": ""});
        assert_eq!(
            readable(&todos),
            "todos:\n1. id: 0; text: Call the dentist; completed: false; priority: A; projects: health\n\
             2. id: 1; text: Water the plants; completed: false\n(2 items)"
        );
        assert_eq!(readable(&json!([])), "(0 items)");
        assert_eq!(readable(&json!({"path": "a.txt", "size": 12})), r#"{"path":"a.txt","size":12}"#, "no list");
        assert_eq!(
            readable(&json!({"path": ".", "entries": [{"name": "a.txt"}]})),
            "path: .\nentries:\n1. name: a.txt\n(1 item)"
        );
        assert_eq!(readable(&json!("plain words [not a literal")), "plain words [not a literal");
        assert_eq!(readable(&json!({"text": "Done."})), "Done.");
    }

    #[test]
    fn a_python_repr_of_rows_reads_as_the_rows_it_writes() {
        let rows = "[{'name': 'Ben Carter', 'city': 'Leeds', 'joined': None}, {'name': \"Dev O'Neil\", 'vip': True, \
                    'spent': -12.5}]";
        assert_eq!(
            structured(rows),
            Some(json!([{"name": "Ben Carter", "city": "Leeds", "joined": null},
                        {"name": "Dev O'Neil", "vip": true, "spent": -12.5}]))
        );
        assert_eq!(
            readable(&json!({"text": rows})),
            "1. name: Ben Carter; city: Leeds\n2. name: Dev O'Neil; vip: true; spent: -12.5\n(2 items)"
        );
        assert_eq!(structured("(1, 'a')"), Some(json!([1, "a"])));
        assert_eq!(structured("{'a': 1}"), Some(json!({"a": 1})));
        for not_data in ["[call(x)]", "{'a': 1", "[1, 2] and more", "(see above)", "[x for x in y]", "{1, 2}"] {
            assert_eq!(structured(not_data), None, "{not_data}");
        }
    }

    #[test]
    fn the_length_of_every_list_is_a_count_an_answer_may_give() {
        let value = json!({"todos": [1, 2, 3, 4, 5, 6], "text": "[{'a': [1, 2]}]"});
        let mut lengths = list_lengths(&value);
        lengths.sort_unstable();
        assert_eq!(lengths, [1, 2, 6]);
    }
}
