//! The web page `tandem serve` serves at `/`: one HTML file, one vanilla JS module and one stylesheet, embedded in
//! the binary (no build step, no CDN: it works offline), sent with a strict Content-Security-Policy (scripts and
//! styles from this origin only, no inline script, no framing, no connections elsewhere; images may be blobs, for a benchmark chart). The page itself needs
//! no key: it holds no data, and every call it makes goes to the `/v1` API under the same key and rules as any
//! client. Two small API routes serve it: `GET /v1/runs/options` (the tool sets and default budgets a run may
//! take) and `POST /v1/runs/{id}/check` (an edited plan validated as approving it would, without deciding).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path as UrlPath, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::serve::openai::chat::json_body;
use crate::serve::plumbing::error::ApiError;
use crate::serve::runs::routes::logged_run;
use crate::serve::runs::run_control::checked_edit;
use crate::serve::AppState;

const INDEX: &str = include_str!("web/index.html");
const APP: &str = include_str!("web/app.js");
const STYLE: &str = include_str!("web/style.css");
const ICON: &[u8] = include_bytes!("web/icon.svg");

/// Only this origin's files, no inline script or style, no plugins, no framing, no form posts elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; \
                   base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The page's routes (no key: the page holds nothing; the API it calls checks the key).
pub fn pages() -> Router<Arc<AppState>> {
    Router::new()
        .route("/", get(|| async { asset(INDEX.as_bytes(), "text/html; charset=utf-8") }))
        .route("/app.js", get(|| async { asset(APP.as_bytes(), "text/javascript; charset=utf-8") }))
        .route("/style.css", get(|| async { asset(STYLE.as_bytes(), "text/css; charset=utf-8") }))
        .route("/icon.svg", get(|| async { asset(ICON, "image/svg+xml") }))
}

fn asset(body: &'static [u8], content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// `GET /v1/runs/options`: what a new run may name (`tools`, `mcp` sets), the models, the default budgets.
pub async fn options(State(state): State<Arc<AppState>>) -> Json<Value> {
    let (tools, mcp) = state.tool_sets.names();
    let budgets = &state.agent.budgets;
    Json(json!({
        "object": "run_options",
        "models": state.model_ids(),
        "tools": tools,
        "mcp": mcp,
        "approve": ["none", "plan"],
        "budgets": {
            "max_replans": budgets.max_replans,
            "max_steps": budgets.max_steps,
            "max_seconds": budgets.max_seconds,
            "max_tokens": budgets.max_tokens,
        },
        "plans": state.agent.pair.plans,
    }))
}

/// `POST /v1/runs/{id}/check` with `{"plan": ...}`: 200 `{"valid": true}` when the edited plan would be taken by
/// approve, else the same 400 approve would answer (its `param` names the field, its message every problem).
/// Decides nothing; the run may be in any state that has settings.
pub async fn check(
    State(state): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let checked = async {
        // The log is read off the HTTP threads first (a 404 before the body is looked at, as before).
        let (_, run) = logged_run(&state, &id).await?;
        let value = json_body(&state, body)?;
        let Some(object) = value.as_object() else {
            return Err(ApiError::bad_request("the body must be a JSON object", None));
        };
        if let Some(other) = object.keys().find(|k| *k != "plan") {
            return Err(ApiError::invalid(other, format!("unknown field {other:?}; this takes plan")));
        }
        let plan = object.get("plan").ok_or_else(|| ApiError::invalid("plan", "the body needs a plan to check"))?;
        let settings = run.settings.ok_or_else(|| {
            ApiError::conflict(format!("run {id} has not started yet: no tools to check against"), "run_not_started")
        })?;
        checked_edit(plan, &settings).await?;
        Ok(Json(json!({"object": "plan_check", "valid": true})).into_response())
    };
    checked.await.unwrap_or_else(IntoResponse::into_response)
}
