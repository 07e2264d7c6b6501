//! Agent runs over HTTP: `POST /v1/runs` queues one for a generation slot, `GET /v1/runs` lists them,
//! `GET /v1/runs/{id}` shows one, `GET /v1/runs/{id}/events` streams its log. Each run is logged in the runs
//! directory exactly as `tandem run` logs it, so it outlives the server: its summary and events are read back from
//! the log, and a run the server left unfinished is resumed (`run_control`) or continued with `tandem resume`.
//! A request may lower the server's budgets, never raise them; the log files are read off the async threads, and
//! event streams open at once are capped.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tokio_stream::wrappers::ReceiverStream;

use crate::agent::log::runs::load_run;
use crate::agent::log::summary::run_summary;
use crate::agent::setup::run_settings;
use crate::agent::{EventLog, RunState, StopReason};
use crate::serve::openai::chat::json_body;
use crate::serve::plumbing::engine::Work;
use crate::serve::plumbing::error::ApiError;
use crate::serve::runs::run_jobs::{Phase, RunHandle, RunJob, RunKind};
use crate::serve::runs::tool_sets::ToolSets;
use crate::serve::AppState;
use crate::settings::{AgentSettings, Approval, ToolSettings};
use crate::tools::toolbox;

/// How often an events stream looks for new lines in the log.
const POLL: Duration = Duration::from_millis(200);

/// Most runs one `GET /v1/runs` lists.
const MAX_LIST: usize = 100;

/// What a `POST /v1/runs` body asks for: the goal, its approval and its tools; budgets go into `agent`.
fn parse(
    value: &Value,
    agent: &mut AgentSettings,
    sets: &ToolSets,
) -> Result<(String, Approval, ToolSettings), ApiError> {
    let object = value.as_object().ok_or_else(|| ApiError::bad_request("the body must be a JSON object", None))?;
    let mut approve = Approval::None;
    let (mut tools, mut mcp) = (None, None);
    for (key, field) in object {
        match key.as_str() {
            "goal" => {}
            "max_replans" => {
                agent.budgets.max_replans = at_most(field, key, u64::from(agent.budgets.max_replans))? as u32
            }
            "max_steps" => agent.budgets.max_steps = at_most(field, key, agent.budgets.max_steps as u64)? as usize,
            "max_seconds" => agent.budgets.max_seconds = at_most(field, key, agent.budgets.max_seconds)?,
            "max_tokens" => agent.budgets.max_tokens = at_most(field, key, agent.budgets.max_tokens as u64)? as usize,
            "plans" => {
                agent.pair.plans = match count(field, key)? {
                    n @ 1..=16 => n as usize,
                    _ => return Err(ApiError::invalid("plans", "plans (candidate plans per plan) is 1 to 16")),
                }
            }
            "approve" => {
                approve = match field.as_str() {
                    Some("none") => Approval::None,
                    Some("plan") => Approval::Plan,
                    _ => {
                        return Err(ApiError::invalid(
                            "approve",
                            "approve is \"none\" or \"plan\" (the run pauses at its plan until POST \
                             /v1/runs/{id}/approve or reject); per-step approval is not offered over HTTP",
                        ))
                    }
                }
            }
            "tools" => tools = Some(name(field, key)?),
            "mcp" => mcp = Some(name(field, key)?),
            other => {
                return Err(ApiError::invalid(
                    other,
                    format!(
                        "unknown field {other:?}; a run takes goal, max_replans, max_steps, max_seconds, max_tokens, \
                         plans, approve, tools, mcp"
                    ),
                ))
            }
        }
    }
    let goal = match object.get("goal") {
        Some(Value::String(goal)) if !goal.trim().is_empty() => goal.clone(),
        Some(Value::String(_)) => return Err(ApiError::invalid("goal", "the goal is empty")),
        Some(_) => return Err(ApiError::invalid("goal", "the goal must be a string")),
        None => return Err(ApiError::invalid("goal", "a run needs a goal")),
    };
    let tools = sets.with(tools.as_deref(), mcp.as_deref())?;
    Ok((goal, approve, tools))
}

fn count(field: &Value, key: &str) -> Result<u64, ApiError> {
    field.as_u64().ok_or_else(|| ApiError::invalid(key, format!("{key} must be a whole number ≥ 0")))
}

/// A budget the request asks for: at most the server's own (`cap`).
fn at_most(field: &Value, key: &str, cap: u64) -> Result<u64, ApiError> {
    let asked = count(field, key)?;
    if asked > cap {
        return Err(ApiError::over_cap(
            key,
            format!("{key} is at most {cap} on this server: a run may lower the server's budgets, never raise them"),
            "budget_too_large",
        ));
    }
    Ok(asked)
}

/// Runs blocking file work (the runs directory, a run's log, benchmark results) on tokio's blocking threads, off
/// the async ones: the runtime has two workers, and a read that stalls one stalls every connection it holds
/// (streams and their disconnect detection included).
pub async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(ApiError::internal(format!("reading files off the HTTP threads failed: {e}"))))
}

/// A run's directory and its log replayed (404 when there is no such run), read off the HTTP threads.
pub async fn logged_run(state: &Arc<AppState>, id: &str) -> Result<(PathBuf, RunState), ApiError> {
    let (state, id) = (state.clone(), id.to_string());
    off_runtime(move || {
        let dir = run_dir(&state, &id)?;
        let run = read_run(&id, &dir)?;
        Ok((dir, run))
    })
    .await
}

/// A set's name: the request names what the server offers, never a path.
fn name(field: &Value, key: &str) -> Result<String, ApiError> {
    field.as_str().map(str::to_string).ok_or_else(|| {
        ApiError::invalid(key, format!("{key} must be the name of a set the server was started with (a string)"))
    })
}

/// `POST /v1/runs`: 201 with the run's id once it is logged and queued.
pub async fn create(State(state): State<Arc<AppState>>, body: Result<Bytes, BytesRejection>) -> Response {
    match off_runtime(move || start(&state, body)).await {
        Ok(id) => (StatusCode::CREATED, Json(json!({"id": id, "object": "run", "status": "queued"}))).into_response(),
        Err(e) => e.into_response(),
    }
}

fn start(state: &AppState, body: Result<Bytes, BytesRejection>) -> Result<String, ApiError> {
    if state.stopping.load(Ordering::SeqCst) {
        return Err(ApiError::shutting_down());
    }
    start_run(state, &json_body(state, body)?)
}

/// Logs and queues the run a request's fields ask for (as `POST /v1/runs` takes them); its id.
pub fn start_run(state: &AppState, value: &Value) -> Result<String, ApiError> {
    if state.stopping.load(Ordering::SeqCst) {
        return Err(ApiError::shutting_down());
    }
    let mut agent = state.agent.clone();
    let (goal, approve, tools) = parse(value, &mut agent, &state.tool_sets)?;
    // The workspace and policy only: the tool files and MCP servers are set up when the run starts.
    let context = toolbox::context(&tools).map_err(|e| ApiError::internal(format!("the run's workspace: {e}")))?;
    agent.tools = tools.clone();
    let settings = run_settings(&agent, &context, approve);
    let (id, dir) = state.runs.create_run().map_err(|e| ApiError::internal(format!("creating the run's log: {e}")))?;
    let log = EventLog::create(&dir).map_err(|e| ApiError::internal(format!("creating the run's log: {e}")))?;
    let (handle, guard) = state
        .active
        .register(&id, Some((goal.clone(), settings.clone())))
        .ok_or_else(|| ApiError::internal(format!("the fresh run id {id} is taken")))?;
    let job = RunJob {
        id: id.clone(),
        dir: dir.clone(),
        kind: RunKind::Start { goal, settings: Box::new(settings), tools, log },
        handle,
        guard,
    };
    if let Err(e) = state.engine.submit(Work::Run(Box::new(job))) {
        // Never queued: no log is left behind.
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    Ok(id)
}

/// A run's directory, or 404. Ids are names inside the runs directory, never paths.
pub fn run_dir(state: &AppState, id: &str) -> Result<PathBuf, ApiError> {
    let plain = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    let dir = state.runs.root().join(id);
    if plain && dir.join(EventLog::FILE).is_file() {
        Ok(dir)
    } else {
        Err(ApiError::not_found(format!("no run {id:?} on this server"), "run_not_found"))
    }
}

fn is_active(state: &AppState, id: &str) -> bool {
    state.active.get(id).is_some()
}

/// A run's status: `queued` or `running` here, `awaiting_approval` (its plan waits on approve or reject),
/// `interrupted` (stopped before its end: resume continues it), `finished` or `cancelled`.
pub fn status_of(run: &RunState, handle: Option<&RunHandle>) -> &'static str {
    match (&run.finished, handle.map(RunHandle::phase)) {
        (Some((StopReason::Cancelled, _)), _) | (None, Some(Phase::Cancelled)) => "cancelled",
        (Some(_), _) => "finished",
        (None, Some(Phase::Queued)) => "queued",
        (None, Some(Phase::Running)) => "running",
        (None, None) if run.awaiting_approval().is_some() => "awaiting_approval",
        (None, None) => "interrupted",
    }
}

/// A run as its log tells it (a log being written may end in a torn line: it is skipped).
pub fn read_run(id: &str, dir: &Path) -> Result<RunState, ApiError> {
    let contents = load_run(dir).map_err(|e| ApiError::internal(format!("reading run {id}'s log: {e}")))?;
    Ok(RunState::replay(&contents.records))
}

/// The run's summary (as `tandem runs show --json`) with its `status`, and the plan version it waits on.
pub fn summary(state: &AppState, id: &str) -> Result<Value, ApiError> {
    let dir = run_dir(state, id)?;
    let handle = state.active.get(id);
    let run = read_run(id, &dir)?;
    let mut summary = run_summary(id, &dir).map_err(|e| ApiError::internal(format!("reading run {id}'s log: {e}")))?;
    let status = status_of(&run, handle.as_deref());
    summary["status"] = json!(status);
    if status == "awaiting_approval" {
        summary["awaiting_approval"] = json!({"plan_version": run.awaiting_approval()});
    }
    Ok(summary)
}

/// [`summary`], read off the HTTP threads.
pub async fn summary_of(state: &Arc<AppState>, id: &str) -> Result<Value, ApiError> {
    let (state, id) = (state.clone(), id.to_string());
    off_runtime(move || summary(&state, &id)).await
}

/// `GET /v1/runs/{id}`: the run's summary with its `status` (see [`status_of`]).
pub async fn show(State(state): State<Arc<AppState>>, UrlPath(id): UrlPath<String>) -> Response {
    match summary_of(&state, &id).await {
        Ok(summary) => Json(summary).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /v1/runs?limit=N`: the newest runs first (20 unless `limit` says, at most 100), each with its status.
pub async fn list(
    State(state): State<Arc<AppState>>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let listed = off_runtime(move || {
        let limit = match query.get("limit") {
            None => 20,
            Some(text) => text.parse::<usize>().ok().filter(|n| (1..=MAX_LIST).contains(n)).ok_or_else(|| {
                ApiError::invalid("limit", format!("limit must be a whole number from 1 to {MAX_LIST}"))
            })?,
        };
        let ids = state.runs.ids().map_err(|e| ApiError::internal(format!("listing the runs: {e}")))?;
        let mut data = Vec::new();
        for id in ids.iter().rev().take(limit) {
            let run = read_run(id, &state.runs.root().join(id))?;
            let handle = state.active.get(id);
            data.push(json!({
                "id": id,
                "object": "run",
                "status": status_of(&run, handle.as_deref()),
                "goal": run.goal,
                "stop": run.finished.as_ref().map(|(stop, _)| stop.to_string()),
                "created": run.started_ms / 1000,
                "steps": run.steps_run,
                "replans": run.replans,
            }));
        }
        Ok::<_, ApiError>(json!({"object": "list", "data": data, "has_more": ids.len() > limit}))
    })
    .await;
    match listed {
        Ok(list) => Json(list).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /v1/runs/{id}/events`: each line of the run's log as one event (`event:` the event's name, `data:` the
/// line), from the first; the stream ends after `run_finished`, or at the log's end when the run is not queued or
/// running on this server: a last event named by its status (`interrupted`, `awaiting_approval`) then says so.
pub async fn events(State(state): State<Arc<AppState>>, UrlPath(id): UrlPath<String>) -> Response {
    let dir = match off_runtime({
        let (state, id) = (state.clone(), id.clone());
        move || run_dir(&state, &id)
    })
    .await
    {
        Ok(dir) => dir,
        Err(e) => return e.into_response(),
    };
    let Some(open) = StreamSlot::take(&state) else {
        return ApiError::too_many(
            format!(
                "{} run-event streams are open already, the most this server keeps (--max-event-streams): close one \
                 or retry later",
                state.max_event_streams
            ),
            "too_many_streams",
        )
        .into_response();
    };
    let (sender, stream) = tokio::sync::mpsc::channel::<Result<SseEvent, Infallible>>(16);
    tokio::spawn(async move {
        let _open = open;
        let path: PathBuf = dir.join(EventLog::FILE);
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
                let status = off_runtime({
                    let (id, dir) = (id.clone(), dir.clone());
                    move || read_run(&id, &dir)
                })
                .await
                .map(|run| status_of(&run, None))
                .unwrap_or("interrupted");
                let note = json!({"run_id": id, "status": status}).to_string();
                let _ = sender.send(Ok(SseEvent::default().event(status).data(note))).await;
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

/// One open run-event stream, counted against the server's cap until dropped.
struct StreamSlot(Arc<AtomicUsize>);

impl StreamSlot {
    /// A slot, or `None` when the cap is reached.
    fn take(state: &AppState) -> Option<Self> {
        let open = state.event_streams.clone();
        if open.fetch_add(1, Ordering::SeqCst) >= state.max_event_streams {
            open.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(Self(open))
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The log's bytes from `offset` on (read off the async threads).
pub(crate) async fn read_from(path: &Path, offset: u64) -> std::io::Result<Vec<u8>> {
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
