//! The peer in `tandem bench speed --vs-llamacpp BIN`: runs llama.cpp's `llama-bench` on the same file, threads
//! and token counts, and reads its JSON output (prefill and decode tok/s) and the child's peak RSS.
//!
//! `scripts/build-llama-bench.sh` builds the binary from the source on PyPI (`llama-cpp-python`).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::process_peak_rss_bytes;
use crate::{Error, Result};

/// One `llama-bench` invocation's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PeerRun {
    pub prefill_tok_s: f64,
    pub decode_tok_s: f64,
    /// Peak resident set size of the child, when the platform reports it.
    pub peak_rss_bytes: Option<u64>,
}

/// One row of `llama-bench -o json`: a prompt test (`n_gen` 0) or a generation test (`n_prompt` 0).
#[derive(Debug, serde::Deserialize)]
struct BenchRow {
    n_prompt: usize,
    n_gen: usize,
    avg_ts: f64,
}

/// Where llama.cpp runs: all layers on the CPU, or all offloaded to the GPU (as ours run on one device).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerDevice {
    Cpu,
    Gpu,
}

impl PeerDevice {
    /// `-ngl`: a GPU build of llama-bench offloads every layer by default, so the CPU must be asked for.
    fn gpu_layers(self) -> &'static str {
        match self {
            PeerDevice::Cpu => "0",
            PeerDevice::Gpu => "999",
        }
    }
}

/// Runs `llama-bench` once (`-r 1`): prefill of `prefill` tokens and decode of `decode` tokens after `depth`
/// cached positions. `-d` would put the prefill test at that depth too, so a decode at depth is a second
/// invocation.
pub fn run_llama_bench(
    bin: &Path,
    model: &Path,
    device: PeerDevice,
    threads: usize,
    prefill: usize,
    decode: usize,
    depth: usize,
) -> Result<PeerRun> {
    let args = |prompt, gen, depth| bench_args(device, threads, prompt, gen, depth);
    if depth == 0 {
        let (json, peak) = invoke(bin, model, &args(prefill, decode, 0))?;
        return Ok(PeerRun { peak_rss_bytes: peak, ..parse_llama_bench_json(&json, prefill, decode)? });
    }
    let (prefill_json, prefill_peak) = invoke(bin, model, &args(prefill, 0, 0))?;
    let (decode_json, decode_peak) = invoke(bin, model, &args(0, decode, depth))?;
    Ok(PeerRun {
        prefill_tok_s: rate(&prefill_json, prefill, 0)?,
        decode_tok_s: rate(&decode_json, 0, decode)?,
        peak_rss_bytes: prefill_peak.max(decode_peak),
    })
}

/// Runs `llama-bench` once for plain decoding only: `decode` tokens after `depth` cached positions, on the CPU;
/// returns its tok/s.
pub fn run_llama_decode(bin: &Path, model: &Path, threads: usize, decode: usize, depth: usize) -> Result<f64> {
    let (json, _) = invoke(bin, model, &bench_args(PeerDevice::Cpu, threads, 0, decode, depth))?;
    rate(&json, 0, decode)
}

/// One `llama-bench -o json` invocation's arguments: one repetition, `prompt` prompt and `gen` new tokens after
/// `depth` cached positions.
fn bench_args(device: PeerDevice, threads: usize, prompt: usize, gen: usize, depth: usize) -> Vec<String> {
    let mut args: Vec<String> = ["-ngl", device.gpu_layers(), "-r", "1", "-o", "json"].map(String::from).to_vec();
    for (flag, value) in [("-t", threads), ("-p", prompt), ("-n", gen), ("-d", depth)] {
        args.extend([flag.to_string(), value.to_string()]);
    }
    args
}

/// Runs `bin -m model args…`, returning its standard output and its peak RSS.
fn invoke(bin: &Path, model: &Path, args: &[String]) -> Result<(String, Option<u64>)> {
    let mut child = Command::new(bin)
        .arg("-m")
        .arg(model)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            Error::Bench(format!(
                "could not run {}: {e}; build it with scripts/build-llama-bench.sh, or pass the path of a llama-bench",
                bin.display()
            ))
        })?;
    // Read both pipes on threads (so neither fills up) while this thread samples the child's peak RSS: the
    // kernel's per-child figure (getrusage) can include the parent's size at fork, so it would not be llama.cpp's.
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut peak = None;
    let status = loop {
        if let Some(hwm) = process_peak_rss_bytes(&child.id().to_string()) {
            peak = Some(hwm);
        }
        let exited = child.try_wait().map_err(|e| Error::Bench(format!("waiting for {}: {e}", bin.display())))?;
        if let Some(status) = exited {
            break status;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    if !status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(Error::Bench(format!("{} failed ({status}):\n{}", bin.display(), tail.join("\n"))));
    }
    Ok((stdout, peak))
}

/// The prefill and decode rates from `llama-bench -o json` output.
pub fn parse_llama_bench_json(json: &str, prefill: usize, decode: usize) -> Result<PeerRun> {
    Ok(PeerRun { prefill_tok_s: rate(json, prefill, 0)?, decode_tok_s: rate(json, 0, decode)?, peak_rss_bytes: None })
}

/// The tok/s of the test with `n_prompt` prompt and `n_gen` new tokens in `llama-bench -o json` output.
fn rate(json: &str, n_prompt: usize, n_gen: usize) -> Result<f64> {
    let rows: Vec<BenchRow> = serde_json::from_str(json.trim())
        .map_err(|e| Error::Bench(format!("llama-bench printed something other than its JSON report: {e}")))?;
    rows.iter().find(|r| r.n_prompt == n_prompt && r.n_gen == n_gen).map(|r| r.avg_ts).ok_or_else(|| {
        Error::Bench(format!("llama-bench's report has no test with {n_prompt} prompt and {n_gen} new tokens"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trimmed from a real `llama-bench -p 512 -n 64 -r 1 -o json` report.
    const REPORT: &str = r#"[
      {"build_commit": "0c1e570", "model_filename": "m.gguf", "n_threads": 2, "n_prompt": 512, "n_gen": 0,
       "avg_ns": 3021000000, "avg_ts": 169.3, "stddev_ts": 0.0, "samples_ts": [169.3]},
      {"build_commit": "0c1e570", "model_filename": "m.gguf", "n_threads": 2, "n_prompt": 0, "n_gen": 64,
       "avg_ns": 1753000000, "avg_ts": 36.5, "stddev_ts": 0.0, "samples_ts": [36.5]}
    ]"#;

    #[test]
    fn reads_prefill_and_decode_rates() {
        let run = parse_llama_bench_json(REPORT, 512, 64).unwrap();
        assert_eq!(run.prefill_tok_s, 169.3);
        assert_eq!(run.decode_tok_s, 36.5);
    }

    #[test]
    fn a_missing_test_or_garbage_is_an_error_that_says_so() {
        let err = parse_llama_bench_json(REPORT, 128, 64).unwrap_err().to_string();
        assert!(err.contains("128 prompt"), "{err}");
        let err = parse_llama_bench_json("error: model not found", 512, 64).unwrap_err().to_string();
        assert!(err.contains("JSON report"), "{err}");
    }
}
