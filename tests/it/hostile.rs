//! Hostile input at the edges (a first slice of the fault sweep): plans far too deep, too long or too large,
//! expressions built to overflow the calculator's parser or its numbers. Each is refused with a reason or handled,
//! never a panic or a stack overflow.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::{json, Value};
use tandem::agent::plan::refs::resolve_value;
use tandem::agent::{IssueKind, Plan};
use tandem::tools::calculator::evaluate;
use tandem::tools::equation::solve;
use tandem::tools::{ToolContext, ToolRegistry, Workspace};

fn registry() -> ToolRegistry {
    ToolRegistry::builtins(&ToolContext::new(Workspace::new(std::env::temp_dir()).unwrap()))
}

#[test]
fn a_plan_nested_100_000_deep_is_refused_not_overflowed() {
    let depth = 100_000;
    let text = format!(
        r#"{{"goal":"g","steps":[{{"id":"s1","tool":"calculator","args":{{"expression":{}1{}}}}}]}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let error = Plan::from_json(&text).unwrap_err().to_string();
    assert!(error.contains("recursion limit"), "{error}");
}

#[test]
fn ten_thousand_steps_validate_in_linear_time_with_every_problem_named() {
    // A chain s1 <- s2 <- ... plus one cycle at the end and one unknown tool: validation walks it without
    // recursion and names both problems.
    let mut steps: Vec<Value> = (1..=10_000)
        .map(|i| {
            let depends: Vec<String> = if i > 1 { vec![format!("s{}", i - 1)] } else { vec![] };
            json!({"id": format!("s{i}"), "tool": "calculator", "args": {"expression": "1+1"}, "depends_on": depends})
        })
        .collect();
    steps[0]["depends_on"] = json!(["s10000"]);
    steps[5000]["tool"] = json!("no_such_tool");
    let plan: Plan = serde_json::from_value(json!({"goal": "g", "steps": steps})).unwrap();
    let started = Instant::now();
    let issues = plan.validate(&registry());
    let kinds: Vec<IssueKind> = issues.iter().map(|i| i.kind()).collect();
    assert!(kinds.contains(&IssueKind::UnknownTool), "{kinds:?}");
    assert!(kinds.contains(&IssueKind::LaterDependency) || kinds.contains(&IssueKind::Cycle), "{kinds:?}");
    assert!(started.elapsed().as_secs() < 30, "validation took {:?}", started.elapsed());
}

#[test]
fn a_megabyte_output_flows_through_references_whole() {
    let big = "x".repeat(1 << 20);
    let outputs = HashMap::from([("s1".to_string(), json!({"text": big}))]);
    let whole = resolve_value("s2", &json!("$s1.text$"), &outputs).unwrap();
    assert_eq!(whole.as_str().map(str::len), Some(1 << 20));
    let embedded = resolve_value("s2", &json!("before $s1.text$ after"), &outputs).unwrap();
    assert!(embedded.as_str().unwrap().len() > 1 << 20);
}

#[test]
fn calculator_expressions_built_to_break_it_are_errors() {
    let huge = format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000));
    let deep = format!("{}1{}", "(".repeat(2_000), ")".repeat(2_000));
    for (expression, expect) in [
        (huge.as_str(), "longer than"),
        (deep.as_str(), "nest"),
        ("1/0", "zero"),
        ("10^10^10^10", ""),
        ("1e308*1e308", ""),
        ("", ""),
        ("2+*3", ""),
        ("((1)", ""),
        ("\u{0}\u{7f}", ""),
    ] {
        assert_error_saying(expression, evaluate(expression), expect);
    }
}

/// `result` is an error, in words, that says `expect` (any words where `expect` is empty).
fn assert_error_saying<T: std::fmt::Debug>(input: &str, result: Result<T, String>, expect: &str) {
    match result {
        Ok(value) => panic!("{input:.40}… gave {value:?}"),
        Err(message) => {
            assert!(!message.is_empty(), "{input:.40}");
            assert!(message.to_lowercase().contains(expect), "{input:.40}: {message}");
        }
    }
}

/// The same for equations, which the calculator solves by evaluating them many times: each is an error in
/// words, never a panic or a hang.
#[test]
fn equations_built_to_break_the_solver_are_errors() {
    let huge = format!("x = {}1{}", "(".repeat(100_000), ")".repeat(100_000));
    let deep = format!("x = {}1{}", "(".repeat(2_000), ")".repeat(2_000));
    let long_sum = format!("{} = 1", vec!["x"; 2_500].join("+"));
    for (equation, expect) in [
        (huge.as_str(), "longer than"),
        (deep.as_str(), "nest"),
        (long_sum.as_str(), "longer than"),
        ("x**x**x**x = 10^10^10", ""),
        ("1/(x-x) = 1", ""),
        ("x = x + 1e308*1e308", ""),
        ("exp(x) = -1", "no solution"),
        ("x = ", "each side"),
        ("x == == 1", "one '='"),
    ] {
        assert_error_saying(equation, solve(equation), expect);
    }
}
