//! The servers a tasks suite starts: its MCP servers (the `[servers]` a task names, started per task in the task's
//! workspace) and one local web server for its `[pages]`, so that goals can use real tools without the network.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use crate::tools::mcp::{register_servers, McpLimits};
use crate::tools::ToolRegistry;
use crate::{Error, Result};

/// How long an MCP server of a suite may take to start, and one of its calls to answer.
const MCP_TIMEOUT_S: u64 = 60;

/// Writes the `mcpServers` file of the servers `names` (entries of `servers`, with `{ws}` the workspace and `{web}`
/// the web server's address in every string) to `file`, starts them and registers their tools in `registry`.
/// Each server runs in the workspace (its `cwd`), so relative paths a tool is given mean the task's files.
pub fn start_mcp(
    registry: &mut ToolRegistry,
    names: &[String],
    servers: &BTreeMap<String, Value>,
    workspace: &Path,
    web: Option<&str>,
    file: &Path,
) -> Result<()> {
    // The servers file resolves a relative `cwd` against its own folder, and a server's `{ws}` arguments are read
    // in its `cwd`: with the default relative `bench-results/…` workspace both pointed nowhere, and every server
    // failed to start ("No such file or directory"). An absolute workspace means the same folder everywhere.
    let workspace = &std::path::absolute(workspace)
        .map_err(|e| Error::io(format!("resolving the workspace {}", workspace.display()), e))?;
    let mut chosen = serde_json::Map::new();
    for name in names {
        let mut entry = servers.get(name).cloned().ok_or_else(|| {
            Error::Bench(format!("the suite has no MCP server '{name}' (its servers: {:?})", servers.keys()))
        })?;
        fill(&mut entry, workspace, web);
        if let Some(object) = entry.as_object_mut() {
            object.entry("cwd").or_insert_with(|| json!(workspace));
        }
        chosen.insert(name.clone(), entry);
    }
    let text = serde_json::to_string_pretty(&json!({"mcpServers": chosen})).map_err(Error::encode("the MCP file"))?;
    std::fs::write(file, text).map_err(|e| Error::io(format!("writing {}", file.display()), e))?;
    let limits = McpLimits::with_timeout(std::time::Duration::from_secs(MCP_TIMEOUT_S));
    register_servers(registry, file, limits).map_err(|e| {
        Error::Bench(format!(
            "{e} (the tasks-mcp servers are installed by scripts/install-mcp-test-servers.sh; put its venv/bin and \
             npm/node_modules/.bin on PATH)"
        ))
    })?;
    Ok(())
}

/// Replaces `{ws}` and `{web}` in every string of `value`.
fn fill(value: &mut Value, workspace: &Path, web: Option<&str>) {
    match value {
        Value::String(s) => *s = fill_text(s, workspace, web),
        Value::Array(items) => items.iter_mut().for_each(|v| fill(v, workspace, web)),
        Value::Object(map) => map.values_mut().for_each(|v| fill(v, workspace, web)),
        _ => {}
    }
}

/// `text` with `{ws}` the workspace path and `{web}` the web server's address (left as is without one).
pub fn fill_text(text: &str, workspace: &Path, web: Option<&str>) -> String {
    let text = text.replace("{ws}", &workspace.display().to_string());
    match web {
        Some(web) => text.replace("{web}", web),
        None => text,
    }
}

/// Runs a task's setup commands (`sh -c`, in the workspace, in order); the first that fails is an error with its
/// output.
pub fn run_setup(commands: &[String], workspace: &Path, task: &str) -> Result<()> {
    for command in commands {
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .current_dir(workspace)
            .output()
            .map_err(|e| Error::io(format!("running the setup of task '{task}'"), e))?;
        if !output.status.success() {
            return Err(Error::Bench(format!(
                "task '{task}': setup command `{command}` failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
    }
    Ok(())
}

/// A local web server that serves a fixed set of pages (path → content) on 127.0.0.1 until dropped.
pub struct WebServer {
    address: String,
    port: u16,
    // Dropping the runtime stops the server.
    _runtime: tokio::runtime::Runtime,
}

impl WebServer {
    /// Starts serving `pages` on `port` where it is free, else (or with `None`) on a free port the system picks; the
    /// caller compares [`WebServer::port`] with what it asked for. A path not among the pages answers 404.
    pub fn start(pages: &BTreeMap<String, String>, port: Option<u16>) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the suite's web server".to_string(), e))?;
        let asked = match port {
            Some(port) => runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", port))).ok(),
            None => None,
        };
        let listener = match asked {
            Some(listener) => listener,
            None => runtime
                .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
                .map_err(|e| Error::io("binding the suite's web server".to_string(), e))?,
        };
        let port = listener.local_addr().map_err(|e| Error::io("the web server's address".to_string(), e))?.port();
        let pages: std::sync::Arc<BTreeMap<String, String>> = std::sync::Arc::new(
            pages.iter().map(|(k, v)| (k.trim_start_matches('/').to_string(), v.clone())).collect(),
        );
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let pages = pages.clone();
            async move { page(&pages, uri.path()) }
        });
        runtime.spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!("the suite's web server stopped: {e}");
            }
        });
        Ok(Self { address: format!("http://127.0.0.1:{port}"), port, _runtime: runtime })
    }

    /// The port it serves on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`.
    pub fn address(&self) -> &str {
        &self.address
    }
}

/// The answer for `path`: the page with a content type by its extension, or 404.
fn page(pages: &BTreeMap<String, String>, path: &str) -> axum::response::Response {
    use axum::response::IntoResponse;
    let key = path.trim_start_matches('/');
    match pages.get(key) {
        Some(body) => {
            let kind = match Path::new(key).extension().and_then(|e| e.to_str()) {
                Some("html" | "htm") => "text/html; charset=utf-8",
                Some("json") => "application/json",
                _ => "text/plain; charset=utf-8",
            };
            ([(axum::http::header::CONTENT_TYPE, kind)], body.clone()).into_response()
        }
        None => (axum::http::StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_in_every_string() {
        let mut entry = json!({"command": "x", "args": ["{ws}/a", "--url={web}"], "env": {"F": "{ws}/m.jsonl"}});
        fill(&mut entry, Path::new("/tmp/w"), Some("http://127.0.0.1:9"));
        assert_eq!(entry["args"], json!(["/tmp/w/a", "--url=http://127.0.0.1:9"]));
        assert_eq!(entry["env"]["F"], "/tmp/w/m.jsonl");
    }

    #[test]
    fn the_web_server_serves_its_pages_and_nothing_else() {
        let pages = BTreeMap::from([("a/menu.html".to_string(), "<p>soup 4</p>".to_string())]);
        let server = WebServer::start(&pages, None).unwrap();
        let got = ureq::get(&format!("{}/a/menu.html", server.address())).call().unwrap();
        assert!(got.content_type().starts_with("text/html"));
        assert_eq!(got.into_string().unwrap(), "<p>soup 4</p>");
        let missing = ureq::get(&format!("{}/b.html", server.address())).call();
        assert!(matches!(missing, Err(ureq::Error::Status(404, _))), "{missing:?}");
    }

    #[test]
    fn the_pages_take_the_port_asked_and_another_where_it_is_taken() {
        let pages = BTreeMap::from([("a.html".to_string(), "a".to_string())]);
        // A port that was free a moment ago (the system's pick, released), then asked for by name.
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let first = WebServer::start(&pages, Some(free)).unwrap();
        assert_eq!(first.port(), free);
        assert_eq!(first.address(), format!("http://127.0.0.1:{free}"));
        let second = WebServer::start(&pages, Some(free)).unwrap();
        assert_ne!(second.port(), free, "the port is the first server's, so the second takes another");
        assert_eq!(ureq::get(&format!("{}/a.html", second.address())).call().unwrap().into_string().unwrap(), "a");
    }
}
