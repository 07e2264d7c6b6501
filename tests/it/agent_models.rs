//! `tandem run` end to end with the real default models (1.5B planner, 0.5B executor): arithmetic through the
//! calculator, a multi-step word problem, a file task, an `llm` step, a replan forced by a tool that fails the
//! first time, step mode, and a token budget. Short goals keep each run to a few planner calls.

use std::path::PathBuf;

use crate::common::runs::{shell_tool, Scratch};
use crate::common::{gives, real_model};
use serde_json::Value;

const PLANNER: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m";
const EXECUTOR: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m";

/// Makes sure both models are in the cache before the binary runs (pulled once, with a clear panic if not).
fn models_ready() {
    real_model(PLANNER);
    real_model(EXECUTOR);
}

fn run_json(scratch: &Scratch, args: &[&str]) -> Value {
    models_ready();
    let mut all = vec!["run", "--threads", "2"];
    all.extend_from_slice(args);
    let (json, _output) = scratch.tandem_json(&all);
    json
}

fn tools_used(json: &Value) -> Vec<String> {
    json["steps"].as_array().unwrap().iter().map(|s| s["tool"].as_str().unwrap().to_string()).collect()
}

/// The seed example: the calculator computes 53 from the goal's expression, called straight with the known
/// arguments (no model writes them), in one plan, and the answer gives 53. On an AVX-512 Zen 5 the greedy 1.5B
/// adds an `llm` step that restates the result (its kernels round otherwise than AVX2's), so the test holds the
/// calculation and the answer, not the plan's length.
#[test]
fn seed_example_is_53_through_the_calculator() {
    let scratch = Scratch::new();
    let json = run_json(&scratch, &["What is 12*4+5?"]);
    assert_eq!(json["stop"], "done", "{json}");
    assert!(gives(json["answer"].as_str().unwrap_or_default(), 53.0), "{json}");
    let steps = json["steps"].as_array().unwrap();
    let calculated = steps.iter().find(|s| s["tool"] == "calculator").unwrap_or_else(|| panic!("{json}"));
    assert_eq!(calculated["output"]["result"], 53, "{json}");
    assert_eq!(calculated["via"], "tool", "known arguments go straight to the tool: {json}");
    assert!(tools_used(&json).iter().all(|t| t == "calculator" || t == "llm"), "{json}");
    assert_eq!(json["planner"]["calls"], 1);
}

#[test]
fn multi_step_word_problem() {
    let scratch = Scratch::new();
    let json =
        run_json(&scratch, &["A box holds 12 eggs. Tom buys 7 boxes and breaks 5 eggs. How many eggs are left?"]);
    assert_eq!(json["stop"], "done", "{json}");
    assert_eq!(json["answer"], "79", "{json}");
    assert!(json["steps"].as_array().unwrap().len() >= 2, "{json}");
}

#[test]
fn file_task_writes_into_the_workspace() {
    let scratch = Scratch::new();
    let ws = scratch.workspace();
    let json = run_json(
        &scratch,
        &["--workspace", ws.to_str().unwrap(), "--allow-write", "Compute 6*7 and write the result to answer.txt"],
    );
    assert_eq!(json["stop"], "done", "{json}");
    assert_eq!(std::fs::read_to_string(ws.join("answer.txt")).unwrap().trim(), "42", "{json}");
    assert!(tools_used(&json).contains(&"write_file".to_string()));
}

/// A workspace with `notes.txt` and a given plan that reads it (s1) and has the executor summarise it (s2, `llm`):
/// (the workspace, the plan file).
fn summarise_notes_plan(scratch: &Scratch) -> (PathBuf, PathBuf) {
    let ws = scratch.workspace();
    std::fs::write(ws.join("notes.txt"), "Tandem runs planner and executor models locally.\n").unwrap();
    let plan = scratch.write(
        "plan.json",
        r#"{"goal": "Summarise notes.txt", "steps": [
            {"id": "s1", "tool": "read_file", "args": {"path": "notes.txt"}},
            {"id": "s2", "tool": "llm", "args": {"prompt": "Summarise this note in a few words."}, "depends_on": ["s1"]}]}"#,
    );
    (ws, plan)
}

#[test]
fn llm_step_runs_on_the_executor_with_the_file_it_depends_on() {
    let scratch = Scratch::new();
    let (ws, plan) = summarise_notes_plan(&scratch);
    let json = run_json(&scratch, &["--workspace", ws.to_str().unwrap(), "--plan", plan.to_str().unwrap()]);
    assert_eq!(json["stop"], "done", "{json}");
    assert_eq!(json["planner"]["calls"], 0, "a given plan needs no planner");
    assert_eq!(json["executor"]["calls"], 1);
    let answer = json["answer"].as_str().unwrap().to_lowercase();
    assert!(["plan", "execut", "local", "tandem", "model"].iter().any(|w| answer.contains(w)), "{answer}");
}

#[test]
fn tool_failing_once_is_recovered_by_a_replan() {
    let scratch = Scratch::new();
    // In the workspace: tool programs may write only there.
    let flag = scratch.workspace().join("flag");
    let script = format!(
        "if [ -e '{f}' ]; then echo '{{\"code\": \"A-17\"}}'; else touch '{f}'; echo 'service unavailable, try again' >&2; exit 3; fi",
        f = flag.display()
    );
    let mut tools = shell_tool("lookup", "Look up the code of a key.", r#"{"key": {"type": "string"}}"#, &script);
    tools += "output_fields = { code = \"string\" }\n";
    let tools_path = scratch.write("tools.toml", &tools);
    let workspace = scratch.workspace();
    let json = run_json(
        &scratch,
        &[
            "--tools",
            tools_path.to_str().unwrap(),
            "--workspace",
            workspace.to_str().unwrap(),
            "Look up the code of the key alpha.",
        ],
    );
    assert_eq!(json["stop"], "done", "{json}");
    assert_eq!(json["replans"], 1, "{json}");
    // The revised plan may phrase the answer with an llm step; the lookup itself must have succeeded.
    let steps = json["steps"].as_array().unwrap();
    let lookups: Vec<&Value> = steps.iter().filter(|s| s["tool"] == "lookup").collect();
    assert_eq!(lookups.len(), 2, "the first call failed, the second succeeded: {json}");
    assert!(!lookups[0]["error"].is_null());
    assert_eq!(lookups[1]["output"]["code"], "A-17");
    assert!(json["answer"].as_str().unwrap().contains("17"), "{json}");
}

#[test]
fn step_mode_answers_after_observing() {
    let scratch = Scratch::new();
    let json = run_json(&scratch, &["--mode", "step", "--max-steps", "4", "What is 12*4+5?"]);
    assert_eq!(json["stop"], "done", "{json}");
    assert!(json["answer"].as_str().unwrap().contains("53"), "{json}");
    assert!(json["planner"]["calls"].as_u64().unwrap() >= 2, "a step, then the answer: {json}");
}

#[test]
fn token_budget_stops_the_run_with_its_reason() {
    let scratch = Scratch::new();
    let json = run_json(&scratch, &["--max-run-tokens", "10", "What is 12*4+5?"]);
    assert_eq!(json["stop"], "budget", "{json}");
    assert!(json["detail"].as_str().unwrap().contains("--max-run-tokens"), "{json}");
    assert!(json["steps"].as_array().unwrap().is_empty(), "no step ran after the budget was spent");
}

/// A split with a given difference has two unknowns: the calculator solves the system (`x + y = 100; x - y =
/// 20`), or the planner works it out in steps; either way both shares are in the answer.
#[test]
fn a_split_with_a_difference_gets_both_shares() {
    let scratch = Scratch::new();
    let json =
        run_json(&scratch, &["Ann and Ben share 100 dollars; Ann gets 20 more than Ben. How much does each get?"]);
    assert_eq!(json["stop"], "done", "{json}");
    let answer = json["answer"].as_str().unwrap_or_default();
    assert!(answer.contains("60") && answer.contains("40"), "{json}");
}

/// SmolLM2-135M (`llama` architecture, SmolLM's BPE pre-tokenizer, a ChatML template of its own) as the executor
/// of `tandem run`: the plan's `llm` step is written by it, as the run log records.
#[test]
fn smollm2_runs_as_the_executor() {
    const SMOLLM2: &str = "smollm2-135m-instruct-q4_1";
    real_model(SMOLLM2);
    let scratch = Scratch::new();
    let (ws, plan) = summarise_notes_plan(&scratch);
    let args = ["run", "--threads", "2", "--executor", SMOLLM2, "--joiner", "off", "--workspace"];
    let mut args = args.to_vec();
    args.extend([ws.to_str().unwrap(), "--plan", plan.to_str().unwrap()]);
    let (json, _) = scratch.tandem_json(&args);
    assert_eq!(json["stop"], "done", "{json}");
    assert_eq!(json["executor"]["calls"], 1, "{json}");
    let events = scratch.latest_events();
    let loaded: Vec<&Value> = events.iter().filter(|e| e["event"] == "model_loaded").collect();
    assert_eq!(loaded.len(), 1, "only the executor loads: {loaded:?}");
    assert_eq!(loaded[0]["role"], "executor");
    assert_eq!(loaded[0]["id"], SMOLLM2);
    // The log names the exact weights: the manifest's SHA-256 of the file (docs/models.md, "Bringing a model").
    assert_eq!(loaded[0]["sha256"], "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53");
    let step = events.iter().find(|e| e["event"] == "step_finished" && e["step"] == "s2").expect("s2 finished");
    assert_eq!(step["via"], "executor", "{step}");
    assert!(step["error"].is_null(), "{step}");
    let text = step["output"]["text"].as_str().unwrap();
    assert!(!text.trim().is_empty(), "SmolLM2 wrote the step's text: {step}");
    let call = events.iter().find(|e| e["event"] == "executor_call").expect("an executor call");
    assert!(call["usage"]["tokens_out"].as_u64().unwrap() > 0, "{call}");
}
