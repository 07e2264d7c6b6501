//! The NESTFUL tool catalogue: reading `*-spec.json` into JSON Schema tools, and choosing the tools offered for a
//! sample (gold tools plus seeded distractors).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::Path;

use super::data::{issue, read_records, BenchDataError, Loaded, Location, NestfulSample, NestfulTool};

/// Loads a NESTFUL tool catalogue: the tools and the skipped ones (tools get no warnings).
pub fn load_tools(path: &Path) -> Result<Loaded<NestfulTool>, BenchDataError> {
    let (records, mut skipped) = read_records(path, Location::Tool)?;
    let mut tools: Vec<NestfulTool> = Vec::with_capacity(records.len());
    for (location, value) in records {
        match parse_tool(value) {
            Ok(tool) if tools.iter().any(|t| t.name == tool.name) => {
                skipped.push(issue(path, location, format!("a second tool named '{}'", tool.name)))
            }
            Ok(tool) => tools.push(tool),
            Err(reason) => skipped.push(issue(path, location, reason)),
        }
    }
    Ok(Loaded { items: tools, skipped, warnings: Vec::new() })
}

#[derive(Deserialize)]
struct RawTool {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    query_parameters: Map<String, Value>,
    #[serde(default)]
    output_parameters: Map<String, Value>,
}

fn parse_tool(value: Value) -> Result<NestfulTool, String> {
    let raw: RawTool = serde_json::from_value(value).map_err(|e| format!("not a NESTFUL tool: {e}"))?;
    let not_object = |kind: &str, params: &Map<String, Value>| {
        params
            .iter()
            .find(|(_, p)| !p.is_object())
            .map(|(n, _)| format!("{kind} '{n}' of '{}' is not an object", raw.name))
    };
    if let Some(reason) =
        not_object("parameter", &raw.query_parameters).or(not_object("output", &raw.output_parameters))
    {
        return Err(reason);
    }
    Ok(NestfulTool {
        parameters: parameters_schema(&raw.query_parameters),
        output_parameters: output_schema(&raw.output_parameters),
        name: raw.name,
        description: raw.description,
    })
}

/// The types JSON Schema knows; NESTFUL also writes `file`, which has no JSON counterpart and is left untyped.
const JSON_TYPES: [&str; 7] = ["string", "integer", "number", "boolean", "array", "object", "null"];

/// `query_parameters` as an object schema; NESTFUL's per-parameter `"required": true` becomes the `required` list.
fn parameters_schema(params: &Map<String, Value>) -> Value {
    let mut schema = Map::new();
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), Value::Object(properties(params)));
    schema.insert("required".into(), required_names(params).into());
    Value::Object(schema)
}

/// `output_parameters` as an object schema whose properties are the output fields plans may reference.
fn output_schema(params: &Map<String, Value>) -> Value {
    let mut schema = Map::new();
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), Value::Object(properties(params)));
    Value::Object(schema)
}

fn properties(params: &Map<String, Value>) -> Map<String, Value> {
    params.iter().map(|(name, p)| (name.clone(), property_schema(p))).collect()
}

fn required_names(params: &Map<String, Value>) -> Vec<Value> {
    params
        .iter()
        .filter(|(_, p)| p.get("required") == Some(&Value::Bool(true)))
        .map(|(n, _)| n.clone().into())
        .collect()
}

/// One NESTFUL parameter as JSON Schema: a non-empty `allowed_values` → `enum`, a boolean `required` is dropped (its parent
/// lists it), unknown types are dropped, `format` is kept on strings only (NESTFUL puts `"format": "date"` on an
/// array once), nested `properties` and `items` are converted the same way.
fn property_schema(param: &Value) -> Value {
    let Some(object) = param.as_object() else {
        return param.clone();
    };
    let is_string = object.get("type").and_then(Value::as_str) == Some("string");
    let mut schema = Map::new();
    for (key, value) in object {
        match key.as_str() {
            "required" if !value.is_array() => {}
            // NESTFUL's spec format lists the values a parameter takes; an empty list means any value (an empty
            // `enum` would admit none, and make every plan with the tool impossible).
            "allowed_values" if value.as_array().is_some_and(Vec::is_empty) => {}
            "allowed_values" => {
                schema.insert("enum".into(), value.clone());
            }
            "type" => {
                if let Some(t) = value.as_str().filter(|t| JSON_TYPES.contains(t)) {
                    schema.insert("type".into(), t.into());
                }
            }
            "format" if !is_string => {}
            "items" => {
                schema.insert("items".into(), property_schema(value));
            }
            "properties" => match value.as_object() {
                Some(nested) => {
                    schema.insert("properties".into(), Value::Object(properties(nested)));
                    let required = required_names(nested);
                    if !required.is_empty() && !object.get("required").is_some_and(Value::is_array) {
                        schema.insert("required".into(), required.into());
                    }
                }
                None => {
                    schema.insert(key.clone(), value.clone());
                }
            },
            _ => {
                schema.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(schema)
}

/// How many tools besides the gold ones a catalogue offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Distractors {
    /// The gold tools and this many others (fewer when the catalogue has fewer).
    Count(usize),
    /// Every tool of the catalogue.
    WholeCatalogue,
}

/// The tools to offer for a sample: its gold tools plus distractors, sorted by name so that position tells nothing.
/// Distractors are drawn from the other tools sorted by name, shuffled by a SplitMix64 generator seeded from
/// `seed` and the sample's index: the same seed gives the same catalogue, and samples get different draws.
pub fn distractor_catalogue(
    sample: &NestfulSample,
    all_tools: &[NestfulTool],
    k: Distractors,
    seed: u64,
) -> Result<Vec<NestfulTool>, BenchDataError> {
    let gold = sample.gold_tools();
    if let Some(missing) = gold.iter().find(|name| !all_tools.iter().any(|t| t.name == **name)) {
        return Err(BenchDataError::UnknownTool { sample: sample.index, tool: missing.to_string() });
    }
    let mut chosen: Vec<&NestfulTool> = all_tools.iter().filter(|t| gold.contains(&t.name.as_str())).collect();
    let mut others: Vec<&NestfulTool> = all_tools.iter().filter(|t| !gold.contains(&t.name.as_str())).collect();
    others.sort_by(|a, b| a.name.cmp(&b.name));
    let take = match k {
        Distractors::Count(n) => n.min(others.len()),
        Distractors::WholeCatalogue => others.len(),
    };
    let mut rng = SplitMix64::new(seed ^ SplitMix64::new(sample.index as u64).next_u64());
    // A partial Fisher–Yates shuffle: the first `take` places end up a uniform draw without repetition.
    for i in 0..take {
        let j = i + rng.below(others.len() - i);
        others.swap(i, j);
    }
    chosen.extend(others.into_iter().take(take));
    chosen.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(chosen.into_iter().cloned().collect())
}

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny, well-mixed generator, enough for reproducible draws.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`); the modulo bias is below 2⁻⁵⁰ for catalogue sizes.
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}
