//! BFCL (Berkeley Function Calling Leaderboard v4), categories `simple_python` and `multiple`: questions and
//! possible answers, function docs as JSON Schema, and BFCL's AST checker for a predicted call.
//!
//! # Data
//!
//! `BFCL_v4_<category>.json` holds one question per line (`id`, `question` turns, `function` docs) and
//! `possible_answer/BFCL_v4_<category>.json` one answer per line (`id`, `ground_truth: [{name: {param: [accepted
//! values]}}]`). Questions and answers are paired by id. A line that is not JSON or not of that shape, a question
//! without an answer (or the reverse), a duplicate id, a parameter type BFCL does not know, or an answer naming a
//! function the question does not document is reported in `skipped` with file and line, never dropped quietly.
//!
//! # Checking
//!
//! [`check`] follows `bfcl_eval/eval_checker/ast_eval/ast_checker.py` (`simple_function_checker`,
//! `multiple_function_checker`, `type_checker`, `string_checker`, `list_checker`, `dict_checker`,
//! `list_dict_checker`) of `github.com/ShishirPatil/gorilla` (read at the March 2026 snapshot, not copied), for
//! Python. In order, and stopping at the first failure:
//!
//! 1. exactly one predicted call (`simple`: one; `multiple`: as many as the ground truth lists, one);
//! 2. its name is the expected function's (compared exactly: BFCL's `.`→`_` renaming exists for providers that
//!    forbid dots in names);
//! 3. every parameter the doc marks `required` is present;
//! 4. for each given argument: it is a documented parameter that the answer lists (else "unexpected"); an int is
//!    turned into a float where the doc says `float`; its Python type must be the doc's (`string`/`any` → str,
//!    `integer` → int, `float` → float, `boolean` → bool, `array`/`tuple` → list, `dict` → dict; a bool is not an
//!    int), or the type of the first accepted value, which then marks a variable compared as is; for `array` and
//!    `tuple` each element must have the `items` type or the type of the accepted list's first element (no int
//!    for float there, as in BFCL; an accepted `""` passes this check); then the value must be accepted:
//!    - strings: after [`standardize`] (drop spaces and `,./-_*^`, lower-case, `'` → `"`) on both sides;
//!    - lists: element-wise, string elements standardised (one level), numbers compared by value (`1 == 1.0`);
//!    - dicts: every given key must be in an accepted dict, its value (standardised if a string) among that key's
//!      accepted values, and every accepted key whose list lacks `""` must be given;
//!    - lists of dicts: the same length as an accepted list, each dict checked against its counterpart;
//!    - anything else: equal (Python `==`) to an accepted value;
//! 5. every parameter of the answer that was not given has `""` among its accepted values (optional).
//!
//! Failures carry BFCL's `error_type` ([`FailureKind::error_type`]) and a message in BFCL's words.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::nestful::{issue, json_lines, read_text, BenchDataError, DataIssue, Location, Records};
use crate::tools::{closed_object_schema, ToolSpec};

/// A BFCL test category this module reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BfclCategory {
    /// One function, one call (`simple_python`, 400 questions).
    SimplePython,
    /// Several functions, one call of the right one (`multiple`, 200 questions).
    Multiple,
}

impl BfclCategory {
    /// BFCL's name of the category.
    pub fn name(self) -> &'static str {
        match self {
            BfclCategory::SimplePython => "simple_python",
            BfclCategory::Multiple => "multiple",
        }
    }

    /// The file name of its questions (and, under `possible_answer/`, of its answers).
    pub fn file_name(self) -> String {
        format!("BFCL_v4_{}.json", self.name())
    }
}

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
    /// Turns of messages (one turn of one user message in these categories).
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
    /// The expected calls (one in these categories).
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

/// A predicted call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BfclCall {
    /// The function's name.
    pub name: String,
    /// The arguments.
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// Why a prediction failed, by BFCL's `error_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum FailureKind {
    /// `simple`: not exactly one call.
    SimpleWrongCount,
    /// `multiple`: not as many calls as expected.
    MultipleWrongCount,
    /// The call names another function.
    WrongFunctionName,
    /// A required parameter is missing.
    MissingRequired,
    /// An argument the doc or the answer does not have.
    UnexpectedParameter,
    /// A parameter the answer requires (no `""` among its values) is missing.
    MissingOptional,
    /// An argument of the wrong type.
    SimpleType,
    /// A list whose elements have the wrong type.
    NestedType,
    /// A string not among the accepted ones.
    StringValue,
    /// A list not among the accepted ones.
    ListValue,
    /// A dict with an unexpected or a missing key.
    DictKey,
    /// A dict with a value not accepted.
    DictValue,
    /// A dict parameter with no dict among its accepted values.
    DictUnclear,
    /// A list of dicts of the wrong length.
    ListDictCount,
    /// A list-of-dicts parameter with no list among its accepted values.
    ListDictUnclear,
    /// Any other value not among the accepted ones.
    OtherValue,
    /// The expected function has no doc in the question (cannot happen with loaded cases).
    UnknownFunction,
}

impl FailureKind {
    /// BFCL's `error_type` string.
    pub fn error_type(self) -> &'static str {
        match self {
            FailureKind::SimpleWrongCount => "simple_function_checker:wrong_count",
            FailureKind::MultipleWrongCount => "multiple_function_checker:wrong_count",
            FailureKind::WrongFunctionName => "simple_function_checker:wrong_func_name",
            FailureKind::MissingRequired => "simple_function_checker:missing_required",
            FailureKind::UnexpectedParameter => "simple_function_checker:unexpected_param",
            FailureKind::MissingOptional => "simple_function_checker:missing_optional",
            FailureKind::SimpleType => "type_error:simple",
            FailureKind::NestedType => "type_error:nested",
            FailureKind::StringValue => "value_error:string",
            FailureKind::ListValue => "value_error:list/tuple",
            FailureKind::DictKey => "value_error:dict_key",
            FailureKind::DictValue => "value_error:dict_value",
            FailureKind::DictUnclear => "dict_checker:unclear",
            FailureKind::ListDictCount => "value_error:list_dict_count",
            FailureKind::ListDictUnclear => "list_dict_checker:unclear",
            FailureKind::OtherValue => "value_error:others",
            FailureKind::UnknownFunction => "bench:unknown_function",
        }
    }
}

/// A failed check: its kind and BFCL's message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The kind.
    pub kind: FailureKind,
    /// What is wrong, in BFCL's words.
    pub reason: String,
}

fn fail<T>(kind: FailureKind, reason: String) -> Result<T, Failure> {
    Err(Failure { kind, reason })
}

/// The verdict on one question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BfclVerdict {
    /// The question's id.
    pub id: String,
    /// `None` when the prediction is accepted.
    pub failure: Option<Failure>,
}

impl BfclVerdict {
    /// Whether the prediction is accepted.
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }
}

/// Accuracy over verdicts.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BfclSummary {
    /// Questions checked.
    pub total: usize,
    /// Questions accepted.
    pub passed: usize,
    /// `passed / total` (0 for none).
    pub accuracy: f64,
    /// Failures counted by BFCL `error_type`.
    pub failures: BTreeMap<String, usize>,
}

/// Counts verdicts.
pub fn summarize(verdicts: &[BfclVerdict]) -> BfclSummary {
    let passed = verdicts.iter().filter(|v| v.passed()).count();
    let mut failures = BTreeMap::new();
    for failure in verdicts.iter().filter_map(|v| v.failure.as_ref()) {
        *failures.entry(failure.kind.error_type().to_string()).or_insert(0) += 1;
    }
    let accuracy = if verdicts.is_empty() { 0.0 } else { passed as f64 / verdicts.len() as f64 };
    BfclSummary { total: verdicts.len(), passed, accuracy, failures }
}

/// Checks the predicted calls of one question (BFCL's `ast_checker` for `simple` and `multiple`).
pub fn check(case: &BfclCase, predicted: &[BfclCall]) -> BfclVerdict {
    BfclVerdict { id: case.question.id.clone(), failure: check_calls(case, predicted).err() }
}

fn check_calls(case: &BfclCase, predicted: &[BfclCall]) -> Result<(), Failure> {
    let (expected_count, kind) = match case.category {
        BfclCategory::SimplePython => (1, FailureKind::SimpleWrongCount),
        BfclCategory::Multiple => (case.answer.calls.len(), FailureKind::MultipleWrongCount),
    };
    if predicted.len() != expected_count {
        return fail(kind, format!("Wrong number of functions: expected {expected_count}, got {}.", predicted.len()));
    }
    let Some(expected) = case.answer.calls.first() else {
        return fail(FailureKind::UnknownFunction, "The possible answer lists no call.".into());
    };
    let Some(function) = case.question.function(&expected.name) else {
        return fail(FailureKind::UnknownFunction, format!("No doc for the expected function '{}'.", expected.name));
    };
    check_call(function, expected, &predicted[0])
}

/// Checks one predicted call against the expected function's doc and accepted values (BFCL's
/// `simple_function_checker`).
pub fn check_call(function: &BfclFunction, expected: &ExpectedCall, call: &BfclCall) -> Result<(), Failure> {
    if call.name != function.name {
        return fail(
            FailureKind::WrongFunctionName,
            format!("Function name '{}' not found in model output.", function.name),
        );
    }
    if let Some(missing) = function.required().into_iter().find(|p| !call.arguments.contains_key(*p)) {
        return fail(FailureKind::MissingRequired, format!("Missing required parameter: '{missing}'."));
    }
    for (param, value) in &call.arguments {
        let (Some(doc), Some(accepted)) = (function.parameter(param), expected.accepted_values(param)) else {
            return fail(FailureKind::UnexpectedParameter, format!("Unexpected parameter: '{param}'."));
        };
        check_argument(param, value, doc, accepted)?;
    }
    for (param, accepted) in &expected.accepted {
        if !call.arguments.contains_key(param) && !accepted.iter().any(is_optional_marker) {
            let reason = format!("Optional parameter '{param}' not provided and not marked as optional.");
            return fail(FailureKind::MissingOptional, reason);
        }
    }
    Ok(())
}

/// The `""` that marks a parameter as omittable.
fn is_optional_marker(value: &Value) -> bool {
    value.as_str() == Some("")
}

/// The Python type a JSON value has once `json.loads` read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PyType {
    Str,
    Int,
    Float,
    Bool,
    List,
    Dict,
    NoneType,
}

impl PyType {
    fn of(value: &Value) -> Self {
        match value {
            Value::String(_) => PyType::Str,
            Value::Number(n) if n.is_f64() => PyType::Float,
            Value::Number(_) => PyType::Int,
            Value::Bool(_) => PyType::Bool,
            Value::Array(_) => PyType::List,
            Value::Object(_) => PyType::Dict,
            Value::Null => PyType::NoneType,
        }
    }

    /// The type BFCL's `PYTHON_TYPE_MAPPING` gives a doc type (`any` is `str` there; `tuple` is `list`).
    fn of_doc(bfcl_type: &str) -> Option<Self> {
        match bfcl_type {
            "string" | "any" => Some(PyType::Str),
            "integer" => Some(PyType::Int),
            "float" | "number" => Some(PyType::Float),
            "boolean" | "bool" => Some(PyType::Bool),
            "array" | "list" | "tuple" => Some(PyType::List),
            "dict" | "object" => Some(PyType::Dict),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            PyType::Str => "str",
            PyType::Int => "int",
            PyType::Float => "float",
            PyType::Bool => "bool",
            PyType::List => "list",
            PyType::Dict => "dict",
            PyType::NoneType => "NoneType",
        }
    }
}

/// Type check, then value check of one argument.
fn check_argument(param: &str, value: &Value, doc: &Value, accepted: &[Value]) -> Result<(), Failure> {
    let description = doc.get("type").and_then(Value::as_str).unwrap_or("any");
    let expected = PyType::of_doc(description).unwrap_or(PyType::Str);
    let nested = match description {
        "array" | "list" | "tuple" => doc.pointer("/items/type").and_then(Value::as_str).and_then(PyType::of_doc),
        _ => None,
    };
    // BFCL accepts an int where a float is documented (Python converts it on use); only at the top level: list
    // elements get no such conversion.
    let value = match value.as_f64() {
        Some(f) if expected == PyType::Float && PyType::of(value) == PyType::Int => Value::from(f),
        _ => value.clone(),
    };
    let is_variable = type_check(param, &value, accepted, description, expected, nested)?;
    if !is_variable {
        match (expected, &value) {
            (PyType::Dict, Value::Object(map)) => return dict_checker(param, map, accepted),
            (PyType::List, Value::Array(items)) if nested == Some(PyType::Dict) => {
                return list_dict_checker(param, items, accepted)
            }
            (PyType::Str, Value::String(text)) => return string_checker(param, text, accepted),
            (PyType::List, Value::Array(items)) => return list_checker(param, items, accepted),
            _ => {}
        }
    }
    if accepted.iter().any(|a| py_eq(&value, a)) {
        return Ok(());
    }
    fail(
        FailureKind::OtherValue,
        format!("Invalid value for parameter '{param}': {value}. Expected one of {}.", json_list(accepted)),
    )
}

/// BFCL's `type_checker`: `Ok(is_variable)` when the type fits. A value of the first accepted value's type counts
/// as a variable when that type differs from the documented one (answers write variables as strings).
fn type_check(
    param: &str,
    value: &Value,
    accepted: &[Value],
    description: &str,
    expected: PyType,
    nested: Option<PyType>,
) -> Result<bool, Failure> {
    let answer_type = accepted.iter().find(|a| !is_optional_marker(a)).map(PyType::of);
    let is_variable = answer_type.is_some_and(|t| t != expected);
    let actual = PyType::of(value);
    let mut nested_failure = None;
    if actual == expected {
        let Some(inner) = nested else {
            return Ok(is_variable);
        };
        if elements_fit(param, value, accepted, inner) {
            return Ok(is_variable);
        }
        nested_failure = Some(format!(
            "Nested type checking failed for parameter '{param}'. Expected outer type {description} with inner type {}. Parameter value: {value}.",
            inner.name()
        ));
    }
    if answer_type == Some(actual) {
        // BFCL returns its result here as it stands: still failed if the nested check failed.
        return match nested_failure {
            None => Ok(true),
            Some(reason) => fail(FailureKind::NestedType, reason),
        };
    }
    let simple = format!(
        "Incorrect type for parameter '{param}'. Expected type {description}, got {}. Parameter value: {value}.",
        actual.name()
    );
    let reason = match nested_failure {
        Some(nested) => format!("{nested} {simple}"),
        None => simple,
    };
    fail(FailureKind::SimpleType, reason)
}

/// Whether every element of the list fits `inner` for some accepted value: an accepted list checks each element
/// (against `inner` or the type of that list's first element); an accepted non-list (the optional `""`) passes.
fn elements_fit(param: &str, value: &Value, accepted: &[Value], inner: PyType) -> bool {
    let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
    accepted.iter().any(|answer| match answer.as_array() {
        None => true,
        Some(answer_items) => {
            items.iter().all(|item| type_check(param, item, answer_items, inner.name(), inner, None).is_ok())
        }
    })
}

/// BFCL's `standardize_string`: drop spaces and `,./-_*^`, lower-case, `'` → `"`, so that `April 1, 2024` and
/// `april 1 2024` compare equal.
pub fn standardize(text: &str) -> String {
    let kept: String = text.chars().filter(|c| !matches!(c, ' ' | ',' | '.' | '/' | '-' | '_' | '*' | '^')).collect();
    kept.to_lowercase().replace('\'', "\"")
}

/// A string standardised, anything else as it is (one level: BFCL does not look inside nested values).
fn standardize_value(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(standardize(s)),
        other => other.clone(),
    }
}

fn string_checker(param: &str, text: &str, accepted: &[Value]) -> Result<(), Failure> {
    let wanted = standardize(text);
    if accepted.iter().filter_map(Value::as_str).any(|a| standardize(a) == wanted) {
        return Ok(());
    }
    let reason = format!(
        "Invalid value for parameter '{param}': '{text}'. Expected one of {}. Case insensitive.",
        json_list(accepted)
    );
    fail(FailureKind::StringValue, reason)
}

fn list_checker(param: &str, items: &[Value], accepted: &[Value]) -> Result<(), Failure> {
    let given: Vec<Value> = items.iter().map(standardize_value).collect();
    let matches = accepted.iter().any(|answer| {
        let candidate: Vec<Value> = match answer {
            Value::Array(values) => values.iter().map(standardize_value).collect(),
            // Python iterates a string by characters; this is how the optional `""` becomes an accepted `[]`.
            Value::String(s) => s.chars().map(|c| Value::String(standardize(&c.to_string()))).collect(),
            _ => return false,
        };
        candidate.len() == given.len() && candidate.iter().zip(&given).all(|(a, b)| py_eq(a, b))
    });
    if matches {
        return Ok(());
    }
    let reason = format!(
        "Invalid value for parameter '{param}': {}. Expected one of {}.",
        Value::Array(items.to_vec()),
        json_list(accepted)
    );
    fail(FailureKind::ListValue, reason)
}

fn dict_checker(param: &str, given: &Map<String, Value>, accepted: &[Value]) -> Result<(), Failure> {
    let mut last =
        Failure { kind: FailureKind::DictUnclear, reason: format!("No accepted dict for parameter '{param}'.") };
    for answer in accepted.iter().filter(|a| !is_optional_marker(a)) {
        let Some(answer) = answer.as_object() else {
            continue;
        };
        match dict_matches(given, answer) {
            Ok(()) => return Ok(()),
            Err(failure) => last = failure,
        }
    }
    Err(last)
}

/// One given dict against one accepted dict (whose values are lists of accepted values).
fn dict_matches(given: &Map<String, Value>, answer: &Map<String, Value>) -> Result<(), Failure> {
    for (key, value) in given {
        let Some(values) = answer.get(key) else {
            return fail(FailureKind::DictKey, format!("Unexpected dict key parameter: '{key}'."));
        };
        let values: Vec<Value> = accepted_list(values).iter().map(standardize_value).collect();
        let standardized = standardize_value(value);
        if !values.iter().any(|v| py_eq(&standardized, v)) {
            let reason =
                format!("Invalid value for parameter '{key}': {value}. Expected one of {}.", json_list(&values));
            return fail(FailureKind::DictValue, reason);
        }
    }
    for (key, values) in answer {
        if !given.contains_key(key) && !accepted_list(values).iter().any(is_optional_marker) {
            return fail(FailureKind::DictKey, format!("Missing dict key parameter: '{key}'."));
        }
    }
    Ok(())
}

/// Accepted values are lists; a lone value is read as a list of one.
fn accepted_list(values: &Value) -> &[Value] {
    match values {
        Value::Array(items) => items,
        other => std::slice::from_ref(other),
    }
}

fn list_dict_checker(param: &str, items: &[Value], accepted: &[Value]) -> Result<(), Failure> {
    let mut last = Failure {
        kind: FailureKind::ListDictUnclear,
        reason: format!("No accepted list of dicts for parameter '{param}'."),
    };
    'answers: for answer in accepted {
        let answer_items: &[Value] = match answer {
            Value::Array(values) => values,
            // The optional `""` has length 0 in Python, so it accepts an empty list.
            Value::String(s) if s.is_empty() => &[],
            _ => continue,
        };
        if answer_items.len() != items.len() {
            last = Failure {
                kind: FailureKind::ListDictCount,
                reason: "Wrong number of dictionaries in the list.".into(),
            };
            continue;
        }
        for (item, expected) in items.iter().zip(answer_items) {
            let checked = match item.as_object() {
                Some(map) => dict_checker(param, map, std::slice::from_ref(expected)),
                None => fail(FailureKind::DictUnclear, format!("An element of '{param}' is not a dict: {item}.")),
            };
            if let Err(failure) = checked {
                last = failure;
                continue 'answers;
            }
        }
        return Ok(());
    }
    Err(last)
}

/// Python's `==` on values read from JSON: numbers by value across int and float (`1 == 1.0`, `True == 1`),
/// lists element-wise, dicts by keys and values, strings exactly.
fn py_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Null, Value::Null) => true,
        _ => match (py_number(a), py_number(b)) {
            (Some(Num::Int(x)), Some(Num::Int(y))) => x == y,
            (Some(x), Some(y)) => x.as_f64() == y.as_f64(),
            _ => false,
        },
    }
}

#[derive(Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

fn py_number(value: &Value) -> Option<Num> {
    match value {
        Value::Bool(b) => Some(Num::Int(i128::from(*b))),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Some(Num::Int(i128::from(i))),
            (None, Some(u)) => Some(Num::Int(i128::from(u))),
            _ => n.as_f64().map(Num::Float),
        },
        _ => None,
    }
}

fn json_list(values: &[Value]) -> String {
    Value::Array(values.to_vec()).to_string()
}
