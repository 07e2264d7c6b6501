//! `tandem bench serve`: concurrent clients streaming chat requests at an OpenAI-compatible server as users send
//! them (every prompt new, sampled as clients sample, or greedy), workload by workload (`text`: a fixed number of
//! tokens without tools; `tools`: a required call; `long`: a new 1,500-token document and a question) and level
//! by level (1, 4, 16 clients); per level requests/s, time to first token p50/p99, completion tokens/s, tokens an
//! answer, prompt tokens evaluated and errors. It starts `tandem serve` itself (or loads a server at `--url`),
//! and with a `llama-server` binary runs llama.cpp's server as it comes (`--jinja`, its defaults) on the same
//! file, threads and slots, alternating the two, and reports the ratios. Every slot of either server is warmed
//! (one request a slot, all at once) before the measured requests; the warm-up is reported apart. The run is
//! written as the other benchmarks' are: `samples.jsonl` (every request, both phases), `summary.json`
//! (with `repeated_prompts`: requests whose prompt an earlier one had sent, 0 unless the messages ran out),
//! `summary.md`.
//!
//! Parts: the requests (`workload`), the clients (`client`), the servers as child processes (`servers`), the
//! figures and their table (`report`).

pub mod client;
pub mod report;
pub mod servers;
pub mod workload;

use std::collections::HashSet;
use std::path::PathBuf;

use serde_json::json;

use super::records::BenchRecorder;
use crate::progress::{ProgressUnit, Reporter};
use crate::{Error, Result};
use client::{run_level, warm_up, Batch};
use report::{markdown, LevelFigures, Phase, Ratios, Row};
use servers::{Launch, RunningServer, ServerKind};
use workload::{Kind, Sampling, Workload};

/// What `tandem bench serve` runs.
#[derive(Debug, Clone)]
pub struct ServeBenchSettings {
    /// The GGUF file served.
    pub model: PathBuf,
    /// The name requests give as `model`.
    pub model_name: String,
    /// The workloads, each run and reported apart.
    pub workloads: Vec<Kind>,
    /// How answers are chosen, each run and reported apart.
    pub samplings: Vec<Sampling>,
    /// Concurrent clients, one level each.
    pub clients: Vec<usize>,
    /// Requests each client sends per level, one after another.
    pub requests_per_client: usize,
    /// `max_tokens` of every request.
    pub max_tokens: usize,
    /// Compute threads of each server started.
    pub threads: usize,
    /// Repetitions of each level on each server (medians are reported).
    pub repeats: usize,
    /// The `tandem` binary to start (`tandem serve`).
    pub tandem: PathBuf,
    /// A server already running at this base URL instead of starting `tandem serve`.
    pub url: Option<String>,
    /// Also run llama.cpp's `llama-server` at this path, alternating with Tandem.
    pub llama_server: Option<PathBuf>,
    /// Where the run directory goes.
    pub out: PathBuf,
}

/// The report: figures per level and server (medians over repetitions), every repetition, the ratios.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServeBenchReport {
    pub levels: Vec<LevelFigures>,
    pub runs: Vec<LevelFigures>,
    pub ratios: Vec<Ratios>,
    /// Requests (on each server) whose prompt an earlier request of the run had sent.
    pub repeated_prompts: usize,
    /// The run directory.
    pub dir: PathBuf,
}

/// The system's load averages (1, 5, 15 minutes) from `/proc/loadavg`, where there is one: the machine's other
/// work is part of every figure.
fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut parts = text.split_whitespace().map(|p| p.parse::<f64>().ok());
    Some([parts.next()??, parts.next()??, parts.next()??])
}

/// Runs every level on each server and writes the run directory.
pub fn run(settings: &ServeBenchSettings, reporter: &dyn Reporter) -> Result<ServeBenchReport> {
    if settings.clients.is_empty() || settings.clients.contains(&0) {
        return Err(Error::Usage("--clients needs one or more numbers of clients, each at least 1".into()));
    }
    if settings.workloads.is_empty() {
        return Err(Error::Usage("--workload needs text, tools, long or several (text,tools,long)".into()));
    }
    if settings.samplings.is_empty() {
        return Err(Error::Usage("--sampling needs sampled, greedy or both (sampled,greedy)".into()));
    }
    if settings.requests_per_client == 0 || settings.max_tokens == 0 {
        return Err(Error::Usage("--requests and --max-completion-tokens must be at least 1".into()));
    }
    if settings.url.is_some() && settings.llama_server.is_some() {
        return Err(Error::Usage(
            "--url loads a server already running; --vs-llama-server starts both servers itself: give one".into(),
        ));
    }
    if let Some(bin) = &settings.llama_server {
        if !bin.is_file() {
            return Err(Error::Bench(format!(
                "no llama-server at {}: build one with scripts/build-llama-server.sh (prints its path)",
                bin.display()
            )));
        }
    }
    let workload = Workload::builtin()?;
    let mut recorder = BenchRecorder::create(&settings.out, "serve")?;
    let load_before = load_average();
    let repeats = settings.repeats.max(1);
    let servers: Vec<ServerKind> = match settings.llama_server {
        Some(_) => vec![ServerKind::Tandem, ServerKind::LlamaServer],
        None => vec![ServerKind::Tandem],
    };
    let levels_run = settings.workloads.len() * settings.samplings.len() * settings.clients.len() * repeats;
    let progress = reporter.start("bench serve", Some((levels_run * servers.len()) as u64), ProgressUnit::Items);
    let mut runs = Vec::new();
    // The run's request numbers: each level's repetition gets its own, the same on both servers (so both answer
    // the same prompts), and no two requests of the run share one.
    let mut next = 0u64;
    let mut sent = HashSet::new();
    let mut repeated_prompts = 0;
    for &kind in &settings.workloads {
        for &sampling in &settings.samplings {
            for &clients in &settings.clients {
                for repeat in 0..repeats {
                    let first = next;
                    next += (clients + clients * settings.requests_per_client) as u64;
                    for n in first..next {
                        if !sent.insert((kind == Kind::Tools, workload.message(kind, n))) {
                            repeated_prompts += 1;
                        }
                    }
                    // Alternating which server goes first, so drift in the machine's load falls on both.
                    let mut order = servers.clone();
                    if repeat % 2 == 1 {
                        order.reverse();
                    }
                    for server in order {
                        let level = Level { kind, sampling, server, clients, repeat, first };
                        let (cold, warm) = run_one(settings, &workload, level, &mut recorder)?;
                        progress.inc(1);
                        reporter.message(&format!(
                            "{} {} with {} clients on {}: {:.2} requests/s, TTFT p50 {:.3} s, {:.1} tok/s, {} errors",
                            kind.name(),
                            sampling.name(),
                            clients,
                            server.name(),
                            warm.requests_per_s,
                            warm.ttft_p50_s,
                            warm.tokens_per_s,
                            warm.errors + cold.errors
                        ));
                        runs.push(cold);
                        runs.push(warm);
                    }
                }
            }
        }
    }
    progress.finish();
    let mut levels = Vec::new();
    let mut ratios = Vec::new();
    for &kind in &settings.workloads {
        for &sampling in &settings.samplings {
            for phase in [Phase::Warm, Phase::Cold] {
                for &clients in &settings.clients {
                    let of = |server: ServerKind| {
                        let row = Row { workload: kind, sampling, phase, server, clients };
                        let these: Vec<LevelFigures> = runs.iter().filter(|r| r.row() == row).cloned().collect();
                        LevelFigures::median_of(&these)
                    };
                    let ours = of(ServerKind::Tandem);
                    let theirs = of(ServerKind::LlamaServer);
                    if let (Phase::Warm, Some(ours), Some(theirs)) = (phase, &ours, &theirs) {
                        ratios.push(Ratios::of(ours, theirs));
                    }
                    levels.extend(ours);
                    levels.extend(theirs);
                }
            }
        }
    }
    let load_after = load_average();
    let heading = format!(
        "bench serve: {} ({}; {}; {} threads a server, every prompt new ({} repeated), every slot warmed first, then {} requests a client, max_tokens {}, medians of {} alternating runs; load average {} before, {} after)",
        settings.model_name,
        settings.workloads.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
        settings.samplings.iter().map(|s| s.name()).collect::<Vec<_>>().join(" and "),
        settings.threads,
        repeated_prompts,
        settings.requests_per_client,
        settings.max_tokens,
        repeats,
        load_before.map_or("?".into(), |l| format!("{:.2}", l[0])),
        load_after.map_or("?".into(), |l| format!("{:.2}", l[0])),
    );
    let table = markdown(&levels, &ratios, &heading);
    let document = json!({
        "bench": "serve",
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "model": settings.model,
        "model_name": settings.model_name,
        "url": settings.url,
        "llama_server": settings.llama_server,
        "threads": settings.threads,
        "workloads": settings.workloads,
        "samplings": settings.samplings,
        "clients": settings.clients,
        "requests_per_client": settings.requests_per_client,
        "max_tokens": settings.max_tokens,
        "repeats": repeats,
        "repeated_prompts": repeated_prompts,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "finished_unix_ms": crate::agent::log::events::now_ms(),
        "levels": levels,
        "ratios": ratios,
        "runs": runs,
    });
    recorder.write("summary.json", &serde_json::to_string_pretty(&document).map_err(Error::encode("the summary"))?)?;
    recorder.write("summary.md", &table)?;
    Ok(ServeBenchReport { levels, runs, ratios, repeated_prompts, dir: recorder.dir().to_path_buf() })
}

/// Which run of which level.
#[derive(Debug, Clone, Copy)]
struct Level {
    kind: Kind,
    sampling: Sampling,
    server: ServerKind,
    clients: usize,
    repeat: usize,
    /// The run's number of the level's first request (its warm-up's).
    first: u64,
}

/// One level on one server: started with as many slots as clients (unless it is `--url`'s), every slot warmed
/// with one request (all at once: the cold phase), loaded (the warm phase), stopped; every request of both phases
/// is recorded.
fn run_one(
    settings: &ServeBenchSettings,
    workload: &Workload,
    level: Level,
    recorder: &mut BenchRecorder,
) -> Result<(LevelFigures, LevelFigures)> {
    let Level { kind, sampling, server, clients, repeat, first } = level;
    let launch = Launch {
        model: settings.model.clone(),
        model_name: settings.model_name.clone(),
        threads: settings.threads,
        slots: clients,
    };
    let running = match (server, &settings.url, &settings.llama_server) {
        (ServerKind::Tandem, Some(_), _) => None,
        (ServerKind::Tandem, None, _) => Some(RunningServer::tandem(&settings.tandem, &launch)?),
        (ServerKind::LlamaServer, _, Some(bin)) => Some(RunningServer::llama_server(bin, &launch)?),
        (ServerKind::LlamaServer, _, None) => return Err(Error::Internal("llama-server without a binary".into())),
    };
    let base = match (&running, &settings.url) {
        (Some(running), _) => running.base.clone(),
        (None, Some(url)) => url.trim_end_matches('/').trim_end_matches("/v1").to_string(),
        (None, None) => return Err(Error::Internal("no server to load".into())),
    };
    let log = || running.as_ref().map(|r| format!("; its log ends:\n{}", r.log_tail())).unwrap_or_default();
    let batch = Batch { workload, kind, sampling, model: &settings.model_name, max_tokens: settings.max_tokens, first };
    let cold = warm_up(&base, batch, clients)
        .map_err(|e| Error::Bench(format!("{}'s warm-up request failed: {e}{}", server.name(), log())))?;
    let measured = Batch { first: first + clients as u64, ..batch };
    let warm = run_level(&base, measured, clients, settings.requests_per_client);
    for (phase, outcome) in [(Phase::Cold, &cold), (Phase::Warm, &warm)] {
        for request in &outcome.requests {
            let phase_name = if phase == Phase::Cold { "cold" } else { "warm" };
            let sample = format!(
                "{}-{}-{}-c{clients}-r{repeat}-{phase_name}-{}-{}",
                server.name(),
                kind.name(),
                sampling.name(),
                request.client,
                request.request
            );
            let mut record = serde_json::to_value(request).map_err(Error::encode("a request's record"))?;
            record["sample"] = json!(sample);
            record["server"] = json!(server.name());
            record["workload"] = json!(kind.name());
            record["sampling"] = json!(sampling.name());
            record["phase"] = json!(phase_name);
            record["clients"] = json!(clients);
            record["repeat"] = json!(repeat);
            recorder.append(&record)?;
        }
    }
    if let Some(first) = warm.requests.iter().find_map(|r| r.error.as_deref()) {
        tracing::warn!("{} at {clients} clients: a request failed: {first}{}", server.name(), log());
    }
    let row = |phase| Row { workload: kind, sampling, phase, server, clients };
    Ok((LevelFigures::of(row(Phase::Cold), &cold), LevelFigures::of(row(Phase::Warm), &warm)))
}
