//! `tandem bench serve` end to end: the real binary starts `tandem serve` on the real 0.5B model per workload and
//! level, warms every slot, drives it with concurrent streamed requests (text of a fixed length; required tool
//! calls), and writes its run directory; the summary must hold every figure for every workload, phase and level,
//! every request answered with a prompt of its own, text answers exactly max_tokens long. Answers are kept short
//! (48 tokens: room for a call). Against llama.cpp's real `llama-server` as it comes, both servers answer the
//! same new prompts, long ones included, and Tandem's `tools` answers are calls.

use serde_json::{json, Value};

use crate::common::real_model;
use crate::common::runs::Scratch;
use crate::serve::MODEL;

#[test]
fn bench_serve_loads_tandem_serve_and_reports_every_level() {
    real_model(MODEL);
    let scratch = Scratch::new();
    let out = scratch.path("results");
    let output = scratch.tandem(&[
        "bench",
        "serve",
        "--quiet",
        "--model",
        MODEL,
        "--clients",
        "1,2",
        "--requests",
        "2",
        "--max-completion-tokens",
        "48",
        "--workload",
        "text,tools",
        "--sampling",
        "sampled",
        "--threads",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "bench serve failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let dirs: Vec<_> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1, "one run directory: {dirs:?}");
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(dirs[0].join("summary.json")).unwrap()).unwrap();
    let levels = summary["levels"].as_array().expect("levels");
    // Both workloads, each with its warm-up (cold) and measured (warm) phase, at both levels.
    assert_eq!(levels.len(), 8, "one row per workload, phase and level: {summary:#}");
    assert_eq!(summary["repeated_prompts"], 0, "every prompt new: {summary:#}");
    let level = |workload: &str, phase: &str, clients: usize| {
        levels
            .iter()
            .find(|l| l["workload"] == workload && l["phase"] == phase && l["clients"] == clients)
            .unwrap_or_else(|| panic!("no {workload} {phase} row at {clients} clients: {summary:#}"))
    };
    for workload in ["text", "tools"] {
        for clients in [1, 2] {
            // Every slot warmed: one warm-up request a slot.
            let cold = level(workload, "cold", clients);
            assert_eq!((cold["requests"].clone(), cold["errors"].clone()), (json!(clients), json!(0)), "{cold}");
            let warm = level(workload, "warm", clients);
            assert_eq!((warm["server"].clone(), warm["sampling"].clone()), (json!("tandem"), json!("sampled")));
            assert_eq!(warm["requests"], clients * 2, "{warm}");
            assert_eq!(warm["errors"], 0, "every request answered: {warm}");
            for figure in ["requests_per_s", "ttft_p50_s", "ttft_p99_s", "tokens_per_s"] {
                let value = warm[figure].as_f64().unwrap_or(0.0);
                assert!(value > 0.0 && value.is_finite(), "{figure} at {clients} clients: {warm}");
            }
            assert!(warm["ttft_p99_s"].as_f64() >= warm["ttft_p50_s"].as_f64(), "{warm}");
            let tokens = warm["completion_tokens"].as_u64().unwrap() as usize;
            if workload == "text" {
                // ignore_eos: every text answer is exactly max_tokens long.
                assert_eq!(tokens, 48 * clients * 2, "{warm}");
            } else {
                assert!(tokens > 0, "{warm}");
            }
            // The warmed slots reuse the shared prompt (the system prompt, and the tools): fewer tokens evaluated
            // than sent, though every user message is new.
            let evaluated = warm["prompt_evaluated"].as_u64().expect("tandem reports cached tokens");
            assert!(evaluated < warm["prompt_tokens"].as_u64().unwrap(), "{warm}");
        }
    }
    assert!(summary["ratios"].as_array().unwrap().is_empty(), "no peer, no ratios");
    // Every request of both phases is a record with its own id, its workload, phase and token counts.
    let samples = std::fs::read_to_string(dirs[0].join("samples.jsonl")).unwrap();
    let records: Vec<Value> = samples.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), 2 * (1 + 2 + 2 + 4), "{samples}");
    let ids: std::collections::HashSet<_> = records.iter().map(|r| r["sample"].to_string()).collect();
    assert_eq!(ids.len(), records.len(), "{samples}");
    let prompts: std::collections::HashSet<_> = records.iter().map(|r| r["prompt"].as_u64().unwrap()).collect();
    assert_eq!(prompts.len(), records.len(), "each request its own message: {samples}");
    for record in &records {
        assert!(record["error"].is_null() && record["ttft_s"].as_f64().is_some(), "{record}");
        assert!(
            record["prompt_tokens"].as_u64() > Some(0) && record["prompt_evaluated"].as_u64().is_some(),
            "{record}"
        );
        if record["workload"] == "text" {
            assert_eq!((record["finish_reason"].clone(), record["tool_calls"].clone()), (json!("length"), json!(0)));
            assert_eq!(record["completion_tokens"], 48, "{record}");
        } else {
            // tool_choice required: every answer is a call (one that outgrew the 48 tokens ends as `length`).
            assert!(record["tool_calls"].as_u64() > Some(0), "{record}");
            // The listing pass's tokens are counted as reasoning tokens, beside the answer's at most 48.
            let answer = record["completion_tokens"].as_u64().unwrap() - record["reasoning_tokens"].as_u64().unwrap();
            assert!(answer > 0 && answer <= 48, "{record}");
            assert!(["tool_calls", "length"].contains(&record["finish_reason"].as_str().unwrap_or("")), "{record}");
        }
    }
    assert!(records.iter().any(|r| r["finish_reason"] == "tool_calls"), "{samples}");
    let table = std::fs::read_to_string(dirs[0].join("summary.md")).unwrap();
    assert!(table.contains("| text | sampled | 2 | tandem | 4 | 0 |"), "{table}");
    assert!(table.contains("| tools | sampled | 2 | tandem | 4 | 0 |"), "{table}");
    assert!(table.contains("Warm-up (cold) phase"), "{table}");
    assert!(stdout.contains("TTFT p50"), "{stdout}");
}

#[test]
fn bench_serve_without_a_llama_server_binary_says_how_to_build_one() {
    real_model(MODEL);
    let scratch = Scratch::new();
    let missing = scratch.path("no-such-llama-server");
    let output = scratch.tandem(&[
        "bench",
        "serve",
        "--quiet",
        "--model",
        MODEL,
        "--clients",
        "1",
        "--out",
        scratch.path("r").to_str().unwrap(),
        "--vs-llama-server",
        missing.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("scripts/build-llama-server.sh"), "{stderr}");
}

/// llama.cpp's `llama-server`, at the fixed path scripts/build-llama-server.sh builds it to (whatever
/// CARGO_TARGET_DIR says).
fn llama_server() -> std::path::PathBuf {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/llama.cpp/build/bin/llama-server");
    assert!(
        path.is_file(),
        "llama.cpp's server {} is missing: run scripts/build-llama-server.sh (builds it from the llama-cpp-python \
         source package, in the tree scripts/build-llama-bench.sh uses)",
        path.display()
    );
    path
}

#[test]
fn bench_serve_sends_both_servers_the_same_new_prompts_long_ones_included() {
    real_model(MODEL);
    let scratch = Scratch::new();
    let out = scratch.path("results");
    let llama_server = llama_server();
    let output = scratch.tandem(&[
        "bench",
        "serve",
        "--quiet",
        "--model",
        MODEL,
        "--workload",
        "tools,long",
        "--sampling",
        "greedy",
        "--clients",
        "1",
        "--requests",
        "1",
        "--max-completion-tokens",
        "48",
        "--threads",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--vs-llama-server",
        llama_server.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "bench serve failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let dir = std::fs::read_dir(&out).unwrap().next().unwrap().unwrap().path();
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["repeated_prompts"], 0, "{summary:#}");
    assert_eq!(summary["ratios"].as_array().map(Vec::len), Some(2), "a ratio row per workload: {summary:#}");
    let samples = std::fs::read_to_string(dir.join("samples.jsonl")).unwrap();
    let records: Vec<Value> = samples.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let of = |server: &str, workload: &str| -> Vec<&Value> {
        records.iter().filter(|r| r["server"] == server && r["workload"] == workload).collect()
    };
    for workload in ["tools", "long"] {
        let (ours, theirs) = (of("tandem", workload), of("llama-server", workload));
        // One warm-up request and one measured one each, every one answered.
        assert_eq!((ours.len(), theirs.len()), (2, 2), "{workload}: {samples}");
        for (a, b) in ours.iter().zip(&theirs) {
            assert!(a["error"].is_null() && b["error"].is_null(), "{a}\n{b}");
            assert_eq!(a["prompt"], b["prompt"], "both servers answer the same request numbers");
        }
        assert_ne!(ours[0]["prompt"], ours[1]["prompt"], "the warm-up and the measured request differ");
    }
    for record in of("tandem", "long").into_iter().chain(of("llama-server", "long")) {
        assert!(record["prompt_tokens"].as_u64() >= Some(1500), "a long prompt: {record}");
        assert_eq!(record["completion_tokens"], 48, "{record}");
    }
    // Tandem's grammar makes every required answer a call; llama-server's answers are recorded as they come.
    for answer in of("tandem", "tools") {
        assert!(answer["tool_calls"].as_u64() > Some(0), "{answer}");
    }
    let table = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(table.contains("| long | greedy | 1 | llama-server | 1 | 0 |"), "{table}");
}

/// The children of process `pid` (Linux's `/proc/PID/task/*/children`).
#[cfg(target_os = "linux")]
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| list.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<u32>>())
        .collect()
}

/// Whether `pid` is running (a zombie or a reused pid of another program does not count).
#[cfg(target_os = "linux")]
fn alive(pid: u32, program: &str) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    status.contains(&format!("({program})")) && !status.contains(") Z ")
}

#[cfg(target_os = "linux")]
#[test]
fn a_benchmark_killed_outright_takes_its_server_with_it() {
    real_model(MODEL);
    let scratch = Scratch::new();
    let out = scratch.path("results");
    let mut bench = scratch
        .command(&["bench", "serve", "--quiet", "--model", MODEL, "--clients", "1", "--requests", "1"])
        .args(["--max-completion-tokens", "4", "--threads", "1", "--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let server = loop {
        if let Some(&child) = children_of(bench.id()).first() {
            break child;
        }
        assert!(std::time::Instant::now() < deadline, "bench serve started no server within a minute");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(alive(server, "tandem"), "the server runs while the benchmark does");
    // SIGKILL: no destructor runs in the benchmark, so only the kernel can stop the server.
    bench.kill().unwrap();
    bench.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while alive(server, "tandem") {
        assert!(std::time::Instant::now() < deadline, "the server {server} outlived its benchmark");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
