//! NESTFUL data and scoring: samples (a query and its gold call sequence), the tool catalogue as JSON Schemas,
//! the mapping between our plans and NESTFUL call sequences, and the paper's four metrics.
//!
//! # Scoring (NESTFUL, arXiv 2409.03797)
//! Both sequences are first *grounded*: calls are labelled `var1`, `var2`, … by position and every reference
//! `$<label>.<field>$` is rewritten to the position-based label, so a prediction that names its steps
//! differently but wires them the same way scores the same. `var_result` (gold's pseudo-call naming the outputs
//! that form the answer) is dropped from gold: our plans state the answer as their final steps' outputs, so
//! keeping it would fail every sample on a call no planner of ours writes. This is the one deviation from the
//! official scorer, and it is made on every pair alike.
//! - **F1 functions / F1 parameters**: macro F1 over labels as scikit-learn's `MultiLabelBinarizer` +
//!   `f1_score(average="macro")` compute it — each sample contributes the *set* of its function names (or of its
//!   `name = value` argument slots); per label, F1 = 2·TP / (2·TP + FP + FN) counted over samples; averaged over
//!   every label seen in gold or prediction.
//! - **Partial sequence accuracy**: per sample, the share of positions where the grounded calls agree (name and
//!   arguments), over the longer sequence's length; averaged over samples.
//! - **Full sequence accuracy**: per sample, 1 when the grounded sequences are equal; averaged.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::agent::refs::references_in;
use crate::agent::Plan;
use crate::{Error, Result};

/// NESTFUL's answer pseudo-call.
pub const VAR_RESULT: &str = "var_result";

/// One call of a sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// Function name.
    pub name: String,
    /// Arguments; strings may hold `$label.field$` references.
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// Label later calls use to reference this one's output.
    #[serde(default)]
    pub label: String,
}

/// One sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Position in the data file, from 0.
    pub index: usize,
    /// The user's query.
    pub input: String,
    /// The gold sequence, `var_result` included as in the file.
    pub output: Vec<Call>,
}

impl Sample {
    /// The gold calls that are real tools (without `var_result`).
    pub fn gold_calls(&self) -> Vec<Call> {
        self.output
            .iter()
            .filter(|c| c.name != VAR_RESULT)
            .cloned()
            .collect()
    }
}

/// A tool of the catalogue.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDoc {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Arguments as a JSON Schema object.
    pub args_schema: Value,
    /// Output as a JSON Schema object (its properties are the referencable fields).
    pub output_schema: Value,
}

/// Samples read from a data file, with the entries that could not be read.
#[derive(Debug, Clone)]
pub struct Loaded<T> {
    /// The readable entries.
    pub items: Vec<T>,
    /// `file:entry: reason` for each unreadable one (counted and reported, never dropped silently).
    pub skipped: Vec<String>,
}

impl<T> Default for Loaded<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            skipped: Vec::new(),
        }
    }
}

fn read_json_array(path: &Path) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let value: Value = serde_json::from_str(&text).map_err(|e| Error::InvalidInput {
        path: path.to_path_buf(),
        message: format!("not JSON: {e}"),
    })?;
    match value {
        Value::Array(items) => Ok(items),
        _ => Err(Error::InvalidInput {
            path: path.to_path_buf(),
            message: "expected a JSON array".into(),
        }),
    }
}

/// Reads the samples of a NESTFUL data file (a JSON array).
pub fn load_samples(path: &Path) -> Result<Loaded<Sample>> {
    let mut loaded = Loaded::default();
    for (index, item) in read_json_array(path)?.into_iter().enumerate() {
        #[derive(Deserialize)]
        struct Raw {
            input: String,
            output: Vec<Call>,
        }
        match serde_json::from_value::<Raw>(item) {
            Ok(raw) if !raw.output.is_empty() => loaded.items.push(Sample {
                index,
                input: raw.input,
                output: raw.output,
            }),
            Ok(_) => loaded.skipped.push(format!(
                "{}: sample {index}: empty gold sequence",
                path.display()
            )),
            Err(e) => loaded
                .skipped
                .push(format!("{}: sample {index}: {e}", path.display())),
        }
    }
    Ok(loaded)
}

/// NESTFUL / BFCL type names as JSON Schema types.
pub fn json_type(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "string" | "str" => "string",
        "integer" | "int" => "integer",
        "number" | "float" | "double" => "number",
        "boolean" | "bool" => "boolean",
        "array" | "list" | "tuple" => "array",
        "object" | "dict" => "object",
        _ => return None,
    })
}

fn property_schema(spec: &Value) -> Value {
    let mut schema = Map::new();
    if let Some(t) = spec.get("type").and_then(Value::as_str).and_then(json_type) {
        schema.insert("type".into(), json!(t));
    }
    if let Some(d) = spec.get("description").and_then(Value::as_str) {
        schema.insert("description".into(), json!(d));
    }
    Value::Object(schema)
}

/// Reads the tool catalogue (`*-spec.json`).
pub fn load_tools(path: &Path) -> Result<Loaded<ToolDoc>> {
    let mut loaded = Loaded::default();
    for (index, item) in read_json_array(path)?.into_iter().enumerate() {
        let Some(name) = item.get("name").and_then(Value::as_str) else {
            loaded
                .skipped
                .push(format!("{}: tool {index}: no name", path.display()));
            continue;
        };
        let empty = Map::new();
        let params = item
            .get("query_parameters")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let outputs = item
            .get("output_parameters")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let properties: Map<String, Value> = params
            .iter()
            .map(|(k, v)| (k.clone(), property_schema(v)))
            .collect();
        let required: Vec<&String> = params
            .iter()
            .filter(|(_, v)| v.get("required").and_then(Value::as_bool).unwrap_or(false))
            .map(|(k, _)| k)
            .collect();
        let output_properties: Map<String, Value> = outputs
            .iter()
            .map(|(k, v)| (k.clone(), property_schema(v)))
            .collect();
        loaded.items.push(ToolDoc {
            name: name.to_string(),
            description: item
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            args_schema: json!({"type": "object", "properties": properties, "required": required}),
            output_schema: json!({"type": "object", "properties": output_properties}),
        });
    }
    Ok(loaded)
}

/// The tools offered for a sample: the gold tools plus `distractors` others drawn with `seed` (the whole
/// catalogue when `distractors` is `None`), in catalogue order.
pub fn catalogue_for(
    sample: &Sample,
    tools: &[ToolDoc],
    distractors: Option<usize>,
    seed: u64,
) -> Vec<ToolDoc> {
    let Some(k) = distractors else {
        return tools.to_vec();
    };
    let gold: BTreeSet<String> = sample.gold_calls().into_iter().map(|c| c.name).collect();
    let mut others: Vec<&ToolDoc> = tools.iter().filter(|t| !gold.contains(&t.name)).collect();
    // A seeded Fisher-Yates shuffle (splitmix64): the same seed and sample give the same distractors everywhere.
    let mut state = seed ^ (sample.index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for i in (1..others.len()).rev() {
        let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
        others.swap(i, j);
    }
    let chosen: BTreeSet<&str> = others.iter().take(k).map(|t| t.name.as_str()).collect();
    tools
        .iter()
        .filter(|t| gold.contains(&t.name) || chosen.contains(t.name.as_str()))
        .cloned()
        .collect()
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A plan as a NESTFUL call sequence: one call per step, in order, labelled by step id.
pub fn plan_to_calls(plan: &Plan) -> Vec<Call> {
    plan.steps
        .iter()
        .map(|s| Call {
            name: s.tool.clone(),
            arguments: s.args.clone(),
            label: s.id.clone(),
        })
        .collect()
}

/// A NESTFUL call sequence as a plan (labels become step ids; `var_result` is left out).
pub fn calls_to_plan(goal: &str, calls: &[Call]) -> Plan {
    let steps = calls
        .iter()
        .filter(|c| c.name != VAR_RESULT)
        .map(|c| crate::agent::Step {
            id: c.label.clone(),
            description: String::new(),
            tool: c.name.clone(),
            args: c.arguments.clone(),
            depends_on: Vec::new(),
        })
        .collect();
    Plan {
        goal: goal.to_string(),
        version: 1,
        steps,
    }
}

/// Grounds a sequence: labels become `var<position>`, references follow, numbers are compared by value.
pub fn ground(calls: &[Call]) -> Vec<Call> {
    let rename: HashMap<&str, String> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| (c.label.as_str(), format!("var{}", i + 1)))
        .collect();
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| Call {
            name: c.name.clone(),
            arguments: c
                .arguments
                .iter()
                .map(|(k, v)| (k.clone(), ground_value(v, &rename)))
                .collect(),
            label: format!("var{}", i + 1),
        })
        .collect()
}

fn ground_value(value: &Value, rename: &HashMap<&str, String>) -> Value {
    match value {
        Value::String(text) if !references_in(value).is_empty() => {
            let mut out = text.clone();
            for reference in references_in(value) {
                if let Some(new) = rename.get(reference.step.as_str()) {
                    let old = reference.to_string();
                    let mut grounded = reference.clone();
                    grounded.step = new.clone();
                    out = out.replace(&old, &grounded.to_string());
                }
            }
            Value::String(out)
        }
        Value::Number(n) => n.as_f64().map_or(value.clone(), |f| json!(f)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| ground_value(v, rename)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), ground_value(v, rename)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Per-sample scores and the sets the corpus F1 needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleScore {
    /// Share of positions that agree.
    pub partial_sequence: f64,
    /// Whether the sequences are equal.
    pub full_sequence: bool,
    /// Gold function names (a set).
    pub gold_functions: BTreeSet<String>,
    /// Predicted function names.
    pub predicted_functions: BTreeSet<String>,
    /// Gold `name = value` slots.
    pub gold_params: BTreeSet<String>,
    /// Predicted slots.
    pub predicted_params: BTreeSet<String>,
}

fn slots(calls: &[Call]) -> BTreeSet<String> {
    calls
        .iter()
        .flat_map(|c| c.arguments.iter().map(|(k, v)| format!("{k} = {v}")))
        .collect()
}

/// Scores a predicted sequence against gold (both grounded here; `var_result` dropped from both).
pub fn score_sample(predicted: &[Call], gold: &[Call]) -> SampleScore {
    let strip = |calls: &[Call]| -> Vec<Call> {
        ground(
            &calls
                .iter()
                .filter(|c| c.name != VAR_RESULT)
                .cloned()
                .collect::<Vec<_>>(),
        )
    };
    let (pred, gold) = (strip(predicted), strip(gold));
    let longest = pred.len().max(gold.len());
    let agreeing = pred
        .iter()
        .zip(&gold)
        .filter(|(p, g)| p.name == g.name && p.arguments == g.arguments)
        .count();
    SampleScore {
        partial_sequence: if longest == 0 {
            1.0
        } else {
            agreeing as f64 / longest as f64
        },
        full_sequence: pred.len() == gold.len() && agreeing == gold.len(),
        gold_functions: gold.iter().map(|c| c.name.clone()).collect(),
        predicted_functions: pred.iter().map(|c| c.name.clone()).collect(),
        gold_params: slots(&gold),
        predicted_params: slots(&pred),
    }
}

/// Macro F1 over labels of per-sample label sets (scikit-learn's `MultiLabelBinarizer` + macro `f1_score`).
pub fn macro_f1(pairs: &[(&BTreeSet<String>, &BTreeSet<String>)]) -> f64 {
    let mut counts: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for (gold, predicted) in pairs {
        for label in gold.union(predicted) {
            let entry = counts.entry(label.as_str()).or_default();
            match (gold.contains(label), predicted.contains(label)) {
                (true, true) => entry.0 += 1,
                (false, true) => entry.1 += 1,
                (true, false) => entry.2 += 1,
                (false, false) => {}
            }
        }
    }
    if counts.is_empty() {
        return 1.0;
    }
    let total: f64 = counts
        .values()
        .map(|&(tp, fp, fn_)| 2.0 * tp as f64 / (2 * tp + fp + fn_) as f64)
        .sum();
    total / counts.len() as f64
}

/// The four metrics over samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// Macro F1 of function names.
    pub f1_functions: f64,
    /// Macro F1 of `name = value` slots.
    pub f1_params: f64,
    /// Mean partial sequence accuracy.
    pub partial_sequence_accuracy: f64,
    /// Mean full sequence accuracy.
    pub full_sequence_accuracy: f64,
}

/// Aggregates sample scores.
pub fn metrics(scores: &[SampleScore]) -> Metrics {
    let n = scores.len().max(1) as f64;
    let functions: Vec<_> = scores
        .iter()
        .map(|s| (&s.gold_functions, &s.predicted_functions))
        .collect();
    let params: Vec<_> = scores
        .iter()
        .map(|s| (&s.gold_params, &s.predicted_params))
        .collect();
    Metrics {
        f1_functions: macro_f1(&functions),
        f1_params: macro_f1(&params),
        partial_sequence_accuracy: scores.iter().map(|s| s.partial_sequence).sum::<f64>() / n,
        full_sequence_accuracy: scores.iter().filter(|s| s.full_sequence).count() as f64 / n,
    }
}
