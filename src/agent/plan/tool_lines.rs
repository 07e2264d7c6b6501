//! Tools as the planner's prompt lists them: by default the description and the argument schema as JSON; or
//! (`TANDEM_TOOL_LISTING=compact`) a compact signature line per tool, `name(arg: type, opt?: type) -> field,
//! field`, with the description and any argument descriptions on the next line. Compact is opt-in until the task
//! suites are measured with it on a quiet machine (the prompts' scores in docs/benchmarks.md are the JSON one's).
//!
//! The compact form keeps what the planner chooses by: names, types, enum values, which arguments are required
//! (`?` marks the optional ones), defaults, formats, argument descriptions and output fields. It leaves out what
//! the plan grammar enforces anyway (lengths, bounds, patterns) and JSON's quotes and keys, so every tool costs
//! fewer prompt tokens (the counts: docs/performance.md, "Time to a plan on a laptop"). The grammar is the same in
//! both forms.

use serde_json::{Map, Value};

use crate::tools::ToolSpec;
use crate::{Error, Result};

/// How tools are written into the planner's prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolListing {
    /// A signature line and a description line per tool.
    Compact,
    /// The description, then the argument schema's properties as JSON and the output fields' names.
    #[default]
    Json,
}

impl ToolListing {
    /// The environment variable that chooses the listing (`compact` or `json`; unset: json).
    pub const ENV: &'static str = "TANDEM_TOOL_LISTING";

    /// The listing `TANDEM_TOOL_LISTING` asks for; an unknown value is an error naming the known ones.
    pub fn from_env() -> Result<Self> {
        match crate::settings::env::tool_listing().as_deref().map(str::trim) {
            Some("compact") => Ok(Self::Compact),
            None | Some("") | Some("json") => Ok(Self::Json),
            Some(other) => {
                Err(Error::Usage(format!("{}={other} is not a tool listing: use compact or json", Self::ENV)))
            }
        }
    }
}

/// The signature line of a tool: `name(arg: type, opt?: type) -> field, field` (no arrow without outputs).
pub fn signature(spec: &ToolSpec) -> String {
    let properties = properties(&spec.args_schema);
    let required = required(&spec.args_schema);
    let args: Vec<String> = properties.iter().map(|(name, schema)| argument(name, schema, &required)).collect();
    let mut line = format!("{}({})", spec.name, args.join(", "));
    let outputs: Vec<String> = spec.output_fields().unwrap_or_default().into_iter().map(|f| f.name).collect();
    if !outputs.is_empty() {
        line.push_str(" -> ");
        line.push_str(&outputs.join(", "));
    }
    line
}

/// The description line: the tool's description, then `arg: description` for each described argument
/// (nested object properties as `arg.field`).
pub fn description(spec: &ToolSpec) -> String {
    let mut notes = Vec::new();
    argument_notes("", &spec.args_schema, &mut notes);
    let text = one_line(&spec.description);
    match (text.is_empty(), notes.is_empty()) {
        (_, true) => text,
        (true, false) => notes.join("; "),
        (false, false) => format!("{} {}", with_stop(&text), notes.join("; ")),
    }
}

fn properties(schema: &Value) -> Map<String, Value> {
    schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default()
}

fn required(schema: &Value) -> Vec<String> {
    let list = schema.get("required").and_then(Value::as_array);
    list.map(|r| r.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default()
}

fn argument(name: &str, schema: &Value, required: &[String]) -> String {
    let mark = if required.iter().any(|r| r == name) { "" } else { "?" };
    let mut text = format!("{name}{mark}: {}", type_of(schema));
    if let Some(default) = schema.get("default") {
        text.push_str(&format!(" = {}", compact_json(default)));
    }
    text
}

/// A schema as a short type: `string`, `integer`, `"a"|"b"`, `string[]`, `{a: string, b?: number}`, a format
/// name for a formatted string (`date-time`), alternatives joined by `|`; `any` when nothing constrains it.
fn type_of(schema: &Value) -> String {
    let Some(object) = schema.as_object() else {
        // `true` admits anything; `false` nothing (the grammar has it either way).
        return "any".into();
    };
    if let Some(values) = object.get("enum").and_then(Value::as_array) {
        return values.iter().map(compact_json).collect::<Vec<_>>().join("|");
    }
    if let Some(value) = object.get("const") {
        return compact_json(value);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(variants) = object.get(key).and_then(Value::as_array) {
            return variants.iter().map(type_of).collect::<Vec<_>>().join("|");
        }
    }
    match object.get("type") {
        Some(Value::String(t)) => named_type(t, object),
        Some(Value::Array(types)) => {
            types.iter().filter_map(Value::as_str).map(|t| named_type(t, object)).collect::<Vec<_>>().join("|")
        }
        _ if object.contains_key("properties") => named_type("object", object),
        _ if object.contains_key("items") => named_type("array", object),
        // Something the short form does not cover (`allOf`, `$ref`, ...): the schema itself.
        _ if object.keys().any(|k| k != "description" && k != "title") => compact_json(schema),
        _ => "any".into(),
    }
}

fn named_type(name: &str, object: &Map<String, Value>) -> String {
    match name {
        "string" => object.get("format").and_then(Value::as_str).unwrap_or("string").to_string(),
        "array" => match object.get("items") {
            Some(items) => {
                let item = type_of(items);
                if item.contains('|') {
                    format!("({item})[]")
                } else {
                    format!("{item}[]")
                }
            }
            None => "array".into(),
        },
        "object" => {
            let schema = Value::Object(object.clone());
            let properties = properties(&schema);
            if properties.is_empty() {
                return "object".into();
            }
            let required = required(&schema);
            let fields: Vec<String> = properties.iter().map(|(n, s)| argument(n, s, &required)).collect();
            format!("{{{}}}", fields.join(", "))
        }
        other => other.to_string(),
    }
}

/// `name: description` for each described property of an object schema (and of objects within it, dotted).
fn argument_notes(prefix: &str, schema: &Value, notes: &mut Vec<String>) {
    for (name, property) in properties(schema) {
        let path = if prefix.is_empty() { name } else { format!("{prefix}.{name}") };
        if let Some(text) = property.get("description").and_then(Value::as_str).map(one_line) {
            if !text.is_empty() {
                notes.push(format!("{path}: {text}"));
            }
        }
        let nested = property.get("items").unwrap_or(&property);
        argument_notes(&path, nested, notes);
    }
}

/// The text on one line (descriptions of MCP and NESTFUL tools may hold line breaks).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The text ending in a full stop (or its own `.`, `!`, `?`, `:`), so argument notes read as their own sentence.
fn with_stop(text: &str) -> String {
    if text.ends_with(['.', '!', '?', ':']) {
        text.to_string()
    } else {
        format!("{text}.")
    }
}

fn compact_json(value: &Value) -> String {
    // Writing a `Value` to a string cannot fail.
    serde_json::to_string(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(args: Value, outputs: Option<Value>) -> ToolSpec {
        ToolSpec {
            name: "book".into(),
            description: "Book a room".into(),
            args_schema: args,
            output_schema: outputs,
            needs_model: false,
            changes_things: None,
        }
    }

    #[test]
    fn signature_marks_optional_arguments_and_lists_enums_and_outputs() {
        let args = json!({"type": "object", "properties": {
            "city": {"type": "string", "description": "City name"},
            "nights": {"type": "integer", "minimum": 1, "default": 1},
            "kind": {"type": "string", "enum": ["single", "double"]},
            "guests": {"type": "array", "items": {"type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}},
            "start": {"type": "string", "format": "date"},
            "note": {"type": ["string", "null"]}},
            "required": ["city", "kind"]});
        let outputs = json!({"type": "object", "properties": {"id": {"type": "string"}, "price": {}}});
        let spec = spec(args, Some(outputs));
        assert_eq!(
            signature(&spec),
            "book(city: string, nights?: integer = 1, kind: \"single\"|\"double\", \
             guests?: {name: string, age?: integer}[], start?: date, note?: string|null) -> id, price"
        );
        assert_eq!(description(&spec), "Book a room. city: City name");
    }

    #[test]
    fn a_tool_without_arguments_or_outputs_is_a_bare_call() {
        let spec = spec(json!({"type": "object", "properties": {}}), None);
        assert_eq!(signature(&spec), "book()");
        assert_eq!(description(&spec), "Book a room");
    }

    #[test]
    fn schemas_the_short_form_does_not_cover_are_written_out() {
        let args = json!({"type": "object", "properties": {"x": {"allOf": [{"type": "integer"}]}, "y": {}},
                          "required": ["x", "y"]});
        assert_eq!(signature(&spec(args, None)), r#"book(x: {"allOf":[{"type":"integer"}]}, y: any)"#);
    }
}
