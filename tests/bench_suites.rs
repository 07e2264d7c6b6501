//! The benchmark suites: loaders on the shared NESTFUL and BFCL files, the scorers on hand-made predictions
//! (values worked out by hand in the comments), the built-in tasks, the pair matrix, the chart, and a small
//! real-model smoke run of each suite through `tandem bench` (one or two samples).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::real_model;
use common::runs::Scratch;
use serde_json::{json, Map, Value};
use tandem::bench::bfcl::{
    check_call, load_answers, load_questions, normalise, to_json_schema, Function,
};
use tandem::bench::chart::{scatter_svg, Point};
use tandem::bench::nestful::{
    calls_to_plan, catalogue_for, load_samples, load_tools, macro_f1, metrics, plan_to_calls,
    score_sample, Call,
};
use tandem::bench::nestful_run::{parse_catalogue_option, registry_of};
use tandem::bench::records::BenchRecorder;
use tandem::bench::tasks::{builtin_tasks, check, normalise as normalise_answer, parse_tasks};
use tandem::commands::bench_suites::{pair_matrix, Suite};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(name)
}

fn call(name: &str, args: Value, label: &str) -> Call {
    Call {
        name: name.into(),
        arguments: args.as_object().cloned().unwrap_or_default(),
        label: label.into(),
    }
}

// ---- NESTFUL ----

#[test]
fn nestful_loads_every_sample_and_tool() {
    let samples = load_samples(&data("nestful/non-executable-glaive-data.json")).unwrap();
    assert_eq!(samples.items.len(), 169);
    assert!(samples.skipped.is_empty(), "{:?}", samples.skipped);
    let tools = load_tools(&data("nestful/non-executable-glaive-spec.json")).unwrap();
    assert!(tools.skipped.is_empty());
    assert!(tools.items.len() >= 60);
    // Every gold call names a catalogue tool (or var_result), so gold+K catalogues always hold the gold tools.
    let names: BTreeSet<&str> = tools.items.iter().map(|t| t.name.as_str()).collect();
    for sample in &samples.items {
        for call in sample.gold_calls() {
            assert!(
                names.contains(call.name.as_str()),
                "sample {}: {}",
                sample.index,
                call.name
            );
        }
    }
    // The whole catalogue compiles into a registry (names, schemas and output fields are usable).
    assert_eq!(registry_of(&tools.items).unwrap().len(), tools.items.len());
}

#[test]
fn malformed_nestful_samples_are_reported_with_their_position() {
    let scratch = Scratch::new();
    let path = scratch.write(
        "data.json",
        r#"[{"input": "ok", "output": [{"name": "f", "label": "var1"}]}, {"input": 3}]"#,
    );
    let loaded = load_samples(&path).unwrap();
    assert_eq!(loaded.items.len(), 1);
    assert_eq!(loaded.skipped.len(), 1);
    assert!(
        loaded.skipped[0].contains("sample 1"),
        "{:?}",
        loaded.skipped
    );
}

#[test]
fn gold_plus_k_catalogue_is_gold_and_k_seeded_distractors() {
    let samples = load_samples(&data("nestful/non-executable-glaive-data.json")).unwrap();
    let tools = load_tools(&data("nestful/non-executable-glaive-spec.json")).unwrap();
    let sample = &samples.items[0];
    let gold: BTreeSet<String> = sample.gold_calls().into_iter().map(|c| c.name).collect();
    let picked = catalogue_for(sample, &tools.items, Some(5), 7);
    assert_eq!(picked.len(), gold.len() + 5);
    assert!(gold.iter().all(|g| picked.iter().any(|t| &t.name == g)));
    assert_eq!(
        picked,
        catalogue_for(sample, &tools.items, Some(5), 7),
        "the same seed gives the same catalogue"
    );
    assert_ne!(picked, catalogue_for(sample, &tools.items, Some(5), 8));
    assert_eq!(
        catalogue_for(sample, &tools.items, None, 7).len(),
        tools.items.len()
    );
    assert_eq!(parse_catalogue_option("gold+5").unwrap(), Some(5));
    assert_eq!(parse_catalogue_option("all").unwrap(), None);
    assert!(parse_catalogue_option("five").is_err());
}

#[test]
fn perfect_prediction_scores_one_on_every_metric() {
    let samples = load_samples(&data("nestful/non-executable-glaive-data.json")).unwrap();
    // Gold → plan (labels become step ids) → calls: the round trip is lossless, and scores 1.0 everywhere.
    let scores: Vec<_> = samples
        .items
        .iter()
        .map(|sample| {
            score_sample(
                &plan_to_calls(&calls_to_plan(&sample.input, &sample.output)),
                &sample.output,
            )
        })
        .collect();
    let m = metrics(&scores);
    assert_eq!(
        (
            m.f1_functions,
            m.f1_params,
            m.partial_sequence_accuracy,
            m.full_sequence_accuracy
        ),
        (1.0, 1.0, 1.0, 1.0)
    );
}

#[test]
fn partial_nestful_prediction_scores_as_worked_out_by_hand() {
    let gold = vec![
        call("a", json!({"x": 1}), "var1"),
        call("b", json!({"y": "$var1.out$"}), "var2"),
        call("c", json!({"z": 3}), "var3"),
        call("var_result", json!({"r": "$var3$"}), "var4"),
    ];
    // Right first call, second call with another label and a wrong value, third call missing.
    let predicted = vec![
        call("a", json!({"x": 1}), "s1"),
        call("b", json!({"y": 5}), "s2"),
    ];
    let score = score_sample(&predicted, &gold);
    // Positions: a=a (agree), b≠b (args differ), c missing → 1 of max(2, 3) = 1/3.
    assert!((score.partial_sequence - 1.0 / 3.0).abs() < 1e-12);
    assert!(!score.full_sequence);
    // Functions: gold {a,b,c}, predicted {a,b}: F1 a=1, b=1, c=0 → macro 2/3.
    let functions = macro_f1(&[(&score.gold_functions, &score.predicted_functions)]);
    assert!((functions - 2.0 / 3.0).abs() < 1e-12, "{functions}");
    // Slots: gold {x=1, y=$var1.out$, z=3}, predicted {x=1, y=5}: x=1 → 1; others 0 → macro 1/4.
    let params = macro_f1(&[(&score.gold_params, &score.predicted_params)]);
    assert!((params - 0.25).abs() < 1e-12, "{params}");
    // A reference to the first call, written with the prediction's own label, is grounded to gold's.
    let wired = vec![
        call("a", json!({"x": 1}), "s1"),
        call("b", json!({"y": "$s1.out$"}), "s2"),
        call("c", json!({"z": 3.0}), "s3"),
    ];
    let full = score_sample(&wired, &gold);
    assert!(full.full_sequence, "{full:?}");
}

// ---- BFCL ----

#[test]
fn bfcl_loads_both_categories_with_their_answers() {
    for (category, expected) in [("simple_python", 400), ("multiple", 200)] {
        let questions = load_questions(&data(&format!("bfcl/BFCL_v4_{category}.json"))).unwrap();
        assert_eq!(questions.items.len(), expected, "{category}");
        assert!(questions.skipped.is_empty());
        let (answers, skipped) = load_answers(&data(&format!(
            "bfcl/possible_answer/BFCL_v4_{category}.json"
        )))
        .unwrap();
        assert!(skipped.is_empty());
        for question in &questions.items {
            assert!(
                answers.contains_key(&question.id),
                "{} has no answer",
                question.id
            );
            for function in &question.functions {
                let text = function.parameters.to_string();
                assert!(
                    !text.contains("\"dict\"") && !text.contains("\"float\""),
                    "unmapped type in {text}"
                );
            }
        }
    }
}

fn triangle() -> (Function, Map<String, Value>) {
    let function = Function {
        name: "calculate_triangle_area".into(),
        description: String::new(),
        parameters: to_json_schema(&json!({"type": "dict", "properties": {
            "base": {"type": "integer"}, "height": {"type": "float"}, "unit": {"type": "string"}}, "required": ["base", "height"]})),
    };
    let accepted =
        json!({"calculate_triangle_area": {"base": [10], "height": [5.0], "unit": ["units", ""]}});
    (function, accepted.as_object().cloned().unwrap())
}

#[test]
fn bfcl_ast_rules_accept_and_reject_as_bfcl_does() {
    let (f, accepted) = triangle();
    let args = |v: Value| v.as_object().cloned().unwrap();
    let check = |name: &str, a: Value| check_call(name, &args(a), Some(&f), &accepted);
    assert!(
        check("calculate_triangle_area", json!({"base": 10, "height": 5})).is_ok(),
        "int for float, optional omitted"
    );
    assert!(
        check(
            "calculate_triangle_area",
            json!({"base": 10, "height": 5.0, "unit": "Units."})
        )
        .is_ok(),
        "string normalised"
    );
    assert!(check("triangle_area", json!({"base": 10, "height": 5}))
        .unwrap_err()
        .contains("expected"));
    assert!(check("calculate_triangle_area", json!({"base": 10}))
        .unwrap_err()
        .contains("required"));
    assert!(check(
        "calculate_triangle_area",
        json!({"base": 10, "height": 5, "colour": "red"})
    )
    .unwrap_err()
    .contains("unexpected"));
    assert!(
        check("calculate_triangle_area", json!({"base": 11, "height": 5}))
            .unwrap_err()
            .contains("'base'")
    );
    assert!(check(
        "calculate_triangle_area",
        json!({"base": 10, "height": 5, "unit": "cm"})
    )
    .is_err());
    assert_eq!(normalise("New York, NY"), "newyorkny");
}

// ---- tasks, records, pairs, chart ----

#[test]
fn builtin_tasks_parse_and_cover_every_category() {
    let tasks = builtin_tasks();
    assert!(tasks.len() >= 40, "{}", tasks.len());
    let categories: BTreeSet<&str> = tasks.iter().map(|t| t.category.as_str()).collect();
    assert_eq!(
        categories,
        BTreeSet::from(["arithmetic", "files", "replan", "text", "units"])
    );
    let bad = parse_tasks(
        "[[task]]\nid = \"x\"\ncategory = \"c\"\ngoal = \"g\"\n",
        Path::new("t.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(bad.contains("no check"), "{bad}");
    let typo = parse_tasks(
        "[[task]]\nid = \"x\"\ncategory = \"c\"\ngoal = \"g\"\nanswer = [\"1\"]\n",
        Path::new("t.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(typo.contains("t.toml") && typo.contains("line"), "{typo}");
}

#[test]
fn task_checks_compare_normalised_answers_and_files() {
    let tasks = builtin_tasks();
    let eggs = tasks.iter().find(|t| t.id == "arith-eggs").unwrap();
    let scratch = Scratch::new();
    assert!(check(eggs, Some("There are 79 eggs left."), &scratch.workspace()).0);
    assert!(!check(eggs, Some("78"), &scratch.workspace()).0);
    assert!(!check(eggs, None, &scratch.workspace()).0);
    assert_eq!(normalise_answer(" 22,500 Dollars"), "22500 dollars");
    let write = tasks.iter().find(|t| t.id == "files-write").unwrap();
    assert!(!check(write, None, &scratch.workspace()).0);
    std::fs::write(scratch.workspace().join("answer.txt"), "42").unwrap();
    assert!(check(write, None, &scratch.workspace()).0);
}

#[test]
fn recorder_resumes_and_reports_torn_lines() {
    let scratch = Scratch::new();
    let mut recorder = BenchRecorder::create(&scratch.path("out"), "tasks-x").unwrap();
    recorder
        .append(&json!({"sample": "a", "score": 1}))
        .unwrap();
    recorder.append(&json!({"sample": 7, "score": 0})).unwrap();
    let dir = recorder.dir().to_path_buf();
    drop(recorder);
    std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join(BenchRecorder::SAMPLES))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"sample\": \"b\""))
        .unwrap();
    let reopened = BenchRecorder::open(&dir).unwrap();
    assert!(
        reopened.is_done(&json!("a"))
            && reopened.is_done(&json!(7))
            && !reopened.is_done(&json!("b"))
    );
    let (records, bad) = reopened.records().unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(bad.len(), 1);
    assert!(bad[0].contains(":3:"), "{bad:?}");
}

#[test]
fn pair_matrix_adds_the_baselines() {
    let p = vec!["big".to_string()];
    let e = vec!["small".to_string()];
    let pairs: Vec<(String, String, String)> = pair_matrix(Suite::Tasks, &p, &e, true)
        .into_iter()
        .map(|x| (x.planner, x.executor, x.mode))
        .collect();
    let t = |a: &str, b: &str, m: &str| (a.to_string(), b.to_string(), m.to_string());
    assert_eq!(
        pairs,
        [
            t("big", "small", "plan-ahead"),
            t("big", "big", "plan-ahead"),
            t("small", "small", "plan-ahead"),
            t("small", "small", "step")
        ]
    );
    assert_eq!(pair_matrix(Suite::Tasks, &p, &e, false).len(), 1);
    assert_eq!(
        pair_matrix(Suite::Nestful, &p, &e, true).len(),
        1,
        "NESTFUL uses the planner only"
    );
}

#[test]
fn chart_places_every_pair() {
    let points = [
        Point {
            label: "a → b".into(),
            seconds: 2.0,
            quality: 0.5,
        },
        Point {
            label: "c <alone>".into(),
            seconds: 4.0,
            quality: 1.0,
        },
    ];
    let svg = scatter_svg("tasks", "success rate", &points);
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<circle").count(), 2);
    assert!(svg.contains("c &lt;alone&gt; (1.00)"));
}

// ---- real-model smoke runs ----

fn bench(scratch: &Scratch, args: &[&str]) -> (Value, String) {
    real_model("qwen2.5-coder-1.5b-instruct-q4_k_m");
    real_model("qwen2.5-coder-0.5b-instruct-q4_k_m");
    let out = scratch.path("bench");
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--threads", "2", "--out", out.to_str().unwrap()]);
    let output = scratch.tandem(&all);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(output.status.success(), "{args:?}: {stderr}");
    let dir = std::fs::read_dir(&out)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let records = std::fs::read_to_string(dir.join("samples.jsonl")).unwrap();
    (summary, records)
}

#[test]
fn smoke_bfcl_one_question_per_category() {
    let scratch = Scratch::new();
    let (summary, records) = bench(&scratch, &["bfcl", "--limit", "1"]);
    assert_eq!(summary["summary"]["samples"], 2);
    assert_eq!(records.lines().count(), 2);
    assert!(summary["models"][0]["sha256"].is_string(), "{summary}");
    // The first simple question (triangle area, base 10, height 5) is within the 0.5B's reach.
    assert_eq!(
        summary["summary"]["accuracy_simple_python"], 1.0,
        "{records}"
    );
}

#[test]
fn smoke_nestful_one_sample() {
    let scratch = Scratch::new();
    let (summary, records) = bench(&scratch, &["nestful", "--limit", "1"]);
    let record: Value = serde_json::from_str(records.lines().next().unwrap()).unwrap();
    assert_eq!(
        record["valid_plan"], true,
        "the grammar makes the plan valid: {record}"
    );
    let f1 = summary["summary"]["f1_functions"].as_f64().unwrap();
    assert!(f1 > 0.0, "{summary}");
}

#[test]
fn smoke_tasks_one_goal() {
    let scratch = Scratch::new();
    let (summary, records) = bench(&scratch, &["tasks", "--limit", "1"]);
    assert_eq!(summary["summary"]["samples"], 1);
    let record: Value = serde_json::from_str(records.lines().next().unwrap()).unwrap();
    assert_eq!(record["sample"], "arith-eggs");
    assert!(
        Path::new(record["run_log"].as_str().unwrap()).is_file(),
        "the run's audit log is kept"
    );
}
