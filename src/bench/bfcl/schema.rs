//! BFCL's parameter docs as JSON Schema.

use serde_json::{Map, Value};

/// BFCL's type name as a JSON Schema type; `None` for `any` (no constraint) and for names BFCL does not know.
pub fn json_schema_type(bfcl_type: &str) -> Option<&'static str> {
    match bfcl_type {
        "string" => Some("string"),
        "integer" => Some("integer"),
        "float" | "number" => Some("number"),
        "boolean" | "bool" => Some("boolean"),
        "array" | "list" | "tuple" => Some("array"),
        "dict" | "object" => Some("object"),
        _ => None,
    }
}

/// A BFCL parameter doc as JSON Schema: types renamed ([`json_schema_type`]; `any` loses its `type`), nested
/// `properties` and `items` converted, BFCL's own `optional` flag dropped (`required` says it), `format` kept on
/// strings only; `description`, `enum`, `default`, `required`, bounds are kept.
pub fn to_json_schema(doc: &Value) -> Value {
    let Some(object) = doc.as_object() else {
        return doc.clone();
    };
    let is_string = object.get("type").and_then(Value::as_str) == Some("string");
    let mut schema = Map::new();
    for (key, value) in object {
        match key.as_str() {
            "type" => {
                if let Some(t) = value.as_str().and_then(json_schema_type) {
                    schema.insert("type".into(), t.into());
                }
            }
            "properties" => {
                let converted = match value.as_object() {
                    Some(props) => Value::Object(props.iter().map(|(k, v)| (k.clone(), to_json_schema(v))).collect()),
                    None => value.clone(),
                };
                schema.insert("properties".into(), converted);
            }
            "items" => {
                schema.insert("items".into(), to_json_schema(value));
            }
            "optional" => {}
            "format" if !is_string => {}
            _ => {
                schema.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(schema)
}
