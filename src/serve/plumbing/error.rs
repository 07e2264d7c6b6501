//! Errors as OpenAI's API returns them: a status code and `{"error": {"message", "type", "param", "code"}}`, so
//! clients written for OpenAI show the message and, for a bad request, the field at fault.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// One error answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong and what to do, in a sentence.
    pub message: String,
    /// The request field at fault (`messages[2].content`), where there is one.
    pub param: Option<String>,
    /// A short machine-readable code (`model_not_found`, `queue_full`), where there is one.
    pub code: Option<&'static str>,
}

impl ApiError {
    /// 400: the request is malformed; `param` names the field.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self { status: StatusCode::BAD_REQUEST, message: message.into(), param: Some(param.into()), code: None }
    }

    /// 400 without a single field at fault (the body is not JSON, the prompt is too long).
    pub fn bad_request(message: impl Into<String>, code: Option<&'static str>) -> Self {
        Self { status: StatusCode::BAD_REQUEST, message: message.into(), param: None, code }
    }

    /// 401: no or a wrong API key.
    pub fn unauthorized() -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            message: "missing or wrong API key: send the server's key as `Authorization: Bearer <key>`".into(),
            param: None,
            code: Some("invalid_api_key"),
        }
    }

    /// 403: the request may not be made here (a foreign origin or host, a feature the server has off); the message
    /// says what would allow it.
    pub fn forbidden(message: impl Into<String>, code: &'static str) -> Self {
        Self { status: StatusCode::FORBIDDEN, message: message.into(), param: None, code: Some(code) }
    }

    /// 415: a body that is not declared JSON.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            message: message.into(),
            param: None,
            code: Some("unsupported_media_type"),
        }
    }

    /// 429: a per-server cap on open work (event streams) is reached; the message names the cap.
    pub fn too_many(message: impl Into<String>, code: &'static str) -> Self {
        Self { status: StatusCode::TOO_MANY_REQUESTS, message: message.into(), param: None, code: Some(code) }
    }

    /// 400 past one of the server's per-request caps; `param` names the field, the message the cap and its flag.
    pub fn over_cap(param: impl Into<String>, message: impl Into<String>, code: &'static str) -> Self {
        Self { status: StatusCode::BAD_REQUEST, message: message.into(), param: Some(param.into()), code: Some(code) }
    }

    /// 404 for a path or a model that does not exist.
    pub fn not_found(message: impl Into<String>, code: &'static str) -> Self {
        Self { status: StatusCode::NOT_FOUND, message: message.into(), param: None, code: Some(code) }
    }

    /// 409: the request does not fit the state of what it names (approving a run that is not waiting, resuming
    /// one that is running); the message says what state it is in and what would work.
    pub fn conflict(message: impl Into<String>, code: &'static str) -> Self {
        Self { status: StatusCode::CONFLICT, message: message.into(), param: None, code: Some(code) }
    }

    /// 503: the server is shutting down and takes no new work.
    pub fn shutting_down() -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "the server is shutting down; retry once it is back".into(),
            param: None,
            code: Some("server_shutting_down"),
        }
    }

    /// 503: every generation slot is busy and the queue is full.
    pub fn queue_full(queue: usize) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: format!("the server is busy: {queue} requests are already waiting; retry later"),
            param: None,
            code: Some("queue_full"),
        }
    }

    /// 500: something failed inside the server (a bug or a failed model), never the request's fault.
    pub fn internal(message: impl Into<String>) -> Self {
        Self { status: StatusCode::INTERNAL_SERVER_ERROR, message: message.into(), param: None, code: None }
    }

    /// OpenAI's `type` for this status.
    fn kind(&self) -> &'static str {
        match self.status {
            StatusCode::UNAUTHORIZED => "authentication_error",
            StatusCode::FORBIDDEN => "permission_error",
            StatusCode::NOT_FOUND => "not_found_error",
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
            s if s.is_server_error() => "server_error",
            _ => "invalid_request_error",
        }
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"message": self.message, "type": self.kind(), "param": self.param, "code": self.code}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}
