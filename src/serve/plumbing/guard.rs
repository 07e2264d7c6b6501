//! What every request passes before it is routed: a `Host` and an `Origin` this server answers to, and a JSON
//! content type on any body. A web page the user opens elsewhere can send a request here; a foreign `Origin` is
//! refused (403), so is a foreign `Host` (a DNS-rebinding page reaches this port under its own name), and so is a
//! body that is not declared JSON (415): a `text/plain` or form POST needs no CORS preflight, so without this
//! check any page could start work here blind. Requests without an `Origin` (curl, SDKs) are not a browser's
//! cross-site requests and pass. Allowed origins get CORS headers, and their preflights an answer. The web page
//! served under an `--allow-host` name posts with its own origin (`http://box.lan:8080`): an origin on an allowed
//! name and this server's own port is that page, and is allowed; the same name on another port is another site.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_MAX_AGE,
    ACCESS_CONTROL_REQUEST_HEADERS, ACCESS_CONTROL_REQUEST_METHOD, CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN,
    TRANSFER_ENCODING, VARY,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::serve::plumbing::error::ApiError;
use crate::serve::AppState;

/// Names always answered to: this machine's loopback names.
const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The hosts and origins a server answers to.
#[derive(Debug, Clone)]
pub struct Allowed {
    /// Host names (lowercase, no port) allowed in `Host`, and as an origin's host.
    names: Vec<String>,
    /// More `Host` names (`--allow-host`).
    hosts: Vec<String>,
    /// `--allow-host '*'`: any `Host`.
    any_host: bool,
    /// More origins, exactly (`--allow-origin`, lowercase, no trailing `/`).
    origins: Vec<String>,
    /// The port the server is bound to: an origin on an `--allow-host` name with this port is the page's own.
    port: u16,
}

impl Allowed {
    /// Loopback names, the bound address `bind` when it is one specific address, and the extra hosts and origins;
    /// `port` is the port bound.
    pub fn new(bind: &str, port: u16, hosts: &[String], origins: &[String]) -> Self {
        let mut names: Vec<String> = LOOPBACK.iter().map(|n| n.to_string()).collect();
        let bind = bind.trim().to_ascii_lowercase();
        let unspecified = bind.trim_matches(['[', ']']).parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified());
        if !bind.is_empty() && !unspecified {
            names.push(match bind.parse::<IpAddr>() {
                Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
                _ => bind,
            });
        }
        let any_host = hosts.iter().any(|h| h.trim() == "*");
        let hosts = hosts.iter().filter(|h| h.trim() != "*").map(|h| host_name(h.trim())).collect();
        let origins = origins.iter().map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase()).collect();
        Self { names, hosts, any_host, origins, port }
    }

    /// Whether a `Host` header's value is one this server answers to.
    pub fn host(&self, value: &str) -> bool {
        let name = host_name(value);
        self.any_host || self.names.contains(&name) || self.hosts.contains(&name)
    }

    /// Whether an `Origin` may call: a loopback (or bound) host on http or https with any port; an `--allow-host`
    /// name on this server's own port (the page served under that name: `*` names none); or one given.
    pub fn origin(&self, value: &str) -> bool {
        let origin = value.trim().trim_end_matches('/').to_ascii_lowercase();
        if self.origins.contains(&origin) {
            return true;
        }
        let (rest, default_port) = match origin.strip_prefix("http://") {
            Some(rest) => (rest, 80),
            None => match origin.strip_prefix("https://") {
                Some(rest) => (rest, 443),
                None => return false,
            },
        };
        if rest.contains(['/', '@']) {
            return false;
        }
        let name = host_name(rest);
        if self.names.contains(&name) {
            return true;
        }
        // The port as written after the name; none is the scheme's own (a browser leaves 80 and 443 out).
        let port = match rest.strip_prefix(name.as_str()) {
            Some("") => Some(default_port),
            Some(written) => written.strip_prefix(':').and_then(|p| p.parse::<u16>().ok()),
            None => None,
        };
        self.hosts.contains(&name) && port == Some(self.port)
    }
}

/// A `host[:port]` without its port, lowercase (`[::1]:8080` → `[::1]`).
fn host_name(value: &str) -> String {
    let value = value.trim().to_ascii_lowercase();
    if value.starts_with('[') {
        return match value.find(']') {
            Some(end) => value[..=end].to_string(),
            None => value,
        };
    }
    match value.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => name.to_string(),
        _ => value,
    }
}

/// Whether a request carries a body (a length above zero, or chunks).
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(TRANSFER_ENCODING)
        || headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|n| n.trim().parse::<u64>().map_or(true, |n| n > 0))
}

/// Whether a `Content-Type` is JSON: `application/json`, with or without parameters (`; charset=utf-8`).
fn is_json(value: &str) -> bool {
    value.split(';').next().is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// The request headers an allowed origin's preflight is told it may send: the key and the JSON type always, and
/// of those it asks for, the ones OpenAI's browser SDK adds (`x-stainless-*`: its version, platform, retry count
/// and timeout; `openai-organization`, `openai-project` and the like). Without them that SDK's preflight fails
/// and its first request never leaves the browser. Other headers are not granted: the browser then refuses.
fn preflight_headers(asked: Option<&HeaderValue>) -> HeaderValue {
    let mut allowed = vec!["authorization".to_string(), "content-type".to_string()];
    let asked = asked.and_then(|v| v.to_str().ok()).unwrap_or("");
    for name in asked.split(',').map(|n| n.trim().to_ascii_lowercase()) {
        let sdk = name.starts_with("x-stainless-") || name.starts_with("openai-");
        let token = name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if sdk && token && !allowed.contains(&name) {
            allowed.push(name);
        }
    }
    HeaderValue::from_str(&allowed.join(", ")).unwrap_or(HeaderValue::from_static("authorization, content-type"))
}

/// The middleware: host, origin, then content type; preflights of allowed origins are answered here.
pub async fn check(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let allowed = &state.allowed;
    let headers = request.headers();
    if let Some(host) = headers.get(HOST) {
        let host = host.to_str().unwrap_or("");
        if !allowed.host(host) {
            return ApiError::forbidden(
                format!(
                    "the Host {host:?} is not one this server answers to (a DNS-rebinding page would use its own \
                     name): use localhost or 127.0.0.1, or start the server with --allow-host NAME"
                ),
                "host_not_allowed",
            )
            .into_response();
        }
    }
    let origin = match headers.get(ORIGIN) {
        None => None,
        Some(origin) => {
            let text = origin.to_str().unwrap_or("");
            if !allowed.origin(text) {
                return ApiError::forbidden(
                    format!(
                        "the Origin {text:?} may not call this server (a web page from another site): start the \
                         server with --allow-origin ORIGIN to allow it"
                    ),
                    "origin_not_allowed",
                )
                .into_response();
            }
            // A page of this server's own origin (the web page) needs no CORS headers: none are sent to it.
            let own = headers.get(HOST).and_then(|h| h.to_str().ok()).map(|host| format!("http://{host}"));
            (own.as_deref() != Some(text)).then(|| origin.clone())
        }
    };
    if let Some(origin) = &origin {
        if request.method() == Method::OPTIONS && headers.contains_key(ACCESS_CONTROL_REQUEST_METHOD) {
            let mut preflight = StatusCode::NO_CONTENT.into_response();
            let out = preflight.headers_mut();
            out.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
            out.insert(ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, OPTIONS"));
            out.insert(ACCESS_CONTROL_ALLOW_HEADERS, preflight_headers(headers.get(ACCESS_CONTROL_REQUEST_HEADERS)));
            out.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
            out.insert(VARY, HeaderValue::from_static("origin"));
            return preflight;
        }
    }
    if has_body(headers) {
        let given = headers.get(CONTENT_TYPE).map(|v| v.to_str().unwrap_or("(not text)"));
        if !given.is_some_and(is_json) {
            return ApiError::unsupported_media_type(format!(
                "a request body must be JSON sent with `Content-Type: application/json` (got {})",
                given.map_or("no Content-Type".to_string(), |t| format!("{t:?}"))
            ))
            .into_response();
        }
    }
    let mut response = next.run(request).await;
    if let Some(origin) = origin {
        response.headers_mut().insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        response.headers_mut().insert(VARY, HeaderValue::from_static("origin"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_origins_default_to_loopback_and_widen_only_as_told() {
        let open = Allowed::new("0.0.0.0", 8080, &[], &[]);
        for host in ["localhost", "localhost:8080", "127.0.0.1:9", "[::1]:8080", "LOCALHOST"] {
            assert!(open.host(host), "{host}");
        }
        for host in ["evil.example", "evil.example:8080", "0.0.0.0", "127.0.0.1.evil.example", "localhost.evil"] {
            assert!(!open.host(host), "{host}");
        }
        for origin in ["http://localhost:3000", "https://127.0.0.1", "http://[::1]:8080/"] {
            assert!(open.origin(origin), "{origin}");
        }
        for origin in ["null", "https://evil.example", "http://localhost@evil.example", "file://", "http://evil:80"] {
            assert!(!open.origin(origin), "{origin}");
        }
        let bound = Allowed::new("192.168.1.5", 8080, &["Box.lan".into()], &["https://App.example.com/".into()]);
        assert!(bound.host("192.168.1.5:8080") && bound.host("box.lan") && !bound.host("other.lan"));
        assert!(bound.origin("http://192.168.1.5:8080") && bound.origin("https://app.example.com"));
        assert!(!bound.origin("http://box.lan"), "an --allow-host name on another port (80) is another site");
        assert!(Allowed::new("::1", 0, &["*".into()], &[]).host("anything.example"));
    }

    #[test]
    fn the_pages_own_origin_under_an_allowed_host_name_is_allowed_on_the_bound_port_only() {
        let lan = Allowed::new("127.0.0.1", 8080, &["box.lan".into(), "*".into()], &[]);
        for origin in ["http://box.lan:8080", "https://BOX.lan:8080/", "http://localhost:3000"] {
            assert!(lan.origin(origin), "{origin}");
        }
        for origin in [
            "http://box.lan:8081",
            "http://box.lan",
            "https://box.lan",
            "http://box.lan:8080.evil.example",
            "http://box.lan.evil.example:8080",
            "http://evil.example:8080",
            "http://box.lan:8080@evil.example",
            "http://box.lan:8080/path",
            "ftp://box.lan:8080",
            "http://box.lan:",
            "http://box.lan:99999",
            "http://\u{3000}box.lan:8080",
        ] {
            assert!(!lan.origin(origin), "{origin}");
        }
        // On the schemes' own ports a browser leaves the port out.
        assert!(Allowed::new("0.0.0.0", 80, &["box.lan".into()], &[]).origin("http://box.lan"));
        assert!(Allowed::new("0.0.0.0", 443, &["box.lan".into()], &[]).origin("https://box.lan"));
        assert!(!Allowed::new("0.0.0.0", 443, &["box.lan".into()], &[]).origin("http://box.lan"));
        // `*` lets any Host in, not any page: a name must be given to be an origin.
        assert!(!Allowed::new("0.0.0.0", 8080, &["*".into()], &[]).origin("http://anything.example:8080"));
    }

    #[test]
    fn preflights_grant_the_openai_browser_sdks_headers_and_no_others() {
        let asked = HeaderValue::from_static(
            "Authorization, Content-Type, X-Stainless-OS, x-stainless-retry-count, x-stainless-timeout, \
             openai-organization, x-forwarded-for, cookie, x-stainless-bad name",
        );
        let granted = preflight_headers(Some(&asked));
        assert_eq!(
            granted.to_str().unwrap(),
            "authorization, content-type, x-stainless-os, x-stainless-retry-count, x-stainless-timeout, \
             openai-organization"
        );
        assert_eq!(preflight_headers(None).to_str().unwrap(), "authorization, content-type");
    }

    #[test]
    fn json_content_types_are_application_json_with_any_parameters() {
        assert!(is_json("application/json") && is_json("Application/JSON; charset=utf-8"));
        assert!(!is_json("text/plain") && !is_json("application/jsonp") && !is_json("multipart/form-data"));
    }
}
