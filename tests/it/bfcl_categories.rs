//! BFCL's categories beyond simple and multiple (parallel, parallel_multiple, irrelevance, the live ones) on the
//! fixtures of `tests/fixtures/bfcl` (written here in BFCL's layout), scored on hand-written model outputs; no
//! models.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};
use tandem::bench::bfcl::{self, call, runner, BfclCall, BfclCase, BfclCategory, CallShape, FailureKind};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bfcl")
}

fn cases(category: BfclCategory) -> Vec<BfclCase> {
    let set = bfcl::load(&fixtures(), category).expect("the fixture loads");
    assert!(set.skipped.is_empty(), "{}: {:#?}", category.name(), set.skipped);
    set.cases
}

fn case(category: BfclCategory, id: &str) -> BfclCase {
    cases(category).into_iter().find(|c| c.question.id == id).expect("the fixture has the case")
}

fn call_of(name: &str, arguments: Value) -> BfclCall {
    let Value::Object(arguments) = arguments else { panic!("arguments must be an object") };
    BfclCall { name: name.into(), arguments }
}

fn failure(case: &BfclCase, predicted: &[BfclCall]) -> Option<FailureKind> {
    bfcl::check(case, predicted).failure.map(|f| f.kind)
}

/// Each expected call as a model would write it: every parameter's first accepted value (a dict's too), the
/// parameters that may only be omitted left out.
fn answer_calls(case: &BfclCase) -> Vec<BfclCall> {
    fn concrete(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter_map(|(k, v)| {
                        let first = v.as_array()?.iter().find(|x| x.as_str() != Some(""))?;
                        Some((k.clone(), concrete(first)))
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    case.answer
        .calls
        .iter()
        .map(|expected| {
            let arguments: Map<String, Value> = expected
                .accepted
                .iter()
                .filter_map(|(name, values)| {
                    let first = values.iter().find(|v| v.as_str() != Some(""))?;
                    Some((name.clone(), concrete(first)))
                })
                .collect();
            BfclCall { name: expected.name.clone(), arguments }
        })
        .collect()
}

#[test]
fn every_category_of_the_fixtures_loads_in_bfcls_layout() {
    let all = runner::categories(&["all".to_string()], &fixtures()).unwrap();
    assert_eq!(all, BfclCategory::ALL.to_vec(), "one question file per category");
    for category in BfclCategory::ALL {
        let cases = cases(category);
        assert!(!cases.is_empty(), "{}", category.name());
        for case in &cases {
            let expected_calls = case.answer.calls.len();
            match category.call_shape() {
                CallShape::AnyNumber => assert_eq!(expected_calls, 0, "{}: no answer file", case.question.id),
                CallShape::One => assert_eq!(expected_calls, 1, "{}", case.question.id),
                CallShape::Several => assert!(expected_calls >= 2, "{}", case.question.id),
            }
            assert!(case.question.id.starts_with(category.name()), "{}", case.question.id);
        }
    }
    // Dotted names come through as they are written.
    assert!(cases(BfclCategory::Parallel)[0].question.function("math.factorial").is_some());
    let names = ["parallel".to_string(), "bogus".to_string()];
    let error = runner::categories(&names, &fixtures()).unwrap_err().to_string();
    assert!(error.contains("unknown BFCL category 'bogus'") && error.contains("live_relevance"), "{error}");
    assert!(runner::categories(&["all".to_string()], Path::new("/nonexistent")).is_err());
}

#[test]
fn the_answers_own_calls_pass_in_any_order() {
    for category in BfclCategory::ALL.into_iter().filter(|c| c.has_answers()) {
        for case in cases(category) {
            let mut calls = answer_calls(&case);
            assert_eq!(failure(&case, &calls), None, "{}: {calls:?}", case.question.id);
            calls.reverse();
            let reversed = failure(&case, &calls);
            if category.call_shape() == CallShape::Several {
                assert_eq!(reversed, None, "{}: parallel calls match in any order", case.question.id);
            }
        }
    }
}

#[test]
fn parallel_answers_need_every_call_once() {
    // parallel_0: math.factorial of 5 and of 6.
    let factorials = case(BfclCategory::Parallel, "parallel_0");
    let five = call_of("math.factorial", json!({"number": 5}));
    let six = call_of("math.factorial", json!({"number": 6}));
    assert_eq!(failure(&factorials, &[six.clone(), five.clone()]), None);
    assert_eq!(failure(&factorials, std::slice::from_ref(&five)), Some(FailureKind::ParallelWrongCount));
    assert_eq!(failure(&factorials, &[]), Some(FailureKind::ParallelWrongCount));
    assert_eq!(failure(&factorials, &[five.clone(), six.clone(), six.clone()]), Some(FailureKind::ParallelWrongCount));
    // One call cannot answer two expected calls: the second 5 matches nothing that is left.
    let verdict = bfcl::check(&factorials, &[five.clone(), five.clone()]);
    let reason = verdict.failure.expect("a repeated call fails");
    assert_eq!(reason.kind, FailureKind::ParallelNoMatch);
    assert!(reason.reason.contains("index 1") && reason.reason.contains("math.factorial"), "{}", reason.reason);
    assert_eq!(reason.kind.error_type(), "parallel_function_checker_no_order:cannot_find_match");
    let seven = call_of("math.factorial", json!({"number": 7}));
    assert_eq!(failure(&factorials, &[five, seven]), Some(FailureKind::ParallelNoMatch));

    // parallel_multiple_0: factorial(4) and gcd(12, 30), either argument order accepted for the gcd.
    let mixed = case(BfclCategory::ParallelMultiple, "parallel_multiple_0");
    let gcd = call_of("math.gcd", json!({"a": 30, "b": 12}));
    let four = call_of("math.factorial", json!({"number": 4}));
    assert_eq!(failure(&mixed, &[gcd.clone(), four.clone()]), None);
    let reversed = call_of("text.reverse", json!({"text": "4"}));
    assert_eq!(failure(&mixed, &[gcd, reversed]), Some(FailureKind::ParallelNoMatch));

    // live_parallel_1-1-0: the optional quantity may be left out or given as 1, not as 2.
    let shopping = case(BfclCategory::LiveParallel, "live_parallel_1-1-0");
    let eggs = call_of("ShoppingList.add_item", json!({"item": "Eggs", "quantity": 1}));
    let bread = call_of("ShoppingList.add_item", json!({"item": "bread"}));
    assert_eq!(failure(&shopping, &[bread.clone(), eggs]), None);
    let two_eggs = call_of("ShoppingList.add_item", json!({"item": "eggs", "quantity": 2}));
    assert_eq!(failure(&shopping, &[bread, two_eggs]), Some(FailureKind::ParallelNoMatch));
}

#[test]
fn irrelevance_wants_no_call_and_relevance_any_call() {
    for category in [BfclCategory::Irrelevance, BfclCategory::LiveIrrelevance] {
        for case in cases(category) {
            assert_eq!(failure(&case, &[]), None, "{}", case.question.id);
            let name = &case.question.functions[0].name;
            let verdict = bfcl::check(&case, &[call_of(name, json!({}))]);
            let reason = verdict.failure.expect("a call where none fits fails");
            assert_eq!(reason.kind.error_type(), "irrelevance_error:decoder_success");
        }
    }
    for case in cases(BfclCategory::LiveRelevance) {
        assert_eq!(failure(&case, &[]), Some(FailureKind::RelevanceNoCall), "{}", case.question.id);
        // Any call counts, even one whose arguments are off: relevance asks only whether to call.
        let name = &case.question.functions[0].name;
        assert_eq!(failure(&case, &[call_of(name, json!({"anything": 1}))]), None);
    }
}

#[test]
fn live_cases_check_nested_dicts_and_dotted_names() {
    // live_multiple_0-0-0: Files.search with query "budget" and options {limit: 5, folder: optional "any"}.
    let search = case(BfclCategory::LiveMultiple, "live_multiple_0-0-0");
    let right = call_of("Files.search", json!({"query": "Budget", "options": {"limit": 5}}));
    assert_eq!(failure(&search, &[right]), None);
    let limit = call_of("Files.search", json!({"query": "budget", "options": {"limit": 10}}));
    assert_eq!(failure(&search, &[limit]), Some(FailureKind::DictValue));
    let underscored = call_of("Files_search", json!({"query": "budget", "options": {"limit": 5}}));
    assert_eq!(failure(&search, &[underscored]), Some(FailureKind::WrongFunctionName));
    let two = vec![call_of("Files.search", json!({"query": "budget", "options": {"limit": 5}})); 2];
    assert_eq!(failure(&search, &two), Some(FailureKind::MultipleWrongCount));
    // live_simple: one call, and a question's system message reaches the model's system prompt.
    let stock = case(BfclCategory::LiveSimple, "live_simple_1-1-0");
    assert_eq!(failure(&stock, &[]), Some(FailureKind::SimpleWrongCount));
    let messages = call::messages(&stock.question, CallShape::One);
    assert_eq!(messages.iter().map(|m| m.role.as_str()).collect::<Vec<_>>(), ["system", "user"]);
    assert!(messages[0].content.contains("inventory.check_stock") && messages[0].content.contains("bike shop"));
}

/// A record as `bench bfcl` writes it, with a hand-written model output as its prediction.
fn rescored(case: &BfclCase, prediction: Value) -> Value {
    let record = json!({"sample": case.question.id, "category": case.category.name(), "prediction": prediction,
                        "case": case});
    runner::rescore(record)["score"].clone()
}

#[test]
fn recorded_outputs_of_every_shape_are_scored() {
    let factorials = case(BfclCategory::Parallel, "parallel_0");
    let both = json!([{"name": "math.factorial", "arguments": {"number": 6}},
                      {"name": "math.factorial", "arguments": {"number": 5}}]);
    assert_eq!(rescored(&factorials, both)["correct"], true);
    let one = json!({"name": "math.factorial", "arguments": {"number": 5}});
    let score = rescored(&factorials, one);
    assert_eq!(
        (score["correct"].clone(), score["error_type"].clone()),
        (json!(false), json!("parallel_function_checker_no_order:wrong_count"))
    );
    // Irrelevance: `[]` is no call, and so is an answer that did not parse (`null`), as BFCL counts it.
    let joke = case(BfclCategory::LiveIrrelevance, "live_irrelevance_0-0-0");
    assert_eq!(rescored(&joke, json!([]))["correct"], true);
    assert_eq!(rescored(&joke, Value::Null)["correct"], true);
    let called = json!([{"name": "ShoppingList.add_item", "arguments": {"item": "cat joke"}}]);
    assert_eq!(rescored(&joke, called)["correct"], false);
    let umbrella = case(BfclCategory::LiveRelevance, "live_relevance_0-0-0");
    assert_eq!(rescored(&umbrella, json!([]))["correct"], false);
    let weather = json!([{"name": "get_current_weather", "arguments": {"location": "Berlin, Germany"}}]);
    assert_eq!(rescored(&umbrella, weather)["correct"], true);
    // A one-call category's record holds one call object (as before these categories existed).
    let factorial = case(BfclCategory::SimplePython, "simple_python_0");
    assert_eq!(rescored(&factorial, json!({"name": "math.factorial", "arguments": {"number": 7}}))["correct"], true);
    assert_eq!(rescored(&factorial, json!({"name": "math.factorial", "arguments": {"number": 8}}))["correct"], false);
    // The summary counts each category by the record's id prefix.
    let records: Vec<Value> = ["parallel_0", "live_parallel_0-0-0", "live_parallel_multiple_0-0-0"]
        .iter()
        .map(|id| json!({"sample": id, "score": {"correct": *id != "parallel_0"}, "ms": 1}))
        .collect();
    let summary = runner::summarise(&records);
    assert_eq!(summary["accuracy_parallel"], 0.0, "{summary}");
    assert_eq!(summary["accuracy_live_parallel"], 1.0, "{summary}");
    assert_eq!(summary["accuracy_live_parallel_multiple"], 1.0, "{summary}");
}
