//! BFCL's AST checkers for predicted calls.
//!
//! [`check`] follows `bfcl_eval/eval_checker/ast_eval/ast_checker.py` (`simple_function_checker`,
//! `multiple_function_checker`, `type_checker`, `string_checker`, `list_checker`, `dict_checker`,
//! `list_dict_checker`) of `github.com/ShishirPatil/gorilla` (read at the March 2026 snapshot, not copied), for
//! Python, and its relevance runner. By the category's [`CheckRule`]:
//!
//! - `irrelevance`, `live_irrelevance`: right when there is no call; `live_relevance`: right when there is any;
//! - `simple_python`, `live_simple`: exactly one call, checked as below; `multiple`, `live_multiple`: as many calls
//!   as the answer lists (one), the first checked against the answer's first;
//! - the `parallel` ones: as many calls as the answer lists; each expected call, in the answer's order, takes the
//!   first call not yet taken that passes the check below against it; one that finds none fails the question.
//!
//! One call against one expected call, in order, stopping at the first failure:
//!
//! 1. the count, as above;
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

use serde_json::{Map, Value};

use super::category::CheckRule;
use super::data::{BfclCase, BfclFunction, ExpectedCall};
use super::verdict::{fail, BfclCall, BfclVerdict, Failure, FailureKind};

/// Checks the predicted calls of one question by its category's rule ([`CheckRule`]).
pub fn check(case: &BfclCase, predicted: &[BfclCall]) -> BfclVerdict {
    BfclVerdict { id: case.question.id.clone(), failure: check_calls(case, predicted).err() }
}

fn check_calls(case: &BfclCase, predicted: &[BfclCall]) -> Result<(), Failure> {
    let expected = &case.answer.calls;
    match case.category.rule() {
        CheckRule::NoCall if predicted.is_empty() => Ok(()),
        CheckRule::NoCall => {
            let reason = format!("Valid syntax. {} function call(s) where none fits the request.", predicted.len());
            fail(FailureKind::IrrelevanceCalled, reason)
        }
        CheckRule::AnyCall if predicted.is_empty() => {
            fail(FailureKind::RelevanceNoCall, "No function call where a function fits the request.".into())
        }
        CheckRule::AnyCall => Ok(()),
        CheckRule::Simple => {
            expect_count(predicted, 1, FailureKind::SimpleWrongCount)?;
            check_expected(case, &expected[0], &predicted[0])
        }
        CheckRule::Multiple => {
            expect_count(predicted, expected.len(), FailureKind::MultipleWrongCount)?;
            check_expected(case, &expected[0], &predicted[0])
        }
        CheckRule::Parallel => {
            expect_count(predicted, expected.len(), FailureKind::ParallelWrongCount)?;
            parallel_no_order(case, predicted)
        }
    }
}

fn expect_count(predicted: &[BfclCall], count: usize, kind: FailureKind) -> Result<(), Failure> {
    if predicted.len() == count {
        return Ok(());
    }
    fail(kind, format!("Wrong number of functions: expected {count}, got {}.", predicted.len()))
}

/// One expected call against one predicted call, the function's doc looked up by the expected name.
fn check_expected(case: &BfclCase, expected: &ExpectedCall, call: &BfclCall) -> Result<(), Failure> {
    let Some(function) = case.question.function(&expected.name) else {
        return fail(FailureKind::UnknownFunction, format!("No doc for the expected function '{}'.", expected.name));
    };
    check_call(function, expected, call)
}

/// BFCL's `parallel_function_checker_no_order`: the expected calls in the answer's order, each taking the first
/// predicted call not yet taken that passes [`check_call`] against it (greedy, as BFCL does: no search for a
/// better assignment). An expected call that no remaining call passes fails the question, with the reasons each
/// candidate failed.
fn parallel_no_order(case: &BfclCase, predicted: &[BfclCall]) -> Result<(), Failure> {
    let mut taken = vec![false; predicted.len()];
    for (i, expected) in case.answer.calls.iter().enumerate() {
        let mut reasons = Vec::new();
        let mut matched = false;
        for (j, call) in predicted.iter().enumerate().filter(|(j, _)| !taken[*j]) {
            match check_expected(case, expected, call) {
                Ok(()) => {
                    taken[j] = true;
                    matched = true;
                    break;
                }
                Err(failure) if failure.kind == FailureKind::UnknownFunction => return Err(failure),
                Err(failure) => reasons.push(format!("call {j}: {}", failure.reason)),
            }
        }
        if !matched {
            let reason = format!(
                "Could not find a matching function among the model's calls for index {i} of possible answers ('{}'). {}",
                expected.name,
                reasons.join(" ")
            );
            return fail(FailureKind::ParallelNoMatch, reason);
        }
    }
    Ok(())
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
