//! `tandem serve`: an OpenAI-compatible HTTP server (axum on tokio) over the loaded planner and executor.
//!
//! Handlers check requests (`request`), build the answer's grammar (`grammar`: tool calls and `json_schema`
//! answers can only come out valid) and queue jobs for the generation slots (`engine`), whose generations share
//! each model's forward passes; answers go back whole or streamed (`chat`, `output`). Errors are OpenAI's error
//! objects (`error`). Binds 127.0.0.1 unless told otherwise; `--api-key` guards every `/v1` route.

mod chat;
mod engine;
mod error;
mod grammar;
mod halt;
mod output;
mod request;
mod runs;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use crate::agent::setup::open_runs_dir;
use crate::agent::{LazyModels, RunsDir};
use crate::decode::Speculation;
use crate::llm::{select_device, LoadOptions};
use crate::progress::Reporter;
use crate::settings::{AgentSettings, ServeSettings};
use crate::{Error, Result};
use engine::{Engine, Role};
pub use error::ApiError;

/// What every handler reads.
struct AppState {
    engine: Engine,
    /// Served model ids and the role each plays.
    models: Vec<(String, Role)>,
    api_key: Option<String>,
    max_tokens: usize,
    max_body_bytes: usize,
    created: u64,
    /// What agent runs plan with: the served models, the server's tool policy, default budgets.
    agent: AgentSettings,
    /// Where agent runs are logged.
    runs: RunsDir,
    /// Agent runs queued or running here.
    active: runs::ActiveRuns,
    /// Set once the server stops listening: queued runs are then left unstarted instead of holding up the exit.
    stopping: Arc<AtomicBool>,
}

impl AppState {
    /// The role of a model id (`planner` and `executor` name them too).
    fn role_of(&self, model: &str) -> Option<Role> {
        match model {
            "planner" => Some(Role::Planner),
            "executor" => Some(Role::Executor),
            _ => self.models.iter().find(|(id, _)| id == model).map(|(_, role)| *role),
        }
    }

    /// The id the model playing `role` is served under.
    fn id_of(&self, role: Role) -> String {
        self.models.iter().find(|(_, r)| *r == role).unwrap_or(&self.models[0]).0.clone()
    }

    fn model_ids(&self) -> Vec<String> {
        self.models.iter().map(|(id, _)| id.clone()).collect()
    }
}

/// The id a model is served under: its manifest id, or a file's name without `.gguf`.
fn served_id(model: &str) -> String {
    let path = std::path::Path::new(model);
    if model.ends_with(".gguf") {
        if let Some(stem) = path.file_stem() {
            return stem.to_string_lossy().into_owned();
        }
    }
    model.to_string()
}

/// Loads the models, binds, calls `on_ready` with the address bound, and serves until Ctrl-C or SIGTERM.
pub fn serve(settings: &ServeSettings, reporter: &dyn Reporter, on_ready: &dyn Fn(SocketAddr)) -> Result<()> {
    if settings.parallel == 0 {
        return Err(Error::Usage("--parallel must be at least 1".into()));
    }
    // The tool policy is checked before anything loads (a bad --tools file or MCP config fails here, not per run).
    drop(crate::tools::toolbox::build_tools(&settings.tools)?);
    crate::llm::device::set_threads(settings.runner.compute.threads);
    let options = LoadOptions {
        prefix_store: settings.runner.prefix_store.then(crate::store::default_prefix_dir),
        ..LoadOptions::default()
    };
    let device = select_device(settings.runner.compute.device)?;
    let speculation = Speculation::from_setting(settings.runner.drafting);
    let mut models = LazyModels::new(&settings.planner, &settings.executor, device, options, speculation, reporter);
    // Loaded before listening: a server that answers has its models.
    let (sources, _shared) = if settings.parallel > 1 {
        let (sources, shared) = models.share(settings.parallel)?;
        (sources, Some(shared))
    } else {
        crate::agent::ModelSource::planner(&mut models)?;
        crate::agent::ModelSource::executor(&mut models)?;
        (vec![models], None)
    };
    let mut served = vec![(served_id(&settings.planner), Role::Planner)];
    if settings.executor != settings.planner {
        served.push((served_id(&settings.executor), Role::Executor));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("tandem-http")
        .build()
        .map_err(|e| Error::io("starting the HTTP runtime", e))?;
    let address = format!("{}:{}", settings.host, settings.port);
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(&address))
        .map_err(|e| Error::io(format!("binding {address} (is the port in use? try --port)"), e))?;
    let bound = listener.local_addr().map_err(|e| Error::io("reading the bound address", e))?;
    std::thread::scope(|scope| {
        let state = Arc::new(AppState {
            engine: Engine::start(scope, sources, settings.queue),
            models: served,
            api_key: settings.api_key.clone().filter(|k| !k.is_empty()),
            max_tokens: settings.max_tokens,
            max_body_bytes: settings.max_body_bytes,
            created: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            agent: AgentSettings {
                planner: settings.planner.clone(),
                executor: settings.executor.clone(),
                tools: settings.tools.clone(),
                ..AgentSettings::default()
            },
            runs: open_runs_dir(settings.runner.runs_dir.as_ref()),
            active: runs::ActiveRuns::default(),
            stopping: Arc::new(AtomicBool::new(false)),
        });
        let stopping = state.stopping.clone();
        let app = router(state, settings.max_body_bytes);
        on_ready(bound);
        let served =
            runtime.block_on(async move { axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await });
        stopping.store(true, Ordering::Relaxed);
        // The runtime's tasks hold the last references to the engine: dropping them ends the slots.
        drop(runtime);
        served.map_err(|e| Error::io("serving HTTP", e))
    })
}

fn router(state: Arc<AppState>, max_body_bytes: usize) -> Router {
    let v1 = Router::new()
        .route("/v1/models", get(list_models))
        .route("/v1/chat/completions", post(chat::completions))
        .route("/v1/runs", post(runs::create))
        .route("/v1/runs/{id}", get(runs::show))
        .route("/v1/runs/{id}/events", get(runs::events))
        .route_layer(middleware::from_fn_with_state(state.clone(), authorize));
    Router::new()
        .route("/health", get(health))
        .merge(v1)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}

async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
}

/// Requires `Authorization: Bearer <key>` when the server has a key.
async fn authorize(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    if let Some(key) = &state.api_key {
        let given = request
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        if !given.is_some_and(|given| same_secret(given.as_bytes(), key.as_bytes())) {
            return ApiError::unauthorized().into_response();
        }
    }
    next.run(request).await
}

/// Compares two secrets in time that does not depend on where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn health(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    let counters = &state.engine.counters;
    Json(json!({
        "status": "ok",
        "models": state.model_ids(),
        "queued": counters.queued.load(Ordering::Relaxed),
        "running": counters.running.load(Ordering::Relaxed),
        "completed": counters.completed.load(Ordering::Relaxed),
        "cancelled": counters.cancelled.load(Ordering::Relaxed),
    }))
}

async fn list_models(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    let data: Vec<serde_json::Value> = state
        .models
        .iter()
        .map(|(id, role)| {
            let role = match role {
                Role::Planner if state.models.len() == 1 => "planner+executor",
                Role::Planner => "planner",
                Role::Executor => "executor",
            };
            json!({"id": id, "object": "model", "created": state.created, "owned_by": "tandem", "role": role})
        })
        .collect();
    Json(json!({"object": "list", "data": data}))
}

async fn not_found(request: Request) -> ApiError {
    ApiError::not_found(format!("no route {} {}", request.method(), request.uri().path()), "unknown_url")
}
