//! Rule `records-by-name` (run, general): at run time, a list of records passed to a parameter that takes a list
//! of strings, named in the plural of a text field every record has (`names` and records with a `name`, `paths`
//! and a `path`), becomes that field of each record; and one record (or a list of exactly one) passed to a
//! parameter that takes a string or a number, named after one of its fields (`id`, or ending in it: `todo_id`,
//! `todoId`), becomes that field's value. Stated on the schema (the parameter's type and name) and the result
//! (records, each with that field).
//!
//! Why: told `open_nodes {"names": "$s2.entities$"}` after a search, the memory server got each entity written out
//! as JSON for a name and found none (tasks-mcp `mem-jazz`); told `complete_todo {"todo_id": "$s1.todos.0$"}`, the
//! to-do server got the whole record written out as JSON for an id and found no such to-do (tasks-apps
//! `todo-finished`).

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

/// One record for `parameter`, given its schema: the value of the record's field the parameter is named after (the
/// name itself, or its end after `_` or before a capital: `todo_id`, `todoId` → `id`), where the schema takes a
/// string or a number (not an object) and that field holds one. A list of exactly one record counts as that record.
fn record_by_name(parameter: &str, value: &Value, schema: &Value) -> Option<(String, Value)> {
    let types = schema_types(schema);
    if types.contains(&"object")
        || !(types.contains(&"string") || types.contains(&"integer") || types.contains(&"number"))
    {
        return None;
    }
    let record = match value {
        Value::Object(record) => record,
        Value::Array(items) if items.len() == 1 => items[0].as_object()?,
        _ => return None,
    };
    let names_it = |field: &str| {
        if parameter == field {
            return true;
        }
        let lower = parameter.to_lowercase();
        let Some(start) =
            lower.len().checked_sub(field.len()).filter(|&s| s > 0 && lower.ends_with(&field.to_lowercase()))
        else {
            return false;
        };
        parameter[..start].ends_with('_') || parameter[start..].starts_with(|c: char| c.is_uppercase())
    };
    let mut named = record.iter().filter(|(field, v)| (v.is_string() || v.is_number()) && names_it(field));
    let (field, found) = named.clone().find(|(field, _)| *field == parameter).or_else(|| named.next())?;
    Some((field.clone(), found.clone()))
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
                if let Some((field, found)) = record_by_name(&k, &v, sub) {
                    lines.push(format!("{k}: a record → its {field} ({found})"));
                    return (k, found);
                }
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
            keys_on: "a list of records passed to a parameter taking a list of strings named in the plural of a text field every record has: that field of each; one record passed to a parameter taking a string or number named after one of its fields (id, todo_id): that field",
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

    #[test]
    fn a_record_passed_for_its_id_gives_its_id() {
        let schema = json!({"type": "object", "properties": {
            "todo_id": {"type": "string"}, "todoId": {"type": "string"}, "id": {"type": "integer"},
            "valid": {"type": "string"}, "record": {"type": "object"}
        }});
        let todo = json!({"id": "0", "text": "Water the plants", "valid": true});
        let one = |name: &str, value: Value| {
            let args: Map<String, Value> = [(name.to_string(), value)].into_iter().collect();
            coerce_to_schema(Value::Object(records_by_name_in(args, &schema).0), &schema)[name].clone()
        };
        assert_eq!(one("todo_id", todo.clone()), json!("0"));
        assert_eq!(one("todoId", json!([todo.clone()])), json!("0"), "a list of one record is that record");
        assert_eq!(one("id", json!({"id": 7})), json!(7));
        // Not where no field is named (`valid` ends in `id` but not after `_` or a capital), the schema takes a
        // record, or the list has several records.
        assert_eq!(one("valid", json!({"id": "0"})), json!("{\"id\":\"0\"}"));
        assert_eq!(one("record", todo.clone()), todo);
        assert_eq!(one("todo_id", json!([{"id": "0"}, {"id": "1"}])), json!("[{\"id\":\"0\"},{\"id\":\"1\"}]"));
    }
}
