//! Benchmark data loaders and scorers (NESTFUL, BFCL) on the shared data and on hand-made predictions; no models.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};
use tandem::bench::bfcl::{self, BfclCall, BfclCase, BfclCategory, BfclSet, FailureKind};
use tandem::bench::nestful::{self, Call, ConversionError, Distractors, Location, NestfulData, NestfulSample};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data");

fn nestful_data() -> NestfulData {
    nestful::load(&Path::new(DATA).join("nestful")).expect("the shared NESTFUL data loads")
}

fn bfcl_set(category: BfclCategory) -> BfclSet {
    bfcl::load(&Path::new(DATA).join("bfcl"), category).expect("the shared BFCL data loads")
}

fn calls(value: Value) -> Vec<Call> {
    serde_json::from_value(value).expect("hand-made calls")
}

fn assert_close(actual: f64, expected: f64, what: &str) {
    assert!((actual - expected).abs() < 1e-12, "{what}: {actual} != {expected}");
}

// ---------------------------------------------------------------- NESTFUL: loading

#[test]
fn nestful_loads_every_sample_and_tool() {
    let data = nestful_data();
    assert_eq!(data.samples.len(), 169);
    assert_eq!(data.tools.len(), 64);
    assert!(data.skipped.is_empty(), "{:?}", data.skipped);
    assert!(data.samples.iter().enumerate().all(|(i, s)| s.index == i));
    assert!(data.samples.iter().all(|s| s.calls.last().is_some_and(|c| c.name == nestful::VAR_RESULT)));
    assert_eq!(data.samples.iter().map(|s| s.tool_calls().count()).sum::<usize>(), 466);
    let used: BTreeSet<&str> = data.samples.iter().flat_map(|s| s.gold_tools()).collect();
    assert_eq!(used.len(), 63);
    assert!(used.iter().all(|name| data.tools.iter().any(|t| t.name == *name)));
}

#[test]
fn nestful_reports_doubtful_gold_sequences_as_warnings() {
    let data = nestful_data();
    let at = |sample: usize| data.warnings.iter().filter(move |w| w.location == Location::Sample(sample));
    // Sample 45 labels two calls `var3` (the second should be `var4`, which var_result references).
    assert!(at(45).any(|w| w.reason.contains("reuses the label 'var3'")));
    assert!(at(45).any(|w| w.reason.contains("$var4$")));
    // Samples 103 and 104 name a `$var3$` in var_result that no call defines.
    assert!(at(103).any(|w| w.reason.contains("$var3$")));
    assert!(at(104).any(|w| w.reason.contains("$var3$")));
    // A price range `$100-$200` reads as a reference to a step `100-` in our syntax: worth knowing.
    assert!(at(147).any(|w| w.reason.contains("'100-'")));
    assert!(data.warnings.iter().all(|w| w.file.ends_with(nestful::DATA_FILE)));
}

#[test]
fn nestful_tools_become_json_schema() {
    let data = nestful_data();
    let tool = |name: &str| data.tools.iter().find(|t| t.name == name).expect(name).clone();
    assert_eq!(
        tool("analyze_sentiment").parameters,
        json!({"type": "object", "properties": {"text": {"type": "string", "description": "The text to be analyzed"}},
               "required": ["text"]})
    );
    let recipes = tool("search_recipes").parameters;
    assert_eq!(recipes["properties"]["diet"]["enum"], json!(["vegetarian", "vegan", "gluten-free", "dairy-free"]));
    assert!(recipes["properties"]["diet"].get("allowed_values").is_none());
    assert!(recipes["required"].as_array().unwrap().contains(&json!("ingredients")));
    assert!(!recipes["required"].as_array().unwrap().contains(&json!("diet")));
    // An object parameter: its own `"required": true` goes to the parent, nothing boolean stays inside.
    let stock = tool("analyze_stock_market").parameters;
    assert!(stock["properties"]["date_range"].get("required").is_none());
    assert_eq!(stock["properties"]["date_range"]["properties"]["start_date"]["type"], "string");
    // `format` on an array means nothing and is dropped; on a string it stays.
    let todo = tool("create_todo").parameters;
    assert!(todo["properties"]["items"].get("format").is_none());
    assert_eq!(todo["properties"]["due_date"]["format"], "date");
    // Output fields are what plans reference; `file` has no JSON type and is left untyped.
    let spec = tool("calculate_route").tool_spec();
    assert_eq!(spec.args_schema["additionalProperties"], json!(false));
    let fields = spec.output_fields().expect("declared outputs");
    assert_eq!(fields[0].name, "best_route");
    assert_eq!(fields[0].json_type.as_deref(), Some("array"));
    let audio = tool("record_audio").tool_spec().output_fields().expect("declared outputs");
    assert_eq!((audio[0].name.as_str(), audio[0].json_type.as_deref()), ("audio_file", None));
}

#[test]
fn nestful_malformed_samples_and_lines_are_reported_not_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let good = json!({"input": "q", "output": [{"name": "f", "arguments": {"a": 1}, "label": "var1"},
                                              {"name": "var_result", "arguments": {"r": "$var1$"}}]});
    let dangling = json!({"input": "q", "output": [{"name": "f", "arguments": {"a": "$var7.x$"}, "label": "var1"}]});
    let samples = json!([good, 5, {"input": "no output"}, {"input": "empty", "output": []},
                         {"input": "unlabelled", "output": [{"name": "f", "arguments": {}}]}, dangling]);
    std::fs::write(dir.path().join(nestful::DATA_FILE), samples.to_string()).unwrap();
    // The catalogue as one object per line, to exercise line numbers.
    let tool = r#"{"name": "f", "description": "d", "query_parameters": {"a": {"type": "integer", "required": true}}, "output_parameters": {"x": {"type": "number"}}}"#;
    let spec = format!(
        "{tool}\n{{\n{}\n\n{tool}\n",
        r#"{"name": "g", "query_parameters": {"a": 3}, "output_parameters": {}}"#
    );
    std::fs::write(dir.path().join(nestful::SPEC_FILE), spec).unwrap();

    let data = nestful::load(dir.path()).unwrap();
    assert_eq!(data.samples.iter().map(|s| s.index).collect::<Vec<_>>(), [0, 5]);
    let skipped: Vec<Location> = data.skipped.iter().map(|s| s.location).collect();
    assert_eq!(
        skipped,
        [
            Location::Sample(1),
            Location::Sample(2),
            Location::Sample(3),
            Location::Sample(4),
            Location::Line(2),
            Location::Line(3),
            Location::Line(5)
        ]
    );
    let reasons: Vec<&str> = data.skipped.iter().map(|s| s.reason.as_str()).collect();
    assert!(reasons[1].contains("missing field `output`"), "{}", reasons[1]);
    assert!(reasons[2].contains("empty"));
    assert!(reasons[3].contains("no label"));
    assert!(reasons[4].contains("not valid JSON"));
    assert!(reasons[5].contains("parameter 'a' of 'g' is not an object"));
    assert!(reasons[6].contains("a second tool named 'f'"));
    assert!(data.skipped[4].to_string().contains(&format!("{}:2: ", nestful::SPEC_FILE)));
    assert_eq!(data.tools.len(), 1);
    assert_eq!(data.warnings.len(), 1);
    assert_eq!(data.warnings[0].location, Location::Sample(5));
}

#[test]
fn nestful_unreadable_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = nestful::load(dir.path()).unwrap_err();
    assert!(missing.to_string().contains("*-data.json") && missing.to_string().contains("--data"), "{missing}");
    std::fs::write(dir.path().join(nestful::DATA_FILE), "[{\"input\": ").unwrap();
    let broken = nestful::load(dir.path()).unwrap_err().to_string();
    assert!(broken.contains("not valid JSON") && broken.contains("line 1"), "{broken}");
}

// ---------------------------------------------------------------- NESTFUL: plans

#[test]
fn nestful_gold_round_trips_through_plans() {
    let data = nestful_data();
    let mut duplicate_labels = Vec::new();
    for sample in &data.samples {
        match nestful::calls_to_plan(&sample.input, &sample.calls) {
            Ok(plan) => {
                assert_eq!(plan.goal, sample.input);
                assert_eq!(plan.steps.len(), sample.tool_calls().count());
                let back = nestful::plan_to_calls(&plan);
                // var_result names the answer and is no step, so the round trip gives the tool calls.
                let gold: Vec<Call> = sample.tool_calls().cloned().collect();
                assert_eq!(back, gold, "sample {}", sample.index);
                if sample.index == 0 {
                    // Labels are step ids and references survive unchanged, so they are dependencies.
                    assert_eq!(plan.step("var3").unwrap().dependencies(), ["var1"]);
                }
            }
            Err(ConversionError::DuplicateLabel { label }) => duplicate_labels.push((sample.index, label)),
            Err(other) => panic!("sample {}: {other}", sample.index),
        }
    }
    assert_eq!(duplicate_labels, [(45, "var3".to_string())]);
}

#[test]
fn nestful_plan_conversion_rejects_unlabelled_calls() {
    let err = nestful::calls_to_plan("g", &calls(json!([{"name": "f", "arguments": {}}]))).unwrap_err();
    assert_eq!(err, ConversionError::MissingLabel { position: 0, name: "f".into() });
}

// ---------------------------------------------------------------- NESTFUL: scores

/// Sample 0's gold: calculate_route (var1), find_song_lyrics (var2), calculate_pace($var1.distance$,
/// $var1.time$) (var3), var_result.
fn sample0(data: &NestfulData) -> &NestfulSample {
    &data.samples[0]
}

#[test]
fn nestful_perfect_predictions_score_one_everywhere() {
    let data = nestful_data();
    let scores: Vec<_> = data.samples.iter().map(|s| nestful::score_sample(&s.calls, &s.calls)).collect();
    let summary = nestful::summarize(&scores);
    assert_eq!(summary.samples, 169);
    for (what, value) in [
        ("f1 functions", summary.functions.f1),
        ("precision functions", summary.functions.precision),
        ("recall functions", summary.functions.recall),
        ("f1 parameters", summary.parameters.f1),
        ("precision parameters", summary.parameters.precision),
        ("recall parameters", summary.parameters.recall),
        ("partial", summary.partial_sequence_accuracy),
        ("full", summary.full_sequence_accuracy),
    ] {
        assert_close(value, 1.0, what);
    }
}

#[test]
fn nestful_slots_are_written_like_python_str() {
    let data = nestful_data();
    let score = nestful::score_sample(&sample0(&data).calls, &[]);
    // Rows follow function names in sorted order: calculate_pace, calculate_route, find_song_lyrics.
    assert_eq!(
        score.gold_parameters[0],
        ["distance = $calculate_route.distance$", "time = $calculate_route.time$"],
        "references are grounded to the function that carries the label"
    );
    assert_eq!(
        score.gold_parameters[1],
        ["locations = ['New York', 'Boston', 'Philadelphia']", "mode_of_transport = car", "optimize_route = time"]
    );
    assert_eq!(score.gold_functions, ["calculate_route", "find_song_lyrics", "calculate_pace"]);

    let typed = calls(json!([{"name": "f", "label": "var1", "arguments": {
        "a": 2.0, "b": 5, "c": true, "d": null, "e": "it's", "f": ["it's", 1e-5, 1e16], "g": {"k": [1, 2.5]}}}]));
    let score = nestful::score_sample(&typed, &typed);
    assert_eq!(
        score.gold_parameters[0],
        ["a = 2.0", "b = 5", "c = True", "d = None", "e = it's", "f = [\"it's\", 1e-05, 1e+16]", "g = {'k': [1, 2.5]}"]
    );
    assert_eq!(score.aligned_gold, [format!("f({})", score.gold_parameters[0].join(", "))]);
}

#[test]
fn nestful_other_labels_with_the_same_wiring_score_as_gold() {
    let data = nestful_data();
    let gold = &sample0(&data).calls;
    // Our step ids instead of var1..var3, steps written as a plan, no var_result.
    let relabelled = calls(json!([
        {"name": "calculate_route", "label": "s1",
         "arguments": {"locations": ["New York", "Boston", "Philadelphia"], "mode_of_transport": "car", "optimize_route": "time"}},
        {"name": "find_song_lyrics", "label": "s2", "arguments": {"title": "Bohemian Rhapsody", "artist": "Queen"}},
        {"name": "calculate_pace", "label": "s3", "arguments": {"time": "$s1.time$", "distance": "$s1.distance"}}
    ]));
    // Argument order does not matter, and `$s1.distance` gets its closing `$` (the scorer's repair).
    let score = nestful::score_sample(gold, &relabelled);
    assert!(score.full_sequence_match, "{:?} vs {:?}", score.aligned_gold, score.aligned_predicted);
    let summary = nestful::summarize(&[score]);
    assert_close(summary.functions.f1, 1.0, "f1 functions");
    assert_close(summary.parameters.f1, 1.0, "f1 parameters");

    // Through a plan and back: the same.
    let plan = nestful::calls_to_plan("goal", &relabelled).unwrap();
    assert!(nestful::score_sample(gold, &nestful::plan_to_calls(&plan)).full_sequence_match);

    // Swapping which labels are which (var2 now names the route) must not fool the grounding.
    let miswired = calls(json!([
        {"name": "calculate_route", "label": "var2",
         "arguments": {"locations": ["New York", "Boston", "Philadelphia"], "mode_of_transport": "car", "optimize_route": "time"}},
        {"name": "find_song_lyrics", "label": "var1", "arguments": {"artist": "Queen", "title": "Bohemian Rhapsody"}},
        {"name": "calculate_pace", "label": "var3", "arguments": {"distance": "$var1.distance$", "time": "$var1.time$"}}
    ]));
    let score = nestful::score_sample(gold, &miswired);
    assert_close(score.partial_sequence_accuracy, 2.0 / 3.0, "miswired partial");
    assert!(score.aligned_predicted[2].contains("$find_song_lyrics.distance$"));
}

#[test]
fn nestful_partial_predictions_match_hand_computed_scores() {
    let data = nestful_data();
    let gold = &sample0(&data).calls;
    let route = json!({"locations": ["New York", "Boston", "Philadelphia"], "mode_of_transport": "car", "optimize_route": "time"});
    // A: the lyrics call is missing.
    let a = calls(json!([
        {"name": "calculate_route", "label": "s1", "arguments": route},
        {"name": "calculate_pace", "label": "s2", "arguments": {"distance": "$s1.distance$", "time": "$s1.time$"}}
    ]));
    // B: all three calls, but `bike` for `car` and the pace's distance taken from the lyrics call.
    let mut bike = route.clone();
    bike["mode_of_transport"] = json!("bike");
    let b = calls(json!([
        {"name": "calculate_route", "label": "s1", "arguments": bike},
        {"name": "find_song_lyrics", "label": "s2", "arguments": {"artist": "Queen", "title": "Bohemian Rhapsody"}},
        {"name": "calculate_pace", "label": "s3", "arguments": {"distance": "$s2.distance$", "time": "$s1.time$"}}
    ]));

    // A: lengths 3 vs 2, so align by name: route=route, lyrics vs pace → (lyrics, gap), pace=pace.
    // 3 positions, 2 agree → 2/3.
    let score_a = nestful::score_sample(gold, &a);
    assert_eq!(score_a.aligned_predicted[1], "");
    assert_close(score_a.partial_sequence_accuracy, 2.0 / 3.0, "A partial");
    assert!(!score_a.full_sequence_match);
    // A alone: function classes route (TP), lyrics (FN), pace (TP) → F1 (1 + 0 + 1) / 3; precision of lyrics is
    // 0 (never predicted), so precision is 2/3 too. Parameters: 7 gold slots, the 2 lyrics slots missed → 5/7.
    let alone = nestful::summarize(std::slice::from_ref(&score_a));
    assert_close(alone.functions.f1, 2.0 / 3.0, "A f1 functions");
    assert_close(alone.functions.precision, 2.0 / 3.0, "A precision functions");
    assert_close(alone.functions.recall, 2.0 / 3.0, "A recall functions");
    assert_close(alone.parameters.f1, 5.0 / 7.0, "A f1 parameters");

    // B: equal lengths, positional: route differs (bike), lyrics agrees, pace differs (grounded distance) → 1/3.
    let score_b = nestful::score_sample(gold, &b);
    assert_close(score_b.partial_sequence_accuracy, 1.0 / 3.0, "B partial");

    // A and B together (corpus-level macro F1):
    // functions: route TP 2 → 1; lyrics TP 1 FN 1 → 2/3; pace TP 2 → 1; mean 8/9.
    // parameters (gold slots are the classes; `bike` and `$find_song_lyrics.distance$` are not classes):
    //   pace.distance TP1 FN1 → 2/3; pace.time TP2 → 1; locations TP2 → 1; mode=car TP1 FN1 → 2/3;
    //   optimize_route TP2 → 1; artist TP1 FN1 → 2/3; title TP1 FN1 → 2/3; mean (4·2/3 + 3) / 7 = 17/21.
    // partial: (2/3 + 1/3) / 2 = 1/2; full: 0.
    let both = nestful::summarize(&[score_a, score_b]);
    assert_eq!(both.samples, 2);
    assert_close(both.functions.f1, 8.0 / 9.0, "A+B f1 functions");
    assert_close(both.parameters.f1, 17.0 / 21.0, "A+B f1 parameters");
    assert_close(both.partial_sequence_accuracy, 0.5, "A+B partial");
    assert_close(both.full_sequence_accuracy, 0.0, "A+B full");
}

#[test]
fn nestful_edge_predictions() {
    let data = nestful_data();
    let gold = &sample0(&data).calls;
    // Nothing predicted: every gold call pairs with a gap.
    let empty = nestful::score_sample(gold, &[]);
    assert_eq!(empty.aligned_gold.len(), 3);
    assert_close(empty.partial_sequence_accuracy, 0.0, "empty partial");
    // An extra call after a perfect sequence: 3 of 4 positions agree.
    let mut extra: Vec<Call> = sample0(&data).tool_calls().cloned().collect();
    extra.push(calls(json!([{"name": "get_random_joke", "label": "var9", "arguments": {}}])).remove(0));
    let score = nestful::score_sample(gold, &extra);
    assert_close(score.partial_sequence_accuracy, 0.75, "extra partial");
    // Hallucinated function names are no gold class: precision does not drop (sklearn ignores unknown labels).
    let summary = nestful::summarize(&[score]);
    assert_close(summary.functions.precision, 1.0, "extra precision");
    // Python's str makes "5" and 5 the same slot, as in the scorer.
    let five = calls(json!([{"name": "f", "label": "var1", "arguments": {"n": 5}}]));
    let five_text = calls(json!([{"name": "f", "label": "var1", "arguments": {"n": "5"}}]));
    assert!(nestful::score_sample(&five, &five_text).full_sequence_match);
    assert_eq!(nestful::summarize(&[]), nestful::NestfulSummary::default());
}

#[test]
fn nestful_distractor_catalogues_are_deterministic() {
    let data = nestful_data();
    let sample = sample0(&data);
    let names = |tools: &[nestful::NestfulTool]| tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    let first = names(&nestful::distractor_catalogue(sample, &data.tools, Distractors::Count(5), 7).unwrap());
    let again = names(&nestful::distractor_catalogue(sample, &data.tools, Distractors::Count(5), 7).unwrap());
    assert_eq!(first, again);
    assert_eq!(first.len(), 3 + 5);
    assert!(sample.gold_tools().iter().all(|g| first.iter().any(|n| n == g)));
    assert!(first.windows(2).all(|w| w[0] < w[1]), "sorted by name: {first:?}");
    let draws: BTreeSet<Vec<String>> = (0..20)
        .map(|seed| names(&nestful::distractor_catalogue(sample, &data.tools, Distractors::Count(5), seed).unwrap()))
        .collect();
    assert!(draws.len() > 10, "seeds should change the draw: {}", draws.len());
    let gold_only = nestful::distractor_catalogue(sample, &data.tools, Distractors::Count(0), 7).unwrap();
    assert_eq!(names(&gold_only), ["calculate_pace", "calculate_route", "find_song_lyrics"]);
    let whole = nestful::distractor_catalogue(sample, &data.tools, Distractors::WholeCatalogue, 7).unwrap();
    assert_eq!(whole.len(), 64);
    let capped = nestful::distractor_catalogue(sample, &data.tools, Distractors::Count(1000), 7).unwrap();
    assert_eq!(capped.len(), 64);
    let unknown = nestful::distractor_catalogue(sample, &data.tools[..1], Distractors::Count(1), 7).unwrap_err();
    assert!(unknown.to_string().contains("sample 0"), "{unknown}");
}

// ---------------------------------------------------------------- BFCL: loading

#[test]
fn bfcl_loads_both_categories_with_an_answer_for_every_question() {
    let simple = bfcl_set(BfclCategory::SimplePython);
    assert_eq!(simple.cases.len(), 400);
    assert!(simple.skipped.is_empty(), "{:?}", simple.skipped);
    assert!(simple.cases.iter().all(|c| c.question.functions.len() == 1 && c.answer.id == c.question.id));
    assert_eq!(simple.cases[0].question.id, "simple_python_0");
    assert!(simple.cases[0].question.user_prompt().unwrap().starts_with("Find the area of a triangle"));

    let multiple = bfcl_set(BfclCategory::Multiple);
    assert_eq!(multiple.cases.len(), 200);
    assert!(multiple.skipped.is_empty(), "{:?}", multiple.skipped);
    assert_eq!(multiple.cases.iter().map(|c| c.question.functions.len()).sum::<usize>(), 557);
    for case in simple.cases.iter().chain(&multiple.cases) {
        assert_eq!(case.answer.calls.len(), 1, "{}", case.question.id);
        assert!(case.question.function(&case.answer.calls[0].name).is_some(), "{}", case.question.id);
    }
}

#[test]
fn bfcl_function_docs_become_json_schema() {
    let simple = bfcl_set(BfclCategory::SimplePython);
    let multiple = bfcl_set(BfclCategory::Multiple);
    let function = |set: &BfclSet, id: &str, name: &str| {
        let case = set.cases.iter().find(|c| c.question.id == id).expect(id);
        case.question.function(name).expect(name).clone()
    };
    let triangle = function(&simple, "simple_python_0", "calculate_triangle_area").json_schema();
    assert_eq!(triangle["type"], "object");
    assert_eq!(triangle["properties"]["base"]["type"], "integer");
    assert_eq!(triangle["required"], json!(["base", "height"]));
    // tuple → array, float → number.
    let weather = function(&multiple, "multiple_5", "weather.get_by_coordinates_date").json_schema();
    assert_eq!(weather["properties"]["coordinates"]["type"], "array");
    assert_eq!(weather["properties"]["coordinates"]["items"], json!({"type": "number"}));
    assert_eq!(weather["properties"]["date"]["format"], "date");
    // any → no type constraint.
    let forest = function(&simple, "simple_python_109", "random_forest.train").json_schema();
    assert!(forest["properties"]["data"].get("type").is_none());
    assert!(forest["properties"]["data"].get("description").is_some());
    // dict inside array items → object, nested properties converted, enum kept.
    let query = function(&simple, "simple_python_96", "database.query").json_schema();
    let item = &query["properties"]["conditions"]["items"];
    assert_eq!(item["type"], "object");
    assert_eq!(item["properties"]["operation"]["enum"], json!(["<", ">", "=", ">=", "<="]));
    // BFCL's `optional` flag goes; the tool spec closes the object.
    let triangle_get = function(&multiple, "multiple_0", "triangle_properties.get");
    assert!(triangle_get.json_schema()["properties"]["get_area"].get("optional").is_none());
    assert_eq!(triangle_get.tool_spec().args_schema["additionalProperties"], json!(false));
    assert_eq!(bfcl::json_schema_type("dict"), Some("object"));
    assert_eq!(bfcl::json_schema_type("float"), Some("number"));
    assert_eq!(bfcl::json_schema_type("tuple"), Some("array"));
    assert_eq!(bfcl::json_schema_type("any"), None);
}

#[test]
fn bfcl_malformed_lines_are_reported_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let question = |id: &str, ty: &str| {
        json!({"id": id, "question": [[{"role": "user", "content": "q"}]],
               "function": [{"name": "f", "description": "d",
                             "parameters": {"type": "dict", "properties": {"x": {"type": ty}}, "required": ["x"]}}]})
        .to_string()
    };
    let questions = [
        question("q1", "integer"),
        "not json".into(),
        question("q3", "complex"),
        question("q4", "integer"),
        String::new(),
        r#"{"id": "q6"}"#.into(),
    ]
    .join("\n");
    let answer = |id: &str| json!({"id": id, "ground_truth": [{"f": {"x": [1]}}]}).to_string();
    let answers = [answer("q1"), answer("q9"), answer("q3"), answer("q1")].join("\n");
    let file = BfclCategory::SimplePython.file_name();
    std::fs::write(dir.path().join(&file), questions).unwrap();
    std::fs::create_dir(dir.path().join("possible_answer")).unwrap();
    std::fs::write(dir.path().join("possible_answer").join(&file), answers).unwrap();

    let set = bfcl::load(dir.path(), BfclCategory::SimplePython).unwrap();
    assert_eq!(set.cases.len(), 1);
    let found: BTreeSet<(bool, Location)> =
        set.skipped.iter().map(|s| (s.file.parent().unwrap().ends_with("possible_answer"), s.location)).collect();
    let expected: BTreeSet<(bool, Location)> = [
        (false, Location::Line(2)), // not JSON
        (false, Location::Line(3)), // unknown type `complex`
        (false, Location::Line(4)), // no answer
        (false, Location::Line(6)), // missing fields
        (true, Location::Line(2)),  // answer without question
        (true, Location::Line(3)),  // its question was skipped
        (true, Location::Line(4)),  // a second answer for q1
    ]
    .into();
    assert_eq!(found, expected, "{:#?}", set.skipped);
    let text: Vec<String> = set.skipped.iter().map(ToString::to_string).collect();
    assert!(text.iter().any(|t| t.contains(&format!("{file}:3: ")) && t.contains("complex")), "{text:#?}");
    assert!(text.iter().any(|t| t.contains("a second answer for 'q1'")), "{text:#?}");
}

// ---------------------------------------------------------------- BFCL: checking

fn call(name: &str, arguments: Value) -> BfclCall {
    let Value::Object(arguments) = arguments else { panic!("arguments must be an object") };
    BfclCall { name: name.into(), arguments }
}

fn failure(case: &BfclCase, predicted: &[BfclCall]) -> Option<FailureKind> {
    bfcl::check(case, predicted).failure.map(|f| f.kind)
}

/// A one-function case from a BFCL parameter doc and accepted values.
fn case(properties: Value, required: &[&str], accepted: Value) -> BfclCase {
    let question = json!({"id": "t", "turns": [], "functions": [{"name": "f", "description": "",
        "parameters": {"type": "dict", "properties": properties, "required": required}}]});
    let Value::Object(accepted) = accepted else { panic!("accepted must be an object") };
    let accepted: Vec<(String, Vec<Value>)> =
        accepted.into_iter().map(|(k, v)| (k, v.as_array().cloned().expect("a list of values"))).collect();
    BfclCase {
        category: BfclCategory::SimplePython,
        question: serde_json::from_value(question).unwrap(),
        answer: bfcl::BfclAnswer { id: "t".into(), calls: vec![bfcl::ExpectedCall { name: "f".into(), accepted }] },
    }
}

/// The first accepted value that is not the optional marker `""`.
fn first_accepted(values: &[Value]) -> Option<Value> {
    values.iter().find(|v| v.as_str() != Some("")).map(concrete)
}

/// An accepted value as a model would write it: accepted dicts map keys to lists of accepted values, so take the
/// first of each (also inside lists of dicts).
fn concrete(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            Value::Object(map.iter().filter_map(|(k, v)| Some((k.clone(), first_accepted(v.as_array()?)?))).collect())
        }
        Value::Array(items) if items.iter().any(Value::is_object) => Value::Array(items.iter().map(concrete).collect()),
        other => other.clone(),
    }
}

/// A prediction built from the answer: each parameter's first accepted value, optional-only ones left out.
fn prediction_from_answer(case: &BfclCase) -> BfclCall {
    let expected = &case.answer.calls[0];
    let arguments: Map<String, Value> =
        expected.accepted.iter().filter_map(|(name, values)| Some((name.clone(), first_accepted(values)?))).collect();
    BfclCall { name: expected.name.clone(), arguments }
}

#[test]
fn bfcl_accepts_every_possible_answer() {
    for category in [BfclCategory::SimplePython, BfclCategory::Multiple] {
        let set = bfcl_set(category);
        let verdicts: Vec<_> =
            set.cases.iter().map(|case| bfcl::check(case, &[prediction_from_answer(case)])).collect();
        let failed: Vec<_> = verdicts.iter().filter(|v| !v.passed()).collect();
        assert!(failed.is_empty(), "{failed:#?}");
        let summary = bfcl::summarize(&verdicts);
        assert_eq!((summary.total, summary.passed, summary.accuracy), (set.cases.len(), set.cases.len(), 1.0));
    }
}

#[test]
fn bfcl_checks_name_count_required_and_unknown_parameters() {
    let set = bfcl_set(BfclCategory::SimplePython);
    // calculate_triangle_area: base [10], height [5], unit ["units", ""] (optional); base and height required.
    let triangle = &set.cases[0];
    let ok = call("calculate_triangle_area", json!({"base": 10, "height": 5}));
    assert_eq!(failure(triangle, std::slice::from_ref(&ok)), None, "unit may be omitted");
    let with_unit = call("calculate_triangle_area", json!({"base": 10, "height": 5, "unit": "units"}));
    assert_eq!(failure(triangle, &[with_unit]), None);
    assert_eq!(failure(triangle, &[]), Some(FailureKind::SimpleWrongCount));
    assert_eq!(failure(triangle, &[ok.clone(), ok]), Some(FailureKind::SimpleWrongCount));
    let renamed = call("triangle_area", json!({"base": 10, "height": 5}));
    assert_eq!(failure(triangle, &[renamed]), Some(FailureKind::WrongFunctionName));
    let missing = call("calculate_triangle_area", json!({"base": 10}));
    let verdict = bfcl::check(triangle, &[missing]);
    let reason = verdict.failure.expect("missing height fails");
    assert_eq!(
        (reason.kind, reason.reason.as_str()),
        (FailureKind::MissingRequired, "Missing required parameter: 'height'.")
    );
    let extra = call("calculate_triangle_area", json!({"base": 10, "height": 5, "color": "red"}));
    assert_eq!(failure(triangle, &[extra]), Some(FailureKind::UnexpectedParameter));
    let wrong_value = call("calculate_triangle_area", json!({"base": 10, "height": 6}));
    assert_eq!(failure(triangle, &[wrong_value]), Some(FailureKind::OtherValue));
    let float_for_int = call("calculate_triangle_area", json!({"base": 10.0, "height": 5}));
    assert_eq!(failure(triangle, &[float_for_int]), Some(FailureKind::SimpleType));
    let text_for_int = call("calculate_triangle_area", json!({"base": "10", "height": 5}));
    assert_eq!(failure(triangle, &[text_for_int]), Some(FailureKind::SimpleType));
    assert_eq!(FailureKind::SimpleType.error_type(), "type_error:simple");

    // multiple: the right function among several; another documented function is a wrong name.
    let multiple = bfcl_set(BfclCategory::Multiple);
    let triangle_get = &multiple.cases[0];
    let circle = call("circle_properties.get", json!({"radius": 3.0}));
    assert_eq!(failure(triangle_get, std::slice::from_ref(&circle)), Some(FailureKind::WrongFunctionName));
    assert_eq!(failure(triangle_get, &[]), Some(FailureKind::MultipleWrongCount));
    let right = call("triangle_properties.get", json!({"side1": 5, "side2": 4, "side3": 3, "get_area": true}));
    assert_eq!(failure(triangle_get, &[right]), None);
}

#[test]
fn bfcl_accepts_ints_for_floats_only_at_the_top_level() {
    let radius = case(json!({"radius": {"type": "float"}}), &["radius"], json!({"radius": [5.0]}));
    assert_eq!(failure(&radius, &[call("f", json!({"radius": 5}))]), None);
    assert_eq!(failure(&radius, &[call("f", json!({"radius": 5.0}))]), None);
    assert_eq!(failure(&radius, &[call("f", json!({"radius": 5.5}))]), Some(FailureKind::OtherValue));
    assert_eq!(failure(&radius, &[call("f", json!({"radius": "5"}))]), Some(FailureKind::SimpleType));
    assert_eq!(failure(&radius, &[call("f", json!({"radius": true}))]), Some(FailureKind::SimpleType));
    // Inside a list BFCL converts nothing: [1, 3] against float items and [[1.0, 3.0]] fails the nested check.
    let interval =
        case(json!({"v": {"type": "array", "items": {"type": "float"}}}), &["v"], json!({"v": [[1.0, 3.0]]}));
    assert_eq!(failure(&interval, &[call("f", json!({"v": [1.0, 3.0]}))]), None);
    assert_eq!(failure(&interval, &[call("f", json!({"v": [1, 3]}))]), Some(FailureKind::NestedType));
    assert_eq!(failure(&interval, &[call("f", json!({"v": [3.0, 1.0]}))]), Some(FailureKind::ListValue));
    // Ints written in the answer are fine for ints given: the element type may be the answer's own.
    let ints = case(json!({"v": {"type": "array", "items": {"type": "float"}}}), &["v"], json!({"v": [[1, 3]]}));
    assert_eq!(failure(&ints, &[call("f", json!({"v": [1, 3]}))]), None);
}

#[test]
fn bfcl_normalises_strings_as_bfcl_does() {
    let city = case(
        json!({"city": {"type": "string"}, "date": {"type": "string"}}),
        &["city"],
        json!({"city": ["New York, NY", "NYC"], "date": ["April 1, 2024", ""]}),
    );
    for given in ["new york ny", "NEW-YORK_NY", "New York,NY.", "nyc"] {
        assert_eq!(failure(&city, &[call("f", json!({"city": given}))]), None, "{given}");
    }
    let brooklyn = failure(&city, &[call("f", json!({"city": "Brooklyn"}))]);
    assert_eq!(brooklyn, Some(FailureKind::StringValue));
    assert_eq!(failure(&city, &[call("f", json!({"city": "NYC", "date": "april 1 2024"}))]), None);
    assert_eq!(
        failure(&city, &[call("f", json!({"city": "NYC", "date": "2024-04-01"}))]),
        Some(FailureKind::StringValue)
    );
    // `'` and `"` are the same after standardising; other punctuation (`!`) is not dropped.
    let quote = case(json!({"s": {"type": "string"}}), &["s"], json!({"s": ["it's"]}));
    assert_eq!(failure(&quote, &[call("f", json!({"s": "IT\"S"}))]), None);
    assert_eq!(failure(&quote, &[call("f", json!({"s": "it's!"}))]), Some(FailureKind::StringValue));
    assert_eq!(bfcl::standardize("April 1, 2024 - 5/6 * x^2_y."), "april1202456x2y");
}

#[test]
fn bfcl_optional_parameters_may_be_omitted_only_when_marked() {
    let doc = json!({"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "boolean"}});
    // `b` is not required by the doc, but the answer lists it without "": BFCL insists on it.
    let strict = case(doc.clone(), &["a"], json!({"a": [1], "b": [2], "c": ["", true]}));
    assert_eq!(failure(&strict, &[call("f", json!({"a": 1, "b": 2}))]), None);
    assert_eq!(failure(&strict, &[call("f", json!({"a": 1}))]), Some(FailureKind::MissingOptional));
    assert_eq!(failure(&strict, &[call("f", json!({"a": 1, "b": 2, "c": true}))]), None);
    assert_eq!(failure(&strict, &[call("f", json!({"a": 1, "b": 2, "c": false}))]), Some(FailureKind::OtherValue));
    // A documented parameter the answer does not list is unexpected.
    let narrow = case(doc, &["a"], json!({"a": [1]}));
    assert_eq!(failure(&narrow, &[call("f", json!({"a": 1, "b": 2}))]), Some(FailureKind::UnexpectedParameter));
}

#[test]
fn bfcl_compares_lists_and_dicts_element_wise() {
    let cities = case(
        json!({"cities": {"type": "array", "items": {"type": "string"}}}),
        &["cities"],
        json!({"cities": [["New York", "Boston"], ["NYC", "Boston"]]}),
    );
    assert_eq!(failure(&cities, &[call("f", json!({"cities": ["new york", "BOSTON"]}))]), None);
    assert_eq!(failure(&cities, &[call("f", json!({"cities": ["nyc", "boston"]}))]), None);
    assert_eq!(failure(&cities, &[call("f", json!({"cities": ["Boston", "New York"]}))]), Some(FailureKind::ListValue));
    assert_eq!(failure(&cities, &[call("f", json!({"cities": ["New York"]}))]), Some(FailureKind::ListValue));
    assert_eq!(failure(&cities, &[call("f", json!({"cities": ["New York", 5]}))]), Some(FailureKind::NestedType));

    let range = case(
        json!({"range": {"type": "dict", "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}}}}),
        &["range"],
        json!({"range": [{"min": [1], "max": [10, ""], "unit": ["Euro", "EUR"]}]}),
    );
    assert_eq!(failure(&range, &[call("f", json!({"range": {"min": 1, "max": 10, "unit": "eur"}}))]), None);
    assert_eq!(failure(&range, &[call("f", json!({"range": {"min": 1, "unit": "euro"}}))]), None);
    assert_eq!(failure(&range, &[call("f", json!({"range": {"min": 1}}))]), Some(FailureKind::DictKey));
    assert_eq!(
        failure(&range, &[call("f", json!({"range": {"min": 2, "unit": "EUR"}}))]),
        Some(FailureKind::DictValue)
    );
    let extra_key = call("f", json!({"range": {"min": 1, "unit": "EUR", "step": 1}}));
    assert_eq!(failure(&range, &[extra_key]), Some(FailureKind::DictKey));

    let conditions = case(
        json!({"conditions": {"type": "array", "items": {"type": "dict", "properties": {}}}}),
        &["conditions"],
        json!({"conditions": [[{"field": ["age"], "op": [">"]}, {"field": ["job"], "op": ["="]}]]}),
    );
    let both = json!([{"field": "Age", "op": ">"}, {"field": "job", "op": "="}]);
    assert_eq!(failure(&conditions, &[call("f", json!({"conditions": both}))]), None);
    let one = json!([{"field": "age", "op": ">"}]);
    assert_eq!(failure(&conditions, &[call("f", json!({"conditions": one}))]), Some(FailureKind::ListDictCount));
    let swapped = json!([{"field": "job", "op": "="}, {"field": "age", "op": ">"}]);
    assert_eq!(failure(&conditions, &[call("f", json!({"conditions": swapped}))]), Some(FailureKind::DictValue));
}

#[test]
fn bfcl_variables_in_answers_are_compared_as_written() {
    // The answer writes a variable name where the doc wants a dict: a string value is then a variable,
    // compared exactly (no standardising).
    let data = case(json!({"data": {"type": "dict"}}), &["data"], json!({"data": ["my_data"]}));
    assert_eq!(failure(&data, &[call("f", json!({"data": "my_data"}))]), None);
    assert_eq!(failure(&data, &[call("f", json!({"data": "My Data"}))]), Some(FailureKind::OtherValue));
}

#[test]
fn bfcl_summary_counts_failures_by_error_type() {
    let set = bfcl_set(BfclCategory::SimplePython);
    let triangle = &set.cases[0];
    let verdicts = [
        bfcl::check(triangle, &[call("calculate_triangle_area", json!({"base": 10, "height": 5}))]),
        bfcl::check(triangle, &[call("calculate_triangle_area", json!({"base": 10}))]),
        bfcl::check(triangle, &[]),
        bfcl::check(triangle, &[call("calculate_triangle_area", json!({"base": 10, "height": 5, "unit": "cm"}))]),
    ];
    let summary = bfcl::summarize(&verdicts);
    assert_eq!((summary.total, summary.passed), (4, 1));
    assert_close(summary.accuracy, 0.25, "accuracy");
    let failures: Vec<(&str, usize)> = summary.failures.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        failures,
        [
            ("simple_function_checker:missing_required", 1),
            ("simple_function_checker:wrong_count", 1),
            ("value_error:string", 1)
        ]
    );
    assert_eq!(bfcl::summarize(&[]).accuracy, 0.0);
}

#[test]
fn bfcl_missing_data_folder_is_an_error() {
    let err = bfcl::load(&PathBuf::from("/nonexistent"), BfclCategory::Multiple).unwrap_err();
    assert!(err.to_string().contains("BFCL_v4_multiple.json"), "{err}");
}
