//! `tandem serve`: an OpenAI-compatible HTTP server (axum on tokio) over the loaded planner and executor, and
//! `tandem mcp`, the same machinery as an MCP server on stdio.
//!
//! Four rooms follow a request. `plumbing`: what every request passes (the `guard` on its `Host`, `Origin` and
//! content type; the generation slots of `engine`, whose generations share each model's forward passes; the
//! graceful stop on Ctrl-C and SIGTERM; metrics; OpenAI's error object). `openai`: chat completions, text
//! completions and the Responses API, tool calls and `json_schema` answers under a grammar so they come out valid.
//! `runs`: agent runs over HTTP (off unless `--allow-runs`, logged to a runs directory of the server's own) and
//! over MCP. `page`: the web page at `/` that drives runs in a browser. This file assembles the state once
//! (`run_server`) and routes. Binds 127.0.0.1 unless told otherwise; `--api-key` guards every `/v1` route and
//! `/mcp`, and a non-loopback address needs one (or `--no-auth`).

mod openai;
mod page;
mod plumbing;
mod runs;

use openai::{chat, completions, response_store, responses};
use page::{bench_results, web};
use plumbing::{engine, error, guard, metrics, shutdown};
use runs::{mcp, routes, run_control, run_jobs, tool_sets};

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use crate::agent::log::runs::default_runs_dir;
use crate::agent::RunsDir;
use crate::progress::Reporter;
use crate::settings::{AgentSettings, Approval, McpSettings, ServeAsks, ServeSettings};
use crate::{Error, Result};
use engine::{Engine, Limits, Role};
pub use error::ApiError;

/// What every handler reads.
struct AppState {
    engine: Engine,
    /// Served model ids and the role each plays.
    models: Vec<(String, Role)>,
    api_key: Option<String>,
    max_tokens: usize,
    /// Tool-calling turns list the request's actions first (`--asks list`; a request's `asks` may turn it off).
    asks: bool,
    max_body_bytes: usize,
    created: u64,
    /// What agent runs plan with: the served models and default budgets.
    agent: AgentSettings,
    /// The tools runs may have: the server's policy and its named tool files and MCP configs.
    tool_sets: tool_sets::ToolSets,
    /// Where agent runs are logged.
    runs: RunsDir,
    /// Agent runs queued or running here.
    active: run_jobs::ActiveRuns,
    /// The benchmark results directory the web page shows (`--bench-results`), if any.
    bench_results: Option<std::path::PathBuf>,
    /// Set once a signal stops the server: no new runs, and runs stop at their next event.
    stopping: Arc<AtomicBool>,
    /// The hosts and origins requests may come with.
    allowed: guard::Allowed,
    /// Agent runs are offered (`--allow-runs`).
    allow_runs: bool,
    /// Largest JSON size of a request's `tools` and `response_format` together.
    max_schema_bytes: usize,
    /// A chat job's caps at its slot: prompt tokens and grammar compile time.
    limits: Limits,
    /// Run-event streams open now, and the most at once.
    event_streams: Arc<AtomicUsize>,
    max_event_streams: usize,
    /// HTTP requests by route and status, and their latency (`GET /metrics`).
    http: metrics::HttpMetrics,
    /// Generation slots (`--parallel`).
    slots: usize,
    /// What MCP clients may ask of runs (`/mcp`, `tandem mcp`).
    mcp: mcp::McpPolicy,
    /// Responses kept for `previous_response_id` (memory only).
    responses: response_store::ResponseStore,
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

    /// The graceful stop: no new work; runs stop at their next event (resumable), queued ones are left for a
    /// resume; generations in flight are halted after `grace`, and the process exits whatever is left after
    /// that and a little more (a hung tool must not hold the stop forever).
    fn begin_shutdown(&self, grace: Duration) {
        self.stopping.store(true, Ordering::SeqCst);
        self.active.interrupt_all();
        self.engine.close();
        let cut = self.engine.cutter();
        std::thread::spawn(move || {
            std::thread::sleep(grace);
            cut.cut_off();
            std::thread::sleep(FORCED_EXIT_AFTER_CUT);
            eprintln!(
                "tandem serve: work still running {FORCED_EXIT_AFTER_CUT:?} after the grace period: exiting now \
                 (status {FORCED_EXIT_CODE})"
            );
            std::process::exit(FORCED_EXIT_CODE);
        });
    }
}

/// How long after generations are cut off the process waits before it exits regardless.
const FORCED_EXIT_AFTER_CUT: Duration = Duration::from_secs(20);

/// The exit status of a stop that had to leave work unfinished (a clean stop exits 0).
const FORCED_EXIT_CODE: i32 = 1;

/// Whether an address to bind answers this machine only.
fn is_loopback(host: &str) -> bool {
    let host = host.trim();
    host.eq_ignore_ascii_case("localhost")
        || host.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The server's API key, checked: an empty key is an error (never "no key"), and a non-loopback address needs a
/// key unless `--no-auth` says to serve it open.
fn api_key(settings: &ServeSettings) -> Result<Option<String>> {
    let key = match &settings.api_key {
        Some(key) if key.trim().is_empty() => {
            return Err(Error::Usage(
                "the API key is empty (--api-key or TANDEM_API_KEY): give a non-empty key, or unset it to serve \
                 this machine without one"
                    .into(),
            ))
        }
        key => key.clone(),
    };
    if key.is_none() && !settings.no_auth && !is_loopback(&settings.host) {
        return Err(Error::Usage(format!(
            "refusing to serve {} without an API key: anyone who can reach it could use the models. Give --api-key \
             KEY (or set TANDEM_API_KEY), bind 127.0.0.1, or pass --no-auth to serve it open on purpose",
            settings.host
        )));
    }
    Ok(key)
}

/// Where the server logs agent runs unless told: `serve-runs` beside the CLI's runs directory, so HTTP clients
/// never see `tandem run`'s runs (nor the CLI theirs).
fn default_serve_runs_dir() -> std::path::PathBuf {
    let cli = default_runs_dir();
    cli.parent().map(|data| data.join("serve-runs")).unwrap_or_else(|| std::path::PathBuf::from("serve-runs"))
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
    let mcp = mcp::McpPolicy { approve: Approval::None };
    run_server(settings, settings.runs_agent(), mcp, reporter, Front::Http(on_ready))
}

/// `tandem mcp`: loads the models and serves MCP over stdin and stdout until the client closes them, Ctrl-C or
/// SIGTERM; runs are logged in the CLI's runs directory unless told otherwise.
pub fn serve_mcp_stdio(settings: &McpSettings, reporter: &dyn Reporter) -> Result<()> {
    let mut serve = settings.serve.clone();
    serve.allow_runs = true;
    if serve.runner.runs_dir.is_none() {
        serve.runner.runs_dir = Some(default_runs_dir());
    }
    let mcp = mcp::McpPolicy { approve: settings.approve };
    run_server(&serve, settings.agent.clone(), mcp, reporter, Front::Stdio)
}

/// What a server answers on.
enum Front<'a> {
    /// HTTP on `host:port` (the OpenAI API, runs, the page and `/mcp`), with a call once it listens.
    Http(&'a dyn Fn(SocketAddr)),
    /// MCP over this process's stdin and stdout.
    Stdio,
}

/// Loads the models, assembles the server's state once, and answers on `front` until told to stop.
fn run_server(
    settings: &ServeSettings,
    agent: AgentSettings,
    mcp: mcp::McpPolicy,
    reporter: &dyn Reporter,
    front: Front<'_>,
) -> Result<()> {
    if settings.parallel == 0 {
        return Err(Error::Usage("--parallel must be at least 1".into()));
    }
    let api_key = api_key(settings)?;
    // The tool policy is checked before anything loads (a bad --tools file or MCP config fails here, not per run).
    let tool_sets = tool_sets::ToolSets::new(settings.tools.clone(), &settings.tool_sets, &settings.mcp_sets)?;
    // The runtime, and with it the signal handlers, come first: a signal while the models load stops cleanly.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("tandem-http")
        .build()
        .map_err(|e| Error::io("starting the HTTP runtime", e))?;
    let signals = shutdown::Signals::install(&runtime)?;
    // Clients' prompts stay in this process's memory unless --persist-prefixes (the prompt cache never leaves it).
    let engine = crate::engine::Engine::for_runner(&settings.runner)?
        .with_prefixes_in_memory(!settings.persist_prefixes)
        .with_prompt_cache(settings.prompt_cache_mib.saturating_mul(1 << 20));
    let mut models = engine.models(&settings.planner, &settings.executor, reporter);
    // Loaded before listening: a server that answers has its models.
    let (sources, _shared) = if settings.parallel > 1 {
        let (sources, shared) = models.share(settings.parallel)?;
        (sources, Some(shared))
    } else {
        models.planner()?;
        models.executor()?;
        (vec![models], None)
    };
    let mut served = vec![(served_id(&settings.planner), Role::Planner)];
    if settings.executor != settings.planner {
        served.push((served_id(&settings.executor), Role::Executor));
    }
    // HTTP binds before the state is assembled: the guard needs the port bound.
    let http = match front {
        Front::Http(on_ready) => {
            let address = format!("{}:{}", settings.host, settings.port);
            let listener = runtime
                .block_on(tokio::net::TcpListener::bind(&address))
                .map_err(|e| Error::io(format!("binding {address} (is the port in use? try --port)"), e))?;
            let bound = listener.local_addr().map_err(|e| Error::io("reading the bound address", e))?;
            Some((listener, bound, on_ready))
        }
        Front::Stdio => None,
    };
    std::thread::scope(|scope| {
        let state = Arc::new(AppState {
            engine: Engine::start(scope, sources, settings.queue),
            models: served,
            api_key,
            max_tokens: settings.max_tokens,
            asks: settings.asks == ServeAsks::List,
            max_body_bytes: settings.max_body_bytes,
            created: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            agent,
            tool_sets,
            runs: RunsDir::new(settings.runner.runs_dir.clone().unwrap_or_else(default_serve_runs_dir)),
            active: run_jobs::ActiveRuns::default(),
            stopping: Arc::new(AtomicBool::new(false)),
            allowed: guard::Allowed::new(
                &settings.host,
                http.as_ref().map_or(0, |(_, bound, _)| bound.port()),
                &settings.allow_hosts,
                &settings.allow_origins,
            ),
            allow_runs: settings.allow_runs,
            max_schema_bytes: settings.max_schema_bytes,
            limits: Limits {
                max_prompt_tokens: settings.max_prompt_tokens,
                compile: Duration::from_millis(settings.max_compile_ms),
            },
            event_streams: Arc::new(AtomicUsize::new(0)),
            max_event_streams: settings.max_event_streams,
            bench_results: settings.bench_results.clone(),
            http: metrics::HttpMetrics::default(),
            slots: settings.parallel,
            mcp,
            responses: response_store::ResponseStore::default(),
        });
        let grace = Duration::from_secs(settings.shutdown_grace_s);
        let served = match http {
            Some((listener, bound, on_ready)) => {
                let app = router(state.clone(), settings.max_body_bytes);
                signals.listening();
                on_ready(bound);
                runtime.block_on(async move {
                    let stop = async move {
                        signals.received().await;
                        state.begin_shutdown(grace);
                    };
                    axum::serve(listener, app).with_graceful_shutdown(stop).await
                })
            }
            None => {
                signals.listening();
                runtime.block_on(async move {
                    let served = tokio::select! {
                        served = mcp::serve_stdio(state.clone()) => served,
                        () = signals.received() => Ok(()),
                    };
                    // The client is gone or a signal came: runs stop at their next event, resumable.
                    state.begin_shutdown(grace);
                    served
                })
            }
        };
        // The runtime's tasks hold the last references to the engine: ending them ends the slots, which first
        // leave the runs still queued resumable and answer the chat requests still queued.
        runtime.shutdown_timeout(Duration::from_secs(2));
        served.map_err(|e| Error::io("serving", e))
    })
}

fn router(state: Arc<AppState>, max_body_bytes: usize) -> Router {
    let runs = Router::new()
        .route("/v1/runs", post(routes::create).get(routes::list))
        .route("/v1/runs/options", get(web::options))
        .route("/v1/runs/{id}", get(routes::show))
        .route("/v1/runs/{id}/events", get(routes::events))
        .route("/v1/runs/{id}/approve", post(run_control::approve))
        .route("/v1/runs/{id}/reject", post(run_control::reject))
        .route("/v1/runs/{id}/resume", post(run_control::resume))
        .route("/v1/runs/{id}/cancel", post(run_control::cancel))
        .route("/v1/runs/{id}/check", post(web::check))
        // MCP over Streamable HTTP: the same runs, behind the same key and --allow-runs.
        .route_service("/mcp", mcp::http_service(state.clone(), max_body_bytes))
        .route_layer(middleware::from_fn_with_state(state.clone(), runs_allowed));
    let v1 = Router::new()
        .route("/v1/models", get(list_models))
        .route("/v1/chat/completions", post(chat::completions))
        .route("/v1/completions", post(completions::completions))
        .route("/v1/responses", post(responses::responses))
        .route("/metrics", get(metrics::metrics))
        .route("/v1/bench", get(bench_results::list))
        .route("/v1/bench/{name}", get(bench_results::show))
        .route("/v1/bench/{name}/samples", get(bench_results::samples))
        .merge(runs)
        .route_layer(middleware::from_fn_with_state(state.clone(), authorize))
        // Outside the key check, so refused requests are counted too.
        .route_layer(middleware::from_fn_with_state(state.clone(), metrics::record));
    // The guard is the outermost layer: it sees every request, unknown paths and preflights included.
    Router::new()
        .route("/health", get(health))
        .merge(web::pages())
        .merge(v1)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(middleware::from_fn_with_state(state.clone(), guard::check))
        .with_state(state)
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

/// Refuses the run routes unless the server offers agent runs (`--allow-runs`): they run its tools.
async fn runs_allowed(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    if !state.allow_runs {
        return ApiError::forbidden(
            "agent runs are off on this server: start it with --allow-runs to offer them (a run uses the server's \
             tools)",
            "runs_disabled",
        )
        .into_response();
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
        "evaluated_tokens": counters.evaluated_tokens.load(Ordering::Relaxed),
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
