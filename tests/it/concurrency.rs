//! Many processes on one runs directory and one results file, and results and benchmark records killed in the
//! middle of a write, with real `tandem` processes: every run gets its own id and a log holding only its own
//! events; every goal line ends with exactly one readable record, none lost and none written twice; a torn record
//! is reported and its sample runs again, once.
//!
//! The torn writes come from the process itself (`TANDEM_FAULT_KILL=torn:N`: half of the Nth record line written
//! and synced, then SIGKILL). Plans are given with `--plan` and the batches hold lines that fail before any model,
//! so no model is needed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Output;

use crate::common::runs::Scratch;
use serde_json::{json, Value};
use tandem::agent::log::events::read_log;
use tandem::agent::Event;
use tandem::bench::records::BenchRecorder;

fn killed(output: &Output) -> bool {
    use std::os::unix::process::ExitStatusExt;
    output.status.signal() == Some(9)
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn concurrent_runs_in_one_runs_directory_get_their_own_ids_and_logs() {
    const RUNS: usize = 8;
    let scratch = Scratch::new();
    let mut children = Vec::new();
    for i in 0..RUNS {
        // Each run's answer and goal are its own, so a stray event would show.
        let plan = scratch.write(
            &format!("plan-{i}.json"),
            &format!(
                r#"{{"goal": "run {i}", "steps": [
                    {{"id": "s1", "tool": "calculator", "args": {{"expression": "{i} * 1000 + 7"}}}},
                    {{"id": "s2", "tool": "calculator", "args": {{"expression": "$s1.result$ + 1"}}, "depends_on": ["s1"]}}]}}"#
            ),
        );
        let child = scratch.command(&["run", "--plan", plan.to_str().unwrap(), "--json"]).spawn().unwrap();
        children.push((i, child));
    }
    let mut ids = BTreeSet::new();
    for (i, child) in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "run {i}: {}", stderr(&output));
        let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(summary["answer"], (i * 1000 + 8).to_string(), "run {i}: {summary}");
        let id = summary["run_id"].as_str().unwrap().to_string();
        let log = read_log(&Path::new(summary["run_dir"].as_str().unwrap()).join("events.jsonl")).unwrap();
        assert!(log.bad_lines.is_empty(), "run {i}: {:?}", log.bad_lines);
        let seqs: Vec<u64> = log.records.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "run {i}: one writer, in order");
        let goals: Vec<&str> = log
            .records
            .iter()
            .filter_map(|r| match &r.event {
                Event::RunStarted { goal, .. } => Some(goal.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(goals, [format!("run {i}")], "run {i}: its log holds its own run only");
        assert!(ids.insert(id.clone()), "run {i}: id {id} given twice");
    }
    let on_disk = std::fs::read_dir(scratch.path("runs")).unwrap().count();
    assert_eq!((ids.len(), on_disk), (RUNS, RUNS), "one directory per run");
}

/// A goal file whose lines all fail before any model loads (each still gets its record).
fn unrunnable_goals(scratch: &Scratch, lines: usize) -> std::path::PathBuf {
    let text: String = (0..lines)
        .map(|i| match i % 3 {
            0 => format!("not json {i}\n"),
            1 => "{\"goal\": \"\"}\n".to_string(),
            _ => format!("{{\"goal\": \"g{i}\", \"bogus\": 1}}\n"),
        })
        .collect();
    scratch.write("goals.jsonl", &text)
}

fn batch(scratch: &Scratch, goals: &Path, out: &Path, kill: Option<&str>) -> Output {
    let mut command = scratch.command(&["batch", goals.to_str().unwrap(), "--out", out.to_str().unwrap(), "--json"]);
    if let Some(kill) = kill {
        command.env("TANDEM_FAULT_KILL", kill);
    }
    command.output().unwrap()
}

/// Readable records per goal line, and the unreadable lines of the results file.
fn recorded_lines(out: &Path) -> (BTreeMap<u64, usize>, usize) {
    let text = std::fs::read_to_string(out).unwrap_or_default();
    let mut per_line = BTreeMap::new();
    let mut unreadable = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Value>(line) {
            Ok(record) => *per_line.entry(record["line"].as_u64().unwrap()).or_insert(0) += 1,
            Err(_) => unreadable += 1,
        }
    }
    (per_line, unreadable)
}

#[test]
fn a_batch_killed_in_the_middle_of_each_record_then_rerun_records_every_line_once() {
    const LINES: usize = 6;
    for torn in 1..=LINES {
        let scratch = Scratch::new();
        let goals = unrunnable_goals(&scratch, LINES);
        let out = scratch.path("results.jsonl");
        let crashed = batch(&scratch, &goals, &out, Some(&format!("torn:{torn}")));
        assert!(killed(&crashed), "record {torn}: not killed: {:?} {}", crashed.status, stderr(&crashed));
        let (before, unreadable) = recorded_lines(&out);
        assert_eq!((before.len(), unreadable), (torn - 1, 1), "record {torn}: whole records, then the torn one");
        assert!(!std::fs::read_to_string(&out).unwrap().ends_with('\n'), "record {torn}: the last line is cut");

        let rerun = batch(&scratch, &goals, &out, None);
        assert_eq!(rerun.status.code(), Some(3), "record {torn}: {}", stderr(&rerun));
        let message = format!("results.jsonl:{torn}:");
        assert!(stderr(&rerun).contains(&message), "record {torn}: the torn line is reported: {}", stderr(&rerun));
        let summary: Value = serde_json::from_slice(&rerun.stdout).unwrap();
        assert_eq!(summary["skipped"], torn - 1, "record {torn}: {summary}");
        let (after, unreadable) = recorded_lines(&out);
        let every_line_once: BTreeMap<u64, usize> = (1..=LINES as u64).map(|line| (line, 1)).collect();
        assert_eq!(after, every_line_once, "record {torn}: none lost, none twice");
        assert_eq!(unreadable, 1, "record {torn}: only the torn line is unreadable");

        // Once more: everything is recorded, nothing runs, nothing is appended.
        let again = batch(&scratch, &goals, &out, None);
        assert!(again.status.success(), "record {torn}: {}", stderr(&again));
        assert_eq!(recorded_lines(&out).0, every_line_once, "record {torn}");
    }
}

#[test]
fn batches_started_together_on_one_results_file_record_each_line_once() {
    const LINES: usize = 30;
    const BATCHES: usize = 4;
    let scratch = Scratch::new();
    let goals = unrunnable_goals(&scratch, LINES);
    let out = scratch.path("results.jsonl");
    let children: Vec<_> = (0..BATCHES)
        .map(|_| {
            scratch
                .command(&["batch", goals.to_str().unwrap(), "--out", out.to_str().unwrap(), "--json"])
                .spawn()
                .unwrap()
        })
        .collect();
    let mut ran = 0;
    for child in children {
        let output = child.wait_with_output().unwrap();
        match output.status.code() {
            // Ran the lines (they fail: exit 3) or found them all recorded (exit 0).
            Some(3) | Some(0) => ran += 1,
            // Or waited 2 s for the lock and gave up, saying why.
            _ => assert!(stderr(&output).contains("another `tandem batch`"), "{}", stderr(&output)),
        }
    }
    assert!(ran >= 1);
    let every_line_once: BTreeMap<u64, usize> = (1..=LINES as u64).map(|line| (line, 1)).collect();
    assert_eq!(recorded_lines(&out), (every_line_once, 0), "{BATCHES} batches at once");
}

#[test]
fn a_torn_bench_record_is_ended_and_its_sample_runs_again_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("tasks-run");
    std::fs::create_dir(&run).unwrap();
    {
        let mut recorder = BenchRecorder::open(&run).unwrap();
        recorder.append(&json!({"sample": "a", "ok": true})).unwrap();
        recorder.append(&json!({"sample": "b", "ok": true})).unwrap();
    }
    // What a crash in the middle of the third record's write leaves.
    let samples = run.join(BenchRecorder::SAMPLES);
    let mut text = std::fs::read_to_string(&samples).unwrap();
    text.push_str("{\"sample\": \"c\", \"o");
    std::fs::write(&samples, text).unwrap();

    let mut recorder = BenchRecorder::open(&run).unwrap();
    assert!(recorder.is_done(&json!("a")) && recorder.is_done(&json!("b")));
    assert!(!recorder.is_done(&json!("c")), "a torn record does not count as done");
    recorder.append(&json!({"sample": "c", "ok": true})).unwrap();
    drop(recorder);
    let (records, bad) = BenchRecorder::read(&run).unwrap();
    let samples: Vec<&str> = records.iter().map(|r| r["sample"].as_str().unwrap()).collect();
    assert_eq!(samples, ["a", "b", "c"], "the record after the torn line is whole");
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].contains("samples.jsonl:3:"), "{bad:?}");
}

#[test]
fn one_process_at_a_time_adds_to_a_bench_run() {
    let dir = tempfile::tempdir().unwrap();
    let _first = BenchRecorder::open(dir.path()).unwrap();
    let second = BenchRecorder::open(dir.path()).unwrap_err().to_string();
    assert!(second.contains("another `tandem bench`"), "{second}");
    // Reading a run that is still being written is fine.
    assert_eq!(BenchRecorder::read(dir.path()).unwrap().0.len(), 0);
}
