//! `tandem batch`: goal-file parsing (strings, objects, blanks, comments, malformed lines with their line numbers),
//! the results file (records by key, a torn last line, the lock), malformed lines through the binary (no model),
//! and one end-to-end batch of two arithmetic goals on the real default models, run twice: the second run skips
//! both.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::runs::{shell_tool, Scratch};
use crate::common::{gives, real_model};
use serde_json::Value;
use tandem::agent::batch::{is_run_started, parse_goals, BatchGoal, BatchRecord, BatchResults, GoalKey, GoalLine};
use tandem::agent::log::events::read_log;
use tandem::agent::Event;

const PLANNER: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m";
const EXECUTOR: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m";

fn goal(line: usize, id: Option<&str>, text: &str, workspace: Option<&str>) -> GoalLine {
    GoalLine::Goal(BatchGoal {
        line,
        id: id.map(str::to_string),
        goal: text.to_string(),
        workspace: workspace.map(PathBuf::from),
    })
}

fn malformed_lines(lines: &[GoalLine]) -> Vec<(usize, String)> {
    lines
        .iter()
        .filter_map(|l| match l {
            GoalLine::Malformed { line, message } => Some((*line, message.clone())),
            GoalLine::Goal(_) => None,
        })
        .collect()
}

#[test]
fn strings_objects_blanks_and_comments() {
    let text = "\"What is 12*4+5?\"\n\
                \n\
                # a comment\n\
                \x20  # an indented comment\n\
                {\"goal\": \"What is 7*8?\", \"id\": \"mul\"}\n\
                {\"goal\": \"  Count the lines of notes.txt \", \"workspace\": \"ws/notes\"}\r\n\
                \x20 \"padded\"  \n";
    let lines = parse_goals(text);
    assert_eq!(
        lines,
        vec![
            goal(1, None, "What is 12*4+5?", None),
            goal(5, Some("mul"), "What is 7*8?", None),
            goal(6, None, "Count the lines of notes.txt", Some("ws/notes")),
            goal(7, None, "padded", None),
        ]
    );
    assert_eq!(lines[0].key(), GoalKey::Line(1));
    assert_eq!(lines[1].key(), GoalKey::Id("mul".into()));
}

#[test]
fn malformed_lines_keep_their_line_numbers() {
    let text = "\"fine\"\n\
                not json\n\
                {\"id\": \"a\"}\n\
                {\"goal\": \"x\", \"goall\": \"typo\"}\n\
                42\n\
                [\"a list\"]\n\
                \"   \"\n\
                {\"goal\": \"y\", \"id\": \"\"}\n\
                {\"goal\": \"z\", \"id\": 7}\n\
                {\"goal\": \"first\", \"id\": \"dup\"}\n\
                {\"goal\": \"second\", \"id\": \"dup\"}\n\
                {\"goal\": \"cut short\"\n";
    let lines = parse_goals(text);
    assert_eq!(lines.len(), 12, "no line is dropped: {lines:?}");
    let bad = malformed_lines(&lines);
    let numbers: Vec<usize> = bad.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, [2, 3, 4, 5, 6, 7, 8, 9, 11, 12]);
    let message = |n: usize| bad.iter().find(|(line, _)| *line == n).map(|(_, m)| m.clone()).unwrap();
    assert!(message(2).starts_with("not JSON"), "{}", message(2));
    assert!(message(3).contains("missing field `goal`"), "{}", message(3));
    assert!(message(4).contains("unknown field `goall`"), "{}", message(4));
    assert!(message(5).contains("found a number"), "{}", message(5));
    assert!(message(6).contains("found an array"), "{}", message(6));
    assert!(message(7).contains("the goal is empty"), "{}", message(7));
    assert!(message(8).contains("the id is empty"), "{}", message(8));
    assert!(message(9).contains("invalid type"), "{}", message(9));
    assert!(message(11).contains("first on line 10"), "{}", message(11));
    assert_eq!(lines[9].key(), GoalKey::Id("dup".into()), "the first use of an id keeps it");
    assert_eq!(lines[10].key(), GoalKey::Line(11), "a malformed line is known by its line number");
}

#[test]
fn the_command_line_is_consistent() {
    use clap::CommandFactory;
    tandem::cli::Cli::command().debug_assert();
    let help = tandem::cli::Cli::command().find_subcommand_mut("batch").unwrap().render_long_help().to_string();
    assert!(help.contains("tandem batch goals.jsonl --out results.jsonl\n"), "the example keeps its lines: {help}");
    assert!(help.contains("Print the summary as one JSON object"), "{help}");
}

#[test]
fn an_empty_file_has_no_goals() {
    assert!(parse_goals("").is_empty());
    assert!(parse_goals("\n\n# only comments\n").is_empty());
    assert_eq!(parse_goals("\u{feff}\"after a byte order mark\"").len(), 1);
}

fn record(line: usize, id: Option<&str>, done: bool) -> BatchRecord {
    let goal = BatchGoal { line, id: id.map(str::to_string), goal: format!("goal {line}"), workspace: None };
    if done {
        let mut record = BatchRecord::failed(&goal, None, String::new(), Duration::from_millis(5));
        record.stop = tandem::agent::StopReason::Done;
        record
    } else {
        BatchRecord::failed(&goal, None, "it broke".into(), Duration::from_millis(5))
    }
}

#[test]
fn results_are_found_again_by_id_or_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new/results.jsonl");
    {
        let mut results = BatchResults::open(&path).unwrap();
        assert!(results.recorded(&GoalKey::Line(1)).is_none());
        results.append(&record(1, None, true)).unwrap();
        results.append(&record(2, Some("b"), false)).unwrap();
        results.append(&BatchRecord::malformed(3, "goals.jsonl:3: not JSON".into())).unwrap();
        assert!(results.recorded(&GoalKey::Line(1)).unwrap().done);
    }
    let results = BatchResults::open(&path).unwrap();
    assert!(results.unreadable().is_empty(), "{:?}", results.unreadable());
    assert!(results.recorded(&GoalKey::Line(1)).unwrap().done);
    assert_eq!(results.recorded(&GoalKey::Line(1)).unwrap().goal.as_deref(), Some("goal 1"));
    assert!(!results.recorded(&GoalKey::Id("b".into())).unwrap().done);
    assert!(results.recorded(&GoalKey::Line(2)).is_none(), "a goal with an id is not known by its line");
    let bad = results.recorded(&GoalKey::Line(3)).unwrap();
    assert!(!bad.done && bad.goal.is_none());
    let text = std::fs::read_to_string(&path).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    for field in ["line", "id", "goal", "run_id", "stop", "answer", "detail", "planner", "executor", "wall_s", "error"]
    {
        assert!(first.get(field).is_some(), "record lacks {field}: {first}");
    }
    assert_eq!(first["planner"]["tokens_out"], 0);
}

#[test]
fn the_latest_record_of_a_goal_counts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.jsonl");
    {
        let mut results = BatchResults::open(&path).unwrap();
        results.append(&record(1, Some("a"), false)).unwrap();
        results.append(&record(1, Some("a"), true)).unwrap();
    }
    assert!(BatchResults::open(&path).unwrap().recorded(&GoalKey::Id("a".into())).unwrap().done);
}

#[test]
fn a_torn_last_line_is_reported_and_ended() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.jsonl");
    let whole = serde_json::to_string(&record(1, None, true)).unwrap();
    std::fs::write(&path, format!("{whole}\n{{\"line\": 2, \"sto")).unwrap();
    {
        let mut results = BatchResults::open(&path).unwrap();
        assert_eq!(results.unreadable().len(), 1);
        assert!(results.unreadable()[0].contains("results.jsonl:2:"), "{:?}", results.unreadable());
        assert!(results.recorded(&GoalKey::Line(1)).is_some());
        assert!(results.recorded(&GoalKey::Line(2)).is_none());
        results.append(&record(2, None, true)).unwrap();
    }
    let results = BatchResults::open(&path).unwrap();
    assert!(results.recorded(&GoalKey::Line(2)).unwrap().done, "the new record starts on a line of its own");
    assert_eq!(results.unreadable().len(), 1, "only the torn line is unreadable");
}

#[test]
fn one_batch_at_a_time_writes_a_results_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.jsonl");
    let _first = BatchResults::open(&path).unwrap();
    let second = BatchResults::open(&path).unwrap_err().to_string();
    assert!(second.contains("another `tandem batch`"), "{second}");
}

fn batch(scratch: &Scratch, goals: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    batch_command(scratch, goals, out, extra).output().unwrap()
}

/// `tandem batch GOALS --out OUT` on 2 threads with the scratch's runs directory, `--json`, and `extra`.
fn batch_command(scratch: &Scratch, goals: &Path, out: &Path, extra: &[&str]) -> std::process::Command {
    let runs = scratch.path("runs");
    let mut args = vec![
        "batch",
        goals.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--threads",
        "2",
        "--runs-dir",
        runs.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    scratch.command(&args)
}

/// The records of a results file, less the journal lines of runs started.
fn records(path: &Path) -> Vec<Value> {
    all_lines(path).into_iter().filter(|value| !is_run_started(value)).collect()
}

/// Every line of a results file, records and journal lines.
fn all_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn summary(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON summary ({e}).\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[test]
fn malformed_lines_are_recorded_with_file_and_line_without_a_model() {
    let scratch = Scratch::new();
    let goals = scratch.write("goals.jsonl", "# nothing to run here\nnot json\n{\"goal\": \"\"}\n");
    let out = scratch.path("results.jsonl");
    let output = batch(&scratch, &goals, &out, &[]);
    assert_eq!(output.status.code(), Some(3), "malformed lines fail the batch: goals that did not finish exit 3");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let json = summary(&output);
    assert_eq!((json["done"].as_u64(), json["failed"].as_u64(), json["skipped"].as_u64()), (Some(0), Some(2), Some(0)));
    let recorded = records(&out);
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    let error = recorded[0]["error"].as_str().unwrap();
    assert!(error.contains("goals.jsonl:2: not JSON"), "{error}");
    assert!(stderr.contains("goals.jsonl:2: not JSON"), "{stderr}");
    assert_eq!(recorded[1]["line"], 3);
    assert_eq!(recorded[1]["stop"], "error");
    // Recorded lines are skipped on the next run; --retry-failed reads them again.
    let again = batch(&scratch, &goals, &out, &[]);
    assert_eq!(summary(&again)["skipped"], 2);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(records(&out).len(), 2);
    let retried = batch(&scratch, &goals, &out, &["--retry-failed"]);
    assert_eq!(summary(&retried)["failed"], 2);
    assert_eq!(records(&out).len(), 4);
}

#[test]
fn two_goals_on_the_real_models_then_a_rerun_skips_both() {
    real_model(PLANNER);
    real_model(EXECUTOR);
    let scratch = Scratch::new();
    let goals = scratch.write("goals.jsonl", "\"What is 12*4+5?\"\n{\"id\": \"mul\", \"goal\": \"What is 7*8?\"}\n");
    let out = scratch.path("results.jsonl");
    let output = batch(&scratch, &goals, &out, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(output.status.success(), "{stderr}");
    let json = summary(&output);
    assert_eq!(json["done"], 2, "{json}");
    assert_eq!(json["skipped"], 0, "{json}");
    let recorded = records(&out);
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    assert_eq!((recorded[0]["line"].as_u64(), &recorded[0]["id"]), (Some(1), &Value::Null));
    assert_eq!((recorded[1]["line"].as_u64(), recorded[1]["id"].as_str()), (Some(2), Some("mul")));
    for (record, answer) in recorded.iter().zip([53.0, 56.0]) {
        assert_eq!(record["stop"], "done", "{record}");
        assert!(gives(record["answer"].as_str().unwrap_or_default(), answer), "{record}");
        assert!(record["error"].is_null(), "{record}");
        assert!(record["planner"]["tokens_out"].as_u64().unwrap() > 0, "{record}");
        let log = PathBuf::from(record["run_dir"].as_str().unwrap()).join("events.jsonl");
        let events = std::fs::read_to_string(&log).unwrap();
        assert!(events.contains("\"model_loaded\""), "every run's log names its models: {events}");
    }
    assert_ne!(recorded[0]["run_id"], recorded[1]["run_id"]);
    // Each record ends the run journaled before it.
    let journal: Vec<Value> = all_lines(&out).into_iter().filter(is_run_started).collect();
    let started: Vec<&Value> = journal.iter().map(|line| &line["started"]["run_id"]).collect();
    assert_eq!(started, [&recorded[0]["run_id"], &recorded[1]["run_id"]], "{journal:?}");
    // The same command again: both goals are recorded, nothing runs, nothing is appended.
    let again = batch(&scratch, &goals, &out, &[]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let json = summary(&again);
    assert_eq!((json["done"].as_u64(), json["skipped"].as_u64()), (Some(0), Some(2)), "{json}");
    assert_eq!(records(&out).len(), 2);
}

/// Three goals in flight at once share the models' forward passes and end as they end one at a time: the same
/// answers from the same numbers of generated tokens (on our CPU kernels each goal's generations are exact).
#[test]
fn goals_in_flight_together_end_as_they_end_one_at_a_time() {
    real_model(PLANNER);
    real_model(EXECUTOR);
    let scratch = Scratch::new();
    let goals = scratch.write(
        "goals.jsonl",
        "{\"id\": \"a\", \"goal\": \"What is 12*4+5?\"}\n{\"id\": \"b\", \"goal\": \"What is 7*8?\"}\n\
         {\"id\": \"c\", \"goal\": \"What is 100-37?\"}\n",
    );
    let mut by_id = Vec::new();
    for parallel in ["1", "3"] {
        let out = scratch.path(&format!("results-{parallel}.jsonl"));
        let output = batch(&scratch, &goals, &out, &["--parallel", parallel]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let json = summary(&output);
        assert_eq!((json["done"].as_u64(), json["parallel"].as_str()), (Some(3), None), "{json}");
        assert_eq!(json["parallel"].as_u64(), Some(parallel.parse().unwrap()), "{json}");
        if parallel == "3" {
            let served = json["planner_goals_per_pass"].as_f64().unwrap();
            assert!(served > 1.0, "no planner pass served two goals: {json}");
        }
        let mut recorded = records(&out);
        recorded.sort_by_key(|r| r["id"].as_str().unwrap().to_string());
        let outcome: Vec<_> = recorded
            .iter()
            .map(|r| (r["id"].clone(), r["answer"].clone(), r["planner"]["tokens_out"].clone()))
            .collect();
        by_id.push(outcome);
    }
    assert_eq!(by_id[0], by_id[1], "one at a time, then three at once");
    let answers: Vec<&str> = by_id[0].iter().map(|(_, answer, _)| answer.as_str().unwrap()).collect();
    assert!(answers.iter().zip([53.0, 56.0, 63.0]).all(|(answer, value)| gives(answer, value)), "{answers:?}");
}

/// A batch killed while a goal's run is going (SIGKILL right after the event that logs a side-effecting step's
/// result), then run again: the second batch resumes that run rather than starting the goal over, so the step's
/// effect happens once, and the goal ends with one record, the resumed run's.
#[test]
fn a_batch_killed_during_a_goals_run_resumes_that_run_and_its_effect_happens_once() {
    real_model(PLANNER);
    real_model(EXECUTOR);
    let goal = "{\"id\": \"log\", \"goal\": \"Log a line with the log_line tool, then compute 6*7.\"}\n";
    let setup = || {
        let scratch = Scratch::new();
        let counter = scratch.workspace().join("count.log");
        let script = format!("echo line >> '{}'; echo '{{\"logged\": 1}}'", counter.display());
        let tools = scratch.write("tools.toml", &shell_tool("log_line", "Append a line to the log.", "{}", &script));
        let goals = scratch.write("goals.jsonl", goal);
        (scratch, tools, goals, counter)
    };
    // The scratch's own workspace and results file.
    let run = |scratch: &Scratch, tools: &Path, goals: &Path, kill: Option<String>| {
        let (workspace, out) = (scratch.workspace(), scratch.path("results.jsonl"));
        let tools_flags = ["--tools", tools.to_str().unwrap(), "--workspace", workspace.to_str().unwrap()];
        let mut command = batch_command(scratch, goals, &out, &tools_flags);
        if let Some(kill) = kill {
            command.env("TANDEM_FAULT_KILL", kill);
        }
        command.output().unwrap()
    };

    // Uninterrupted: which event logs the tool's result.
    let (reference, tools, goals, counter) = setup();
    let output = run(&reference, &tools, &goals, None);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let record = &records(&reference.path("results.jsonl"))[0];
    assert_eq!(record["stop"], "done", "{record}");
    // Without the joiner (the scratch turns it off) the answer is every last step's output.
    let answer = record["answer"].clone();
    assert!(answer.as_str().unwrap().contains("42"), "{record}");
    assert_eq!(std::fs::read_to_string(&counter).unwrap().lines().count(), 1);
    let log = read_log(&PathBuf::from(record["run_dir"].as_str().unwrap()).join("events.jsonl")).unwrap();
    // Killed right after this event is on disk: the step's result is logged, the answer step has not run.
    let kill_after = log
        .records
        .iter()
        .find(|r| matches!(&r.event, Event::StepFinished { tool, output: Some(_), .. } if tool == "log_line"))
        .map(|r| r.seq)
        .expect("the plan calls log_line");

    let (case, tools, goals, counter) = setup();
    let crashed = run(&case, &tools, &goals, Some(format!("event:{kill_after}")));
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(crashed.status.signal(), Some(9), "{}", String::from_utf8_lossy(&crashed.stderr));
    assert_eq!(std::fs::read_to_string(&counter).unwrap().lines().count(), 1, "the tool ran before the kill");
    let out = case.path("results.jsonl");
    assert!(records(&out).is_empty(), "no record yet");
    let started = all_lines(&out)[0]["started"]["run_id"].clone();

    let rerun = run(&case, &tools, &goals, None);
    let stderr = String::from_utf8_lossy(&rerun.stderr).to_string();
    assert!(rerun.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("resuming run {}", started.as_str().unwrap())), "{stderr}");
    let recorded = records(&out);
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!((&recorded[0]["stop"], &recorded[0]["answer"]), (&Value::from("done"), &answer), "the same answer");
    assert_eq!(recorded[0]["run_id"], started, "the record is the resumed run's");
    assert_eq!(std::fs::read_to_string(&counter).unwrap().lines().count(), 1, "the effect happened once");
    let log = read_log(&PathBuf::from(recorded[0]["run_dir"].as_str().unwrap()).join("events.jsonl")).unwrap();
    assert!(log.bad_lines.is_empty(), "{:?}", log.bad_lines);
    assert!(log.records.iter().any(|r| matches!(r.event, Event::Resumed { .. })), "the run was resumed");
    assert_eq!(std::fs::read_dir(case.path("runs")).unwrap().count(), 1, "no second run");

    // Once more: the goal is recorded, nothing runs.
    let again = run(&case, &tools, &goals, None);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(summary(&again)["skipped"], 1);
    assert_eq!(records(&out).len(), 1);
}

/// A run journaled as started whose directory holds no log (a batch killed between the two) is not resumed: the
/// goal starts over in a new run and gets its record.
#[test]
fn a_journaled_run_that_logged_nothing_starts_over() {
    real_model(PLANNER);
    real_model(EXECUTOR);
    let scratch = Scratch::new();
    let goals = scratch.write("goals.jsonl", "{\"id\": \"mul\", \"goal\": \"What is 7*8?\"}\n");
    let empty_run = scratch.path("runs").join("20260101-000000-0000");
    std::fs::create_dir_all(&empty_run).unwrap();
    let journal = serde_json::json!({
        "started": {"run_id": "20260101-000000-0000", "run_dir": empty_run},
        "line": 1, "id": "mul", "goal": "What is 7*8?",
    });
    let out = scratch.write("results.jsonl", &format!("{journal}\n"));
    let output = batch(&scratch, &goals, &out, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("resuming run"), "{stderr}");
    let recorded = records(&out);
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!((&recorded[0]["stop"], &recorded[0]["answer"]), (&Value::from("done"), &Value::from("56")));
    assert_ne!(recorded[0]["run_id"], "20260101-000000-0000", "a new run");
}
