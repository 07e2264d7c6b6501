//! Deciding on and steering runs over HTTP: `approve` / `reject` a plan a run waits on (optionally with an edited
//! plan, checked as the agent checks plans), `resume` a run stopped before its end, `cancel` one. Approving and
//! resuming queue the agent's own resume of the run's log (`Agent::resume`), so a decision survives a restart
//! exactly as a stop does.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use crate::agent::log::runs::lock_run;
use crate::agent::{in_doubt_steps, Plan, PlanDecision, PlanIssue, RunSettings, RunState, StopReason};
use crate::serve::openai::chat::json_body;
use crate::serve::plumbing::engine::Work;
use crate::serve::plumbing::error::ApiError;
use crate::serve::runs::routes::{logged_run, off_runtime, run_dir, status_of, summary_of};
use crate::serve::runs::run_jobs::{self, append_finish, Cancel, RunJob, RunKind, Verdict};
use crate::serve::AppState;
use crate::tools::toolbox;

/// How long a cancel waits for a running run to reach its next event.
const CANCEL_WAIT: Duration = Duration::from_secs(120);

/// `POST /v1/runs/{id}/approve`: runs the plan the run waits on, or the edited `plan` given instead.
pub async fn approve(
    State(state): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    answer(decide_over_http(&state, &id, body, true).await)
}

/// `POST /v1/runs/{id}/reject`: ends the run without running the plan, or runs the edited `plan` given instead.
pub async fn reject(
    State(state): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    answer(decide_over_http(&state, &id, body, false).await)
}

/// `POST /v1/runs/{id}/resume`: continues a run stopped before its end (`rerun_in_doubt` as `tandem resume`'s).
pub async fn resume(
    State(state): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let restarted = async {
        let fields = fields(&state, body, &["rerun_in_doubt"])?;
        restart(&state, &id, &fields).await.map(|()| queued(&id))
    };
    answer(restarted.await)
}

/// `POST /v1/runs/{id}/cancel`: stops the run at its next event and ends its log (`stop`: `cancelled`); answers
/// its summary.
pub async fn cancel(State(state): State<Arc<AppState>>, UrlPath(id): UrlPath<String>) -> Response {
    answer(stop(&state, &id).await.map(|summary| Json(summary).into_response()))
}

fn answer(result: Result<Response, ApiError>) -> Response {
    result.unwrap_or_else(IntoResponse::into_response)
}

fn queued(id: &str) -> Response {
    (StatusCode::ACCEPTED, Json(json!({"id": id, "object": "run", "status": "queued"}))).into_response()
}

/// The body's fields: none at all, or a JSON object of only `allowed` keys.
fn fields(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
    allowed: &[&str],
) -> Result<Map<String, Value>, ApiError> {
    if matches!(&body, Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace)) {
        return Ok(Map::new());
    }
    let value = json_body(state, body)?;
    let Value::Object(object) = value else {
        return Err(ApiError::bad_request("the body must be a JSON object", None));
    };
    if let Some(other) = object.keys().find(|k| !allowed.contains(&k.as_str())) {
        let takes = if allowed.is_empty() { "no fields".to_string() } else { allowed.join(", ") };
        return Err(ApiError::invalid(other, format!("unknown field {other:?}; this takes {takes}")));
    }
    Ok(object)
}

/// A run in a state the request does not fit, in OpenAI's error shape (409).
fn not_now(id: &str, run: &RunState, what: &str, code: &'static str) -> ApiError {
    let status = status_of(run, None);
    let hint = match status {
        "awaiting_approval" => "; approve or reject it (POST /v1/runs/{id}/approve or /reject)",
        "interrupted" => "; resume it first (POST /v1/runs/{id}/resume)",
        _ => "",
    };
    ApiError::conflict(format!("run {id} is {status}: {what}{}", hint.replace("{id}", id)), code)
}

/// 409 unless this server can run the run: the same models, and no tool beyond what it was started with.
fn check_runs_here(state: &AppState, id: &str, settings: &RunSettings) -> Result<(), ApiError> {
    if settings.pair.planner != state.agent.pair.planner || settings.pair.executor != state.agent.pair.executor {
        return Err(ApiError::conflict(
            format!(
                "run {id} was started with planner {} and executor {}; this server serves {} and {}: continue it with \
                 `tandem resume {id}` or on a server started with those models",
                settings.pair.planner, settings.pair.executor, state.agent.pair.planner, state.agent.pair.executor
            ),
            "run_not_resumable",
        ));
    }
    state.tool_sets.permits(settings).map_err(|why| {
        ApiError::conflict(
            format!("run {id} cannot go on on this server: {why}; continue it with `tandem resume {id}`"),
            "run_not_resumable",
        )
    })
}

async fn decide_over_http(
    state: &Arc<AppState>,
    id: &str,
    body: Result<Bytes, BytesRejection>,
    approve: bool,
) -> Result<Response, ApiError> {
    let fields = fields(state, body, &["plan"])?;
    decide(state, id, fields.get("plan"), approve, run_jobs::HTTP).await.map(|()| queued(id))
}

/// Approves (or rejects) the plan run `id` waits on, or runs the `edited` plan instead; queues the run's resume.
pub(crate) async fn decide(
    state: &Arc<AppState>,
    id: &str,
    edited: Option<&Value>,
    approve: bool,
    by: &'static str,
) -> Result<(), ApiError> {
    if state.stopping.load(Ordering::SeqCst) {
        return Err(ApiError::shutting_down());
    }
    // The log is read off the HTTP threads (as every file here is): a long one must not stall other clients.
    let (dir, run) = logged_run(state, id).await?;
    if let Some(handle) = state.active.get(id) {
        let status = status_of(&run, Some(handle.as_ref()));
        return Err(ApiError::conflict(
            format!("run {id} is {status}: only a run waiting for approval can be approved or rejected"),
            "run_not_awaiting_approval",
        ));
    }
    let Some(version) = run.awaiting_approval() else {
        return Err(not_now(
            id,
            &run,
            "only a run waiting for approval can be approved or rejected",
            "run_not_awaiting_approval",
        ));
    };
    let settings = run.settings.clone().expect("a run waiting for approval has its settings");
    check_runs_here(state, id, &settings)?;
    let decision = match edited {
        None if approve => PlanDecision::Approve,
        None => PlanDecision::Reject,
        Some(value) => PlanDecision::Edit(checked_edit(value, &settings).await?),
    };
    let (handle, guard) = state.active.register(id, None).ok_or_else(|| {
        ApiError::conflict(format!("run {id} was just queued by another request"), "run_not_awaiting_approval")
    })?;
    let kind = RunKind::Resume { decision: Some(Verdict { version, decision, by }), rerun_in_doubt: false };
    state.engine.submit(Work::Run(Box::new(RunJob { id: id.to_string(), dir, kind, handle, guard })))?;
    Ok(())
}

/// An edited plan, read and validated against the run's tools as the agent validates plans; 400 naming the field
/// of the first problem (`plan.steps[1].tool`).
pub(crate) async fn checked_edit(value: &Value, settings: &RunSettings) -> Result<Plan, ApiError> {
    let plan: Plan = serde_json::from_value(value.clone())
        .map_err(|e| ApiError::invalid("plan", format!("the edited plan is not a valid plan document: {e}")))?;
    let tools = settings.tool_settings();
    let checked = plan.clone().with_explicit_dependencies();
    let issues = tokio::task::spawn_blocking(move || {
        toolbox::build_tools(&tools).map(|(_, registry)| checked.validate(&registry))
    })
    .await
    .map_err(|e| ApiError::internal(format!("checking the plan: {e}")))?
    .map_err(|e| ApiError::internal(format!("setting up the run's tools to check the plan: {e}")))?;
    match issues.first() {
        None => Ok(plan),
        Some(first) => {
            let list: Vec<String> = issues.iter().map(ToString::to_string).collect();
            Err(ApiError::invalid(
                issue_param(&plan, first),
                format!("the edited plan cannot run: {}", list.join("; ")),
            ))
        }
    }
}

/// The plan field a problem is about.
fn issue_param(plan: &Plan, issue: &PlanIssue) -> String {
    let index = |step: &str| plan.steps.iter().position(|s| s.id == step);
    let at = |step: &str, field: &str| match index(step) {
        Some(i) => format!("plan.steps[{i}].{field}"),
        None => "plan.steps".into(),
    };
    match issue {
        PlanIssue::NoSteps | PlanIssue::Cycle { .. } => "plan.steps".into(),
        PlanIssue::EmptyId { position } => format!("plan.steps[{}].id", position.saturating_sub(1)),
        PlanIssue::DuplicateId { id } => match plan.steps.iter().rposition(|s| &s.id == id) {
            Some(i) => format!("plan.steps[{i}].id"),
            None => "plan.steps".into(),
        },
        PlanIssue::UnknownDependency { step, .. } | PlanIssue::LaterDependency { step, .. } => at(step, "depends_on"),
        PlanIssue::UnknownTool { step, .. } => at(step, "tool"),
        PlanIssue::ReferenceTypeMismatch { step, argument, .. } => at(step, &format!("args.{argument}")),
        PlanIssue::InvalidArgs { step, .. }
        | PlanIssue::DanglingReference { step, .. }
        | PlanIssue::UnknownOutputField { step, .. } => at(step, "args"),
    }
}

/// Queues the resume of run `id`, stopped before its end (`rerun_in_doubt` as `tandem resume`'s).
pub(crate) async fn restart(state: &Arc<AppState>, id: &str, fields: &Map<String, Value>) -> Result<(), ApiError> {
    if state.stopping.load(Ordering::SeqCst) {
        return Err(ApiError::shutting_down());
    }
    let (dir, run) = logged_run(state, id).await?;
    let rerun_in_doubt = match fields.get("rerun_in_doubt") {
        None => false,
        Some(Value::Bool(yes)) => *yes,
        Some(_) => return Err(ApiError::invalid("rerun_in_doubt", "rerun_in_doubt must be true or false")),
    };
    if let Some(handle) = state.active.get(id) {
        let status = status_of(&run, Some(handle.as_ref()));
        return Err(ApiError::conflict(format!("run {id} is {status} on this server already"), "run_not_resumable"));
    }
    if run.finished.is_some() || run.awaiting_approval().is_some() {
        return Err(not_now(id, &run, "only an interrupted run can be resumed", "run_not_resumable"));
    }
    let Some(settings) = run.settings.clone() else {
        return Err(ApiError::conflict(format!("run {id} never started (its log is empty)"), "run_not_resumable"));
    };
    check_runs_here(state, id, &settings)?;
    // A stop between a tool's call and its logged result leaves the call in doubt: refused here, as `tandem
    // resume` refuses it, unless the tool is safe to repeat or the request says to run it again.
    let tools = settings.tool_settings();
    let replayed = run.clone();
    let doubt = tokio::task::spawn_blocking(move || {
        toolbox::build_tools(&tools).map(|(_, registry)| in_doubt_steps(&replayed, &registry, rerun_in_doubt))
    })
    .await
    .map_err(|e| ApiError::internal(format!("checking the run: {e}")))?
    .map_err(|e| ApiError::internal(format!("setting up the run's tools: {e}")))?;
    if let Err(e) = doubt {
        let message =
            e.to_string().replace("`tandem resume --rerun-in-doubt ID`", "resuming with {\"rerun_in_doubt\": true}");
        return Err(ApiError::conflict(message, "steps_in_doubt"));
    }
    let (handle, guard) = state.active.register(id, None).ok_or_else(|| {
        ApiError::conflict(format!("run {id} was just queued by another request"), "run_not_resumable")
    })?;
    let kind = RunKind::Resume { decision: None, rerun_in_doubt };
    state.engine.submit(Work::Run(Box::new(RunJob { id: id.to_string(), dir, kind, handle, guard })))?;
    Ok(())
}

/// 409: the run's log already ends (`stop` says how).
fn already_finished(id: &str, stop: impl std::fmt::Display) -> ApiError {
    ApiError::conflict(format!("run {id} already finished ({stop}); there is nothing to cancel"), "run_finished")
}

/// Cancels run `id` (a running one once it has stopped); its summary.
pub(crate) async fn stop(state: &Arc<AppState>, id: &str) -> Result<Value, ApiError> {
    let dir = {
        let (state, id) = (state.clone(), id.to_string());
        off_runtime(move || run_dir(&state, &id)).await?
    };
    if let Some(handle) = state.active.get(id) {
        let cancel = {
            let (handle, dir) = (handle.clone(), dir.clone());
            tokio::task::spawn_blocking(move || handle.cancel(&dir))
                .await
                .map_err(|e| ApiError::internal(format!("cancelling: {e}")))?
                .map_err(|e| ApiError::internal(format!("closing run {id}'s log: {e}")))?
        };
        if cancel == Cancel::AlreadyFinished {
            return Err(already_finished(id, "cancelled"));
        }
        if cancel == Cancel::Stopping {
            // The run stops at its next event (its generation is halted); its slot then closes the log.
            let started = Instant::now();
            while state.active.get(id).is_some_and(|h| Arc::ptr_eq(&h, &handle)) {
                if started.elapsed() > CANCEL_WAIT {
                    return Err(ApiError::internal(format!("run {id} did not stop within {CANCEL_WAIT:?}")));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    } else {
        let (_, run) = logged_run(state, id).await?;
        if let Some((stop, _)) = &run.finished {
            return Err(already_finished(id, stop));
        }
        // Interrupted or waiting for approval: its log is closed here, under the run's lock (so no `tandem
        // resume` is running it meanwhile).
        let target = dir.clone();
        tokio::task::spawn_blocking(move || {
            let _lock = lock_run(&target).map_err(|e| ApiError::conflict(e.to_string(), "run_active"))?;
            append_finish(&target, StopReason::Cancelled, "cancelled over HTTP")
                .map_err(|e| ApiError::internal(format!("closing the run's log: {e}")))
        })
        .await
        .map_err(|e| ApiError::internal(format!("cancelling: {e}")))??;
    }
    summary_of(state, id).await
}
