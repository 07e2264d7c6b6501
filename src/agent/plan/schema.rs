//! The plan's JSON Schema, generated from the tool registry; the planner's grammar is compiled from it.
//!
//! - Each step is an `anyOf` of per-tool shapes: `tool` is a `const` and `args` is that tool's argument schema
//!   with `additionalProperties: false`, so unknown tools and misnamed arguments cannot be generated.
//! - In a plan, step k has the id `s<k>` (`prefixItems`, one entry per position), and its `depends_on` and its
//!   references name only `s1` … `s<k-1>`: a step cannot depend on itself or on a later one. Step mode's single
//!   next step follows the looser convention `^s[1-9][0-9]?$` (up to 99 steps).
//! - References are constrained: where tools declare output fields, an argument accepts its own type **or** a
//!   string `$s<N>.<field>$` whose field is a declared output field of a type the argument accepts (numbers for
//!   numbers, anything for strings). Plain string arguments may embed references to any declared field, and a
//!   literal dollar must be written `$$`, so a string cannot smuggle in a malformed reference. Which tool step N
//!   called is not tracked, so "that step has that field" is left to
//!   [`Plan::validate`](crate::agent::plan::Plan::validate); the field name and the type are fixed by the grammar.
//! - If some tool declares no output fields, references to its steps cannot be checked: then any identifier is
//!   admitted as a field, and `$s<N>$` (the whole output) as well.
//!
//! Only keywords llguidance supports are used: `type`, `properties`, `required`, `additionalProperties: false`,
//! `anyOf`, `const`, `pattern`, `minItems`/`maxItems`, `maxLength`, plus whatever the tools' own schemas hold.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::agent::plan::refs::{reference_fits, schema_types};
use crate::tools::{ToolRegistry, ToolSpec};

/// Size limits written into the plan schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanSchemaOptions {
    /// Most steps in a plan (also bounds the step-id pattern).
    pub max_steps: usize,
    /// Longest step description, in characters.
    pub max_description: usize,
    /// Longest answer in step mode, in characters.
    pub max_answer: usize,
    /// Longest `thought` the plan opens with, in characters; 0: no thought (see [`PlanSchemaOptions::THOUGHT_ENV`]).
    pub max_thought: usize,
}

impl Default for PlanSchemaOptions {
    fn default() -> Self {
        Self { max_steps: 12, max_description: 200, max_answer: 500, max_thought: 0 }
    }
}

impl PlanSchemaOptions {
    /// The experiment's switch: `TANDEM_PLAN_THOUGHT=N` has plans open with a `thought` of at most N characters
    /// (what the goal asks, part by part) before the steps; unset or 0, no thought (docs/benchmarks.md says
    /// what it changed).
    pub const THOUGHT_ENV: &'static str = "TANDEM_PLAN_THOUGHT";

    /// The defaults, with the thought `TANDEM_PLAN_THOUGHT` asks for.
    pub fn from_env() -> crate::Result<Self> {
        let max_thought = match crate::settings::env::plan_thought().as_deref().map(str::trim) {
            None | Some("") => 0,
            Some(text) => text.parse().map_err(|_| {
                crate::Error::Usage(format!("{}={text} is not a number of characters", Self::THOUGHT_ENV))
            })?,
        };
        Ok(Self { max_thought, ..Self::default() })
    }
}

/// The regex (anchored) for step ids with at most `max_steps` steps: `^s[1-9][0-9]?$` for up to 99.
pub fn step_id_pattern(max_steps: usize) -> String {
    format!("^{}$", step_id_regex(max_steps))
}

fn step_id_regex(max_steps: usize) -> String {
    let digits = max_steps.max(1).to_string().len();
    match digits {
        1 => "s[1-9]".to_string(),
        2 => "s[1-9][0-9]?".to_string(),
        n => format!("s[1-9][0-9]{{0,{}}}", n - 1),
    }
}

fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if !(c.is_ascii_alphanumeric() || c == '_') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Declared output fields across the registry: name → types (`None` = untyped somewhere).
struct FieldCatalog {
    fields: BTreeMap<String, Vec<Option<String>>>,
    /// Some tool declares nothing: any field name may be referenced.
    open: bool,
    /// Regex of the step ids a reference may name; `None`: no step may be referenced (the plan's first step).
    id: Option<String>,
}

impl FieldCatalog {
    /// References may name any step id of a plan of `options.max_steps` steps.
    fn new(registry: &ToolRegistry, options: &PlanSchemaOptions) -> Self {
        Self::naming(registry, Some(step_id_regex(options.max_steps)))
    }

    /// References may name only the steps before step `position` (1-based): `s1` … `s<position - 1>`.
    fn before(registry: &ToolRegistry, position: usize) -> Self {
        let earlier: Vec<String> = (1..position).map(|k| k.to_string()).collect();
        Self::naming(registry, (!earlier.is_empty()).then(|| format!("s({})", earlier.join("|"))))
    }

    fn naming(registry: &ToolRegistry, id: Option<String>) -> Self {
        let mut fields: BTreeMap<String, Vec<Option<String>>> = BTreeMap::new();
        let mut open = false;
        for spec in registry.specs() {
            match spec.output_fields() {
                Some(declared) => {
                    for field in declared {
                        let types = fields.entry(field.name).or_default();
                        if !types.contains(&field.json_type) {
                            types.push(field.json_type);
                        }
                    }
                }
                None => open = true,
            }
        }
        Self { fields, open, id }
    }

    /// Alternation of field names a reference into an argument of `arg_types` may use (`None`: none fits).
    fn field_alternation(&self, arg_types: &[&str]) -> Option<String> {
        let mut names: Vec<String> = self
            .fields
            .iter()
            .filter(|(_, types)| types.iter().any(|t| reference_fits(arg_types, t.as_deref())))
            .map(|(name, _)| regex_escape(name))
            .collect();
        if self.open {
            names.push("[A-Za-z_][A-Za-z0-9_]*".into());
        }
        (!names.is_empty()).then(|| names.join("|"))
    }

    /// The body of one reference (between the dollars' neighbours), or `None` when nothing may be referenced.
    fn reference_regex(&self, arg_types: &[&str]) -> Option<String> {
        let id = self.id.as_ref()?;
        let fields = self.field_alternation(arg_types);
        let whole = if self.open { format!("|\\${id}\\$") } else { String::new() };
        fields.map(|f| format!("\\${id}\\.({f})\\${whole}"))
    }

    /// Schema of a string that is exactly one reference fitting `arg_types`.
    fn whole_reference(&self, arg_types: &[&str]) -> Option<Value> {
        self.reference_regex(arg_types).map(|r| json!({"type": "string", "pattern": format!("^({r})$")}))
    }

    /// Regex of free text: no lone `$`, only `$$` and well-formed references to declared fields.
    fn text_pattern(&self) -> String {
        match self.reference_regex(&["string"]) {
            Some(r) => format!("^([^$]|\\$\\$|{r})*$"),
            None => "^([^$]|\\$\\$)*$".to_string(),
        }
    }

    /// The schema with references admitted wherever a value may be one.
    fn admit_references(&self, schema: &Value) -> Value {
        let Some(object) = schema.as_object() else {
            return schema.clone();
        };
        let types = schema_types(schema);
        let constrained = ["enum", "const", "pattern", "format"].iter().any(|k| object.contains_key(*k));
        if types == ["string"] && !constrained {
            let mut text = object.clone();
            text.insert("pattern".into(), Value::String(self.text_pattern()));
            return Value::Object(text);
        }
        let mut inner = object.clone();
        if types == ["object"] {
            if let Some(Value::Object(properties)) = inner.get_mut("properties") {
                for property in properties.values_mut() {
                    *property = self.admit_references(property);
                }
                // An object that declares its keys gets only those: left open, the planner has written
                // near-misses such as "start_date " for "start_date".
                if !properties.is_empty() && !object.contains_key("additionalProperties") {
                    inner.insert("additionalProperties".into(), Value::Bool(false));
                }
            }
        }
        if types == ["array"] {
            if let Some(items) = inner.get("items").filter(|i| i.is_object()).cloned() {
                inner.insert("items".into(), self.admit_references(&items));
            }
        }
        match self.whole_reference(&types) {
            Some(reference) => json!({"anyOf": [Value::Object(inner), reference]}),
            None => Value::Object(inner),
        }
    }

    /// A tool's closed argument schema with references admitted in each argument.
    fn args_schema(&self, spec: &ToolSpec) -> Value {
        let mut schema = spec.args_schema.as_object().cloned().unwrap_or_default();
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            for property in properties.values_mut() {
                *property = self.admit_references(property);
            }
        }
        Value::Object(schema)
    }
}

/// The plan schema for the registry's tools, with default limits.
pub fn plan_json_schema(registry: &ToolRegistry) -> Value {
    plan_json_schema_with(registry, &PlanSchemaOptions::default())
}

/// The plan schema for the registry's tools. Property order (id, description, tool, args, depends_on) is the
/// order the grammar makes the model write them in.
pub fn plan_json_schema_with(registry: &ToolRegistry, options: &PlanSchemaOptions) -> Value {
    let positions: Vec<Value> =
        (1..=options.max_steps).map(|k| json!({"anyOf": positional_step_shapes(registry, options, k)})).collect();
    let steps = json!({
        "type": "array",
        "minItems": 1,
        "maxItems": options.max_steps,
        "prefixItems": positions,
        "items": false
    });
    // No goal: the run knows it, and copying a long goal back cost the planner dozens of decoded tokens.
    if options.max_thought == 0 {
        return json!({
            "type": "object",
            "properties": {"steps": steps},
            "required": ["steps"],
            "additionalProperties": false
        });
    }
    // The thought comes first (the grammar writes properties in order), so the steps are written after it.
    json!({
        "type": "object",
        "properties": {"thought": {"type": "string", "maxLength": options.max_thought}, "steps": steps},
        "required": ["thought", "steps"],
        "additionalProperties": false
    })
}

/// The schema of step mode's answer: either the next step (one of the per-tool shapes) or the final answer.
pub fn next_step_json_schema(registry: &ToolRegistry, options: &PlanSchemaOptions) -> Value {
    json!({
        "anyOf": [
            {
                "type": "object",
                "properties": {"next": {"anyOf": step_shapes(registry, options)}},
                "required": ["next"],
                "additionalProperties": false
            },
            {
                "type": "object",
                "properties": {"answer": {"type": "string", "maxLength": options.max_answer}},
                "required": ["answer"],
                "additionalProperties": false
            }
        ]
    })
}

/// One schema per tool for a step calling it: `tool` fixed, `args` that tool's arguments (references allowed
/// where the types fit). Any step id; `depends_on` and references may name any step (step mode, where the
/// position is the caller's to check).
pub fn step_shapes(registry: &ToolRegistry, options: &PlanSchemaOptions) -> Vec<Value> {
    let id = json!({"type": "string", "pattern": step_id_pattern(options.max_steps)});
    let depends_on = json!({"type": "array", "items": id, "maxItems": options.max_steps.saturating_sub(1)});
    shapes(registry, options, &FieldCatalog::new(registry, options), id, depends_on)
}

/// The step shapes for the plan's step `position` (1-based): its id is `s<position>`, and `depends_on` and
/// references name only earlier steps, so a plan cannot depend on itself or on a later step (seen on NESTFUL
/// before: `"id":"s4", … "depends_on":["s3","s4"]`).
pub fn positional_step_shapes(registry: &ToolRegistry, options: &PlanSchemaOptions, position: usize) -> Vec<Value> {
    let earlier: Vec<String> = (1..position).map(|k| format!("s{k}")).collect();
    let depends_on = if earlier.is_empty() {
        json!({"type": "array", "maxItems": 0})
    } else {
        json!({"type": "array", "items": {"enum": earlier}, "maxItems": earlier.len()})
    };
    let id = json!({"const": format!("s{position}")});
    shapes(registry, options, &FieldCatalog::before(registry, position), id, depends_on)
}

fn shapes(
    registry: &ToolRegistry,
    options: &PlanSchemaOptions,
    catalog: &FieldCatalog,
    id: Value,
    depends_on: Value,
) -> Vec<Value> {
    registry
        .specs()
        .map(|spec| {
            let mut properties = Map::new();
            properties.insert("id".into(), id.clone());
            properties.insert("description".into(), json!({"type": "string", "maxLength": options.max_description}));
            properties.insert("tool".into(), json!({"const": spec.name}));
            properties.insert("args".into(), catalog.args_schema(spec));
            properties.insert("depends_on".into(), depends_on.clone());
            json!({
                "type": "object",
                "properties": properties,
                "required": ["id", "description", "tool", "args", "depends_on"],
                "additionalProperties": false
            })
        })
        .collect()
}
