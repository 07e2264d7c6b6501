//! A Streamable HTTP MCP server's side of a connection: rmcp's client transport (on reqwest) for its endpoint, with
//! the file's headers and the caps on what one response may hold.
//!
//! rmcp's worker keeps the session: it sends `Mcp-Session-Id` where the server gave one and goes on without one where
//! the server is stateless (no session id, or the 2026-07-28 protocol's self-contained requests), and starts a new
//! session once where the server says its session expired.

use std::collections::HashMap;

use http::{HeaderName, HeaderValue};
use rmcp::transport::streamable_http_client::{StreamableHttpClientTransportConfig, StreamableHttpError};
use rmcp::transport::{StreamableHttpClientTransport, Transport};
use rmcp::RoleClient;

use super::config::HttpServer;
use super::MAX_MESSAGE_BYTES;

/// The transport to `endpoint`. It must be made inside the runtime (it spawns its worker there).
pub(crate) fn transport(endpoint: &HttpServer) -> Result<impl Transport<RoleClient> + 'static, String> {
    // reqwest is built without a crypto provider of its own: rustls's ring provider, the one ureq already uses,
    // serves https. Installing it a second time is refused harmlessly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut headers = HashMap::new();
    for (key, value) in &endpoint.headers {
        // The config checked both; the value is never shown (it may be a secret).
        let name = HeaderName::from_bytes(key.as_bytes()).map_err(|_| format!("bad header name \"{key}\""))?;
        let mut value = HeaderValue::from_str(value).map_err(|_| format!("bad value of header \"{key}\""))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(endpoint.url.as_str())
        .custom_headers(headers)
        .max_json_response_size(MAX_MESSAGE_BYTES)
        .max_sse_event_size(MAX_MESSAGE_BYTES)
        .reinit_on_expired_session(true);
    Ok(StreamableHttpClientTransport::from_config(config))
}

/// The HTTP client's error inside rmcp's transport error, which does not give it as its source: where a request
/// failed, its cause (a refused connection, a bad certificate, …) is there.
pub(crate) fn client_cause<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    match error.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
        Some(StreamableHttpError::Client(cause)) => Some(cause),
        _ => None,
    }
}
