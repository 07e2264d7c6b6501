//! Real tools' JSON Schemas made usable as they come: spellings of other dialects normalised (Python and OpenAPI
//! type names, `nullable`), constructs that admit no value at all loosened, and every change noted with where it
//! was made, so a tool with an odd schema is planned with instead of aborting the run.
//!
//! Loosening only ever admits more values, never fewer: a plan that fits the tool's own schema still fits.

use serde_json::{Map, Value};

/// What [`fit`] changed, one sentence each (the JSON pointer of the place, then the change).
pub type Notes = Vec<String>;

/// The schema with every change below made, and the notes saying what changed.
///
/// - `type` names of other dialects (`dict`, `float`, `int`, `str`, `bool`, `list`, `tuple`, `any`) become JSON
///   Schema's; a type name it does not know is dropped (any type).
/// - OpenAPI's `nullable: true` becomes a type that also admits `null`.
/// - An empty `enum` (it admits nothing; NESTFUL writes `allowed_values: []` for "any value") is dropped.
/// - `required` names that `properties` does not declare are dropped from `required`.
/// - Bounds that contradict each other (`minimum` > `maximum`, and the same for lengths and item counts) are
///   dropped.
/// - `properties`, `required` and `enum` of the wrong JSON type are dropped.
pub fn fit(schema: &Value) -> (Value, Notes) {
    let mut notes = Vec::new();
    let fitted = fit_at(schema, "", &mut notes);
    (fitted, notes)
}

fn fit_at(schema: &Value, pointer: &str, notes: &mut Notes) -> Value {
    let Value::Object(object) = schema else {
        // `true`/`false` schemas and anything else pass through; the validator judges them.
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in object {
        let here = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
        let fitted = match key.as_str() {
            "properties" | "$defs" | "definitions" | "patternProperties" => match value {
                Value::Object(members) => Value::Object(
                    members
                        .iter()
                        .map(|(name, member)| {
                            let at = format!("{here}/{}", name.replace('~', "~0").replace('/', "~1"));
                            (name.clone(), fit_at(member, &at, notes))
                        })
                        .collect(),
                ),
                _ => {
                    notes.push(format!("{here}: not an object of schemas; dropped"));
                    continue;
                }
            },
            "items" | "additionalProperties" | "not" | "contains" | "propertyNames" | "if" | "then" | "else" => {
                match value {
                    Value::Array(members) => Value::Array(
                        members.iter().enumerate().map(|(i, m)| fit_at(m, &format!("{here}/{i}"), notes)).collect(),
                    ),
                    other => fit_at(other, &here, notes),
                }
            }
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => match value {
                Value::Array(members) => Value::Array(
                    members.iter().enumerate().map(|(i, m)| fit_at(m, &format!("{here}/{i}"), notes)).collect(),
                ),
                _ => {
                    notes.push(format!("{here}: not a list of schemas; dropped"));
                    continue;
                }
            },
            _ => value.clone(),
        };
        out.insert(key.clone(), fitted);
    }
    fit_types(&mut out, pointer, notes);
    fit_enum(&mut out, pointer, notes);
    fit_required(&mut out, pointer, notes);
    for (low, high) in [("minimum", "maximum"), ("minLength", "maxLength"), ("minItems", "maxItems")] {
        fit_bounds(&mut out, low, high, pointer, notes);
    }
    Value::Object(out)
}

/// JSON Schema's name for a type name of another dialect; `None` for one that names no JSON type.
fn json_type(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "object" | "dict" | "map" | "mapping" => "object",
        "array" | "list" | "tuple" | "set" | "sequence" => "array",
        "string" | "str" | "text" => "string",
        "integer" | "int" | "long" => "integer",
        "number" | "float" | "double" | "decimal" => "number",
        "boolean" | "bool" => "boolean",
        "null" | "none" => "null",
        _ => return None,
    })
}

fn fit_types(object: &mut Map<String, Value>, pointer: &str, notes: &mut Notes) {
    let nullable = object.remove("nullable");
    let mut names: Option<Vec<String>> = match object.get("type") {
        None => None,
        Some(Value::String(name)) => Some(vec![name.clone()]),
        Some(Value::Array(names)) => Some(names.iter().filter_map(|n| n.as_str().map(str::to_string)).collect()),
        Some(_) => Some(Vec::new()),
    };
    if let Some(given) = &names {
        let mut fitted: Vec<String> = Vec::new();
        let mut unknown = Vec::new();
        for name in given {
            match json_type(name) {
                Some(json) if !fitted.iter().any(|f| f == json) => fitted.push(json.to_string()),
                Some(_) => {}
                None => unknown.push(name.clone()),
            }
        }
        if !unknown.is_empty() || fitted.is_empty() {
            notes.push(format!(
                "{pointer}/type: {} names no JSON type; any type is admitted",
                object.get("type").map(Value::to_string).unwrap_or_default()
            ));
            names = None;
        } else if fitted != *given {
            notes.push(format!("{pointer}/type: {} read as {}", serde_json::json!(given), serde_json::json!(fitted)));
            names = Some(fitted);
        } else {
            names = Some(fitted);
        }
    }
    if nullable == Some(Value::Bool(true)) {
        if let Some(list) = names.as_mut().filter(|l| !l.iter().any(|n| n == "null")) {
            list.push("null".into());
        }
        notes.push(format!("{pointer}/nullable: read as a type that also admits null"));
    }
    match names {
        None => {
            object.remove("type");
        }
        Some(list) if list.len() == 1 => {
            object.insert("type".into(), Value::String(list[0].clone()));
        }
        Some(list) => {
            object.insert("type".into(), Value::Array(list.into_iter().map(Value::String).collect()));
        }
    }
}

fn fit_enum(object: &mut Map<String, Value>, pointer: &str, notes: &mut Notes) {
    match object.get("enum") {
        Some(Value::Array(values)) if values.is_empty() => {
            object.remove("enum");
            notes.push(format!("{pointer}/enum: empty (admits nothing); dropped, any value is admitted"));
        }
        Some(Value::Array(_)) | None => {}
        Some(_) => {
            object.remove("enum");
            notes.push(format!("{pointer}/enum: not a list; dropped"));
        }
    }
}

fn fit_required(object: &mut Map<String, Value>, pointer: &str, notes: &mut Notes) {
    let Some(required) = object.get("required") else { return };
    let Value::Array(names) = required else {
        object.remove("required");
        notes.push(format!("{pointer}/required: not a list of names; dropped"));
        return;
    };
    let Some(Value::Object(properties)) = object.get("properties") else { return };
    let (kept, dropped): (Vec<&Value>, Vec<&Value>) =
        names.iter().partition(|n| n.as_str().is_some_and(|n| properties.contains_key(n)));
    if dropped.is_empty() {
        return;
    }
    notes.push(format!(
        "{pointer}/required: {} not among the properties; no longer required",
        Value::from(dropped.iter().map(|v| (*v).clone()).collect::<Vec<_>>())
    ));
    let kept: Vec<Value> = kept.into_iter().cloned().collect();
    object.insert("required".into(), Value::Array(kept));
}

fn fit_bounds(object: &mut Map<String, Value>, low: &str, high: &str, pointer: &str, notes: &mut Notes) {
    let (Some(min), Some(max)) = (object.get(low).and_then(Value::as_f64), object.get(high).and_then(Value::as_f64))
    else {
        return;
    };
    if min > max {
        object.remove(low);
        object.remove(high);
        notes.push(format!("{pointer}: {low} {min} above {high} {max} (admits nothing); both dropped"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dialects_and_contradictions_are_loosened_with_notes() {
        let schema = json!({
            "type": "dict",
            "properties": {
                "city": {"type": "str", "enum": []},
                "price": {"type": "float", "minimum": 10, "maximum": 1},
                "tags": {"type": "list", "items": {"type": "string", "nullable": true}},
                "anything": {"type": "whatever"}
            },
            "required": ["city", "ghost"]
        });
        let (fitted, notes) = fit(&schema);
        assert_eq!(
            fitted,
            json!({
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "price": {"type": "number"},
                    "tags": {"type": "array", "items": {"type": ["string", "null"]}},
                    "anything": {}
                },
                "required": ["city"]
            })
        );
        for needle in ["/properties/city/enum", "/properties/price", "ghost", "/properties/anything/type", "nullable"] {
            assert!(notes.iter().any(|n| n.contains(needle)), "no note on {needle}: {notes:?}");
        }
    }

    #[test]
    fn a_schema_already_fine_is_unchanged_and_unnoted() {
        let schema = json!({"type": "object", "properties": {"n": {"type": ["integer", "null"], "minimum": 0,
            "maximum": 9}, "e": {"enum": ["a", "b"]}}, "required": ["n"], "additionalProperties": false,
            "$defs": {"x": {"type": "string"}}});
        let (fitted, notes) = fit(&schema);
        assert_eq!(fitted, schema);
        assert!(notes.is_empty(), "{notes:?}");
    }
}
