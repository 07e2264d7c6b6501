//! `scripts/nestful-llamacpp-baseline.py`, the plain llama.cpp baseline for NESTFUL: its run directory is one
//! that `tandem bench rescore` scores, a failing or cut-off child is recorded as an error and the run goes on, and
//! wrong arguments are refused with what to give. llama.cpp itself is not built here: a stand-in program prints what
//! `llama-completion` prints (the answer, then ` [end of text]`; its timings on stderr). The real binary's run is
//! the measurement in docs/benchmarks.md.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::common::runs::Scratch;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn split() -> PathBuf {
    root().join("tests/fixtures/nestful-dotted")
}

/// Answers by the goal in the `-f` file: a right sequence for the Lisbon goal, a crash for the currency goal, a
/// cut-off array for anything else. Keeps its arguments for the test to read.
const STAND_IN: &str = r#"#!/bin/sh
printf '%s\n' "$@" > "$(dirname "$0")/args-$$.txt"
goal=""
while [ $# -gt 0 ]; do
    if [ "$1" = "-f" ]; then goal=$(cat "$2"); fi
    shift
done
case "$goal" in
    *Lisbon*)
        printf '%s' '[{"name": "Stays.FindRoom", "label": "var1", "arguments": {"tier": "suite", "city": "Lisbon", "check_in": "03/14/2025"}}, '
        printf '%s\n\n' '{"name": "Stays.Book", "label": "var2", "arguments": {"room_id": "$var1.room_id$", "nights": 3}}] [end of text]'
        echo "common_perf_print: prompt eval time =     812.50 ms /   402 tokens (    2.02 ms per token)" >&2
        echo "common_perf_print:        eval time =    1500.00 ms /    41 runs   (   36.59 ms per token)" >&2
        ;;
    *Convert*)
        echo "llama_model_load: error loading model" >&2
        exit 3
        ;;
    *)
        printf '%s' '[{"name": "Stays.Book", "label": "var1", "arguments": {"room_id": "r'
        ;;
esac
"#;

fn gold(sample: usize) -> Value {
    let data: Value =
        serde_json::from_str(&std::fs::read_to_string(split().join("dev-dotted-data.json")).unwrap()).unwrap();
    data[sample]["output"].clone()
}

/// A Tandem NESTFUL run directory with three records: the split's two samples and one goal of our own.
fn source_run(scratch: &Scratch) -> PathBuf {
    let dir = scratch.path("tandem-run");
    std::fs::create_dir(&dir).unwrap();
    let catalogue = json!(["Notes add", "Stays.FindRoom", "FX.com/convert", "Stays.Book"]);
    let records = [
        json!({"sample": 0, "input": "Find a suite in Lisbon for 03/14/2025 and book it for 3 nights.",
               "catalogue": catalogue, "gold": gold(0), "prediction": null}),
        json!({"sample": 1, "input": "Convert 250 USD to EUR and add a note with the converted amount.",
               "catalogue": catalogue, "gold": gold(1), "prediction": null}),
        json!({"sample": 2, "input": "Book room r7 for 2 nights.", "catalogue": catalogue,
               "gold": [{"name": "Stays.Book", "arguments": {"room_id": "r7", "nights": 2}, "label": "var1"}]}),
    ];
    let lines: String = records.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(dir.join("samples.jsonl"), lines).unwrap();
    dir
}

fn baseline(args: &[&Path]) -> Output {
    Command::new("python3")
        .arg(root().join("scripts/nestful-llamacpp-baseline.py"))
        .args(args)
        .output()
        .expect("python3 must be installed to run scripts/nestful-llamacpp-baseline.py")
}

#[test]
fn llamacpp_baseline_records_are_scored_by_tandems_rescore() {
    let scratch = Scratch::new();
    let run = source_run(&scratch);
    let stand_in = scratch.write("llama-completion", STAND_IN);
    std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
    let model = scratch.write("model.gguf", "not a model: the stand-in never reads it");
    let out = scratch.path("out");
    let tandem = Path::new(env!("CARGO_BIN_EXE_tandem"));
    let output = baseline(&[
        &run,
        Path::new("--data"),
        &split(),
        Path::new("--model"),
        &model,
        Path::new("--llama-completion"),
        &stand_in,
        Path::new("--out"),
        &out,
        Path::new("--tandem"),
        tandem,
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("[1/3] sample 0: 2 calls") && stdout.contains("[3/3] sample 2"), "{stdout}");

    let dirs: Vec<PathBuf> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let dir = &dirs[0];
    assert!(dir.file_name().unwrap().to_str().unwrap().starts_with("nestful-llamacpp-model-"), "{dir:?}");
    let records: Vec<Value> = std::fs::read_to_string(dir.join("samples.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 3);

    // The right sequence, in NESTFUL's call format, with llama.cpp's timings.
    let right = &records[0];
    assert_eq!(right["prediction"][1]["name"], "Stays.Book");
    assert_eq!(right["prediction"][1]["arguments"]["room_id"], "$var1.room_id$");
    assert_eq!(right["valid_plan"], true);
    assert_eq!(right["tokens_in"], 402);
    assert_eq!(right["llamacpp"]["eval_ms"], 1500.0);
    assert!(right.get("error").is_none(), "{right}");
    // A child that fails, and one whose array is cut off, are errors with empty predictions.
    assert_eq!(records[1]["prediction"], Value::Null);
    assert!(records[1]["error"].as_str().unwrap().contains("status 3"), "{}", records[1]);
    assert!(records[2]["error"].as_str().unwrap().contains("no complete JSON array"), "{}", records[2]);

    // Tandem's scorer read the directory: one sample of three right, two errors.
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let scores = &summary["scores"];
    assert_eq!(scores["samples"], 3);
    assert_eq!(scores["errors"], 2);
    assert!((scores["full_sequence_accuracy"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9, "{scores}");
    assert!((scores["valid_plan_rate"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9, "{scores}");
    let rescored = Command::new(tandem).args(["bench", "rescore"]).arg(dir).output().unwrap();
    assert!(rescored.status.success(), "{}", String::from_utf8_lossy(&rescored.stderr));
    let again: Value = serde_json::from_slice(&rescored.stdout).unwrap();
    assert_eq!(&again, scores);

    // The prompt holds the catalogue as the spec file gives it, and llama.cpp ran greedy, on 2 threads, under
    // the schema, in the model's own chat template.
    let system = std::fs::read_to_string(dir.join("prompts/0.system.txt")).unwrap();
    assert!(system.contains("- Stays.FindRoom: Find a hotel room in a city for given dates"), "{system}");
    assert!(system.contains("output fields: room_id, nightly_price"), "{system}");
    let args: Vec<String> = std::fs::read_dir(scratch.dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("args-"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert_eq!(args.len(), 3);
    for needed in ["--temp\n0\n", "-t\n2\n", "-n\n768\n", "--jinja\n", "-jf\n"] {
        assert!(args[0].contains(needed), "{needed:?} missing from {}", args[0]);
    }

    // Resuming with --retry-errors runs the two failed samples again and keeps one record a sample.
    let output = baseline(&[
        &run,
        Path::new("--data"),
        &split(),
        Path::new("--model"),
        &model,
        Path::new("--llama-completion"),
        &stand_in,
        Path::new("--resume"),
        dir,
        Path::new("--retry-errors"),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("sample 0: already recorded") && stdout.contains("[2/3] sample 1: 0 calls"), "{stdout}");
    let samples: Vec<u64> = std::fs::read_to_string(dir.join("samples.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["sample"].as_u64().unwrap())
        .collect();
    assert_eq!(samples, [0, 1, 2]);
}

#[test]
fn llamacpp_baseline_refuses_wrong_arguments_with_what_to_give() {
    let scratch = Scratch::new();
    let run = source_run(&scratch);
    let model = scratch.write("model.gguf", "x");
    let no_binary = scratch.path("llama-completion");
    let output = baseline(&[
        &run,
        Path::new("--data"),
        &split(),
        Path::new("--model"),
        &model,
        Path::new("--llama-completion"),
        &no_binary,
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("scripts/build-llama-completion.sh"), "{stderr}");

    let not_a_run = scratch.workspace();
    let output = baseline(&[
        &not_a_run,
        Path::new("--data"),
        &split(),
        Path::new("--model"),
        &model,
        Path::new("--llama-completion"),
        &no_binary,
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("tandem bench nestful"), "{output:?}");
    let help = baseline(&[Path::new("--help")]);
    assert!(help.status.success() && String::from_utf8_lossy(&help.stdout).contains("--llama-completion"));
}
