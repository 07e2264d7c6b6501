//! A question over a list, as the planner model writes it in Python, read and worked out by code: the model writes
//! one expression over `items` (`min(items, key=lambda x: x['price'])`, `sum(1 for o in items if o['price'] > 30)`),
//! [`parse`] reads it into a [`Query`] of a small fixed form, and [`answer`] works it out over the list's items with
//! agent::run::tally. Nothing is executed: an expression outside these forms is no query, and the reading falls back
//! to the model copying rows.
//!
//! Why Python: a coder model writes the comparison the question means as code (`min` for "the cheapest", a filter
//! for "more than 30") far more reliably than it picks a label: asked to choose among `lowest price`, `highest
//! price` and `other`, the 1.5B chose `lowest price` for "Which of these offers travel by road?".
//!
//! The forms: `min`/`max(items, key=lambda v: v['f'])`; `sorted(items, key=lambda v: v['f'][, reverse=True])[k]`;
//! `[v for v in items if c]`, `next(v for v in items if c)`; `len(items)`, `len([… if c])`, `sum(1 for v in items if
//! c)`; `sum(v['f'] for v in items[ if c])`, also in brackets; `any`/`all(c for v in items)` (yes or no); `items[k]`
//! (the model is shown the whole list). Each may pick a field after it (`…['name']`), which changes nothing: the
//! reading is the whole item. A condition `c` is comparisons of a field with a literal
//! (`v['price'] > 30`, `v['city'] == 'Leeds'`, `'road' in v['kind']`) joined by `and`.

use std::cmp::Ordering;

use serde_json::Value;

use super::tally::{extreme, order, total};

/// A list question in one of the forms [`parse`] reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Query {
    /// The item with the lowest (`highest` false) or highest value of `field`.
    Extreme { field: String, highest: bool },
    /// The item at `index` (from the end where negative) of the items sorted by `field`.
    Ranked { field: String, descending: bool, index: i64 },
    /// The items that meet every condition (`first`: only the first of them).
    Filter { conditions: Vec<Condition>, first: bool },
    /// How many items meet every condition.
    Count { conditions: Vec<Condition> },
    /// The sum of `field` over the items that meet every condition.
    Sum { field: String, conditions: Vec<Condition> },
    /// Whether any item (`every` false) or every item meets every condition.
    Whether { conditions: Vec<Condition>, every: bool },
    /// The item at `index` of the list as shown (from the end where negative).
    At { index: i64 },
}

/// A field compared with a literal.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// The field.
    pub field: String,
    /// `==`, `!=`, `<`, `<=`, `>`, `>=`, or `in` (the literal is part of the field's text).
    pub op: String,
    /// The literal: a number or a text.
    pub value: Value,
    /// What an item without the field reads as: `v.get('f', default)`'s default, else null.
    pub missing: Value,
}

/// What a query works out to: items (their indexes in the list) or a number, as text.
#[derive(Debug, Clone, PartialEq)]
pub enum Worked {
    /// The items, by index.
    Items(Vec<usize>),
    /// A count or a total.
    Number(String),
    /// Yes or no, and the items that show it: those that meet the conditions where any is asked, those that do
    /// not where every one is.
    Truth(bool, Vec<usize>),
}

/// The query `text` writes (code fences and blank space around it aside); `None` where it is not one of the forms.
pub fn parse(text: &str) -> Option<Query> {
    let code = text.trim().trim_start_matches("```python").trim_start_matches("```").trim_end_matches("```").trim();
    let mut parser = Parser { tokens: tokenize(code)?, at: 0 };
    let query = parser.query()?;
    // A field picked after the query (`min(…)['name']`) leaves the item whole.
    while parser.eat("[") {
        parser.string()?;
        parser.expect("]")?;
    }
    (parser.at == parser.tokens.len()).then_some(query)
}

/// `query` worked out over `items`; `None` where a field it names is in no item, or no item gives a value.
pub fn answer(query: &Query, items: &[Value]) -> Option<Worked> {
    let named = |field: &str| items.iter().any(|item| item.get(field).is_some());
    let meets = |item: &Value, conditions: &[Condition]| conditions.iter().all(|c| holds(item, c));
    let fields_named = |conditions: &[Condition]| conditions.iter().all(|c| named(&c.field));
    match query {
        Query::Extreme { field, highest } => extreme(items, field, *highest).map(|i| Worked::Items(vec![i])),
        Query::Ranked { field, descending, index } => {
            let value = |i: usize| items[i].get(field.as_str());
            let mut ranked: Vec<usize> =
                (0..items.len()).filter(|&i| value(i).is_some_and(|v| order(v, v).is_some())).collect();
            // Every ranked item's value compares (the filter above), so `Equal` is never taken.
            ranked.sort_by(|&a, &b| value(a).zip(value(b)).and_then(|(x, y)| order(x, y)).unwrap_or(Ordering::Equal));
            if *descending {
                ranked.reverse();
            }
            position(*index, ranked.len()).map(|at| Worked::Items(vec![ranked[at]]))
        }
        Query::Filter { conditions, first } => {
            if !fields_named(conditions) {
                return None;
            }
            let mut kept: Vec<usize> = (0..items.len()).filter(|&i| meets(&items[i], conditions)).collect();
            if *first {
                kept.truncate(1);
            }
            Some(Worked::Items(kept))
        }
        Query::Count { conditions } => fields_named(conditions)
            .then(|| Worked::Number(items.iter().filter(|i| meets(i, conditions)).count().to_string())),
        Query::Whether { conditions, every } => {
            if !fields_named(conditions) {
                return None;
            }
            let shown: Vec<usize> = (0..items.len()).filter(|&i| meets(&items[i], conditions) != *every).collect();
            Some(Worked::Truth(shown.is_empty() == *every, shown))
        }
        Query::At { index } => position(*index, items.len()).map(|at| Worked::Items(vec![at])),
        Query::Sum { field, conditions } => {
            if !named(field) || !fields_named(conditions) {
                return None;
            }
            let kept: Vec<Value> = items.iter().filter(|i| meets(i, conditions)).cloned().collect();
            if kept.is_empty() {
                return Some(Worked::Number("0".into()));
            }
            total(&kept, field).map(Worked::Number)
        }
    }
}

/// The place `index` names in a list of `len`, counting from the end where it is negative, as Python does; `None`
/// past either end.
fn position(index: i64, len: usize) -> Option<usize> {
    let at = if index < 0 { len as i64 + index } else { index };
    usize::try_from(at).ok().filter(|&at| at < len)
}

/// Whether `item` meets `condition`: numbers compare as numbers (`$19.50` is 19.5), texts without regard to case.
fn holds(item: &Value, condition: &Condition) -> bool {
    let value = item.get(&condition.field).unwrap_or(&condition.missing);
    let as_text = |v: &Value| match v {
        Value::String(s) => s.trim().to_lowercase(),
        other => other.to_string(),
    };
    match condition.op.as_str() {
        "truthy" => return truthy(value),
        "falsy" => return !truthy(value),
        // In a list: one of its values; in a text: part of it.
        "in" => {
            return match value {
                Value::Array(values) => values.iter().any(|v| as_text(v) == as_text(&condition.value)),
                other => as_text(other).contains(&as_text(&condition.value)),
            }
        }
        _ => {}
    }
    // Numbers and dates compare by value; other texts only for (in)equality.
    let by_value = order(value, &condition.value);
    let equality = matches!(condition.op.as_str(), "==" | "!=");
    let Some(order) = by_value.or_else(|| equality.then(|| as_text(value).cmp(&as_text(&condition.value)))) else {
        return false;
    };
    match condition.op.as_str() {
        "==" => order.is_eq(),
        "!=" => order.is_ne(),
        "<" => order.is_lt(),
        "<=" => order.is_le(),
        ">" => order.is_gt(),
        ">=" => order.is_ge(),
        _ => false,
    }
}

/// Whether Python reads `value` as true: not null, false, zero, or empty.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    }
}

/// A token of the expression: a name, a number, a text literal, or punctuation.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Name(String),
    Number(f64),
    Text(String),
    Punct(&'static str),
}

/// The punctuation the forms use, longest first.
const PUNCTUATION: [&str; 15] = ["==", "!=", "<=", ">=", "<", ">", "(", ")", "[", "]", ",", ":", "=", "-", "."];

fn tokenize(code: &str) -> Option<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut rest = code;
    while let Some(c) = rest.chars().next() {
        if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
        } else if c == '\'' || c == '"' {
            let end = rest[1..].find(c)? + 1;
            tokens.push(Token::Text(rest[1..end].to_string()));
            rest = &rest[end + 1..];
        } else if c.is_ascii_digit() {
            let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(rest.len());
            tokens.push(Token::Number(rest[..end].replace('_', "").parse().ok()?));
            rest = &rest[end..];
        } else if c.is_alphabetic() || c == '_' {
            let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
            tokens.push(Token::Name(rest[..end].to_string()));
            rest = &rest[end..];
        } else {
            let punct = PUNCTUATION.iter().find(|p| rest.starts_with(**p))?;
            tokens.push(Token::Punct(punct));
            rest = &rest[punct.len()..];
        }
    }
    Some(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    /// Takes the next token where it is the punctuation or name `word`.
    fn eat(&mut self, word: &str) -> bool {
        let here = match self.peek() {
            Some(Token::Punct(p)) => *p == word,
            Some(Token::Name(n)) => n == word,
            _ => false,
        };
        self.at += usize::from(here);
        here
    }

    fn expect(&mut self, word: &str) -> Option<()> {
        self.eat(word).then_some(())
    }

    fn name(&mut self) -> Option<String> {
        let Some(Token::Name(name)) = self.peek().cloned() else { return None };
        self.at += 1;
        Some(name)
    }

    fn string(&mut self) -> Option<String> {
        let Some(Token::Text(text)) = self.peek().cloned() else { return None };
        self.at += 1;
        Some(text)
    }

    /// A literal: a text, or a number with an optional minus sign.
    fn literal(&mut self) -> Option<Value> {
        let negative = self.eat("-");
        match self.peek().cloned()? {
            Token::Text(text) if !negative => {
                self.at += 1;
                Some(Value::String(text))
            }
            Token::Number(n) => {
                self.at += 1;
                serde_json::Number::from_f64(if negative { -n } else { n }).map(Value::Number)
            }
            Token::Name(name) if !negative => {
                let value = match name.as_str() {
                    "True" => Value::Bool(true),
                    "False" => Value::Bool(false),
                    "None" => Value::Null,
                    _ => return None,
                };
                self.at += 1;
                Some(value)
            }
            _ => None,
        }
    }

    /// `v['field']` for the variable `var`.
    fn field_of(&mut self, var: &str) -> Option<String> {
        self.field_or_default(var).map(|(field, _)| field)
    }

    /// `v['field']` or `v.get('field'[, default])` for the variable `var`, with what a missing field reads as (the
    /// default, or null).
    fn field_or_default(&mut self, var: &str) -> Option<(String, Value)> {
        (self.name()? == var).then_some(())?;
        if self.eat(".") {
            self.expect("get")?;
            self.expect("(")?;
            let field = self.string()?;
            let mut missing = Value::Null;
            if self.eat(",") {
                missing = match self.literal() {
                    Some(value) => value,
                    None => {
                        self.expect("[")?;
                        self.expect("]")?;
                        Value::Array(Vec::new())
                    }
                };
            }
            self.expect(")")?;
            return Some((field, missing));
        }
        self.expect("[")?;
        let field = self.string()?;
        self.expect("]")?;
        Some((field, Value::Null))
    }

    /// `key=lambda v: v['field']`.
    fn key(&mut self) -> Option<String> {
        self.expect("key")?;
        self.expect("=")?;
        self.expect("lambda")?;
        let var = self.name()?;
        self.expect(":")?;
        self.field_of(&var)
    }

    fn query(&mut self) -> Option<Query> {
        if self.eat("[") {
            let (_, conditions) = self.comprehension()?;
            self.expect("]")?;
            return Some(Query::Filter { conditions, first: false });
        }
        let function = self.name()?;
        if function == "items" {
            self.expect("[")?;
            let index = self.index()?;
            self.expect("]")?;
            return Some(Query::At { index });
        }
        self.expect("(")?;
        let query = match function.as_str() {
            "min" | "max" => {
                self.items()?;
                self.expect(",")?;
                let field = self.key()?;
                Query::Extreme { field, highest: function == "max" }
            }
            "sorted" => {
                self.items()?;
                self.expect(",")?;
                let field = self.key()?;
                let descending = self.eat(",") && self.eat("reverse") && self.eat("=") && self.eat("True");
                self.expect(")")?;
                self.expect("[")?;
                let index = self.index()?;
                self.expect("]")?;
                return Some(Query::Ranked { field, descending, index });
            }
            "any" | "all" => {
                // The condition comes before the variable it names is bound: read the binding first.
                let start = self.at;
                while !matches!(self.peek(), Some(Token::Name(word)) if word == "for") {
                    self.peek()?;
                    self.at += 1;
                }
                let (var, mut conditions) = self.for_items()?;
                let end = self.at;
                self.at = start;
                loop {
                    conditions.push(self.condition(&var)?);
                    if !self.eat("and") {
                        break;
                    }
                }
                self.expect("for")?;
                self.at = end;
                Query::Whether { conditions, every: function == "all" }
            }
            "next" => {
                let (_, conditions) = self.comprehension()?;
                Query::Filter { conditions, first: true }
            }
            "len" => {
                if self.items().is_some() {
                    Query::Count { conditions: Vec::new() }
                } else {
                    self.expect("[")?;
                    let (_, conditions) = self.comprehension()?;
                    self.expect("]")?;
                    Query::Count { conditions }
                }
            }
            "sum" => {
                let bracketed = self.eat("[");
                let query = match self.peek() {
                    Some(Token::Number(n)) if *n == 1.0 => {
                        self.at += 1;
                        let (_, conditions) = self.for_items()?;
                        Query::Count { conditions }
                    }
                    _ => {
                        let (picked, conditions) = self.comprehension()?;
                        Query::Sum { field: picked?, conditions }
                    }
                };
                if bracketed {
                    self.expect("]")?;
                }
                query
            }
            _ => return None,
        };
        self.expect(")")?;
        Some(query)
    }

    /// A list index: a whole number, with an optional minus sign.
    fn index(&mut self) -> Option<i64> {
        let negative = self.eat("-");
        let Some(Token::Number(n)) = self.peek().cloned() else { return None };
        self.at += 1;
        (n.fract() == 0.0).then_some(if negative { -(n as i64) } else { n as i64 })
    }

    /// `items` (the list's name in the prompt).
    fn items(&mut self) -> Option<()> {
        let at = self.at;
        if self.name().as_deref() == Some("items") {
            return Some(());
        }
        self.at = at;
        None
    }

    /// `v['field'] for v in items if …` or `v for v in items if …`: the field picked (if any) and the conditions.
    fn comprehension(&mut self) -> Option<(Option<String>, Vec<Condition>)> {
        let var = self.name()?;
        let picked = if self.eat("[") {
            let field = self.string()?;
            self.expect("]")?;
            Some(field)
        } else {
            None
        };
        let (bound, conditions) = self.for_items()?;
        (bound == var).then_some((picked, conditions))
    }

    /// `for v in items[ if c and c …]`: the variable and the conditions.
    fn for_items(&mut self) -> Option<(String, Vec<Condition>)> {
        self.expect("for")?;
        let var = self.name()?;
        self.expect("in")?;
        self.items()?;
        let mut conditions = Vec::new();
        if self.eat("if") {
            loop {
                conditions.push(self.condition(&var)?);
                if !self.eat("and") {
                    break;
                }
            }
        }
        Some((var, conditions))
    }

    /// `v['f'] OP literal`, `literal OP v['f']` (turned around), or `literal in v['f']`.
    fn condition(&mut self, var: &str) -> Option<Condition> {
        let at = self.at;
        if self.eat("not") {
            let (field, missing) = self.field_or_default(var)?;
            return Some(Condition { field, op: "falsy".into(), value: Value::Null, missing });
        }
        if let Some((field, missing)) = self.field_or_default(var) {
            // A field alone is its truth, as Python reads it.
            if self.ends_condition() {
                return Some(Condition { field, op: "truthy".into(), value: Value::Null, missing });
            }
            let op = self.op()?;
            let value = self.literal()?;
            return (op != "in").then_some(Condition { field, op, value, missing });
        }
        self.at = at;
        let value = self.literal()?;
        let op = self.op()?;
        let (field, missing) = self.field_or_default(var)?;
        let op = match op.as_str() {
            "<" => ">",
            ">" => "<",
            "<=" => ">=",
            ">=" => "<=",
            same => same,
        };
        Some(Condition { field, op: op.to_string(), value, missing })
    }

    /// Whether the next token ends a condition: `)`, `]`, `and`, `for` or the end.
    fn ends_condition(&self) -> bool {
        match self.peek() {
            None | Some(Token::Punct(")" | "]")) => true,
            Some(Token::Name(word)) => word == "and" || word == "for",
            _ => false,
        }
    }

    fn op(&mut self) -> Option<String> {
        if self.eat("is") {
            return Some(if self.eat("not") { "!=" } else { "==" }.to_string());
        }
        for op in ["==", "!=", "<=", ">=", "<", ">", "in"] {
            if self.eat(op) {
                return Some(op.to_string());
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn offers() -> Vec<Value> {
        json!([
            {"name": "Harbour Ferry", "price": 31, "kind": "sea"},
            {"name": "Night Coach", "price": "$19", "kind": "road"},
            {"name": "Fast Rail", "price": 42, "kind": "rail"},
            {"name": "City Bus", "price": 24, "kind": "road"},
        ])
        .as_array()
        .unwrap()
        .clone()
    }

    fn worked(text: &str) -> Option<Worked> {
        answer(&parse(text)?, &offers())
    }

    #[test]
    fn the_forms_a_coder_model_writes_are_worked_out_by_code() {
        let items = |indexes: &[usize]| Some(Worked::Items(indexes.to_vec()));
        let number = |text: &str| Some(Worked::Number(text.into()));
        assert_eq!(worked("```python\nmin(items, key=lambda x: x['price'])\n```"), items(&[1]));
        assert_eq!(worked("max(items, key=lambda o: o[\"price\"])['name']"), items(&[2]));
        assert_eq!(worked("sorted(items, key=lambda x: x['price'])[1]"), items(&[3]));
        assert_eq!(worked("sorted(items, key=lambda x: x['price'], reverse=True)[-1]"), items(&[1]));
        assert_eq!(worked("[o for o in items if o['kind'] == 'Road']"), items(&[1, 3]));
        assert_eq!(worked("[o['name'] for o in items if o['price'] < 30 and o['kind'] != 'sea']"), items(&[1, 3]));
        assert_eq!(worked("next(o for o in items if o['name'] == 'Fast Rail')"), items(&[2]));
        assert_eq!(worked("sum(1 for item in items if item['price'] > 30)"), number("2"));
        assert_eq!(worked("len([o for o in items if 30 <= o['price']])"), number("2"));
        assert_eq!(worked("len(items)"), number("4"));
        assert_eq!(worked("sum(o['price'] for o in items)"), number("116"));
        assert_eq!(worked("sum([o['price'] for o in items if 'road' in o['kind']])"), number("43"));
        assert_eq!(worked("any(o['price'] < 20 for o in items)"), Some(Worked::Truth(true, vec![1])));
        assert_eq!(worked("any(o['price'] > 50 for o in items)"), Some(Worked::Truth(false, vec![])));
        let all = "all(o['price'] < 40 and o['kind'] != 'air' for o in items)";
        assert_eq!(worked(all), Some(Worked::Truth(false, vec![2])));
        assert_eq!(worked("items[2]['price']"), items(&[2]));
        assert_eq!(worked("items[-1]"), items(&[3]));
        // Truth, `get`, `is` and lists, as Python reads them.
        let todos = json!([
            {"text": "Call Mia", "done": false, "contexts": ["phone"]},
            {"text": "Pay rent", "done": true},
            {"text": "Call the bank", "contexts": ["phone", "town"]},
        ]);
        let todos = todos.as_array().unwrap();
        let on = |text: &str| answer(&parse(text).unwrap(), todos);
        assert_eq!(on("len([t for t in items if not t['done']])"), number("2"));
        assert_eq!(on("[t for t in items if t.get('done', False) == False]"), items(&[0, 2]));
        assert_eq!(on("[t for t in items if t['done'] is True]"), items(&[1]));
        assert_eq!(
            on("[t['text'] for t in items if 'phone' in t.get('contexts', []) and not t.get('done')]"),
            items(&[0, 2])
        );
        assert_eq!(on("[t['text'] for t in items if 'phone' in t['contexts'] and not t['done']]"), items(&[0, 2]));
        assert_eq!(on("[t for t in items if t['done']]"), items(&[1]));
    }

    #[test]
    fn anything_else_is_no_query() {
        // Positions past the end, unknown fields, other code and prose are not worked out: the model copies rows.
        assert_eq!(worked("items[7]"), None);
        assert_eq!(worked("[o for o in items if o['transport'] == 'road']"), None);
        assert_eq!(parse("import os; os.remove('x')"), None);
        assert_eq!(parse("To find the cheapest offer, use min"), None);
        assert_eq!(parse("min(items, key=lambda x: x['price']) + 1"), None);
        assert_eq!(parse("[o for o in other if o['a'] == 1]"), None);
    }
}
