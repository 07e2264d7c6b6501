//! References from a step's arguments to earlier steps' outputs, and their resolution.
//!
//! # Syntax
//!
//! A reference is `$<step id>.<field>$` inside a JSON string argument, e.g. `"$s1.result$"`. This is exactly the
//! form NESTFUL uses (`"$var1.result$"`, its labels being our step ids), so benchmark data maps onto plans
//! unchanged. Nested fields and array indices chain with dots (`$s2.entries.0.name$`); `$s1$` is the whole
//! output. Ids and fields are letters, digits, `_` and `-`.
//!
//! - An argument that is exactly one reference takes the referenced value with its JSON type (`53`, not `"53"`).
//! - References inside a longer string are replaced by the value's text (strings as they are, anything else as
//!   compact JSON): `"total: $s1.result$ km"` → `"total: 53 km"`.
//! - `$$` is a literal `$`. A `$` that starts no well-formed reference is kept as it is (`"costs $5"`), but the
//!   plan grammar only admits `$$`, so planner-written text is unambiguous.
//!
//! A reference implies a dependency: a step runs after every step it references, whether or not `depends_on`
//! lists it (small planners forget to), and validation treats it exactly like a `depends_on` entry.

use std::collections::HashMap;

use serde_json::Value;

use crate::agent::plan::issues::PlanError;
use crate::agent::records::readable;
pub use crate::agent::records::value_text;

/// One reference found in an argument.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    /// The step whose output is referenced.
    pub step: String,
    /// The path into that output (`result`, `entries.0.name`), or `None` for the whole output.
    pub field: Option<String>,
}

impl Reference {
    /// The first segment of the field path: the output field the tool declares.
    pub fn top_field(&self) -> Option<&str> {
        self.field.as_deref().map(|f| f.split('.').next().unwrap_or(f))
    }
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "${}.{}$", self.step, field),
            None => write!(f, "${}$", self.step),
        }
    }
}

/// A string argument cut into literal text and references.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Ref(Reference),
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Parses `s1.result` / `s1` (the text between the dollars).
fn parse_body(body: &str) -> Option<Reference> {
    let valid = |s: &str| !s.is_empty() && s.chars().all(is_name_char);
    let (step, field) = match body.split_once('.') {
        Some((step, field)) => (step, Some(field)),
        None => (body, None),
    };
    if !valid(step) || field.is_some_and(|f| !f.split('.').all(valid)) {
        return None;
    }
    Some(Reference { step: step.to_string(), field: field.map(str::to_string) })
}

fn pieces(text: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        literal.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            literal.push('$');
            rest = tail;
            continue;
        }
        let reference = after.find('$').and_then(|close| parse_body(&after[..close]).map(|r| (r, close)));
        match reference {
            Some((reference, close)) => {
                if !literal.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut literal)));
                }
                out.push(Piece::Ref(reference));
                rest = &after[close + 1..];
            }
            None => {
                literal.push('$');
                rest = after;
            }
        }
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        out.push(Piece::Text(literal));
    }
    out
}

/// The text of a string argument as the plan writes it, its references cut out: each is a line break, so that no
/// quote or name runs across one.
pub fn literal_text(text: &str) -> String {
    let parts: Vec<String> = pieces(text)
        .into_iter()
        .map(|piece| match piece {
            Piece::Text(text) => text,
            Piece::Ref(_) => "\n".to_string(),
        })
        .collect();
    parts.concat()
}

/// Every text of `args` (nested ones too) as the plan writes it ([`literal_text`]), trimmed, the empty ones left out.
pub fn literal_texts(args: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut texts = Vec::new();
    visit_strings(&Value::Object(args.clone()), String::new(), &mut |_, text| {
        let literal = literal_text(text).trim().to_string();
        if !literal.is_empty() {
            texts.push(literal);
        }
    });
    texts
}

/// The reference a string stands for when it is exactly one reference.
pub fn parse_reference(text: &str) -> Option<Reference> {
    match pieces(text).as_slice() {
        [Piece::Ref(reference)] => Some(reference.clone()),
        _ => None,
    }
}

/// Rewrites references inside every string of `value`: `change(reference, whole)` (`whole`: the string is exactly
/// that reference) gives a replacement or `None` to keep it. Strings with no replaced reference stay byte for
/// byte; the others are written again with their literal `$` as `$$`, so they resolve to the same text.
pub fn rewrite_references(value: &mut Value, change: &mut impl FnMut(&Reference, bool) -> Option<Reference>) {
    match value {
        Value::String(text) => {
            let mut parts = pieces(text);
            let whole = matches!(parts.as_slice(), [Piece::Ref(_)]);
            let mut changed = false;
            for part in &mut parts {
                if let Piece::Ref(reference) = part {
                    if let Some(new) = change(reference, whole) {
                        *reference = new;
                        changed = true;
                    }
                }
            }
            if changed {
                *text = parts
                    .iter()
                    .map(|part| match part {
                        Piece::Text(literal) => literal.replace('$', "$$"),
                        Piece::Ref(reference) => reference.to_string(),
                    })
                    .collect();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| rewrite_references(item, change)),
        Value::Object(map) => map.values_mut().for_each(|item| rewrite_references(item, change)),
        _ => {}
    }
}

/// Every reference anywhere inside a JSON value, in document order.
pub fn references_in(value: &Value) -> Vec<Reference> {
    let mut found = Vec::new();
    visit_strings(value, String::new(), &mut |_, text| {
        found.extend(pieces(text).into_iter().filter_map(|p| match p {
            Piece::Ref(r) => Some(r),
            Piece::Text(_) => None,
        }))
    });
    found
}

/// Calls `f(json_pointer, text)` for every string inside `value`.
pub(crate) fn visit_strings(value: &Value, pointer: String, f: &mut impl FnMut(&str, &str)) {
    match value {
        Value::String(text) => f(&pointer, text),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                visit_strings(item, format!("{pointer}/{i}"), f);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let escaped = key.replace('~', "~0").replace('/', "~1");
                visit_strings(item, format!("{pointer}/{escaped}"), f);
            }
        }
        _ => {}
    }
}

/// The text of an output that is text and nothing else: a string, or an object whose one field `text` is a string
/// (what MCP tools and `llm` steps give).
pub fn output_as_text(output: &Value) -> Option<&str> {
    match output {
        Value::String(text) => Some(text),
        Value::Object(map) if map.len() == 1 => map.get("text").and_then(Value::as_str),
        _ => None,
    }
}

/// How references resolve: strictly (a missing field is an error), or reading text (a field missing from an output
/// that is only text takes that text, and the reference is noted in `read_from_text`).
#[derive(Debug, Default)]
pub struct Resolution {
    /// Whether a field missing from a text output takes the text.
    pub read_text: bool,
    /// The references that took a whole text in place of a field, in document order.
    pub read_from_text: Vec<Reference>,
    /// Whether a field missing from a result takes the result's one field, or its one list where the reference is
    /// read as a list (rule `references` at run time: the planner named a result's list before it saw the result).
    pub one_field: bool,
    /// The references that took a result's one field or list so, with that field, in document order.
    pub took_one_field: Vec<(Reference, String)>,
    /// Whether a list or record inside text is written as a model reads it (model prompts:
    /// [`crate::agent::records::readable`], a list counted and one item a line) rather than as compact JSON.
    pub records_in_text: bool,
}

fn lookup(
    step: &str,
    reference: &Reference,
    outputs: &HashMap<String, Value>,
    how: &mut Resolution,
) -> Result<Value, PlanError> {
    let strict = strict_lookup(step, reference, outputs);
    if let (Err(PlanError::MissingField { .. }), true) = (&strict, how.one_field) {
        if let (Some(Value::Object(output)), Some(top)) = (outputs.get(&reference.step), reference.top_field()) {
            let rest = reference.field.as_deref().and_then(|f| f.strip_prefix(top)).unwrap_or_default();
            // The one field there is; else the one list there is, where the reference is read as a list (a path
            // that goes on with an index, or a model's prompt, which reads the list whole).
            let list = one_list(output).map(|(key, _)| key);
            let read_as_list =
                how.records_in_text || rest.split('.').nth(1).is_some_and(|i| i.parse::<usize>().is_ok());
            // A lone text is `fields-read-from-text`'s: a value is read out of it, not the text taken whole.
            let data = output.values().all(|v| v.is_array() || v.is_object());
            let field = match (output.len(), list) {
                (1, _) if data => output.keys().next(),
                (_, Some(list)) if read_as_list => Some(list),
                _ => None,
            };
            if let Some(field) = field {
                let taken = Reference { step: reference.step.clone(), field: Some(format!("{field}{rest}")) };
                if let Ok(value) = strict_lookup(step, &taken, outputs) {
                    how.took_one_field.push((reference.clone(), field.clone()));
                    return Ok(value);
                }
            }
        }
    }
    match strict {
        Err(PlanError::MissingField { .. }) if how.read_text => {
            let text = outputs.get(&reference.step).and_then(output_as_text);
            let Some(text) = text else { return strict_lookup(step, reference, outputs) };
            how.read_from_text.push(reference.clone());
            Ok(Value::String(text.to_string()))
        }
        other => other,
    }
}

/// The one field of a record that holds a list, with its list, where exactly one does: where a reference names a
/// field the result lacks, the list it meant (rule `references` at run time, rule `dependencies`' blind picks).
pub fn one_list(map: &serde_json::Map<String, Value>) -> Option<(&String, &Value)> {
    let mut lists = map.iter().filter(|(_, value)| value.is_array());
    let list = lists.next()?;
    lists.next().is_none().then_some(list)
}

fn strict_lookup(step: &str, reference: &Reference, outputs: &HashMap<String, Value>) -> Result<Value, PlanError> {
    let output = outputs
        .get(&reference.step)
        .ok_or_else(|| PlanError::MissingOutput { step: step.to_string(), reference: reference.to_string() })?;
    let Some(field) = &reference.field else {
        return Ok(output.clone());
    };
    let mut current = output;
    for part in field.split('.') {
        current = match current {
            Value::Object(map) => map.get(part),
            Value::Array(items) => part.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        }
        .ok_or_else(|| PlanError::MissingField {
            step: step.to_string(),
            reference: reference.to_string(),
            output: truncate(&output.to_string(), 200),
        })?;
    }
    Ok(current.clone())
}

fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// Replaces every reference inside `value` (an argument of step `step`) with the referenced output.
pub fn resolve_value(step: &str, value: &Value, outputs: &HashMap<String, Value>) -> Result<Value, PlanError> {
    resolve_value_with(step, value, outputs, &mut Resolution::default())
}

/// [`resolve_value`], resolving as `how` says and noting there what it did.
pub fn resolve_value_with(
    step: &str,
    value: &Value,
    outputs: &HashMap<String, Value>,
    how: &mut Resolution,
) -> Result<Value, PlanError> {
    Ok(match value {
        Value::String(text) => {
            let parts = pieces(text);
            if let [Piece::Ref(reference)] = parts.as_slice() {
                return lookup(step, reference, outputs, how);
            }
            let mut resolved = String::with_capacity(text.len());
            for part in parts {
                match part {
                    Piece::Text(t) => resolved.push_str(&t),
                    Piece::Ref(r) => {
                        let value = lookup(step, &r, outputs, how)?;
                        resolved.push_str(&match how.records_in_text {
                            true => readable(&value),
                            false => value_text(&value),
                        })
                    }
                }
            }
            Value::String(resolved)
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| resolve_value_with(step, v, outputs, how)).collect::<Result<_, _>>()?)
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), resolve_value_with(step, v, outputs, how)?)))
                .collect::<Result<_, PlanError>>()?,
        ),
        other => other.clone(),
    })
}

/// The JSON types a schema admits through its `type` keyword (empty when it does not say).
pub fn schema_types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Whether a whole reference to a value of `field_type` may fill an argument admitting `arg_types`. Unknown
/// types fit; integers and numbers fit each other; anything fits a string argument (it is turned into text by
/// [`coerce_to_schema`]).
pub fn reference_fits(arg_types: &[&str], field_type: Option<&str>) -> bool {
    let Some(field_type) = field_type else {
        return true;
    };
    if arg_types.is_empty() || arg_types.contains(&"string") || arg_types.contains(&field_type) {
        return true;
    }
    let numeric = |t: &str| t == "number" || t == "integer";
    numeric(field_type) && arg_types.iter().any(|t| numeric(t))
}

/// Adjusts resolved arguments to the types their schema asks for, where a reference brought another type:
/// non-strings become text where a string is wanted, numeric strings become numbers where a number is wanted.
/// Everything else is left for the schema check to report.
pub fn coerce_to_schema(value: Value, schema: &Value) -> Value {
    let types = schema_types(schema);
    match value {
        other if types == ["string"] && !other.is_string() => Value::String(value_text(&other)),
        Value::Object(map) => {
            let properties = schema.get("properties");
            Value::Object(
                map.into_iter()
                    .map(|(k, v)| {
                        let coerced = match properties.and_then(|p| p.get(&k)) {
                            Some(sub) => coerce_to_schema(v, sub),
                            None => v,
                        };
                        (k, coerced)
                    })
                    .collect(),
            )
        }
        Value::Array(items) if types.is_empty() || types.contains(&"array") => match schema.get("items") {
            Some(item_schema) if item_schema.is_object() => {
                Value::Array(items.into_iter().map(|v| coerce_to_schema(v, item_schema)).collect())
            }
            _ => Value::Array(items),
        },
        Value::String(text) if !types.is_empty() && !types.contains(&"string") => {
            let trimmed = text.trim();
            if types.contains(&"integer") {
                if let Ok(i) = trimmed.parse::<i64>() {
                    return Value::from(i);
                }
            }
            if types.contains(&"number") {
                if let Some(n) = trimmed.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
                    return Value::Number(n);
                }
            }
            Value::String(text)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_missing_from_a_result_of_one_field_takes_that_field_where_asked() {
        let outputs = HashMap::from([
            ("s1".to_string(), json!({"todos": [{"id": "0", "text": "Call the dentist"}]})),
            ("s2".to_string(), json!({"todos": [{"id": "4"}], "count": 1})),
            ("s4".to_string(), json!({"todos": [], "done": [], "count": 0})),
        ]);
        let mut how = Resolution { one_field: true, ..Resolution::default() };
        let value = resolve_value_with("s3", &json!("$s1.entries.0.text$"), &outputs, &mut how).unwrap();
        assert_eq!(value, json!("Call the dentist"));
        assert_eq!(how.took_one_field, [(parse_reference("$s1.entries.0.text$").unwrap(), "todos".to_string())]);
        let listed = resolve_value_with("s3", &json!("$s2.entries.0.id$"), &outputs, &mut how).unwrap();
        assert_eq!(listed, json!("4"), "read as a list: the one list");
        let two_fields = resolve_value_with("s3", &json!("$s2.entries$"), &outputs, &mut how);
        assert!(matches!(two_fields, Err(PlanError::MissingField { .. })), "not read as a list: no one reading");
        let two_lists = resolve_value_with("s3", &json!("$s4.entries.0$"), &outputs, &mut how);
        assert!(matches!(two_lists, Err(PlanError::MissingField { .. })), "two lists: no one reading");
        let text = "What is the title of the task 'Watering'? $s1.entries$";
        let mut how = Resolution { one_field: true, read_text: true, records_in_text: true, ..Resolution::default() };
        let inside = resolve_value_with("s3", &json!(text), &outputs, &mut how).unwrap();
        assert!(inside.as_str().unwrap().ends_with("? 1. id: 0; text: Call the dentist\n(1 item)"), "{inside}");
        let text = HashMap::from([("s1".to_string(), json!({"text": "commit 4f2a\nSow the beans"}))]);
        let lone_text = resolve_value_with(
            "s3",
            &json!("$s1.commit_id$"),
            &text,
            &mut Resolution { one_field: true, ..Resolution::default() },
        );
        assert!(matches!(lone_text, Err(PlanError::MissingField { .. })), "a lone text is read, not taken whole");
        let strict = resolve_value_with("s3", &json!("$s1.entries$"), &outputs, &mut Resolution::default());
        assert!(matches!(strict, Err(PlanError::MissingField { .. })), "off: the field as written");
    }
}
