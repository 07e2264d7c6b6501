//! Reading NESTFUL data: samples and their gold call sequences, the record types, and the issues of records that
//! could not be used.
//!
//! # Data
//!
//! A data file holds samples `{"input", "output": [{"name", "arguments", "label"}, …]}` (a JSON array, or one
//! object per line); the catalogue (`*-spec.json`) lists tools with `query_parameters` and `output_parameters`.
//! Nothing is dropped quietly: a sample or tool that cannot be read goes to `skipped` with its file and sample
//! index (or line), and a readable sample with a doubtful sequence (a label used twice, a reference to a label no
//! earlier call defines) is kept and reported in `warnings`.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::agent::plan::refs::references_in;
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
    /// The directory does not hold exactly one file of a split's kind.
    #[error("{} must hold one *{suffix} file{}; give the split's directory with --data DIR", dir.display(),
        if found.is_empty() { String::new() } else { format!(", not several ({found})") })]
    Split {
        /// The directory.
        dir: PathBuf,
        /// `-data.json` or `-spec.json`.
        suffix: &'static str,
        /// The candidates, when there were several.
        found: String,
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
            changes_things: None,
        }
    }
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

/// Reads the file and splits it into records: the elements of a JSON array (located by index) or the non-blank
/// lines of a one-object-per-line file (located by line; a line that is not JSON is an issue, not a failure).
pub(super) fn read_records(
    path: &Path,
    array_location: fn(usize) -> Location,
) -> Result<Records<Value>, BenchDataError> {
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
