//! NESTFUL (IBM, arXiv 2409.03797): its non-executable data and tool catalogue, call sequences to and from
//! [`Plan`]s, and its four scores computed the way IBM's scorer computes them.
//!
//! # Data
//!
//! A data file holds samples `{"input", "output": [{"name", "arguments", "label"}, …]}` (a JSON array, or one
//! object per line); the catalogue (`*-spec.json`) lists tools with `query_parameters` and `output_parameters`.
//! Nothing is dropped quietly: a sample or tool that cannot be read goes to `skipped` with its file and sample
//! index (or line), and a readable sample with a doubtful sequence (a label used twice, a reference to a label no
//! earlier call defines) is kept and reported in `warnings`.
//!
//! # Scores
//!
//! Implemented after IBM's scorer, read (not copied) from the NESTFUL code release as mirrored in
//! `github.com/romitjain/NESTFUL`: `src/scorer.py` (`calculate_scores`), `src/output_parsers.py`
//! (`ground_seq_nested_repsonse`) and `src/utils.py` (`compute_score_sklearn`, `post_process_api_with_args`).
//! (`github.com/IBM/NESTFUL` itself holds only the data.)
//!
//! 1. **`var_result` and labels (grounding).** Calls named `var_result` are dropped from gold and prediction (it
//!    names the answer; it is no call). Every other label is then replaced, inside references, by the name of the
//!    function that carries it in the same sequence: `$var1.distance$` becomes `$calculate_route.distance$`. So a
//!    prediction that numbers its labels differently from gold (`var7` for `var1`, or our step ids `s1`, `s2`) but
//!    wires the same functions' outputs into the same arguments scores exactly as if it used gold's labels, and
//!    one that wires another call's output in does not. As in the scorer, a reference is grounded when it is a whole
//!    string argument, or a string directly inside a list argument, that starts with `$` and has a `.`; `$var1$`,
//!    references inside longer text and inside objects are compared as written. Two deliberate differences: the
//!    scorer only grounds labels starting with `var` (it tests `startswith("$var")`), we ground any label defined
//!    in the sequence, so plans with step ids `s1`… can be scored at all; and the scorer replaces the label text
//!    everywhere in the string (`str.replace`), we replace only the label segment, so a field whose name contains
//!    the label is not mangled. For `var…` labels and ordinary field names the results are identical.
//! 2. **Prediction clean-up.** A predicted top-level string argument that starts with `$` but does not end with
//!    one gets the missing `$` (the scorer's repair of `$var1.x`). Third difference: we repair only when the part
//!    before the first `.` is a label of the sequence, i.e. a truncated reference. The scorer repairs every such
//!    string, which also rewrites literal text: gold's price ranges `$100-$200` (samples 147, 150, 162) would get a
//!    `$` appended, so there the gold sequence itself would not score 1 against itself.
//! 3. **Slots.** An argument becomes the text `name = value`, the value written as Python's `str` writes the
//!    parsed JSON (strings bare, `True`, `None`, `['a', 'b']`, `2.0`), so `"5"` and `5` give the same slot, as in
//!    the scorer.
//! 4. **F1 of function names** (`f1_intent`): one row per sample, the set of grounded function names; **F1 of
//!    parameters** (`f1_slot`): one row per sample and function name occurring in gold or prediction, the set of
//!    that function's slots (when a sequence calls a function twice, its last call's slots stand, as in the
//!    scorer's dict). Both are sklearn's macro F1 over `MultiLabelBinarizer` classes fitted on the gold rows: per
//!    class `F1 = 2·TP / (2·TP + FP + FN)` counted over rows, then the unweighted mean over classes. Predicted
//!    names or slots that occur in no gold row are not classes and so cost nothing (sklearn ignores unknown labels).
//!    These are corpus-level figures, not means of per-sample values: [`summarize`] computes them over all
//!    samples at once. Precision and recall are macro averages the same way (0 for a class never predicted).
//! 5. **Partial sequence accuracy** (`accuracy_combined`): each grounded call becomes
//!    `name(k1 = v1, k2 = v2)` with the slots sorted; if gold and prediction have equal length they are compared
//!    position by position, otherwise first aligned by function name greedily (walk both; equal names pair up, else
//!    the gold call pairs with a gap while gold lasts, then the remaining predicted calls with gaps). The score is
//!    the fraction of aligned positions whose strings are equal; the summary gives the mean over samples.
//! 6. **Full sequence accuracy**: the fraction of samples whose partial sequence accuracy is exactly 1.
//!
//! A prediction that could not be parsed is scored as an empty sequence (the scorer's parse failure leaves it
//! empty too). The win rate (executing the calls) needs the executable split and is not computed here.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::agent::refs::references_in;
use crate::agent::{Plan, Step};
use crate::tools::{closed_object_schema, ToolSpec};

/// The data file of the non-executable GLAIVE split.
pub const DATA_FILE: &str = "non-executable-glaive-data.json";
/// The tool catalogue of the non-executable GLAIVE split.
pub const SPEC_FILE: &str = "non-executable-glaive-spec.json";
/// The pseudo-call that names the answer at the end of a NESTFUL sequence.
pub const VAR_RESULT: &str = "var_result";

/// A benchmark file that cannot be used at all (single bad samples or lines are [`DataIssue`]s instead).
#[derive(Debug, thiserror::Error)]
pub enum BenchDataError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not JSON (the message carries the line and column).
    #[error("{} is not valid JSON: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The file is JSON of the wrong shape.
    #[error("{}: expected {expected}", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// What the file should hold.
        expected: &'static str,
    },
    /// A sample uses a tool the catalogue lacks.
    #[error("sample {sample} calls '{tool}', which the tool catalogue lacks")]
    UnknownTool {
        /// The sample's index.
        sample: usize,
        /// The tool's name.
        tool: String,
    },
}

/// Where in a file a problem sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Location {
    /// A 1-based line of a one-object-per-line file.
    Line(usize),
    /// A 0-based position in a JSON array of samples.
    Sample(usize),
    /// A 0-based position in a JSON array of tools.
    Tool(usize),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line(n) => write!(f, "line {n}"),
            Location::Sample(n) => write!(f, "sample {n}"),
            Location::Tool(n) => write!(f, "tool {n}"),
        }
    }
}

/// A record that was skipped, or kept with a warning, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataIssue {
    /// The file.
    pub file: PathBuf,
    /// Where in it.
    pub location: Location,
    /// What is wrong, in words.
    pub reason: String,
}

impl fmt::Display for DataIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location {
            Location::Line(n) => write!(f, "{}:{n}: {}", self.file.display(), self.reason),
            other => write!(f, "{} ({other}): {}", self.file.display(), self.reason),
        }
    }
}

/// One call of a NESTFUL sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// The function's name (`var_result` for the answer pseudo-call).
    pub name: String,
    /// Arguments; strings may hold references such as `"$var1.result$"`.
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// The label later calls use to reference this call's output (`var1`); `var_result` has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// One NESTFUL sample: a user query and its gold call sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NestfulSample {
    /// 0-based position in the data file (line order for a one-object-per-line file).
    pub index: usize,
    /// The user's query.
    pub input: String,
    /// The gold sequence as written, `var_result` included.
    pub calls: Vec<Call>,
}

impl NestfulSample {
    /// The gold calls without `var_result`.
    pub fn tool_calls(&self) -> impl Iterator<Item = &Call> {
        self.calls.iter().filter(|c| c.name != VAR_RESULT)
    }

    /// The names of the tools the gold sequence calls, each once, in order of first use.
    pub fn gold_tools(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for call in self.tool_calls() {
            if !names.contains(&call.name.as_str()) {
                names.push(&call.name);
            }
        }
        names
    }
}

/// A tool of the NESTFUL catalogue, with its parameters as JSON Schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NestfulTool {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Argument schema: `{"type": "object", "properties", "required"}` built from `query_parameters`.
    pub parameters: Value,
    /// Output schema: `{"type": "object", "properties"}` built from `output_parameters`.
    pub output_parameters: Value,
}

impl NestfulTool {
    /// The tool as planning sees it (argument schema closed; the executor never runs it, so `needs_model` is off).
    pub fn tool_spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            args_schema: closed_object_schema(&self.parameters),
            output_schema: Some(self.output_parameters.clone()),
            needs_model: false,
        }
    }
}

/// A loaded NESTFUL split.
#[derive(Debug, Clone, Default)]
pub struct NestfulData {
    /// Samples in file order.
    pub samples: Vec<NestfulSample>,
    /// The tool catalogue in file order.
    pub tools: Vec<NestfulTool>,
    /// Samples and tools that could not be read.
    pub skipped: Vec<DataIssue>,
    /// Samples kept although their sequence looks wrong (a duplicate label, a dangling reference).
    pub warnings: Vec<DataIssue>,
}

/// What one file gave: the records read, those skipped, and warnings about kept ones.
#[derive(Debug, Clone)]
pub struct Loaded<T> {
    /// Records read, in file order.
    pub items: Vec<T>,
    /// Records that could not be read.
    pub skipped: Vec<DataIssue>,
    /// Records kept with a doubt.
    pub warnings: Vec<DataIssue>,
}

/// Parsed records with their locations, and the issues of those that did not parse.
pub(crate) type Records<T> = (Vec<(Location, T)>, Vec<DataIssue>);

/// Loads [`DATA_FILE`] and [`SPEC_FILE`] from `dir`.
pub fn load(dir: &Path) -> Result<NestfulData, BenchDataError> {
    let samples = load_samples(&dir.join(DATA_FILE))?;
    let tools = load_tools(&dir.join(SPEC_FILE))?;
    Ok(NestfulData {
        samples: samples.items,
        tools: tools.items,
        skipped: [samples.skipped, tools.skipped].concat(),
        warnings: [samples.warnings, tools.warnings].concat(),
    })
}

/// Reads the file and splits it into records: the elements of a JSON array (located by index) or the non-blank
/// lines of a one-object-per-line file (located by line; a line that is not JSON is an issue, not a failure).
fn read_records(path: &Path, array_location: fn(usize) -> Location) -> Result<Records<Value>, BenchDataError> {
    let text = read_text(path)?;
    if text.trim_start().starts_with('[') {
        let items: Vec<Value> =
            serde_json::from_str(&text).map_err(|source| BenchDataError::Json { path: path.to_path_buf(), source })?;
        return Ok((items.into_iter().enumerate().map(|(i, v)| (array_location(i), v)).collect(), Vec::new()));
    }
    Ok(json_lines(path, &text))
}

/// The file's text.
pub(crate) fn read_text(path: &Path) -> Result<String, BenchDataError> {
    std::fs::read_to_string(path).map_err(|source| BenchDataError::Io { path: path.to_path_buf(), source })
}

/// Parses one JSON value per non-blank line; lines that do not parse become issues with their line number.
pub(crate) fn json_lines(path: &Path, text: &str) -> Records<Value> {
    let mut records = Vec::new();
    let mut issues = Vec::new();
    for (i, line) in text.lines().enumerate() {
        // Blank lines carry no record (a trailing newline, a stray empty line), so there is nothing to report.
        if line.trim().is_empty() {
            continue;
        }
        let location = Location::Line(i + 1);
        match serde_json::from_str(line) {
            Ok(value) => records.push((location, value)),
            Err(e) => issues.push(issue(path, location, format!("not valid JSON: {e}"))),
        }
    }
    (records, issues)
}

pub(crate) fn issue(path: &Path, location: Location, reason: impl Into<String>) -> DataIssue {
    DataIssue { file: path.to_path_buf(), location, reason: reason.into() }
}

/// Loads samples from a NESTFUL data file: the samples, the skipped ones, and warnings about kept ones.
pub fn load_samples(path: &Path) -> Result<Loaded<NestfulSample>, BenchDataError> {
    let (records, mut skipped) = read_records(path, Location::Sample)?;
    let mut samples = Vec::with_capacity(records.len());
    let mut warnings = Vec::new();
    for (index, (location, value)) in records.into_iter().enumerate() {
        match parse_sample(index, value) {
            Ok(sample) => {
                warnings.extend(sequence_warnings(&sample.calls).into_iter().map(|w| issue(path, location, w)));
                samples.push(sample);
            }
            Err(reason) => skipped.push(issue(path, location, reason)),
        }
    }
    Ok(Loaded { items: samples, skipped, warnings })
}

#[derive(Deserialize)]
struct RawSample {
    input: String,
    output: Vec<Call>,
}

/// A sample, or why it cannot be used.
fn parse_sample(index: usize, value: Value) -> Result<NestfulSample, String> {
    let raw: RawSample = serde_json::from_value(value).map_err(|e| format!("not a NESTFUL sample: {e}"))?;
    if raw.output.is_empty() {
        return Err("the gold sequence is empty".into());
    }
    // A call without a label cannot be referenced or become a plan step, so the sequence is unusable.
    if let Some((position, call)) = raw
        .output
        .iter()
        .enumerate()
        .find(|(_, c)| c.name != VAR_RESULT && c.label.as_deref().is_none_or(str::is_empty))
    {
        return Err(format!("call {position} ('{}') has no label", call.name));
    }
    Ok(NestfulSample { index, input: raw.input, calls: raw.output })
}

/// Doubts about a readable sequence: labels used twice, references (in our `$id.field$` syntax) to labels that no
/// earlier call defines.
fn sequence_warnings(calls: &[Call]) -> Vec<String> {
    let mut warnings = Vec::new();
    let mut defined: HashSet<String> = HashSet::new();
    for (position, call) in calls.iter().enumerate() {
        for reference in call.arguments.values().flat_map(references_in) {
            if !defined.contains(&reference.step) {
                warnings.push(format!(
                    "call {position} ('{}') references {reference}, but no earlier call has the label '{}'",
                    call.name, reference.step
                ));
            }
        }
        if let Some(label) = &call.label {
            if !defined.insert(label.replace('$', "")) {
                warnings.push(format!("call {position} ('{}') reuses the label '{label}'", call.name));
            }
        }
    }
    warnings
}

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

/// One NESTFUL parameter as JSON Schema: `allowed_values` → `enum`, a boolean `required` is dropped (its parent
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

/// Why a call sequence cannot become a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    /// A call (other than `var_result`) has no label to become its step id.
    #[error("call {position} ('{name}') has no label to become a step id")]
    MissingLabel {
        /// The call's position in the sequence.
        position: usize,
        /// Its function name.
        name: String,
    },
    /// Two calls share a label, so step ids would not be unique.
    #[error("the label '{label}' is used by more than one call")]
    DuplicateLabel {
        /// The label.
        label: String,
    },
}

/// A plan for `goal` from a call sequence: each call becomes a step in order, its label (without `$`) the step id,
/// its name the tool, its arguments the arguments unchanged (NESTFUL references are our references). `var_result`
/// is left out: it names the answer and is no tool call (the scorer drops it too). `depends_on` stays empty because
/// references imply dependencies.
pub fn calls_to_plan(goal: &str, calls: &[Call]) -> Result<Plan, ConversionError> {
    let mut steps: Vec<Step> = Vec::with_capacity(calls.len());
    for (position, call) in calls.iter().enumerate().filter(|(_, c)| c.name != VAR_RESULT) {
        let id = call
            .label
            .as_deref()
            .map(|l| l.replace('$', ""))
            .filter(|l| !l.is_empty())
            .ok_or_else(|| ConversionError::MissingLabel { position, name: call.name.clone() })?;
        if steps.iter().any(|s| s.id == id) {
            return Err(ConversionError::DuplicateLabel { label: id });
        }
        steps.push(Step {
            id,
            description: String::new(),
            tool: call.name.clone(),
            args: call.arguments.clone(),
            depends_on: Vec::new(),
        });
    }
    Ok(Plan { goal: goal.to_string(), version: 1, steps })
}

/// The call sequence of a plan, in step order: the tool is the name, the step id the label, the arguments as they
/// are. Descriptions and explicit `depends_on` have no NESTFUL counterpart and are not carried.
pub fn plan_to_calls(plan: &Plan) -> Vec<Call> {
    plan.steps
        .iter()
        .map(|s| Call { name: s.tool.clone(), arguments: s.args.clone(), label: Some(s.id.clone()) })
        .collect()
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

/// Per-sample results, with the rows the corpus-level F1 scores are computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleScore {
    /// Gold function names after grounding (one row of the F1-of-functions computation).
    pub gold_functions: Vec<String>,
    /// Predicted function names after grounding.
    pub predicted_functions: Vec<String>,
    /// Gold `name = value` slots, one row per function name in gold or prediction.
    pub gold_parameters: Vec<Vec<String>>,
    /// Predicted slots, rows parallel to `gold_parameters`.
    pub predicted_parameters: Vec<Vec<String>>,
    /// Gold calls as `name(k = v, …)`, aligned with the prediction (`""` marks a gap).
    pub aligned_gold: Vec<String>,
    /// Predicted calls, aligned with gold.
    pub aligned_predicted: Vec<String>,
    /// The fraction of aligned positions that agree.
    pub partial_sequence_accuracy: f64,
    /// Whether every aligned position agrees.
    pub full_sequence_match: bool,
}

/// Macro-averaged precision, recall and F1 (sklearn `average="macro"`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct MacroScores {
    /// Mean per-class precision.
    pub precision: f64,
    /// Mean per-class recall.
    pub recall: f64,
    /// Mean per-class F1.
    pub f1: f64,
}

/// The four NESTFUL scores over a set of samples.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct NestfulSummary {
    /// Samples scored.
    pub samples: usize,
    /// F1 of function names (and its precision and recall), corpus-level macro average.
    pub functions: MacroScores,
    /// F1 of parameters (name = value slots), corpus-level macro average.
    pub parameters: MacroScores,
    /// Mean partial sequence accuracy.
    pub partial_sequence_accuracy: f64,
    /// Fraction of samples predicted exactly.
    pub full_sequence_accuracy: f64,
}

/// A call after grounding: its name and its `key = value` slots in argument order.
struct Grounded {
    name: String,
    slots: Vec<String>,
}

/// Scores one prediction against the gold sequence (both as written, `var_result` and labels included).
pub fn score_sample(gold: &[Call], predicted: &[Call]) -> SampleScore {
    let gold = ground(gold, false);
    let predicted = ground(predicted, true);
    let (gold_parameters, predicted_parameters) = slot_rows(&gold, &predicted);
    let (aligned_gold, aligned_predicted) =
        align(gold.iter().map(canonical).collect(), predicted.iter().map(canonical).collect());
    let agreeing = aligned_gold.iter().zip(&aligned_predicted).filter(|(g, p)| g == p).count();
    // Both empty cannot happen with real gold; sklearn would not give a number there, the scorer then records 0.
    let partial = if aligned_gold.is_empty() { 0.0 } else { agreeing as f64 / aligned_gold.len() as f64 };
    SampleScore {
        gold_functions: gold.iter().map(|c| c.name.clone()).collect(),
        predicted_functions: predicted.iter().map(|c| c.name.clone()).collect(),
        gold_parameters,
        predicted_parameters,
        aligned_gold,
        aligned_predicted,
        partial_sequence_accuracy: partial,
        full_sequence_match: partial == 1.0,
    }
}

/// The summary over scored samples: corpus-level macro F1s, mean sequence accuracies (all 0 for no samples).
pub fn summarize(scores: &[SampleScore]) -> NestfulSummary {
    if scores.is_empty() {
        return NestfulSummary::default();
    }
    let n = scores.len() as f64;
    let gold_functions: Vec<Vec<String>> = scores.iter().map(|s| s.gold_functions.clone()).collect();
    let predicted_functions: Vec<Vec<String>> = scores.iter().map(|s| s.predicted_functions.clone()).collect();
    let gold_parameters: Vec<Vec<String>> = scores.iter().flat_map(|s| s.gold_parameters.clone()).collect();
    let predicted_parameters: Vec<Vec<String>> = scores.iter().flat_map(|s| s.predicted_parameters.clone()).collect();
    NestfulSummary {
        samples: scores.len(),
        functions: macro_scores(&gold_functions, &predicted_functions),
        parameters: macro_scores(&gold_parameters, &predicted_parameters),
        partial_sequence_accuracy: scores.iter().map(|s| s.partial_sequence_accuracy).sum::<f64>() / n,
        full_sequence_accuracy: scores.iter().filter(|s| s.full_sequence_match).count() as f64 / n,
    }
}

#[derive(Default, Clone, Copy)]
struct Counts {
    tp: usize,
    fp: usize,
    fn_: usize,
}

/// sklearn's macro precision/recall/F1 of multi-label rows, with the label set fitted on `gold` (labels only
/// predicted are ignored). Rows are sets: repeats within a row count once. 0 when gold has no labels.
pub fn macro_scores(gold: &[Vec<String>], predicted: &[Vec<String>]) -> MacroScores {
    let mut counts: BTreeMap<&str, Counts> =
        gold.iter().flatten().map(|label| (label.as_str(), Counts::default())).collect();
    if counts.is_empty() {
        return MacroScores::default();
    }
    let empty = Vec::new();
    for (i, gold_row) in gold.iter().enumerate() {
        let gold_set: BTreeSet<&str> = gold_row.iter().map(String::as_str).collect();
        let predicted_set: BTreeSet<&str> = predicted.get(i).unwrap_or(&empty).iter().map(String::as_str).collect();
        for label in gold_set.union(&predicted_set) {
            let Some(c) = counts.get_mut(label) else {
                continue;
            };
            match (gold_set.contains(label), predicted_set.contains(label)) {
                (true, true) => c.tp += 1,
                (true, false) => c.fn_ += 1,
                (false, true) => c.fp += 1,
                (false, false) => {}
            }
        }
    }
    let ratio = |num: usize, den: usize| {
        if den == 0 {
            0.0
        } else {
            num as f64 / den as f64
        }
    };
    let classes = counts.len() as f64;
    let mean = |f: &dyn Fn(&Counts) -> f64| counts.values().map(f).sum::<f64>() / classes;
    MacroScores {
        precision: mean(&|c| ratio(c.tp, c.tp + c.fp)),
        recall: mean(&|c| ratio(c.tp, c.tp + c.fn_)),
        f1: mean(&|c| ratio(2 * c.tp, 2 * c.tp + c.fp + c.fn_)),
    }
}

/// Drops `var_result`, grounds labels to function names, writes the slots (see the module docs, steps 1–3).
fn ground(calls: &[Call], prediction: bool) -> Vec<Grounded> {
    let labels = label_functions(calls);
    calls
        .iter()
        .filter(|c| c.name != VAR_RESULT)
        .map(|call| Grounded {
            name: call.name.clone(),
            slots: call
                .arguments
                .iter()
                .map(|(key, value)| {
                    let mut value = value.clone();
                    if prediction {
                        close_reference(&mut value, &labels);
                    }
                    format!("{key} = {}", py_str(&ground_value(&value, &labels)))
                })
                .collect(),
        })
        .collect()
}

/// Label (without `$`) → the function that carries it; a later call wins, as in the scorer's dict.
fn label_functions(calls: &[Call]) -> HashMap<String, &str> {
    calls
        .iter()
        .filter(|c| c.name != VAR_RESULT && c.name != "varResult")
        .filter_map(|c| Some((c.label.as_deref()?.replace('$', ""), c.name.as_str())))
        .collect()
}

fn ground_value(value: &Value, labels: &HashMap<String, &str>) -> Value {
    match value {
        Value::String(s) => Value::String(ground_string(s, labels)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| match item {
                    Value::String(s) => Value::String(ground_string(s, labels)),
                    other => other.clone(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `$var1.distance$` → `$calculate_route.distance$` when `var1` labels a `calculate_route` call.
fn ground_string(text: &str, labels: &HashMap<String, &str>) -> String {
    let grounded = text
        .strip_prefix('$')
        .and_then(|_| text.split_once('.'))
        .and_then(|(head, rest)| labels.get(&head.replace('$', "")).map(|name| format!("${name}.{rest}")));
    grounded.unwrap_or_else(|| text.to_string())
}

/// Adds the closing `$` to a truncated reference (`$var1.distance`): a string that starts with `$`, does not end
/// with one, and whose part before the first `.` names a label of the sequence.
fn close_reference(value: &mut Value, labels: &HashMap<String, &str>) {
    if let Value::String(s) = value {
        let head = s.split_once('.').map(|(head, _)| head.replace('$', ""));
        if s.starts_with('$') && !s.ends_with('$') && head.is_some_and(|h| labels.contains_key(&h)) {
            s.push('$');
        }
    }
}

/// Function name → the slots of its last call, for gold and prediction, as parallel rows over the union of names.
fn slot_rows(gold: &[Grounded], predicted: &[Grounded]) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let last_slots = |calls: &[Grounded]| -> BTreeMap<String, Vec<String>> {
        calls.iter().map(|c| (c.name.clone(), c.slots.clone())).collect()
    };
    let (gold, predicted) = (last_slots(gold), last_slots(predicted));
    let names: BTreeSet<&String> = gold.keys().chain(predicted.keys()).collect();
    names
        .into_iter()
        .map(|name| (gold.get(name).cloned().unwrap_or_default(), predicted.get(name).cloned().unwrap_or_default()))
        .unzip()
}

/// `name(k1 = v1, k2 = v2)` with the slots sorted.
fn canonical(call: &Grounded) -> String {
    let mut slots = call.slots.clone();
    slots.sort();
    format!("{}({})", call.name, slots.join(", "))
}

fn call_name(canonical: &str) -> &str {
    canonical.split_once('(').map_or(canonical, |(name, _)| name)
}

/// The scorer's alignment: unchanged when the lengths agree, else a greedy walk by function name in which a gold
/// call without a partner pairs with a gap (`""`) while gold lasts, then the rest of the prediction with gaps.
fn align(gold: Vec<String>, predicted: Vec<String>) -> (Vec<String>, Vec<String>) {
    if gold.len() == predicted.len() {
        return (gold, predicted);
    }
    let (mut i, mut j) = (0, 0);
    let (mut aligned_gold, mut aligned_predicted) = (Vec::new(), Vec::new());
    while i < gold.len() || j < predicted.len() {
        if i < gold.len() && j < predicted.len() && call_name(&gold[i]) == call_name(&predicted[j]) {
            aligned_gold.push(gold[i].clone());
            aligned_predicted.push(predicted[j].clone());
            i += 1;
            j += 1;
        } else if i < gold.len() {
            aligned_gold.push(gold[i].clone());
            aligned_predicted.push(String::new());
            i += 1;
        } else {
            aligned_gold.push(String::new());
            aligned_predicted.push(predicted[j].clone());
            j += 1;
        }
    }
    (aligned_gold, aligned_predicted)
}

/// Python's `str()` of a value parsed from JSON: a string as it is, anything else as `repr()`.
fn py_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

/// Python's `repr()` of a value parsed from JSON (dicts keep their key order, as Python's do).
fn py_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (None, Some(u), _) => u.to_string(),
            (None, None, Some(f)) => py_float(f),
            _ => n.to_string(),
        },
        Value::String(s) => py_string_repr(s),
        Value::Array(items) => format!("[{}]", items.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(map) => {
            let entries: Vec<String> =
                map.iter().map(|(k, v)| format!("{}: {}", py_string_repr(k), py_repr(v))).collect();
            format!("{{{}}}", entries.join(", "))
        }
    }
}

/// Python's float `repr`: the shortest round-trip digits, positional for exponents −4..16 (always with a decimal
/// point, `2.0`), else scientific with a signed two-digit exponent (`1e-05`, `1.5e+16`).
fn py_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "nan".into()
        } else if f > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    // Rust's `{:e}` also prints the shortest round-trip digits: `-1.2345e3`.
    let sci = format!("{f:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = mantissa.strip_prefix('-').map_or(("", mantissa), |m| ("-", m));
    if !(-4..16).contains(&exponent) {
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{mantissa}e{exp_sign}{:02}", exponent.abs());
    }
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if exponent < 0 {
        return format!("{sign}0.{}{digits}", "0".repeat((-exponent - 1) as usize));
    }
    let point = exponent as usize + 1;
    let padded = format!("{digits:0<point$}");
    let (int_part, frac_part) = padded.split_at(point);
    format!("{sign}{int_part}.{}", if frac_part.is_empty() { "0" } else { frac_part })
}

/// Python's `repr` of a string: single quotes unless the text has a single quote and no double quote.
fn py_string_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}
