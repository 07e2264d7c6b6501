//! Agent runs over HTTP: `POST /v1/runs` starts one on a generation slot, `GET /v1/runs/{id}` is its summary,
//! `GET /v1/runs/{id}/events` streams its `events.jsonl` as server-sent events until `run_finished`.
//!
//! A run is logged in the runs directory exactly as `tandem run` logs it, so it outlives the server: its summary
//! and events are read back from the log, and `tandem resume` continues one the server left unfinished.
//! Approval is `none` over HTTP for now (no one to ask).

use std::collections::HashSet;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tokio_stream::wrappers::ReceiverStream;

use super::chat::json_body;
use super::engine::Work;
use super::error::ApiError;
use super::AppState;
use crate::agent::setup::run_settings;
use crate::agent::summary::run_summary;
use crate::agent::{Agent, AutoApprove, EventLog, LazyModels, NoObserver};
use crate::settings::{AgentSettings, Approval};
use crate::tools::toolbox;

/// How often an events stream looks for new lines in the log.
const POLL: Duration = Duration::from_millis(200);

/// The ids of the runs this server has queued or is running.
pub type ActiveRuns = Arc<Mutex<HashSet<String>>>;

/// One agent run for a slot.
pub struct RunJob {
    goal: String,
    agent: AgentSettings,
    log: EventLog,
    active: ActiveGuard,
    stopping: Arc<AtomicBool>,
}

/// Keeps a run's id in the active set until the run is over (or dropped unrun).
struct ActiveGuard {
    id: String,
    active: ActiveRuns,
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.active.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.id);
    }
}

/// Runs an agent run on a slot's models: the tools are built per run (MCP servers live as long as the run), the
/// log ends with `run_finished` even when the run fails.
pub fn execute_run(models: &mut LazyModels<'_>, job: RunJob) {
    let RunJob { goal, agent, log, active, stopping } = job;
    if stopping.load(Ordering::Relaxed) {
        tracing::warn!(run = %active.id, "the server stopped before this run started: it was not run");
        return;
    }
    let outcome = (|| -> crate::Result<()> {
        let (context, registry) = toolbox::build_tools(&agent.tools)?;
        let settings = run_settings(&agent, &context, Approval::None);
        let mut approver = AutoApprove;
        let run = Agent::start(&goal, settings, log, &registry, &context, models, &mut approver, &NoObserver)?;
        run.run(None)?;
        Ok(())
    })();
    if let Err(e) = outcome {
        tracing::warn!(run = %active.id, error = %e, "an HTTP agent run failed before its log was closed");
    }
}

/// What a `POST /v1/runs` body asks for.
fn parse(value: &Value, agent: &mut AgentSettings) -> Result<String, ApiError> {
    let object = value.as_object().ok_or_else(|| ApiError::bad_request("the body must be a JSON object", None))?;
    for (key, field) in object {
        match key.as_str() {
            "goal" => {}
            "max_replans" => agent.budgets.max_replans = count(field, key)?.min(u64::from(u32::MAX)) as u32,
            "max_steps" => agent.budgets.max_steps = count(field, key)? as usize,
            "max_seconds" => agent.budgets.max_seconds = count(field, key)?,
            "max_tokens" => agent.budgets.max_tokens = count(field, key)? as usize,
            "approve" => match field.as_str() {
                Some("none") => {}
                _ => {
                    return Err(ApiError::invalid(
                        "approve",
                        "only \"none\" over HTTP: runs are not paused for approval by this server",
                    ))
                }
            },
            other => {
                return Err(ApiError::invalid(
                    other,
                    format!(
                        "unknown field {other:?}; a run takes goal, max_replans, max_steps, max_seconds, max_tokens, \
                         approve"
                    ),
                ))
            }
        }
    }
    match object.get("goal") {
        Some(Value::String(goal)) if !goal.trim().is_empty() => Ok(goal.clone()),
        Some(Value::String(_)) => Err(ApiError::invalid("goal", "the goal is empty")),
        Some(_) => Err(ApiError::invalid("goal", "the goal must be a string")),
        None => Err(ApiError::invalid("goal", "a run needs a goal")),
    }
}

fn count(field: &Value, key: &str) -> Result<u64, ApiError> {
    field.as_u64().ok_or_else(|| ApiError::invalid(key, format!("{key} must be a whole number ≥ 0")))
}

/// `POST /v1/runs`: 201 with the run's id once it is logged and queued.
pub async fn create(State(state): State<Arc<AppState>>, body: Result<Bytes, BytesRejection>) -> Response {
    match start(&state, body) {
        Ok(id) => (StatusCode::CREATED, Json(json!({"id": id, "object": "run", "status": "queued"}))).into_response(),
        Err(e) => e.into_response(),
    }
}

fn start(state: &AppState, body: Result<Bytes, BytesRejection>) -> Result<String, ApiError> {
    let value = json_body(state, body)?;
    let mut agent = state.agent.clone();
    let goal = parse(&value, &mut agent)?;
    let (id, dir) = state.runs.create_run().map_err(|e| ApiError::internal(format!("creating the run's log: {e}")))?;
    let log = EventLog::create(&dir).map_err(|e| ApiError::internal(format!("creating the run's log: {e}")))?;
    state.active.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone());
    let active = ActiveGuard { id: id.clone(), active: state.active.clone() };
    if let Err(e) =
        state.engine.submit(Work::Run(RunJob { goal, agent, log, active, stopping: state.stopping.clone() }))
    {
        // Never queued: no log is left behind.
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    Ok(id)
}

/// A run's directory, or 404. Ids are names inside the runs directory, never paths.
fn run_dir(state: &AppState, id: &str) -> Result<PathBuf, ApiError> {
    let plain = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    let dir = state.runs.root().join(id);
    if plain && dir.join(EventLog::FILE).is_file() {
        Ok(dir)
    } else {
        Err(ApiError::not_found(format!("no run {id:?} on this server"), "run_not_found"))
    }
}

fn is_active(state: &AppState, id: &str) -> bool {
    state.active.lock().unwrap_or_else(|p| p.into_inner()).contains(id)
}

/// `GET /v1/runs/{id}`: the run's summary (as `tandem runs show --json`) with its `status`: `queued`, `running`,
/// `finished`, or `interrupted` (not running here and never finished: `tandem resume` continues it).
pub async fn show(State(state): State<Arc<AppState>>, UrlPath(id): UrlPath<String>) -> Response {
    let summary = run_dir(&state, &id).and_then(|dir| {
        let active = is_active(&state, &id);
        let mut summary =
            run_summary(&id, &dir).map_err(|e| ApiError::internal(format!("reading run {id}'s log: {e}")))?;
        let finished = summary["stop"] != json!("interrupted");
        let empty = std::fs::metadata(dir.join(EventLog::FILE)).map(|m| m.len() == 0).unwrap_or(false);
        summary["status"] = json!(match (finished, active, empty) {
            (true, _, _) => "finished",
            (false, true, true) => "queued",
            (false, true, false) => "running",
            (false, false, _) => "interrupted",
        });
        Ok(summary)
    });
    match summary {
        Ok(summary) => Json(summary).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /v1/runs/{id}/events`: each line of the run's log as one event (`event:` the event's name, `data:` the
/// line), from the first; the stream ends after `run_finished`, or at the log's end when the run is not running on
/// this server (an `interrupted` event then says so).
pub async fn events(State(state): State<Arc<AppState>>, UrlPath(id): UrlPath<String>) -> Response {
    let dir = match run_dir(&state, &id) {
        Ok(dir) => dir,
        Err(e) => return e.into_response(),
    };
    let (sender, stream) = tokio::sync::mpsc::channel::<Result<SseEvent, Infallible>>(16);
    tokio::spawn(async move {
        let path = dir.join(EventLog::FILE);
        let mut offset = 0u64;
        // Bytes, not text: a read may end inside a line, even inside a character.
        let mut pending: Vec<u8> = Vec::new();
        loop {
            // Read before looking: a run that ends between the two still has its last line read next time.
            let running = is_active(&state, &id);
            match read_from(&path, offset).await {
                Ok(bytes) => {
                    offset += bytes.len() as u64;
                    pending.extend_from_slice(&bytes);
                }
                Err(e) => {
                    let error = ApiError::internal(format!("reading run {id}'s log: {e}"));
                    let _ = sender.send(Ok(SseEvent::default().event("error").data(error.body().to_string()))).await;
                    return;
                }
            }
            while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                let bytes: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&bytes);
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                let name = serde_json::from_str::<Value>(line)
                    .ok()
                    .and_then(|v| v.get("event").and_then(Value::as_str).map(str::to_string))
                    .unwrap_or_else(|| "unreadable".into());
                if sender.send(Ok(SseEvent::default().event(&name).data(line))).await.is_err() {
                    return;
                }
                if name == "run_finished" {
                    return;
                }
            }
            if !running {
                let note = json!({"run_id": id, "status": "interrupted"}).to_string();
                let _ = sender.send(Ok(SseEvent::default().event("interrupted").data(note))).await;
                return;
            }
            if sender.is_closed() {
                return;
            }
            tokio::time::sleep(POLL).await;
        }
    });
    Sse::new(ReceiverStream::new(stream)).into_response()
}

/// The log's bytes from `offset` on (read off the async threads).
async fn read_from(path: &Path, offset: u64) -> std::io::Result<Vec<u8>> {
    let path = path.to_path_buf();
    let read = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Seek};
        let mut file = std::fs::File::open(path)?;
        file.seek(std::io::SeekFrom::Start(offset))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(bytes)
    });
    read.await.unwrap_or_else(|e| Err(std::io::Error::other(e)))
}
