//! Plans: validation (a table of bad plans, each with the issue it must raise), reference resolution, DAG order,
//! and the plan JSON Schema — checked with the `jsonschema` crate and compiled by llguidance.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, InferenceCapabilities};
use llguidance::{Matcher, ParserFactory};
use rstest::rstest;
use serde_json::{json, Value};
use tandem::agent::plan::refs::{references_in, resolve_value, Resolution};
use tandem::agent::plan::resolve_args_with;
use tandem::agent::{
    coerce_to_schema, parse_reference, plan_json_schema, resolve_args, IssueKind, Plan, PlanError, PlanIssue, Reference,
};
use tandem::tools::{DeclaredTool, ToolContext, ToolRegistry, Workspace};

/// The built-ins with writes allowed: calculator, read_file, list_dir, write_file, llm.
pub(crate) fn registry() -> ToolRegistry {
    let dir = std::env::temp_dir();
    ToolRegistry::builtins(&ToolContext::new(Workspace::new(dir).unwrap()).with_write(true))
}

fn fixture(name: &str) -> Plan {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent").join(name);
    Plan::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

pub(crate) fn plan(steps: Value) -> Plan {
    serde_json::from_value(json!({"goal": "test", "steps": steps})).unwrap()
}

fn kinds(issues: &[PlanIssue]) -> Vec<IssueKind> {
    issues.iter().map(PlanIssue::kind).collect()
}

#[test]
fn a_good_multi_step_plan_validates() {
    let registry = registry();
    for name in ["plan_good.json", "plan_nestful.json"] {
        let issues = fixture(name).validate(&registry);
        assert!(issues.is_empty(), "{name}: {issues:#?}");
    }
}

#[rstest]
#[case::no_steps(json!([]), IssueKind::NoSteps)]
#[case::empty_id(json!([{"id": " ", "tool": "calculator", "args": {"expression": "1"}}]), IssueKind::EmptyId)]
#[case::duplicate_ids(json!([
    {"id": "s1", "tool": "calculator", "args": {"expression": "1"}},
    {"id": "s1", "tool": "calculator", "args": {"expression": "2"}}
]), IssueKind::DuplicateId)]
#[case::cycle(json!([
    {"id": "s1", "tool": "calculator", "args": {"expression": "1"}, "depends_on": ["s2"]},
    {"id": "s2", "tool": "calculator", "args": {"expression": "2"}, "depends_on": ["s1"]}
]), IssueKind::Cycle)]
#[case::self_dependency(json!([
    {"id": "s1", "tool": "calculator", "args": {"expression": "1"}, "depends_on": ["s1"]}
]), IssueKind::Cycle)]
#[case::cycle_through_a_reference(json!([
    {"id": "s1", "tool": "calculator", "args": {"expression": "$s2.result$ + 1"}},
    {"id": "s2", "tool": "calculator", "args": {"expression": "2"}, "depends_on": ["s1"]}
]), IssueKind::Cycle)]
#[case::unknown_dependency(json!([
    {"id": "s1", "tool": "calculator", "args": {"expression": "1"}, "depends_on": ["s9"]}
]), IssueKind::UnknownDependency)]
#[case::dependency_on_a_later_step(json!([
    {"id": "s1", "tool": "calculator", "args": {"expression": "1"}, "depends_on": ["s2"]},
    {"id": "s2", "tool": "calculator", "args": {"expression": "2"}}
]), IssueKind::LaterDependency)]
#[case::unknown_tool(json!([{"id": "s1", "tool": "browser", "args": {"url": "x"}}]), IssueKind::UnknownTool)]
#[case::wrong_arg_type(json!([{"id": "s1", "tool": "calculator", "args": {"expression": 53}}]), IssueKind::InvalidArgs)]
#[case::missing_required_arg(json!([{"id": "s1", "tool": "calculator", "args": {}}]), IssueKind::InvalidArgs)]
#[case::extra_arg(json!([
    {"id": "s1", "tool": "calculator", "args": {"expression": "1", "depends_on": ["s0"]}}
]), IssueKind::InvalidArgs)]
#[case::dangling_reference(json!([
    {"id": "s1", "tool": "calculator", "args": {"expression": "$s7.result$ + 1"}}
]), IssueKind::DanglingReference)]
#[case::reference_to_a_later_step(json!([
    {"id": "s1", "tool": "llm", "args": {"prompt": "Explain $s2.result$"}},
    {"id": "s2", "tool": "calculator", "args": {"expression": "2"}}
]), IssueKind::DanglingReference)]
#[case::undeclared_output_field(json!([
    {"id": "s1", "tool": "calculator", "args": {"expression": "1"}},
    {"id": "s2", "tool": "calculator", "args": {"expression": "$s1.value$ * 2"}, "depends_on": ["s1"]}
]), IssueKind::UnknownOutputField)]
#[case::reference_of_the_wrong_type(json!([
    {"id": "s1", "tool": "read_file", "args": {"path": "a.txt"}},
    {"id": "s2", "tool": "write_file", "args": {"path": "b.txt", "content": "x", "append": "$s1.content$"}}
]), IssueKind::ReferenceTypeMismatch)]
fn bad_plans_raise_the_expected_issue(#[case] steps: Value, #[case] expected: IssueKind) {
    let issues = plan(steps).validate(&registry());
    assert!(kinds(&issues).contains(&expected), "expected {expected:?}, got {issues:#?}");
    // Each issue is a sentence that names the step it is about (when it is about one).
    for issue in &issues {
        let text = issue.to_string();
        if let Some(step) = issue.step() {
            assert!(text.contains(step), "{text}");
        }
    }
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let bad = plan(json!([
        {"id": "s1", "tool": "calculator", "args": {"expression": 1}, "depends_on": ["s3"]},
        {"id": "s1", "tool": "nope", "args": {}},
        {"id": "s2", "tool": "calculator", "args": {"expression": "$s9.result$", "extra": true}}
    ]));
    let found: HashSet<IssueKind> = kinds(&bad.validate(&registry())).into_iter().collect();
    let expected: HashSet<IssueKind> = [
        IssueKind::DuplicateId,
        IssueKind::UnknownDependency,
        IssueKind::InvalidArgs,
        IssueKind::UnknownTool,
        IssueKind::DanglingReference,
    ]
    .into();
    assert_eq!(found, expected);
    let err = bad.check(&registry()).unwrap_err();
    assert!(matches!(&err, PlanError::Invalid(issues) if issues.len() >= 5), "{err}");
}

#[test]
fn a_referenced_argument_is_checked_by_its_reference_not_as_text() {
    // "$s1.result$" is not a boolean, but the reference is judged by the field's declared type: a number into a
    // number argument is fine, a string into a boolean is not (see the table above).
    let ok = plan(json!([
        {"id": "s1", "tool": "calculator", "args": {"expression": "2+2"}},
        {"id": "s2", "tool": "llm", "args": {"prompt": "$s1.result$"}}
    ]));
    assert!(ok.validate(&registry()).is_empty());
    let issues = plan(json!([
        {"id": "s1", "tool": "calculator", "args": {"expression": "2+2"}},
        {"id": "s2", "tool": "calculator", "args": {"expression": "$s1.result$", "extra": 1}}
    ]))
    .validate(&registry());
    assert_eq!(kinds(&issues), [IssueKind::InvalidArgs]);
    assert!(issues[0].to_string().contains("extra"), "{}", issues[0]);
}

#[test]
fn resolution_keeps_types_and_formats_embedded_references() {
    let step: tandem::agent::Step = serde_json::from_value(json!({
        "id": "s3", "tool": "x",
        "args": {
            "n": "$s1.result$",
            "list": ["$s2.entries.1$", "first: $s2.entries.0$"],
            "msg": "total $s1.result$ km, cost $$5, all: $s2$",
            "flag": true
        }
    }))
    .unwrap();
    assert_eq!(
        step.references(),
        [
            Reference { step: "s1".into(), field: Some("result".into()) },
            Reference { step: "s2".into(), field: Some("entries.1".into()) },
            Reference { step: "s2".into(), field: Some("entries.0".into()) },
            Reference { step: "s1".into(), field: Some("result".into()) },
            Reference { step: "s2".into(), field: None },
        ]
    );
    assert_eq!(step.dependencies(), ["s1", "s2"]);
    let outputs: HashMap<String, Value> =
        [("s1".into(), json!({"result": 53})), ("s2".into(), json!({"entries": ["a", {"b": 2}]}))].into();
    let args = resolve_args(&step, &outputs).unwrap();
    assert_eq!(
        Value::Object(args),
        json!({
            "n": 53,
            "list": [{"b": 2}, "first: a"],
            "msg": "total 53 km, cost $5, all: {\"entries\":[\"a\",{\"b\":2}]}",
            "flag": true
        })
    );
    let missing: HashMap<String, Value> = [("s1".into(), json!({"result": 53}))].into();
    assert!(matches!(resolve_args(&step, &missing), Err(PlanError::MissingOutput { .. })));
    let wrong: HashMap<String, Value> = [("s1".into(), json!({"value": 1})), ("s2".into(), json!({}))].into();
    let err = resolve_args(&step, &wrong).unwrap_err();
    assert!(matches!(&err, PlanError::MissingField { .. }) && err.to_string().contains("value"), "{err}");
}

/// Reading text: a field missing from an output that is only text (an MCP tool's `{"text": …}`, a string) takes
/// that text and is noted; a field missing from structured output, or from text read strictly, is still an error.
#[test]
fn a_field_missing_from_a_text_output_reads_the_text_only_when_asked() {
    let step: tandem::agent::Step = serde_json::from_value(json!({
        "id": "s2", "tool": "git_show",
        "args": {"revision": "$s1.commit_id$", "note": "latest: $s1.message$", "n": "$s3.count$"}
    }))
    .unwrap();
    let log = "Commit: c4696ff\nMessage: Fix the greeting";
    let outputs: HashMap<String, Value> =
        [("s1".into(), json!({"text": log})), ("s3".into(), json!({"count": 3}))].into();
    let err = resolve_args(&step, &outputs).unwrap_err();
    assert!(matches!(&err, PlanError::MissingField { .. }), "strict resolution must refuse: {err}");
    let mut how = Resolution { read_text: true, ..Resolution::default() };
    let args = resolve_args_with(&step, &outputs, &mut how).unwrap();
    assert_eq!(Value::Object(args), json!({"revision": log, "note": format!("latest: {log}"), "n": 3}));
    let mut read: Vec<String> = how.read_from_text.iter().map(ToString::to_string).collect();
    read.sort();
    assert_eq!(read, ["$s1.commit_id$", "$s1.message$"]);
    // Structured output, or text beside other fields, is not text: the field is still missing.
    for output in [json!({"value": 1}), json!({"text": "a", "status": 0}), json!(["a"])] {
        let outputs: HashMap<String, Value> =
            [("s1".into(), output.clone()), ("s3".into(), json!({"count": 3}))].into();
        let mut how = Resolution { read_text: true, ..Resolution::default() };
        let err = resolve_args_with(&step, &outputs, &mut how).unwrap_err();
        assert!(matches!(&err, PlanError::MissingField { .. }), "{output}: {err}");
    }
    // A string output reads as text too.
    let outputs: HashMap<String, Value> = [("s1".into(), json!(log)), ("s3".into(), json!({"count": 3}))].into();
    let mut how = Resolution { read_text: true, ..Resolution::default() };
    assert_eq!(resolve_args_with(&step, &outputs, &mut how).unwrap()["revision"], json!(log));
}

/// The pieces a value read out of a text may be: each line, what follows a line's label, each word without the
/// punctuation around it; each once.
#[test]
fn a_texts_pieces_are_its_lines_labelled_values_and_words() {
    let pieces = tandem::agent::run::executor::text_pieces("Commit: c4696ff\nMessage: Fix the greeting.\n\n");
    assert_eq!(
        pieces,
        [
            "Commit: c4696ff",
            "c4696ff",
            "Commit",
            "Message: Fix the greeting.",
            "Fix the greeting.",
            "Message",
            "Fix",
            "the",
            "greeting"
        ]
    );
    assert!(tandem::agent::run::executor::text_pieces(" \n\t").is_empty());
}

#[test]
fn reference_syntax_escapes_prices_and_adjacent_references() {
    assert_eq!(parse_reference("$s1.result$"), Some(Reference { step: "s1".into(), field: Some("result".into()) }));
    assert_eq!(parse_reference("$var2$"), Some(Reference { step: "var2".into(), field: None }));
    assert_eq!(parse_reference("$var1.result$").unwrap().to_string(), "$var1.result$");
    assert_eq!(parse_reference("costs $5 and $6"), None);
    assert_eq!(parse_reference("$s1.result$ "), None);
    assert_eq!(references_in(&json!("$s1.a$$s2.b$")).len(), 2);
    assert_eq!(references_in(&json!("$$s1.a$")).len(), 0);
    assert_eq!(references_in(&json!(["$HOME and $PATH", {"k": "$s1.a b$"}])).len(), 0);
    let outputs: HashMap<String, Value> = [("s1".to_string(), json!({"a": 1}))].into();
    assert_eq!(resolve_value("s2", &json!("$$5 and $s1.a$, $5"), &outputs).unwrap(), json!("$5 and 1, $5"));
}

#[test]
fn coercion_follows_the_argument_schema() {
    let schema = json!({"type": "object", "properties": {
        "s": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"},
        "list": {"type": "array", "items": {"type": "string"}}, "keep": {"type": "boolean"}
    }});
    assert_eq!(
        coerce_to_schema(json!({"s": 53, "n": " 7 ", "x": "2.5", "list": [1, "a"], "keep": "yes"}), &schema),
        json!({"s": "53", "n": 7, "x": 2.5, "list": ["1", "a"], "keep": "yes"})
    );
}

#[test]
fn nestful_labels_and_references_work_unchanged() {
    let plan = fixture("plan_nestful.json");
    let registry = registry();
    assert!(plan.validate(&registry).is_empty());
    // References imply dependencies, so the DAG order holds without depends_on.
    let mut done = HashSet::new();
    let mut order = Vec::new();
    let mut outputs = HashMap::new();
    let ctx = ToolContext::new(Workspace::new(tempfile::tempdir().unwrap().keep()).unwrap()).with_write(true);
    loop {
        let ready: Vec<String> = plan.ready_steps(&done).iter().map(|s| s.id.clone()).collect();
        let Some(id) = ready.first() else { break };
        let step = plan.step(id).unwrap();
        let spec = registry.spec(&step.tool).unwrap();
        let args = coerce_to_schema(Value::Object(resolve_args(step, &outputs).unwrap()), &spec.args_schema);
        outputs.insert(id.clone(), registry.call(&step.tool, &args, &ctx).unwrap());
        done.insert(id.clone());
        order.push(id.clone());
    }
    assert_eq!(order, ["var1", "var2", "var3"]);
    assert_eq!(outputs["var2"]["result"], 106);
    assert_eq!(std::fs::read_to_string(ctx.workspace.root().join("answer.txt")).unwrap(), "106");
    std::fs::remove_dir_all(ctx.workspace.root()).unwrap();
}

#[test]
fn ready_steps_follow_the_dag() {
    let diamond = plan(json!([
        {"id": "s1", "tool": "calculator", "args": {"expression": "1"}},
        {"id": "s2", "tool": "calculator", "args": {"expression": "$s1.result$ + 1"}},
        {"id": "s3", "tool": "calculator", "args": {"expression": "2"}, "depends_on": ["s1"]},
        {"id": "s4", "tool": "calculator", "args": {"expression": "$s2.result$ + $s3.result$"}}
    ]));
    let ids = |done: &[&str]| -> Vec<String> {
        let done: HashSet<String> = done.iter().map(|s| s.to_string()).collect();
        diamond.ready_steps(&done).iter().map(|s| s.id.clone()).collect()
    };
    assert_eq!(ids(&[]), ["s1"]);
    assert_eq!(ids(&["s1"]), ["s2", "s3"]);
    assert_eq!(ids(&["s1", "s2"]), ["s3"]);
    assert_eq!(ids(&["s1", "s2", "s3"]), ["s4"]);
    assert!(ids(&["s1", "s2", "s3", "s4"]).is_empty());
    let explicit = diamond.with_explicit_dependencies();
    assert_eq!(explicit.steps[3].depends_on, ["s2", "s3"]);
}

fn schema_accepts(schema: &Value, plan: &Value) -> bool {
    let validator = jsonschema::validator_for(schema).unwrap();
    validator.is_valid(plan)
}

/// The good plan as the planner writes it: without the goal (the run knows it) or a version.
fn good_plan_json() -> Value {
    let mut plan = serde_json::to_value(fixture("plan_good.json")).unwrap();
    plan.as_object_mut().unwrap().remove("goal");
    plan.as_object_mut().unwrap().remove("version");
    plan
}

#[test]
fn the_plan_schema_accepts_a_valid_plan() {
    let schema = plan_json_schema(&registry());
    let good = good_plan_json();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&good).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // The step shape lists its properties in the order the model should write them.
    let shape = &schema["properties"]["steps"]["prefixItems"][0]["anyOf"][0]["properties"];
    let order: Vec<&str> = shape.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(order, ["id", "description", "tool", "args", "depends_on"]);
}

#[rstest]
#[case::unknown_tool("/steps/0/tool", json!("browser"))]
#[case::wrong_arg_name("/steps/0/args", json!({"file": "notes.txt"}))]
#[case::extra_arg("/steps/2/args", json!({"expression": "1", "depends_on": ["s1"]}))]
#[case::arg_of_another_tool("/steps/2/args", json!({"path": "notes.txt"}))]
#[case::undeclared_field("/steps/2/args/expression", json!("$s2.answer$ * 3"))]
#[case::malformed_reference("/steps/2/args/expression", json!("$s2.text * 3"))]
#[case::reference_with_a_bad_id("/steps/2/args/expression", json!("$step2.text$ * 3"))]
#[case::number_field_into_a_boolean("/steps/3/args/append", json!("$s3.result$"))]
#[case::string_field_into_a_boolean("/steps/3/args/append", json!("$s1.content$"))]
#[case::bad_step_id("/steps/0/id", json!("first"))]
#[case::bad_dependency_id("/steps/1/depends_on", json!(["one"]))]
#[case::missing_description("/steps/0/description", Value::Null)]
#[case::no_steps("/steps", json!([]))]
fn the_plan_schema_rejects(#[case] pointer: &str, #[case] replacement: Value) {
    let schema = plan_json_schema(&registry());
    let mut plan = good_plan_json();
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let holder = plan.pointer_mut(parent).unwrap().as_object_mut().unwrap();
    if replacement.is_null() {
        holder.remove(key);
    } else {
        holder.insert(key.to_string(), replacement);
    }
    assert!(!schema_accepts(&schema, &plan), "accepted {pointer}: {plan}");
}

#[test]
fn references_of_a_fitting_type_are_admitted_in_typed_arguments() {
    // A user tool with typed arguments: integers accept references to numeric fields only.
    let mut registry = registry();
    registry.load_file(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent/tools.toml")).unwrap();
    let schema = plan_json_schema(&registry);
    let step = |args: Value| {
        json!({"steps": [
            {"id": "s1", "description": "", "tool": "calculator", "args": {"expression": "1"}, "depends_on": []},
            {"id": "s2", "description": "", "tool": "write_file", "args": args, "depends_on": ["s1"]}
        ]})
    };
    assert!(schema_accepts(&schema, &step(json!({"path": "a", "content": "$s1.text$"}))));
    assert!(schema_accepts(&schema, &step(json!({"path": "a", "content": "n=$s1.result$, words=$s1.words$"}))));
    assert!(!schema_accepts(&schema, &step(json!({"path": "a", "content": "costs $5"}))));
    assert!(schema_accepts(&schema, &step(json!({"path": "a", "content": "costs $$5"}))));
    // `shout` declares no outputs, so references to any field name become admissible.
    assert!(schema_accepts(&schema, &step(json!({"path": "a", "content": "$s1.anything$"}))));
    let closed = plan_json_schema(&self::registry());
    assert!(!schema_accepts(&closed, &step(json!({"path": "a", "content": "$s1.anything$"}))));
}

#[test]
fn nested_objects_that_declare_their_keys_take_no_others() {
    // NESTFUL's analyze_stock_market: the planner once wrote "start_date " (trailing space) into an open object.
    let mut registry = ToolRegistry::new();
    let args = json!({"type": "object", "additionalProperties": false, "required": ["date_range", "filters"],
        "properties": {
            "date_range": {"type": "object", "properties": {"start_date": {"type": "string"}, "end_date": {"type": "string"}}},
            "filters": {"type": "object"},
            "open": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": true}}});
    let tool =
        DeclaredTool { name: "stocks".into(), description: String::new(), args_schema: args, output_schema: None };
    registry.register_arc(Arc::new(tool)).unwrap();
    let schema = plan_json_schema(&registry);
    let plan = |args: Value| json!({"steps": [{"id": "s1", "description": "", "tool": "stocks", "args": args, "depends_on": []}]});
    let dates = |key: &str| json!({key: "2021-01-01", "end_date": "2021-12-31"});
    assert!(schema_accepts(&schema, &plan(json!({"date_range": dates("start_date"), "filters": {}}))));
    assert!(!schema_accepts(&schema, &plan(json!({"date_range": dates("start_date "), "filters": {}}))));
    // An object that declares no keys, or says it takes others, stays open.
    assert!(schema_accepts(&schema, &plan(json!({"date_range": {}, "filters": {"any": 1}}))));
    assert!(schema_accepts(&schema, &plan(json!({"date_range": {}, "filters": {}, "open": {"b": "x"}}))));
}

/// A matcher for the schema on llguidance's one-byte-per-token test vocabulary, compact JSON as the decoder
/// asks for it.
fn llguidance_matcher(schema: &Value) -> Matcher {
    let env = ApproximateTokEnv::single_byte_env();
    let factory = ParserFactory::new(
        &env,
        InferenceCapabilities::default(),
        &llguidance::earley::SlicedBiasComputer::general_slices(),
    )
    .unwrap();
    let mut schema = schema.clone();
    match schema.get_mut("x-guidance").and_then(Value::as_object_mut) {
        Some(options) => {
            options.insert("whitespace_flexible".into(), json!(false));
        }
        None => schema["x-guidance"] = json!({"whitespace_flexible": false}),
    }
    let matcher = Matcher::new(factory.create_parser(TopLevelGrammar::from_json_schema(schema)));
    assert!(!matcher.is_error(), "llguidance rejected the schema: {:?}", matcher.get_error());
    matcher
}

/// How many bytes of `text` the grammar takes before refusing one.
fn accepted_prefix(matcher: &mut Matcher, text: &str) -> usize {
    let tokens: Vec<u32> = text.bytes().map(u32::from).collect();
    matcher.try_consume_tokens(&tokens).unwrap_or(0)
}

/// A complete first step, to build later steps on.
const FIRST: &str =
    r#"{"steps":[{"id":"s1","description":"","tool":"calculator","args":{"expression":"1"},"depends_on":[]}"#;

#[test]
fn llguidance_compiles_the_plan_schema_and_follows_it() {
    let schema = plan_json_schema(&registry());
    let good = serde_json::to_string(&good_plan_json()).unwrap();
    let mut matcher = llguidance_matcher(&schema);
    assert_eq!(accepted_prefix(&mut matcher, &good), good.len(), "{good}");
    assert!(matcher.is_accepting().unwrap());

    for (bad, stops_at) in [
        (r#"{"steps":[{"id":"s1","description":"","tool":"browser""#, r#""tool":""#),
        (r#"{"steps":[{"id":"s1","description":"","tool":"calculator","args":{"path""#, r#""args":{""#),
        (
            &format!(r#"{FIRST},{{"id":"s2","description":"","tool":"calculator","args":{{"expression":"$s1.nope$"#),
            r#""expression":"$s1."#,
        ),
        (r#"{"steps":[{"id":"step1""#, r#""id":"s"#),
        // Step k is `s<k>`, and depends on and refers to earlier steps only.
        (&format!(r#"{FIRST},{{"id":"s3""#), r#"},{"id":"s"#),
        (
            r#"{"steps":[{"id":"s1","description":"","tool":"calculator","args":{"expression":"1"},"depends_on":["s1"]"#,
            r#""depends_on":["#,
        ),
        (
            &format!(
                r#"{FIRST},{{"id":"s2","description":"","tool":"calculator","args":{{"expression":"1"}},"depends_on":["s2"]"#
            ),
            r#""depends_on":["s"#,
        ),
        (
            &format!(r#"{FIRST},{{"id":"s2","description":"","tool":"calculator","args":{{"expression":"$s2.result$"#),
            r#"{"expression":"$s"#,
        ),
        (
            r#"{"steps":[{"id":"s1","description":"","tool":"calculator","args":{"expression":"$s1.result$"#,
            r#""expression":"$"#,
        ),
    ] {
        let mut matcher = llguidance_matcher(&schema);
        let taken = accepted_prefix(&mut matcher, bad);
        assert!(taken < bad.len(), "the grammar accepted {bad}");
        // It refuses the first byte after `stops_at`: the grammar, not a later check, rules the plan out.
        let expected = bad.find(stops_at).unwrap() + stops_at.len();
        assert_eq!(taken, expected, "stopped at {:?} in {bad}", &bad[..taken]);
    }
}

fn declared(name: &str, args_schema: Value, output_schema: Option<Value>) -> Arc<DeclaredTool> {
    Arc::new(DeclaredTool {
        name: name.into(),
        description: format!("{name} does a thing"),
        args_schema,
        output_schema,
    })
}

#[test]
fn tool_names_as_real_catalogues_spell_them_are_planned_and_validated() {
    let mut registry = ToolRegistry::new();
    for name in ["Hotels.SearchHouse", "WeatherAPI.com_forecast", "fs/read text", "ünïcode-tool"] {
        let args = json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]});
        registry
            .register_arc(declared(
                name,
                args,
                Some(json!({"type": "object", "properties": {"out": {"type": "string"}}})),
            ))
            .unwrap();
    }
    for bad in ["", " padded", "tab\there", &"x".repeat(257)] {
        let error = registry.register_arc(declared(bad, json!({"type": "object"}), None)).unwrap_err().to_string();
        assert!(error.contains("no control characters"), "{bad:?}: {error}");
    }
    let clash = registry.register_arc(declared("Hotels.SearchHouse", json!({"type": "object"}), None)).unwrap_err();
    assert!(clash.to_string().contains("Hotels.SearchHouse"), "{clash}");
    let plan = plan(json!([
        {"id": "s1", "tool": "Hotels.SearchHouse", "args": {"q": "Lisbon"}},
        {"id": "s2", "tool": "fs/read text", "args": {"q": "$s1.out$"}}
    ]));
    assert_eq!(plan.validate(&registry), vec![]);
    let schema = plan_json_schema(&registry);
    let text = r#"{"steps":[{"id":"s1","description":"","tool":"WeatherAPI.com_forecast","args":{"q":"Oslo"},"depends_on":[]}]}"#;
    let mut matcher = llguidance_matcher(&schema);
    assert_eq!(accepted_prefix(&mut matcher, text), text.len(), "{text}");
    assert!(matcher.is_accepting().unwrap());
}

#[test]
fn odd_schemas_are_loosened_with_warnings_and_still_plannable() {
    let mut registry = ToolRegistry::new();
    // NESTFUL's `allowed_values: []` as an empty enum, Python type names, OpenAPI `nullable`, contradicting bounds,
    // a required name the properties lack, and an output schema whose pattern is no regex at all.
    let args = json!({"type": "dict", "properties": {
        "city": {"type": "str", "enum": []},
        "nights": {"type": "int", "minimum": 5, "maximum": 1},
        "note": {"type": "string", "nullable": true}
    }, "required": ["city", "phantom"]});
    let output = json!({"type": "string", "pattern": "(unclosed"});
    registry.register_arc(declared("Stays.Find", args, Some(output))).unwrap();
    registry
        .register_arc(declared("ok_tool", json!({"type": "object", "properties": {"a": {"type": "integer"}}}), None))
        .unwrap();
    let warnings = registry.warnings().join("\n");
    for needle in ["Stays.Find", "/properties/city/enum", "phantom", "minimum", "nullable", "output", "not checked"] {
        assert!(warnings.contains(needle), "no warning on {needle}:\n{warnings}");
    }
    assert!(!warnings.contains("ok_tool"), "a fine schema is not touched:\n{warnings}");
    // Values the loosened schema admits pass the argument check; the output is no longer checked.
    assert!(registry.arg_errors("Stays.Find", &json!({"city": "Oslo", "nights": 3, "note": null})).unwrap().is_empty());
    assert!(registry.output_errors("Stays.Find", &json!("anything")).unwrap().is_empty());
    let schema = plan_json_schema(&registry);
    let text = r#"{"steps":[{"id":"s1","description":"","tool":"Stays.Find","args":{"city":"Oslo","nights":3},"depends_on":[]}]}"#;
    let mut matcher = llguidance_matcher(&schema);
    assert_eq!(accepted_prefix(&mut matcher, text), text.len(), "{text}");
}

#[test]
fn a_bfcl_question_with_odd_parameter_docs_still_gets_a_call_grammar() {
    // Dotted function names, an empty enum, contradicting bounds, an unknown type and a keyword llguidance does not
    // support: the call grammar compiles and takes a call of each function.
    let question = json!({"id": "odd_0", "turns": [], "functions": [
        {"name": "geo.distance", "description": "", "parameters": {"type": "dict", "properties": {
            "unit": {"type": "string", "enum": []},
            "points": {"type": "integer", "minimum": 9, "maximum": 2},
            "meta": {"type": "any", "x-vendor-hint": {"a": 1}}
        }, "required": ["unit"]}},
        {"name": "math.factorial", "description": "", "parameters": {"type": "dict", "properties": {
            "number": {"type": "integer"}}, "required": ["number"]}}
    ]});
    let question: tandem::bench::bfcl::BfclQuestion = serde_json::from_value(question).unwrap();
    let schema = tandem::bench::bfcl::call::call_schema(&question, tandem::bench::bfcl::CallShape::One);
    for call in [
        r#"{"name":"geo.distance","arguments":{"unit":"km","points":4}}"#,
        r#"{"name":"math.factorial","arguments":{"number":5}}"#,
    ] {
        let mut matcher = llguidance_matcher(&schema);
        assert_eq!(accepted_prefix(&mut matcher, call), call.len(), "{call}");
        assert!(matcher.is_accepting().unwrap(), "{call}");
    }
}

#[test]
fn bfcl_call_grammars_take_one_call_several_or_possibly_none() {
    use tandem::bench::bfcl::{call::call_schema, BfclQuestion, CallShape};
    let question: BfclQuestion = serde_json::from_value(json!({"id": "p_0", "turns": [], "functions": [
        {"name": "math.factorial", "description": "", "parameters": {"type": "dict", "properties": {
            "number": {"type": "integer"}}, "required": ["number"]}}
    ]}))
    .unwrap();
    let one = r#"{"name":"math.factorial","arguments":{"number":5}}"#;
    let two = format!("[{one},{}]", one.replace('5', "6"));
    // (text, accepted in full and complete) per shape.
    let cases = [
        (CallShape::One, one.to_string(), true),
        (CallShape::One, two.clone(), false),
        (CallShape::Several, two.clone(), true),
        (CallShape::Several, format!("[{one}]"), true),
        (CallShape::Several, "[]".to_string(), false),
        (CallShape::AnyNumber, "[]".to_string(), true),
        (CallShape::AnyNumber, two.clone(), true),
        (CallShape::AnyNumber, r#"[{"name":"math.gcd","arguments":{}}]"#.to_string(), false),
    ];
    for (shape, text, ok) in cases {
        let mut matcher = llguidance_matcher(&call_schema(&question, shape));
        let taken = accepted_prefix(&mut matcher, &text) == text.len() && matcher.is_accepting().unwrap();
        assert_eq!(taken, ok, "{shape:?} on {text}");
    }
    // With no function at all only "no call" can be written.
    let bare: BfclQuestion = serde_json::from_value(json!({"id": "i_0", "turns": [], "functions": []})).unwrap();
    let mut matcher = llguidance_matcher(&call_schema(&bare, CallShape::AnyNumber));
    assert_eq!(accepted_prefix(&mut matcher, "[]"), 2);
    assert!(matcher.is_accepting().unwrap());
}

#[test]
fn a_plan_with_a_thought_writes_it_first_within_its_length() {
    let options = tandem::agent::PlanSchemaOptions { max_thought: 12, ..Default::default() };
    let schema = tandem::agent::plan_json_schema_with(&registry(), &options);
    let good = serde_json::to_string(&good_plan_json()).unwrap();
    let thought = format!(r#"{{"thought":"add, double",{}"#, &good[1..]);
    assert_eq!(accepted_prefix(&mut llguidance_matcher(&schema), &thought), thought.len(), "{thought}");
    // Steps without the thought, or a thought past its length, are refused where they go wrong.
    assert_eq!(accepted_prefix(&mut llguidance_matcher(&schema), &good), r#"{""#.len());
    let long = r#"{"thought":"add, then double""#;
    assert_eq!(accepted_prefix(&mut llguidance_matcher(&schema), long), r#"{"thought":"add, then do"#.len());
    // The plan reads as before: the thought is the planner's, not part of the plan.
    let plan = tandem::agent::plan::Plan::from_json(&thought).unwrap();
    assert_eq!(plan.steps.len(), good_plan_json()["steps"].as_array().unwrap().len());
}
