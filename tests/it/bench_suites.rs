//! The benchmark harness: the NESTFUL catalogue option, the built-in tasks, the records, the pair matrix, the
//! chart, and a small real-model smoke run of each suite through `tandem bench` (one or two samples). The
//! NESTFUL and BFCL loaders and scorers have their own tests in `bench_scoring.rs`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common::real_model;
use crate::common::runs::Scratch;
use serde_json::{json, Value};
use tandem::bench::chart::{scatter_svg, Point};
use tandem::bench::nestful::runner::{parse_catalogue_option, registry_of};
use tandem::bench::nestful::{load, Distractors};
use tandem::bench::records::BenchRecorder;
use tandem::bench::suites::{pair_matrix, Suite};
use tandem::bench::tasks::{builtin_tasks, check, mentions, normalise as normalise_answer, parse_suite, parse_tasks};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data").join(name)
}

#[test]
fn nestful_catalogue_option_and_registry() {
    assert_eq!(parse_catalogue_option("gold+5").unwrap(), Distractors::Count(5));
    assert_eq!(parse_catalogue_option("all").unwrap(), Distractors::WholeCatalogue);
    assert!(parse_catalogue_option("five").unwrap_err().to_string().contains("gold+K"));
    // The whole catalogue compiles into a registry (names, schemas and output fields are usable by the grammar).
    let data = load(&data("nestful")).unwrap();
    assert_eq!(registry_of(&data.tools).unwrap().len(), data.tools.len());
}

// ---- tasks, records, pairs, chart ----

#[test]
fn builtin_tasks_parse_and_cover_every_category() {
    let tasks = builtin_tasks();
    assert!(tasks.len() >= 40, "{}", tasks.len());
    let categories: BTreeSet<&str> = tasks.iter().map(|t| t.category.as_str()).collect();
    assert_eq!(categories, BTreeSet::from(["arithmetic", "distractors", "files", "replan", "text", "units"]));
    let bad = parse_tasks("[[task]]\nid = \"x\"\ncategory = \"c\"\ngoal = \"g\"\n", Path::new("t.toml"))
        .unwrap_err()
        .to_string();
    assert!(bad.contains("no check"), "{bad}");
    let typo =
        parse_tasks("[[task]]\nid = \"x\"\ncategory = \"c\"\ngoal = \"g\"\nanswer = [\"1\"]\n", Path::new("t.toml"))
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
fn the_answers_dev_suite_parses_with_every_kind_of_goal() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/tasks-answers.toml");
    let tasks = parse_tasks(&std::fs::read_to_string(&path).unwrap(), &path).unwrap();
    assert!(tasks.len() >= 60, "{}", tasks.len());
    let categories: BTreeSet<&str> = tasks.iter().map(|t| t.category.as_str()).collect();
    for wanted in ["order", "percent", "conversion", "word", "equation", "workspace", "shell", "multipart", "distract"]
    {
        assert!(categories.contains(wanted), "no {wanted} goals in {categories:?}");
    }
    assert!(tasks.iter().filter(|t| t.category == "multipart").all(|t| t.answer_all.len() >= 2));
}

#[test]
fn the_mcp_suite_parses_with_its_servers_pages_and_forty_goals() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/tasks-mcp.toml");
    let suite = parse_suite(&std::fs::read_to_string(&path).unwrap(), &path).unwrap();
    assert!(suite.task.len() >= 40, "{}", suite.task.len());
    for server in ["time", "git", "files", "memory", "fetch"] {
        assert!(suite.servers.contains_key(server), "no {server} server in {:?}", suite.servers.keys());
        assert!(suite.task.iter().any(|t| t.mcp.iter().any(|m| m == server)), "no goal uses {server}");
    }
    assert!(suite.task.iter().all(|t| !t.mcp.is_empty()), "every goal of the suite uses an MCP server");
    // Every page a goal points at is served.
    for task in &suite.task {
        if let Some(at) = task.goal.find("{web}/") {
            // The address ends at a space or at the sentence's end (`…/meetup.html?`).
            let page: String = task.goal[at + 6..].chars().take_while(|c| !c.is_whitespace()).collect();
            let page = page.trim_end_matches(['?', '.', ',', '!']);
            assert!(suite.pages.contains_key(page), "task {} points at {page}, which [pages] lacks", task.id);
        }
    }
    // A task naming a server the suite does not define is refused with the names it does define.
    let bad = parse_suite(
        "[servers.a]\ncommand = \"x\"\n[[task]]\nid = \"t\"\ncategory = \"c\"\ngoal = \"g\"\nmcp = [\"b\"]\nanswer_any = [\"1\"]\n",
        Path::new("t.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(bad.contains("'b'") && bad.contains("\"a\""), "{bad}");
}

#[test]
fn the_apps_suite_and_its_held_out_twin_parse_with_checks_on_every_change() {
    let read = |name: &str| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches").join(name);
        parse_suite(&std::fs::read_to_string(&path).unwrap(), &path).unwrap()
    };
    let dev = read("tasks-apps.toml");
    assert!(dev.task.len() >= 40, "{}", dev.task.len());
    let held_out = read("tasks-apps-holdout.toml");
    assert!(held_out.task.len() >= 10, "{}", held_out.task.len());
    for server in ["todo", "db", "sheets"] {
        assert!(dev.task.iter().any(|t| t.mcp.iter().any(|m| m == server)), "no goal uses {server}");
    }
    // The held-out twin has a server the dev suite does not, and none of its goals.
    assert!(held_out.servers.keys().any(|s| !dev.servers.contains_key(s)), "{:?}", held_out.servers.keys());
    let goals: BTreeSet<&str> = dev.task.iter().map(|t| t.goal.as_str()).collect();
    assert!(held_out.task.iter().all(|t| !goals.contains(t.goal.as_str())));
    // Every goal is checked, and every change also for what it must keep (a file's other lines, other rows).
    for task in dev.task.iter().chain(&held_out.task) {
        let changes = !task.file_any.is_empty() || (task.answer_any.is_empty() && task.answer_all.is_empty());
        if changes {
            assert!(!task.file_all.is_empty() || !task.verify.is_empty(), "{} changes but keeps nothing", task.id);
        }
    }
}

#[test]
fn numbers_in_answers_must_stand_alone_and_every_part_must_be_there() {
    assert!(mentions("x = 9.", "9") && mentions("9.0 km", "9") && mentions("the 9th", "9"));
    assert!(!mentions("x = 19", "9") && !mentions("-9", "9") && !mentions("9.5", "9") && !mentions("95", "9"));
    assert!(mentions("it is -45 now", "-45") && mentions("zebra-42", "zebra-42"));
    let two_parts = parse_tasks(
        "[[task]]\nid = \"x\"\ncategory = \"c\"\ngoal = \"g\"\nanswer_all = [\"99\", \"24.75\"]\n",
        Path::new("t.toml"),
    )
    .unwrap();
    let scratch = Scratch::new();
    assert!(check(&two_parts[0], Some("99 in all, 24.75 each"), &scratch.workspace()).0);
    let (passed, why) = check(&two_parts[0], Some("The total is 99."), &scratch.workspace());
    assert!(!passed && why.contains("24.75"), "{why}");
}

#[test]
fn recorder_resumes_and_reports_torn_lines() {
    let scratch = Scratch::new();
    let mut recorder = BenchRecorder::create(&scratch.path("out"), "tasks-x").unwrap();
    recorder.append(&json!({"sample": "a", "score": 1})).unwrap();
    recorder.append(&json!({"sample": 7, "score": 0})).unwrap();
    let dir = recorder.dir().to_path_buf();
    drop(recorder);
    std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join(BenchRecorder::SAMPLES))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"sample\": \"b\""))
        .unwrap();
    let reopened = BenchRecorder::open(&dir).unwrap();
    assert!(reopened.is_done(&json!("a")) && reopened.is_done(&json!(7)) && !reopened.is_done(&json!("b")));
    let (records, bad) = reopened.records().unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(bad.len(), 1);
    assert!(bad[0].contains(":3:"), "{bad:?}");
}

#[test]
fn runs_started_in_the_same_second_get_their_own_directories() {
    let scratch = Scratch::new();
    let recorders: Vec<BenchRecorder> =
        (0..5).map(|_| BenchRecorder::create(&scratch.path("out"), "nestful-x").unwrap()).collect();
    let dirs: BTreeSet<PathBuf> = recorders.iter().map(|r| r.dir().to_path_buf()).collect();
    assert_eq!(dirs.len(), 5, "five runs, five directories: {dirs:?}");
    let mut recorders = recorders.into_iter();
    let mut first = recorders.next().unwrap();
    first.append(&json!({"sample": 1})).unwrap();
    let second = recorders.next().unwrap();
    assert!(!second.is_done(&json!(1)));
    // Reopened (one process at a time holds a run), the second run still has not done the first one's sample.
    let second_dir = second.dir().to_path_buf();
    drop(second);
    assert!(!BenchRecorder::open(&second_dir).unwrap().is_done(&json!(1)));
    // Concurrent starts, as two `tandem bench` processes in the same second would make them.
    let root = scratch.path("threads");
    let made: Vec<PathBuf> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| BenchRecorder::create(&root, "bfcl-x").unwrap().dir().to_path_buf()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(made.iter().collect::<BTreeSet<_>>().len(), 4, "{made:?}");
}

#[test]
fn pair_matrix_adds_the_baselines() {
    let p = vec!["big".to_string()];
    let e = vec!["small".to_string()];
    let pairs: Vec<(String, String, String)> = pair_matrix(Suite::Tasks, &p, &e, true)
        .into_iter()
        .map(|x| (x.planner, x.executor, x.mode.name().to_string()))
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
    assert_eq!(pair_matrix(Suite::Nestful, &p, &e, true).len(), 1, "NESTFUL uses the planner only");
}

#[test]
fn chart_places_every_pair() {
    let points = [
        Point { label: "a → b".into(), seconds: 2.0, quality: 0.5 },
        Point { label: "c <alone>".into(), seconds: 4.0, quality: 1.0 },
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
    let dir = std::fs::read_dir(&out).unwrap().next().unwrap().unwrap().path();
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
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
    assert_eq!(summary["summary"]["accuracy_simple_python"], 1.0, "{records}");
}

#[test]
fn smoke_nestful_one_sample() {
    let scratch = Scratch::new();
    let (summary, records) = bench(&scratch, &["nestful", "--limit", "1"]);
    let record: Value = serde_json::from_str(records.lines().next().unwrap()).unwrap();
    assert_eq!(record["valid_plan"], true, "the grammar makes the plan valid: {record}");
    let f1 = summary["summary"]["f1_functions"].as_f64().unwrap();
    assert!(f1 > 0.0, "{summary}");
}

#[test]
fn a_nestful_split_with_dotted_names_and_free_parameters_loads_and_plans_cleanly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nestful-dotted");
    let data = load(&dir).unwrap();
    assert_eq!((data.samples.len(), data.tools.len()), (2, 4), "found by *-data.json and *-spec.json");
    let registry = registry_of(&data.tools).unwrap();
    assert!(registry.warnings().is_empty(), "empty allowed_values mean any value: {:?}", registry.warnings());
    assert!(registry.contains("FX.com/convert") && registry.contains("Notes add"));
    let spec = registry.spec("Stays.FindRoom").unwrap();
    assert_eq!(spec.args_schema["properties"]["tier"]["enum"], json!(["basic", "suite"]));
    assert!(spec.args_schema["properties"]["city"].get("enum").is_none());
    // A directory with two candidate files of one kind is refused, naming them.
    let scratch = Scratch::new();
    for name in ["a-data.json", "b-data.json", "a-spec.json"] {
        std::fs::copy(dir.join("dev-dotted-spec.json"), scratch.path(name)).unwrap();
    }
    let error = load(&scratch.path("")).err().unwrap().to_string();
    assert!(error.contains("a-data.json, b-data.json"), "{error}");
}

#[test]
fn smoke_nestful_dotted_tool_names() {
    let scratch = Scratch::new();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nestful-dotted");
    let (summary, records) = bench(&scratch, &["nestful", "--data", data.to_str().unwrap(), "--limit", "2"]);
    assert_eq!(summary["summary"]["samples"], 2, "{records}");
    for line in records.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        assert!(record.get("error").is_none_or(Value::is_null), "no name or schema error: {record}");
    }
    assert!(summary["summary"]["f1_functions"].as_f64().unwrap() > 0.0, "{summary}");
}

#[test]
fn smoke_tasks_one_goal() {
    let scratch = Scratch::new();
    let (summary, records) = bench(&scratch, &["tasks", "--limit", "1"]);
    assert_eq!(summary["summary"]["samples"], 1);
    let record: Value = serde_json::from_str(records.lines().next().unwrap()).unwrap();
    assert_eq!(record["sample"], "arith-eggs");
    assert!(Path::new(record["run_log"].as_str().unwrap()).is_file(), "the run's audit log is kept");
}

/// `--categories` picks the tasks of those categories, in the suite's order; a category the suite lacks is refused
/// before anything is written, naming the suite's categories.
#[test]
fn tasks_of_the_categories_asked_for_run_and_an_unknown_category_is_refused() {
    let scratch = Scratch::new();
    let (summary, records) = bench(&scratch, &["tasks", "--categories", "units", "--limit", "1"]);
    assert_eq!(summary["summary"]["samples"], 1);
    let record: Value = serde_json::from_str(records.lines().next().unwrap()).unwrap();
    assert_eq!(record["category"], "units", "{record}");

    let out = scratch.path("refused");
    let output = scratch.tandem(&["bench", "tasks", "--categories", "units,sums", "--out", out.to_str().unwrap()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("'sums'") && stderr.contains("arithmetic, distractors, files"), "{stderr}");
    assert!(!out.exists(), "a refused run writes nothing");
    let nestful = scratch.tandem(&["bench", "nestful", "--categories", "units", "--out", out.to_str().unwrap()]);
    assert!(!nestful.status.success() && !out.exists());
}

/// `bench rescore --mend` reads a NESTFUL record's plan again from the planner's text through today's mends: a
/// repeated call and an optional argument the goal never mentions, recorded as planned, cost the full match that
/// the mended plan scores. Without `--mend` the recorded prediction is scored as it was; `--mend` on another
/// suite's run is refused.
#[test]
fn rescore_with_mend_reads_nestful_plans_again_through_the_mends() {
    let scratch = Scratch::new();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nestful-dotted");
    let sample = &load(&data).unwrap().samples[0];
    let find = json!({"city": "Lisbon", "check_in": "03/14/2025", "tier": "suite", "guests": 2});
    let raw = json!({"steps": [
        {"id": "s1", "description": "find", "tool": "Stays.FindRoom", "args": find, "depends_on": []},
        {"id": "s2", "description": "find again", "tool": "Stays.FindRoom", "args": find, "depends_on": []},
        {"id": "s3", "description": "book", "tool": "Stays.Book", "args": {"room_id": "$s2.room_id$", "nights": 3},
         "depends_on": ["s2"]}
    ]});
    let plan: tandem::agent::Plan = serde_json::from_value(raw.clone()).unwrap();
    let prediction = tandem::bench::nestful::plan_to_calls(&plan);
    let record = json!({"sample": 0, "input": sample.input, "gold": sample.calls, "grammar": true,
        "catalogue": ["Stays.FindRoom", "Stays.Book", "Notes add"], "raw": raw.to_string(),
        "prediction": prediction, "valid_plan": true, "mended": [], "ms": 1});
    let dir = scratch.path("nestful-by-hand");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("samples.jsonl"), format!("{record}\n")).unwrap();
    let rescore = |extra: &[&str]| {
        let mut args = vec!["bench", "rescore", dir.to_str().unwrap()];
        args.extend_from_slice(extra);
        let output = scratch.tandem(&args);
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    assert_eq!(rescore(&[])["full_sequence_accuracy"], 0.0, "three calls as planned, one too many");
    let mended = rescore(&["--mend", "--data", data.to_str().unwrap()]);
    assert_eq!(mended["full_sequence_accuracy"], 1.0, "{mended}");
    assert_eq!(mended["valid_plan_rate"], 1.0, "{mended}");
    let replayed: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("samples.mended.jsonl")).unwrap()).unwrap();
    assert_eq!(
        replayed["mended"],
        json!([
            "s2: dropped, the same call as s1",
            "s1: guests 2 left out (optional, and the goal names neither it nor 2)"
        ]),
        "{replayed}"
    );
    assert_eq!(std::fs::read_to_string(dir.join("samples.jsonl")).unwrap(), format!("{record}\n"), "kept as run");

    let tasks = scratch.path("tasks-by-hand");
    std::fs::create_dir_all(&tasks).unwrap();
    std::fs::write(tasks.join("samples.jsonl"), "").unwrap();
    let refused = scratch.tandem(&["bench", "rescore", tasks.to_str().unwrap(), "--mend"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--mend reads NESTFUL plans"), "{refused:?}");
}

/// A tasks file's MCP servers start when the run writes under the default, relative `bench-results/` (the
/// servers file resolves a relative `cwd` against its own folder, so before, every server "could not start"):
/// run from the scratch folder without `--out`, the suite's one goal is answered with its server's tool.
#[test]
fn a_suites_mcp_servers_start_under_the_default_relative_output_folder() {
    real_model("qwen2.5-coder-1.5b-instruct-q4_k_m");
    real_model("qwen2.5-coder-0.5b-instruct-q4_k_m");
    let scratch = Scratch::new();
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/server.py");
    let suite = format!(
        "[servers.fixture]\ncommand = \"python3\"\nargs = [{:?}, \"normal\"]\n\n[[task]]\nid = \"add\"\n\
         category = \"mcp\"\ngoal = \"Add 17 and 25 with the math tool.\"\nmcp = [\"fixture\"]\nanswer_any = [\"42\"]\n",
        server.display().to_string()
    );
    let data = scratch.write("suite.toml", &suite);
    let output = scratch
        .command(&["bench", "tasks", "--data", data.to_str().unwrap(), "--threads", "2"])
        .current_dir(scratch.path(""))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let results = scratch.path("bench-results");
    let dir = std::fs::read_dir(&results).unwrap().next().unwrap().unwrap().path();
    let records = std::fs::read_to_string(dir.join("samples.jsonl")).unwrap();
    let record: Value = serde_json::from_str(records.lines().next().unwrap()).unwrap();
    assert!(record["error"].is_null(), "the server did not start: {record}");
    let calls = record.to_string();
    assert!(calls.contains("math.add") || calls.contains("math_add"), "the server's tool was not called: {record}");
}
