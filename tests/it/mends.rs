//! Plan mends (`agent::mend`): each rewrites a model-written plan only where its mistake has one reading, and
//! names what it changed; what has another reading is left as written.

use std::collections::HashMap;

use serde_json::{json, Value};
use tandem::agent::mend::{
    drop_repeated_calls, drop_unmentioned_optional, mend_languages, mend_percentages, mend_plan, mend_references,
    mend_unused_dependencies,
};
use tandem::agent::refs::resolve_value;
use tandem::agent::{IssueKind, Plan};
use tandem::tools::ToolRegistry;

use super::plan::{plan, registry};

/// The built-ins and declared tools, each `(name, properties JSON, required names, its one number output field or
/// "" for none)`, run by `cat`.
fn with_tools(tools: &[(&str, &str, &[&str], &str)]) -> ToolRegistry {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tools.toml");
    let mut text = String::new();
    for (name, properties, required, output) in tools {
        let properties: Value = serde_json::from_str(properties).unwrap();
        let schema = json!({"type": "object", "properties": properties, "required": required});
        text += &format!(
            "[[tool]]\nname = \"{name}\"\ndescription = \"A tool.\"\ncommand = [\"cat\"]\nargs_schema = '{schema}'\n"
        );
        if !output.is_empty() {
            text += &format!("output_fields = {{ {output} = \"number\" }}\n");
        }
    }
    std::fs::write(&path, text).unwrap();
    let mut registry = registry();
    registry.load_file(&path).unwrap();
    registry
}

fn goal_plan(goal: &str, steps: Value) -> Plan {
    serde_json::from_value(json!({"goal": goal, "steps": steps})).unwrap()
}

/// A generic name for an output field the tool lacks, where the tool has only one, has one reading and is mended
/// before validation (and named); one with another reading is left for validation to report.
#[test]
fn a_reference_with_one_reading_is_mended_and_named() {
    let mut plan = plan(json!([
        {"id": "s1", "tool": "llm", "args": {"prompt": "Pick a number"}},
        {"id": "s2", "tool": "calculator", "args": {"expression": "$s1.result$ * 2 + $s1.result$"}},
        {"id": "s3", "tool": "llm", "args": {"prompt": "Costs $$5: $s1$ and $s1.text$, ok?", "note": "$s1$"}},
        {"id": "s4", "tool": "calculator", "args": {"expression": "$s2.value$ + 1"}},
        {"id": "s5", "tool": "llm", "args": {"prompt": "$s1.result.first$"}},
        {"id": "s6", "tool": "llm", "args": {"prompt": "$s1.interest_earned$"}}
    ]));
    let mends = mend_references(&mut plan, &registry());
    assert_eq!(mends, ["s2: $s1.result$ → $s1.text$", "s3: $s1$ → $s1.text$"], "{mends:#?}");
    assert_eq!(plan.steps[1].args["expression"], json!("$s1.text$ * 2 + $s1.text$"), "both, named once");
    // The literal dollar is written escaped again, so it still resolves to "$5"; a whole-output argument stays.
    assert_eq!(plan.steps[2].args["prompt"], json!("Costs $$5: $s1.text$ and $s1.text$, ok?"));
    assert_eq!(plan.steps[2].args["note"], json!("$s1$"));
    let outputs = HashMap::from([("s1".to_string(), json!({"text": "7"}))]);
    assert_eq!(resolve_value("s3", &plan.steps[2].args["prompt"], &outputs).unwrap(), json!("Costs $5: 7 and 7, ok?"));
    // The calculator has two output fields, a path below a missing field has no reading, and a specific name
    // the tool lacks means another step: all three are left to validation.
    assert_eq!(plan.steps[3].args["expression"], json!("$s2.value$ + 1"));
    assert_eq!(plan.steps[4].args["prompt"], json!("$s1.result.first$"));
    assert_eq!(plan.steps[5].args["prompt"], json!("$s1.interest_earned$"));
    let issues = plan.validate(&registry());
    let unknown_fields = issues.iter().filter(|i| i.kind() == IssueKind::UnknownOutputField).count();
    assert_eq!(unknown_fields, 3, "{issues:#?}");
}

/// A list of one reference to a field that is a list already is the reference; one to a field of another type
/// stays a list.
#[test]
fn a_list_wrapped_in_a_list_is_unwrapped() {
    let text = r#"{"type": "string"}"#;
    let registry = with_tools(&[("count", &format!(r#"{{"words": {text}}}"#), &["words"], "total")]);
    let mut plan = plan(json!([
        {"id": "s1", "tool": "list_dir", "args": {"path": "."}},
        {"id": "s2", "tool": "count", "args": {"words": ["$s1.entries$"]}},
        {"id": "s3", "tool": "count", "args": {"words": ["$s2.total$"]}},
        {"id": "s4", "tool": "count", "args": {"words": ["$s1.entries$", "x"]}}
    ]));
    let mends = mend_references(&mut plan, &registry);
    assert_eq!(mends, [r#"s2: words ["$s1.entries$"] → $s1.entries$ (entries is a list already)"#], "{mends:#?}");
    assert_eq!(plan.steps[1].args["words"], json!("$s1.entries$"));
    assert_eq!(plan.steps[2].args["words"], json!(["$s2.total$"]), "a number field wrapped is a list of one");
    assert_eq!(plan.steps[3].args["words"], json!(["$s1.entries$", "x"]), "two items are a list of two");
}

/// A percentage of the goal passed as a fraction is mended to the number as written ("5%" → 5), and one passed as
/// written where the parameter asks for a decimal to the fraction; numbers the goal writes, references and
/// parameters of the right form are left alone.
#[test]
fn percentages_are_passed_in_the_form_the_parameter_takes() {
    let registry = with_tools(&[
        ("loan", r#"{"interest_rate": {"type": "number", "description": "The annual interest rate"}}"#, &[], ""),
        ("tax", r#"{"tax_rate": {"type": "number", "description": "The tax rate as a decimal"}}"#, &[], ""),
    ]);
    let mut plan = goal_plan(
        "Borrow at 5% interest with 8% tax; 0.2 and 20% are both fine.",
        json!([
            {"id": "s1", "tool": "loan", "args": {"interest_rate": 0.05}},
            {"id": "s2", "tool": "tax", "args": {"tax_rate": 8}},
            {"id": "s3", "tool": "tax", "args": {"tax_rate": 0.08}},
            {"id": "s4", "tool": "loan", "args": {"interest_rate": 0.2}},
            {"id": "s5", "tool": "loan", "args": {"interest_rate": 5}},
            {"id": "s6", "tool": "loan", "args": {"interest_rate": "$s1.result$"}}
        ]),
    );
    let mends = mend_percentages(&mut plan, &registry);
    assert_eq!(
        mends,
        ["s1: interest_rate 0.05 → 5 (the goal's 5%)", "s2: tax_rate 8 → 0.08 (the goal's 8%)"],
        "{mends:#?}"
    );
    let rates: Vec<&Value> = plan.steps.iter().map(|s| s.args.values().next().unwrap()).collect();
    assert_eq!(rates, [&json!(5), &json!(0.08), &json!(0.08), &json!(0.2), &json!(5), &json!("$s1.result$")]);
}

/// A language planned as a code where the parameter does not ask for one is mended to the name (as the goal writes
/// it where it names the language), and a name the goal gives to the code where the description asks for a code;
/// other parameters, codes the goal itself writes, and the form the parameter takes are left alone.
#[test]
fn languages_are_passed_in_the_form_the_parameter_takes() {
    let text = |description: &str| format!(r#"{{"type": "string", "description": "{description}"}}"#);
    let translate = format!(
        r#"{{"text": {}, "source_language": {}, "target_language": {}}}"#,
        text("The text"),
        text("The source language"),
        text("The target language")
    );
    let coded = format!(r#"{{"text": {}, "to": {}}}"#, text("The text"), text("ISO 639-1 code of the language"));
    let registry = with_tools(&[("translate", &translate, &["text"], ""), ("coded", &coded, &["text"], "")]);
    let mut plan = goal_plan(
        "Translate 'it is de rigueur' from English to french, then to Spanish.",
        json!([
            {"id": "s1", "tool": "translate", "args": {"text": "it", "source_language": "en", "target_language": "FR-fr"}},
            {"id": "s2", "tool": "coded", "args": {"text": "de", "to": "Spanish"}},
            {"id": "s3", "tool": "translate", "args": {"text": "x", "source_language": "English", "target_language": "ja"}},
            {"id": "s4", "tool": "coded", "args": {"text": "y", "to": "es"}},
            {"id": "s5", "tool": "translate", "args": {"text": "z", "source_language": "it", "target_language": "pt-BR"}}
        ]),
    );
    let mends = mend_languages(&mut plan, &registry);
    assert_eq!(
        mends,
        [
            r#"s1: source_language "en" → "English" (the goal's English)"#,
            r#"s1: target_language "FR-fr" → "french" (the goal's french)"#,
            r#"s2: to "Spanish" → "es" (the goal's Spanish)"#,
            r#"s3: target_language "ja" → "Japanese" (ja is Japanese; the parameter asks for no code)"#,
            r#"s5: target_language "pt-BR" → "Portuguese" (pt is Portuguese; the parameter asks for no code)"#,
        ],
        "{mends:#?}"
    );
    assert_eq!(plan.steps[0].args["text"], json!("it"), "a text argument is no language");
    assert_eq!(plan.steps[4].args["source_language"], json!("it"), "the goal itself writes it");
    assert_eq!(plan.steps[3].args["to"], json!("es"), "already the code the parameter asks for");
}

/// An optional argument the goal names neither by value nor by name is left out (the tool's default stands);
/// required arguments, optional ones the goal names either way, references and undeclared arguments stay.
#[test]
fn optional_arguments_the_goal_does_not_mention_are_left_out() {
    let books = r#"{"query": {"type": "string"}, "max_results": {"type": "integer"}, "format": {"type": "string"},
        "include_covers": {"type": "boolean"}, "mode": {"type": "string"}, "after": {"type": "string"}}"#;
    let registry = with_tools(&[("books", books, &["query"], "")]);
    let mut plan = goal_plan(
        "Search books on adventure, at most 5, driving there, then again with covers included.",
        json!([
            {"id": "s1", "tool": "books", "args": {"query": "J.K. Rowling", "max_results": 10, "format": "QR", "mode": "drive"}},
            {"id": "s2", "tool": "books", "args": {"query": "adventure", "max_results": 5, "include_covers": true,
                "after": "$s1.result$", "color": "red"}},
            {"id": "s3", "tool": "books", "args": {"query": "x", "include_covers": false, "format": ["QR", "adventure"]}}
        ]),
    );
    let mut mends = drop_unmentioned_optional(&mut plan, &registry);
    mends.sort();
    assert_eq!(
        mends,
        [
            r#"s1: format "QR" left out (optional, and the goal names neither it nor "QR")"#,
            "s1: max_results 10 left out (optional, and the goal names neither it nor 10)",
            r#"s3: format ["QR","adventure"] left out (optional, and the goal names neither it nor ["QR","adventure"])"#,
        ],
        "{mends:#?}"
    );
    let names = |i: usize| {
        let mut names = plan.steps[i].args.keys().cloned().collect::<Vec<_>>();
        names.sort();
        names
    };
    assert_eq!(names(0), ["mode", "query"], "a required argument stays whatever its value; \"driving\" names drive");
    assert_eq!(names(1), ["after", "color", "include_covers", "max_results", "query"]);
    assert_eq!(names(2), ["include_covers", "query"], "\"covers included\" names include_covers");
    let issues = plan.validate(&registry);
    assert!(
        issues.iter().any(|i| i.kind() == IssueKind::InvalidArgs),
        "the undeclared color is validation's: {issues:#?}"
    );
}

/// `mend_plan` runs every mend, percentages before the optional arguments are judged: `0.05` for "5%" is the
/// goal's 5 once mended, so it stays.
#[test]
fn the_plan_mends_run_in_turn() {
    let registry = with_tools(&[(
        "loan",
        r#"{"amount": {"type": "number"}, "rate": {"type": "number", "description": "yearly"}, "currency": {"type": "string"}}"#,
        &["amount"],
        "",
    )]);
    let mut plan = goal_plan(
        "Borrow 1000 at 5%.",
        json!([{"id": "s1", "tool": "loan", "args": {"amount": 1000, "rate": 0.05, "currency": "EUR"}}]),
    );
    let mends = mend_plan(&mut plan, &registry);
    assert_eq!(
        mends,
        [
            "s1: rate 0.05 → 5 (the goal's 5%)",
            r#"s1: currency "EUR" left out (optional, and the goal names neither it nor "EUR")"#
        ],
        "{mends:#?}"
    );
    assert_eq!(plan.steps[0].args, json!({"amount": 1000, "rate": 5}).as_object().unwrap().clone());
}

/// A step that lists a dependency it does not reference, and passes a number that copies one of the dependency's
/// inputs or that the goal does not give, takes the dependency's only (number) output instead; where two numbers
/// could be meant, or the dependency's output is not one number, the step is left as written.
#[test]
fn a_listed_dependency_whose_result_went_unused_is_referenced() {
    let number = r#"{"type": "number"}"#;
    let args = |names: &[&str]| {
        let fields: Vec<String> = names.iter().map(|n| format!(r#""{n}": {number}"#)).collect();
        format!("{{{}}}", fields.join(", "))
    };
    let registry = with_tools(&[
        ("profit", &args(&["revenue", "expenses"]), &["revenue", "expenses"], "profit"),
        ("convert", &args(&["amount"]), &["amount"], "converted"),
        ("gcd", &args(&["a", "b"]), &["a", "b"], "gcd"),
        ("tax", &args(&["amount", "rate"]), &["amount", "rate"], "tax"),
    ]);
    let mut plan = goal_plan(
        "Profit of 7000 revenue and 5000 expenses, convert it, its GCD with the expenses, a 5% tax on 1000 more.",
        json!([
            {"id": "s1", "tool": "profit", "args": {"revenue": 7000, "expenses": 5000}},
            {"id": "s2", "tool": "convert", "args": {"amount": 7000}, "depends_on": ["s1"]},
            {"id": "s3", "tool": "gcd", "args": {"a": 7000, "b": 5000}, "depends_on": ["s1"]},
            {"id": "s4", "tool": "tax", "args": {"amount": 3000, "rate": 0.05}, "depends_on": ["s2"]},
            {"id": "s5", "tool": "convert", "args": {"amount": 1000}, "depends_on": ["s4"]},
            {"id": "s6", "tool": "tax", "args": {"amount": "$s1.profit$", "rate": 5}, "depends_on": ["s1"]}
        ]),
    );
    let mends = mend_unused_dependencies(&mut plan, &registry);
    assert_eq!(
        mends,
        [
            "s2: amount 7000 → $s1.profit$ (s2 depends on s1 but did not use its result)",
            "s4: amount 3000 → $s2.converted$ (s4 depends on s2 but did not use its result)",
        ],
        "{mends:#?}"
    );
    assert_eq!(plan.steps[2].args, *json!({"a": 7000, "b": 5000}).as_object().unwrap(), "two copies: no one reading");
    assert_eq!(plan.steps[3].args["rate"], json!(0.05), "the goal's 5% as a fraction is the goal's");
    assert_eq!(plan.steps[4].args["amount"], json!(1000), "the goal gives 1000, and s4 did not take it");
    assert_eq!(plan.steps[5].args["amount"], json!("$s1.profit$"));
}

/// A step that repeats an earlier call is dropped, and what referenced or waited for it takes the earlier step;
/// a call with other arguments is kept.
#[test]
fn a_repeated_call_is_dropped_and_its_readers_take_the_first() {
    let mut plan = plan(json!([
        {"id": "s1", "tool": "calculator", "args": {"expression": "100*0.07"}},
        {"id": "s2", "tool": "calculator", "args": {"expression": "100*0.07"}, "depends_on": ["s1"]},
        {"id": "s3", "tool": "calculator", "args": {"expression": "100*0.15"}},
        {"id": "s4", "tool": "llm", "args": {"prompt": "Costs $$: $s2.result$ and $s3.result$"}, "depends_on": ["s2", "s1", "s3"]},
        {"id": "s5", "tool": "calculator", "args": {"expression": "100*0.07"}},
        {"id": "s6", "tool": "calculator", "args": {"expression": "$s5.result$ + 1"}}
    ]));
    let mends = drop_repeated_calls(&mut plan);
    assert_eq!(mends, ["s2: dropped, the same call as s1", "s5: dropped, the same call as s1"], "{mends:#?}");
    let ids: Vec<&str> = plan.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["s1", "s3", "s4", "s6"]);
    assert_eq!(plan.steps[2].args["prompt"], json!("Costs $$: $s1.result$ and $s3.result$"));
    assert_eq!(plan.steps[2].depends_on, ["s1", "s3"], "s2 became s1, listed once");
    assert_eq!(plan.steps[3].args["expression"], json!("$s1.result$ + 1"));
    assert!(plan.validate(&registry()).is_empty(), "{:#?}", plan.validate(&registry()));
}
