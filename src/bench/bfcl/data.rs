//! Reading BFCL data: questions, possible answers and function docs, paired by id, with the lines that could not
//! be used.
//!
//! `BFCL_v4_<category>.json` holds one question per line (`id`, `question` turns, `function` docs) and
//! `possible_answer/BFCL_v4_<category>.json` one answer per line (`id`, `ground_truth: [{name: {param: [accepted
//! values]}}]`, one entry per expected call). Questions and answers are paired by id. The relevance categories
//! (`irrelevance`, `live_irrelevance`, `live_relevance`) have no answer file: their cases get an empty answer. A line that is not JSON or not of that shape, a question
//! without an answer (or the reverse), a duplicate id, a parameter type BFCL does not know, or an answer naming a
//! function the question does not document is reported in `skipped` with file and line, never dropped quietly.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::category::BfclCategory;
use super::schema::to_json_schema;
use crate::bench::nestful::{issue, json_lines, read_text, BenchDataError, DataIssue, Location, Records};
use crate::tools::{closed_object_schema, ToolSpec};

/// One chat message of a question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// `user`, `system`, …
    pub role: String,
    /// The text.
    pub content: String,
}

/// A function doc as BFCL writes it (`parameters.type` is `"dict"`, types are BFCL's names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BfclFunction {
    /// The function's name (may contain dots: `math.hypot`).
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// BFCL's parameter doc: `{"type": "dict", "properties", "required"}`.
    pub parameters: Value,
}

impl BfclFunction {
    /// The parameters as JSON Schema (see [`to_json_schema`]).
    pub fn json_schema(&self) -> Value {
        to_json_schema(&self.parameters)
    }

    /// The function as planning sees it: argument schema closed, no declared output, not run by the model.
    pub fn tool_spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            args_schema: closed_object_schema(&self.json_schema()),
            output_schema: None,
            needs_model: false,
            changes_things: None,
        }
    }

    /// The names the doc marks required.
    pub fn required(&self) -> Vec<&str> {
        let list = self.parameters.get("required").and_then(Value::as_array);
        list.map(|names| names.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
    }

    /// The doc of one parameter.
    pub fn parameter(&self, name: &str) -> Option<&Value> {
        self.parameters.get("properties")?.get(name)
    }
}

/// One question: the chat turns and the functions on offer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BfclQuestion {
    /// `simple_python_0`, `multiple_17`, …
    pub id: String,
    /// Turns of messages (one turn in the single-turn categories; live questions may open with a system message).
    pub turns: Vec<Vec<Message>>,
    /// The function docs.
    pub functions: Vec<BfclFunction>,
}

impl BfclQuestion {
    /// The first user message, the question itself.
    pub fn user_prompt(&self) -> Option<&str> {
        self.turns.iter().flatten().find(|m| m.role == "user").map(|m| m.content.as_str())
    }

    /// The doc of the function with that name.
    pub fn function(&self, name: &str) -> Option<&BfclFunction> {
        self.functions.iter().find(|f| f.name == name)
    }
}

/// One expected call: the function and, per parameter, the accepted values (`""` among them: may be omitted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpectedCall {
    /// The function's name.
    pub name: String,
    /// Parameter → accepted values, in the answer file's order.
    pub accepted: Vec<(String, Vec<Value>)>,
}

impl ExpectedCall {
    /// The accepted values of one parameter, if the answer lists it.
    pub fn accepted_values(&self, param: &str) -> Option<&[Value]> {
        self.accepted.iter().find(|(name, _)| name == param).map(|(_, values)| values.as_slice())
    }
}

/// The possible answer of a question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BfclAnswer {
    /// The question's id.
    pub id: String,
    /// The expected calls (one for simple and multiple, several for parallel, none for the relevance categories).
    pub calls: Vec<ExpectedCall>,
}

/// A question with its possible answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BfclCase {
    /// Its category (decides the call-count rule).
    pub category: BfclCategory,
    /// The question.
    pub question: BfclQuestion,
    /// What is accepted.
    pub answer: BfclAnswer,
}

/// A loaded category.
#[derive(Debug, Clone)]
pub struct BfclSet {
    /// The category.
    pub category: BfclCategory,
    /// Questions paired with answers, in question-file order.
    pub cases: Vec<BfclCase>,
    /// Lines that could not be used, and why.
    pub skipped: Vec<DataIssue>,
}

/// Loads a category from the BFCL data folder (`dir/BFCL_v4_<cat>.json`, `dir/possible_answer/BFCL_v4_<cat>.json`).
pub fn load(dir: &Path, category: BfclCategory) -> Result<BfclSet, BenchDataError> {
    let question_path = dir.join(category.file_name());
    let answer_path = dir.join("possible_answer").join(category.file_name());
    let (questions, mut skipped) = read_lines(&question_path, parse_question)?;
    if !category.has_answers() {
        let cases = unanswered(category, questions, &question_path, &mut skipped);
        return Ok(BfclSet { category, cases, skipped });
    }
    let (answers, answer_issues) = read_lines(&answer_path, parse_answer)?;
    skipped.extend(answer_issues);
    let cases = pair(category, questions, answers, (&question_path, &answer_path), &mut skipped);
    Ok(BfclSet { category, cases, skipped })
}

/// Parses every line with `parse`; lines that fail become issues with their line numbers.
fn read_lines<T>(path: &Path, parse: fn(Value) -> Result<T, String>) -> Result<Records<T>, BenchDataError> {
    let text = read_text(path)?;
    let (records, mut issues) = json_lines(path, &text);
    let mut parsed = Vec::with_capacity(records.len());
    for (location, value) in records {
        match parse(value) {
            Ok(item) => parsed.push((location, item)),
            Err(reason) => issues.push(issue(path, location, reason)),
        }
    }
    Ok((parsed, issues))
}

/// Pairs questions with answers by id; everything left unpaired or inconsistent becomes an issue.
fn pair(
    category: BfclCategory,
    questions: Vec<(Location, BfclQuestion)>,
    answers: Vec<(Location, BfclAnswer)>,
    (question_path, answer_path): (&Path, &Path),
    skipped: &mut Vec<DataIssue>,
) -> Vec<BfclCase> {
    let mut by_id: HashMap<String, (Location, BfclAnswer)> = HashMap::new();
    for (location, answer) in answers {
        if by_id.contains_key(&answer.id) {
            skipped.push(issue(answer_path, location, format!("a second answer for '{}'", answer.id)));
        } else {
            by_id.insert(answer.id.clone(), (location, answer));
        }
    }
    let mut cases: Vec<BfclCase> = Vec::with_capacity(questions.len());
    for (location, question) in questions {
        if cases.iter().any(|c| c.question.id == question.id) {
            skipped.push(issue(question_path, location, format!("a second question '{}'", question.id)));
            continue;
        }
        let Some((answer_location, answer)) = by_id.remove(&question.id) else {
            let reason = format!("no possible answer for '{}' in {}", question.id, answer_path.display());
            skipped.push(issue(question_path, location, reason));
            continue;
        };
        if let Some(call) = answer.calls.iter().find(|c| question.function(&c.name).is_none()) {
            let reason =
                format!("the answer expects '{}', which question '{}' does not document", call.name, question.id);
            skipped.push(issue(answer_path, answer_location, reason));
            continue;
        }
        cases.push(BfclCase { category, question, answer });
    }
    let mut orphans: Vec<(Location, BfclAnswer)> = by_id.into_values().collect();
    orphans.sort_by_key(|(location, _)| *location);
    for (location, answer) in orphans {
        skipped.push(issue(answer_path, location, format!("no question '{}' for this answer", answer.id)));
    }
    cases
}

/// The cases of a category without answers (each with an empty one); a repeated id becomes an issue.
fn unanswered(
    category: BfclCategory,
    questions: Vec<(Location, BfclQuestion)>,
    question_path: &Path,
    skipped: &mut Vec<DataIssue>,
) -> Vec<BfclCase> {
    let mut cases: Vec<BfclCase> = Vec::with_capacity(questions.len());
    for (location, question) in questions {
        if cases.iter().any(|c| c.question.id == question.id) {
            skipped.push(issue(question_path, location, format!("a second question '{}'", question.id)));
            continue;
        }
        let answer = BfclAnswer { id: question.id.clone(), calls: Vec::new() };
        cases.push(BfclCase { category, question, answer });
    }
    cases
}

#[derive(Deserialize)]
struct RawQuestion {
    id: String,
    question: Vec<Vec<Message>>,
    function: Vec<BfclFunction>,
}

fn parse_question(value: Value) -> Result<BfclQuestion, String> {
    let raw: RawQuestion = serde_json::from_value(value).map_err(|e| format!("not a BFCL question: {e}"))?;
    for function in &raw.function {
        check_doc(function).map_err(|problem| format!("{}: function '{}': {problem}", raw.id, function.name))?;
    }
    Ok(BfclQuestion { id: raw.id, turns: raw.question, functions: raw.function })
}

/// BFCL type names this module understands: the checker's own (`string`, `integer`, `float`, `boolean`, `array`,
/// `tuple`, `dict`, `any`) and their JSON-Schema spellings.
const KNOWN_TYPES: [&str; 12] =
    ["string", "integer", "float", "number", "boolean", "bool", "array", "list", "tuple", "dict", "object", "any"];

/// Whether BFCL's checker can read the doc: an object of typed parameters, every type known.
fn check_doc(function: &BfclFunction) -> Result<(), String> {
    let properties = function.parameters.get("properties").and_then(Value::as_object);
    let properties = properties.ok_or("parameters have no 'properties' object")?;
    if let Some(required) = function.parameters.get("required") {
        if !required.as_array().is_some_and(|names| names.iter().all(Value::is_string)) {
            return Err("'required' is not a list of names".into());
        }
    }
    for (name, doc) in properties {
        if doc.get("type").is_none() {
            return Err(format!("parameter '{name}' has no type"));
        }
        unknown_type(doc, name)?;
    }
    Ok(())
}

/// The first type name BFCL does not know inside a parameter doc (nested `properties` and `items` included).
fn unknown_type(doc: &Value, path: &str) -> Result<(), String> {
    if let Some(t) = doc.get("type") {
        if !t.as_str().is_some_and(|t| KNOWN_TYPES.contains(&t)) {
            return Err(format!("'{path}' has the unknown type {t}"));
        }
    }
    if let Some(properties) = doc.get("properties").and_then(Value::as_object) {
        for (name, sub) in properties {
            unknown_type(sub, &format!("{path}.{name}"))?;
        }
    }
    match doc.get("items") {
        Some(items) => unknown_type(items, &format!("{path}[]")),
        None => Ok(()),
    }
}

#[derive(Deserialize)]
struct RawAnswer {
    id: String,
    ground_truth: Vec<Map<String, Value>>,
}

fn parse_answer(value: Value) -> Result<BfclAnswer, String> {
    let raw: RawAnswer = serde_json::from_value(value).map_err(|e| format!("not a BFCL possible answer: {e}"))?;
    if raw.ground_truth.is_empty() {
        return Err(format!("{}: the ground truth lists no call", raw.id));
    }
    let calls = raw.ground_truth.into_iter().map(expected_call).collect::<Result<Vec<_>, _>>();
    Ok(BfclAnswer { calls: calls.map_err(|problem| format!("{}: {problem}", raw.id))?, id: raw.id })
}

/// `{name: {param: [values]}}` as an [`ExpectedCall`].
fn expected_call(call: Map<String, Value>) -> Result<ExpectedCall, String> {
    let mut entries = call.into_iter();
    let (Some((name, params)), None) = (entries.next(), entries.next()) else {
        return Err("a ground-truth call is not an object with exactly one function name".into());
    };
    let Value::Object(params) = params else {
        return Err(format!("the parameters of '{name}' are not an object"));
    };
    let mut accepted = Vec::with_capacity(params.len());
    for (param, values) in params {
        let Value::Array(values) = values else {
            return Err(format!("the accepted values of '{name}.{param}' are not a list"));
        };
        accepted.push((param, values));
    }
    Ok(ExpectedCall { name, accepted })
}
