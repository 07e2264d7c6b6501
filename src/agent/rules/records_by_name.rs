//! Rule `records-by-name` (run, general): at run time, a list of records passed to a parameter that takes a list
//! of strings, named in the plural of a text field every record has (`names` and records with a `name`, `paths`
//! and a `path`), becomes that field of each record. Stated on the schema (an array of strings, the parameter's
//! name) and the result (records, each with that field as text).
//!
//! Why: told `open_nodes {"names": "$s2.entities$"}` after a search, the memory server got each entity written out
//! as JSON for a name and found none (tasks-mcp `mem-jazz`).

use serde_json::{Map, Value};

use crate::agent::plan::refs::schema_types;

/// A list of records for `parameter`, given its schema: the field of each record the parameter's name is the
/// plural of, where the schema takes a list of strings and every record has that field as text.
fn records_by_name(parameter: &str, value: Value, schema: &Value) -> Value {
    let Some(field) = parameter.strip_suffix('s').filter(|f| !f.is_empty()) else { return value };
    let wants_strings = schema_types(schema).contains(&"array")
        && schema.get("items").is_some_and(|items| schema_types(items) == ["string"]);
    let Value::Array(items) = &value else { return value };
    let named: Option<Vec<Value>> =
        items.iter().map(|item| item.get(field).filter(|v| v.is_string()).cloned()).collect();
    match named {
        Some(names) if wants_strings && !names.is_empty() && items.iter().all(Value::is_object) => Value::Array(names),
        _ => value,
    }
}

/// [`records_by_name`] on each top-level argument of `args`, whose argument schema is `schema`; one line per
/// argument changed (`names: 2 records → their name`). The caller asks [`super::RuleSet::on`] first.
pub fn records_by_name_in(args: Map<String, Value>, schema: &Value) -> (Map<String, Value>, Vec<String>) {
    let properties = schema.get("properties");
    let mut lines = Vec::new();
    let args = args
        .into_iter()
        .map(|(k, v)| match properties.and_then(|p| p.get(&k)) {
            Some(sub) => {
                let count = v.as_array().map_or(0, Vec::len);
                let named = records_by_name(&k, v.clone(), sub);
                if named != v {
                    lines.push(format!("{k}: {count} records → their {} ({named})", &k[..k.len() - 1]));
                }
                (k, named)
            }
            None => (k, v),
        })
        .collect();
    (args, lines)
}

/// Rule `records-by-name` (run, general).
pub struct RecordsByName;

impl super::Rule for RecordsByName {
    fn about(&self) -> super::About {
        super::About {
            name: "records-by-name",
            stage: super::Stage::Run,
            profile: super::Profile::General,
            keys_on: "a list of records passed to a parameter taking a list of strings named in the plural of a text field every record has: that field of each",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::plan::refs::coerce_to_schema;
    use serde_json::json;

    #[test]
    fn records_passed_for_names_give_their_names() {
        let schema = json!({"type": "object", "properties": {
            "names": {"type": "array", "items": {"type": "string"}},
            "tags": {"type": "array", "items": {"type": "object"}}
        }});
        let people = json!([{"name": "Alice", "likes": "jazz"}, {"name": "Dave"}]);
        let args = json!({"names": people, "tags": people});
        let Value::Object(args) = args else { unreachable!() };
        let coerced = coerce_to_schema(Value::Object(records_by_name_in(args, &schema).0), &schema);
        assert_eq!(coerced["names"], json!(["Alice", "Dave"]));
        assert_eq!(coerced["tags"], people, "a list of objects where objects are asked stays");
        // A record without the field is written out as text, as before.
        let Value::Object(unnamed) = json!({"names": [{"title": "x"}]}) else { unreachable!() };
        let unnamed = coerce_to_schema(Value::Object(records_by_name_in(unnamed, &schema).0), &schema);
        assert_eq!(unnamed["names"], json!(["{\"title\":\"x\"}"]));
    }
}
