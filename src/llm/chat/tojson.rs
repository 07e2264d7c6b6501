//! JSON in prompts: the `tojson` filter written the way Python's `json.dumps` writes, and JSON turned into
//! template values with key order kept (minijinja's own maps sort their keys).

use std::sync::Arc;

use minijinja::value::{Enumerator, Kwargs, Object, ObjectRepr, Value as JinjaValue, ValueKind};
use minijinja::{Error as JinjaError, ErrorKind};

/// `tojson` as Hugging Face defines it: `json.dumps(x, ensure_ascii=False, indent=None, separators=None,
/// sort_keys=False)`. minijinja's built-in writes compact JSON and escapes `<`, `>`, `&` and `'` for HTML,
/// which would show a model its tool schemas in a form it never saw in training.
pub(super) fn tojson(value: &JinjaValue, kwargs: Kwargs) -> Result<JinjaValue, JinjaError> {
    let indent: Option<JinjaValue> = kwargs.get("indent")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let separators: Option<JinjaValue> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => match v.as_str() {
            Some(s) => Some(s.to_string()),
            None => match v.as_i64() {
                Some(n) => Some(" ".repeat(usize::try_from(n).unwrap_or(0))),
                None => {
                    let message = "tojson: indent must be an integer or a string";
                    return Err(JinjaError::new(ErrorKind::InvalidOperation, message));
                }
            },
        },
    };
    let (item_sep, key_sep) = match separators {
        Some(v) if !v.is_none() => {
            let parts: Vec<String> =
                v.try_iter()?.map(|p| p.as_str().map(str::to_string)).collect::<Option<_>>().ok_or_else(|| {
                    JinjaError::new(ErrorKind::InvalidOperation, "tojson: separators must be two strings")
                })?;
            match <[String; 2]>::try_from(parts) {
                Ok([item, key]) => (item, key),
                Err(_) => {
                    return Err(JinjaError::new(ErrorKind::InvalidOperation, "tojson: separators must be two strings"))
                }
            }
        }
        // Python's defaults: ", " without indent, "," with it (the newline follows).
        _ => (if indent.is_some() { "," } else { ", " }.to_string(), ": ".to_string()),
    };
    let writer = PyJson {
        indent,
        item_sep,
        key_sep,
        ensure_ascii: ensure_ascii.unwrap_or(false),
        sort_keys: sort_keys.unwrap_or(false),
    };
    let mut out = String::new();
    writer.write(value, 0, &mut out)?;
    Ok(JinjaValue::from(out))
}

/// `json.dumps(value, ensure_ascii=False)` of a JSON value, keys in their given order: JSON Tandem itself writes
/// into a prompt (tools shown in a system message) in the form the templates' `tojson` writes.
pub(super) fn dumps(value: &serde_json::Value) -> String {
    let writer =
        PyJson { indent: None, item_sep: ", ".into(), key_sep: ": ".into(), ensure_ascii: false, sort_keys: false };
    let mut out = String::new();
    // Every value made from JSON is JSON again: the writer's only error (a value JSON has no form for) cannot occur.
    let _ = writer.write(&ordered_json(value), 0, &mut out);
    out
}

/// Python's `json.dumps` layout.
struct PyJson {
    indent: Option<String>,
    item_sep: String,
    key_sep: String,
    ensure_ascii: bool,
    sort_keys: bool,
}

impl PyJson {
    fn write(&self, value: &JinjaValue, depth: usize, out: &mut String) -> Result<(), JinjaError> {
        match value.kind() {
            ValueKind::Undefined | ValueKind::None => out.push_str("null"),
            ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
            ValueKind::Number => {
                if value.is_integer() {
                    out.push_str(&value.to_string());
                } else {
                    out.push_str(&python_float(f64::try_from(value.clone())?));
                }
            }
            ValueKind::String => self.write_str(value.as_str().unwrap_or_default(), out),
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<JinjaValue> = value.try_iter()?.collect();
                self.write_container('[', ']', items.len(), depth, out, |i, out| {
                    self.write(&items[i], depth + 1, out)
                })?;
            }
            ValueKind::Map => {
                let mut keys: Vec<JinjaValue> = value.try_iter()?.collect();
                if self.sort_keys {
                    keys.sort_by_key(key_text);
                }
                self.write_container('{', '}', keys.len(), depth, out, |i, out| {
                    self.write_str(&key_text(&keys[i]), out);
                    out.push_str(&self.key_sep);
                    self.write(&value.get_item(&keys[i])?, depth + 1, out)
                })?;
            }
            other => {
                return Err(JinjaError::new(
                    ErrorKind::InvalidOperation,
                    format!("tojson: a {other} value is not JSON"),
                ))
            }
        }
        Ok(())
    }

    fn write_container(
        &self,
        open: char,
        close: char,
        len: usize,
        depth: usize,
        out: &mut String,
        mut item: impl FnMut(usize, &mut String) -> Result<(), JinjaError>,
    ) -> Result<(), JinjaError> {
        out.push(open);
        if len == 0 {
            out.push(close);
            return Ok(());
        }
        for i in 0..len {
            if i > 0 {
                out.push_str(&self.item_sep);
            }
            if let Some(indent) = &self.indent {
                out.push('\n');
                out.push_str(&indent.repeat(depth + 1));
            }
            item(i, out)?;
        }
        if let Some(indent) = &self.indent {
            out.push('\n');
            out.push_str(&indent.repeat(depth));
        }
        out.push(close);
        Ok(())
    }

    fn write_str(&self, s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 || (self.ensure_ascii && !(' '..='~').contains(&c)) => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
}

/// Python converts non-string keys with `str()`-like rules: numbers as digits, booleans as `true`/`false`.
fn key_text(key: &JinjaValue) -> String {
    match key.as_str() {
        Some(s) => s.to_string(),
        None if key.kind() == ValueKind::Bool => if key.is_true() { "true" } else { "false" }.to_string(),
        None if key.is_none() => "null".to_string(),
        None => key.to_string(),
    }
}

/// Python's `repr(float)`: shortest round-trip digits, exponent form outside 1e-4 ≤ |x| < 1e16 written as
/// `1e+16` / `1e-05`, and `NaN` / `Infinity` as `json.dumps` writes them.
fn python_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    // Rust's Debug uses the same shortest digits and the same switch to exponent form as Python's repr.
    let text = format!("{x:?}");
    match text.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => text,
    }
}

/// A JSON object as a template map that iterates its keys in the given order.
#[derive(Debug)]
struct OrderedMap(Vec<(JinjaValue, JinjaValue)>);

impl Object for OrderedMap {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &JinjaValue) -> Option<JinjaValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.0.iter().map(|(k, _)| k.clone()).collect())
    }
}

pub(super) fn ordered_json(value: &serde_json::Value) -> JinjaValue {
    match value {
        serde_json::Value::Null => JinjaValue::from(()),
        serde_json::Value::Bool(b) => JinjaValue::from(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                JinjaValue::from(i)
            } else if let Some(u) = n.as_u64() {
                JinjaValue::from(u)
            } else {
                JinjaValue::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => JinjaValue::from(s.as_str()),
        serde_json::Value::Array(items) => JinjaValue::from(items.iter().map(ordered_json).collect::<Vec<_>>()),
        serde_json::Value::Object(map) => JinjaValue::from_object(OrderedMap(
            map.iter().map(|(k, v)| (JinjaValue::from(k.as_str()), ordered_json(v))).collect(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumps_writes_as_python_does_in_the_given_key_order() {
        let value: serde_json::Value = serde_json::from_str(r#"{"name": "f", "a": [1, 2.5, "é\n"], "b": {}}"#).unwrap();
        assert_eq!(dumps(&value), r#"{"name": "f", "a": [1, 2.5, "é\n"], "b": {}}"#);
    }

    #[test]
    fn python_floats() {
        assert_eq!(python_float(1.0), "1.0");
        assert_eq!(python_float(0.1), "0.1");
        assert_eq!(python_float(1e16), "1e+16");
        assert_eq!(python_float(1.5e-7), "1.5e-07");
        assert_eq!(python_float(123456.789), "123456.789");
        assert_eq!(python_float(f64::NAN), "NaN");
    }
}
