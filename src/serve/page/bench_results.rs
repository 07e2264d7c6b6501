//! Benchmark results for the web page, read from the directory `tandem serve --bench-results DIR` names (where
//! `tandem bench` writes a directory per run: `summary.json`, `summary.md`, `samples.jsonl`, a pairs run's
//! `chart.svg`). Read-only: `GET /v1/bench` lists the runs, `GET /v1/bench/{name}` gives one run's summary and
//! chart, `GET /v1/bench/{name}/samples` pages through its records. Names are directory names inside DIR, never
//! paths; without the flag every route answers 404 saying how to turn it on. Every file is read off the HTTP
//! threads (`runs::off_runtime`): a run's records may be 64 MiB, and the runtime has two workers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Path as UrlPath, Query, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::serve::plumbing::error::ApiError;
use crate::serve::runs::routes::off_runtime;
use crate::serve::AppState;

/// Most records one samples page holds.
const MAX_PAGE: usize = 200;
/// Largest file read (a summary, a chart, the records), in bytes.
const MAX_FILE: u64 = 64 << 20;

fn root(state: &AppState) -> Result<&Path, ApiError> {
    state.bench_results.as_deref().ok_or_else(|| {
        ApiError::not_found(
            "this server shows no benchmark results: start it with --bench-results DIR (e.g. bench-results)",
            "bench_results_off",
        )
    })
}

/// A run's directory inside the results directory, or 404.
fn run_dir(state: &AppState, name: &str) -> Result<PathBuf, ApiError> {
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+' | '.'));
    let dir = root(state)?.join(name);
    if plain && dir.is_dir() {
        Ok(dir)
    } else {
        Err(ApiError::not_found(format!("no benchmark run {name:?} in the results directory"), "bench_run_not_found"))
    }
}

/// A file of a run as text, when it is there (and not over the size cap).
fn read(dir: &Path, file: &str) -> Result<Option<String>, ApiError> {
    let path = dir.join(file);
    match std::fs::metadata(&path) {
        Err(_) => Ok(None),
        Ok(meta) if meta.len() > MAX_FILE => {
            Err(ApiError::internal(format!("{} is larger than {MAX_FILE} bytes", path.display())))
        }
        Ok(_) => std::fs::read_to_string(&path)
            .map(Some)
            .map_err(|e| ApiError::internal(format!("reading {}: {e}", path.display()))),
    }
}

/// The answer of `work`, run on a blocking thread.
async fn answer(work: impl FnOnce() -> Result<Value, ApiError> + Send + 'static) -> Response {
    match off_runtime(work).await {
        Ok(value) => Json(value).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /v1/bench`: the runs in the results directory, newest name first, each with its suite and whether it has
/// a summary, records and a chart.
pub async fn list(State(state): State<Arc<AppState>>) -> Response {
    answer(move || {
        let root = root(&state)?;
        let entries =
            std::fs::read_dir(root).map_err(|e| ApiError::internal(format!("listing {}: {e}", root.display())))?;
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort_by(|a, b| b.cmp(a));
        let data: Vec<Value> = names
            .iter()
            .map(|name| {
                let dir = root.join(name);
                let summary: Option<Value> =
                    read(&dir, "summary.json").ok().flatten().and_then(|t| serde_json::from_str(&t).ok());
                json!({
                    "name": name,
                    "suite": summary.as_ref().and_then(|s| s.get("suite").cloned()),
                    "summary": dir.join("summary.json").is_file(),
                    "samples": dir.join("samples.jsonl").is_file(),
                    "chart": dir.join("chart.svg").is_file(),
                })
            })
            .collect();
        Ok(json!({"object": "list", "data": data}))
    })
    .await
}

/// `GET /v1/bench/{name}`: the run's `summary.json`, `summary.md` and `chart.svg` (each null when absent).
pub async fn show(State(state): State<Arc<AppState>>, UrlPath(name): UrlPath<String>) -> Response {
    answer(move || {
        let dir = run_dir(&state, &name)?;
        let summary =
            read(&dir, "summary.json")?.map(|text| serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text)));
        Ok(json!({
            "name": name,
            "summary": summary,
            "markdown": read(&dir, "summary.md")?,
            "chart": read(&dir, "chart.svg")?,
        }))
    })
    .await
}

/// `GET /v1/bench/{name}/samples?offset=N&limit=M`: records of `samples.jsonl` (50 unless `limit` says, at most
/// 200), with the total.
pub async fn samples(
    State(state): State<Arc<AppState>>,
    UrlPath(name): UrlPath<String>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Response {
    answer(move || {
        let number = |key: &str, default: usize, max: usize| match query.get(key) {
            None => Ok(default),
            Some(text) => text
                .parse::<usize>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| ApiError::invalid(key, format!("{key} must be a whole number from 0 to {max}"))),
        };
        let (offset, limit) = (number("offset", 0, usize::MAX)?, number("limit", 50, MAX_PAGE)?);
        let dir = run_dir(&state, &name)?;
        let text = read(&dir, "samples.jsonl")?.unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let data: Vec<Value> = lines
            .iter()
            .skip(offset)
            .take(limit)
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| json!({"unreadable": l})))
            .collect();
        Ok(json!({"object": "list", "data": data, "offset": offset, "total": lines.len()}))
    })
    .await
}
