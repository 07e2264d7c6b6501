//! BFCL data and checking: questions with their function docs (as JSON Schema), the accepted answers, and the
//! AST checker's rules for one call.
//!
//! # The checker (BFCL's `ast_checker`, simple and multiple categories)
//! A call passes when: its function is the expected one; every required parameter is given; no parameter is
//! unknown to the function or absent from the accepted answers; every given value is among the accepted values;
//! every accepted-answer parameter not given lists `""` (optional). Values compare as BFCL does: an integer is
//! accepted for a float; strings are compared after lower-casing and removing spaces and the punctuation
//! `, . / - _ * ^`; lists element by element; dictionaries key by key.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{json, Map, Value};

use super::nestful::{json_type, Loaded};
use crate::{Error, Result};

/// One function a question offers.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Name (may contain dots, e.g. `math.factorial`).
    pub name: String,
    /// Description.
    pub description: String,
    /// Parameters as a JSON Schema object (BFCL types mapped to JSON Schema).
    pub parameters: Value,
}

/// One question.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// BFCL id (`simple_python_0`).
    pub id: String,
    /// The user's request.
    pub text: String,
    /// Functions offered.
    pub functions: Vec<Function>,
}

/// Accepted answers: function → parameter → accepted values.
pub type Accepted = Map<String, Value>;

/// BFCL's parameter schema as a JSON Schema llguidance compiles: known keywords only, BFCL types mapped.
pub fn to_json_schema(schema: &Value) -> Value {
    let Some(object) = schema.as_object() else {
        return json!({});
    };
    let mut out = Map::new();
    if let Some(t) = object
        .get("type")
        .and_then(Value::as_str)
        .and_then(json_type)
    {
        out.insert("type".into(), json!(t));
    }
    if let Some(d) = object.get("description").and_then(Value::as_str) {
        out.insert("description".into(), json!(d));
    }
    if let Some(values) = object.get("enum").and_then(Value::as_array) {
        out.insert("enum".into(), Value::Array(values.clone()));
    }
    if let Some(items) = object.get("items") {
        out.insert("items".into(), to_json_schema(items));
    }
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        let converted: Map<String, Value> = properties
            .iter()
            .map(|(k, v)| (k.clone(), to_json_schema(v)))
            .collect();
        out.insert("properties".into(), Value::Object(converted));
        if let Some(required) = object.get("required") {
            out.insert("required".into(), required.clone());
        }
        out.insert("additionalProperties".into(), json!(false));
    }
    Value::Object(out)
}

fn read_lines(path: &Path) -> Result<Vec<(usize, std::result::Result<Value, String>)>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    Ok(text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, serde_json::from_str(l).map_err(|e| e.to_string())))
        .collect())
}

fn question_of(value: &Value) -> Option<Question> {
    let id = value.get("id")?.as_str()?.to_string();
    let turns = value.get("question")?.as_array()?;
    let text = turns
        .iter()
        .flat_map(|turn| turn.as_array().into_iter().flatten())
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .filter_map(|m| m.get("content").and_then(Value::as_str))
        .last()?
        .to_string();
    let functions = value
        .get("function")?
        .as_array()?
        .iter()
        .map(|f| {
            Some(Function {
                name: f.get("name")?.as_str()?.to_string(),
                description: f
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                parameters: to_json_schema(f.get("parameters")?),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Question {
        id,
        text,
        functions,
    })
}

/// Reads a category's questions (one JSON object per line).
pub fn load_questions(path: &Path) -> Result<Loaded<Question>> {
    let mut loaded = Loaded::default();
    for (line, value) in read_lines(path)? {
        match value.map(|v| {
            question_of(&v).ok_or_else(|| "missing id, user question or functions".to_string())
        }) {
            Ok(Ok(question)) => loaded.items.push(question),
            Ok(Err(e)) | Err(e) => loaded
                .skipped
                .push(format!("{}:{line}: {e}", path.display())),
        }
    }
    Ok(loaded)
}

/// Reads a category's accepted answers: id → the accepted call (its first ground-truth entry).
pub fn load_answers(path: &Path) -> Result<(HashMap<String, Accepted>, Vec<String>)> {
    let mut answers = HashMap::new();
    let mut skipped = Vec::new();
    for (line, value) in read_lines(path)? {
        let parsed = value.and_then(|v| {
            let id = v
                .get("id")
                .and_then(Value::as_str)
                .ok_or("no id")?
                .to_string();
            let call = v
                .get("ground_truth")
                .and_then(|g| g.get(0))
                .and_then(Value::as_object)
                .ok_or("no ground_truth call")?;
            Ok::<_, String>((id, call.clone()))
        });
        match parsed {
            Ok((id, call)) => {
                answers.insert(id, call);
            }
            Err(e) => skipped.push(format!("{}:{line}: {e}", path.display())),
        }
    }
    Ok((answers, skipped))
}

/// BFCL's string normalisation: lower case, without spaces and `, . / - _ * ^`.
pub fn normalise(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, ' ' | ',' | '.' | '/' | '-' | '_' | '*' | '^'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether a value matches an accepted one.
fn value_matches(given: &Value, accepted: &Value) -> bool {
    match (given, accepted) {
        (Value::String(g), Value::String(a)) => normalise(g) == normalise(a),
        (Value::Number(g), Value::Number(a)) => match (g.as_f64(), a.as_f64()) {
            // An integer is accepted for a float (and a float equal to an integer value, e.g. 5.0 for 5).
            (Some(g), Some(a)) => (g - a).abs() <= f64::EPSILON * a.abs().max(1.0),
            _ => false,
        },
        (Value::Array(g), Value::Array(a)) => {
            g.len() == a.len() && g.iter().zip(a).all(|(g, a)| value_matches(g, a))
        }
        (Value::Object(g), Value::Object(a)) => {
            // Dictionaries: each key's accepted values may themselves be a list of options.
            g.len() <= a.len()
                && g.iter().all(|(k, v)| match a.get(k) {
                    Some(Value::Array(options)) => options.iter().any(|o| value_matches(v, o)),
                    Some(other) => value_matches(v, other),
                    None => false,
                })
        }
        (g, a) => g == a,
    }
}

/// Checks one predicted call (`name`, `arguments`) against the accepted answer; the error says why it fails.
pub fn check_call(
    name: &str,
    arguments: &Map<String, Value>,
    function: Option<&Function>,
    accepted: &Accepted,
) -> std::result::Result<(), String> {
    let Some((expected_name, params)) = accepted.iter().next() else {
        return Err("no accepted answer".into());
    };
    if name != expected_name {
        return Err(format!("called {name}, expected {expected_name}"));
    }
    let params = params.as_object().cloned().unwrap_or_default();
    if let Some(function) = function {
        let required = function
            .parameters
            .get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for r in required.iter().filter_map(Value::as_str) {
            if !arguments.contains_key(r) {
                return Err(format!("required parameter '{r}' missing"));
            }
        }
    }
    for (key, value) in arguments {
        let Some(options) = params.get(key).and_then(Value::as_array) else {
            return Err(format!("unexpected parameter '{key}'"));
        };
        if !options.iter().any(|o| value_matches(value, o)) {
            return Err(format!(
                "'{key}' = {value} is not among {}",
                Value::Array(options.clone())
            ));
        }
    }
    for (key, options) in &params {
        let optional = options
            .as_array()
            .is_some_and(|o| o.iter().any(|v| v == ""));
        if !arguments.contains_key(key) && !optional {
            return Err(format!("parameter '{key}' missing"));
        }
    }
    Ok(())
}
