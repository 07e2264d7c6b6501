//! MCP servers over Streamable HTTP, end to end against a real server: tests/fixtures/mcp/http_server.py on the
//! official Python SDK (`mcp`, pinned and installed by scripts/install-mcp-test-servers.sh, as in tests/it/mcp.rs),
//! started on a free loopback port per test: a stateful server on the 2026-07-28 protocol, a stateless one, an
//! older one that needs the `initialize` handshake; a list that goes stale; a refused connection; the config rules;
//! `tools list`; and a given plan run through `tandem run`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tandem::tools::mcp::{parse_config, register_servers, McpLimits, Transport};
use tandem::tools::{ToolContext, ToolError, ToolRegistry, Workspace};
use tempfile::TempDir;

use crate::common::runs::Scratch;
use crate::mcp::installed_program;

/// A running fixture server; killed when dropped.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    /// Starts tests/fixtures/mcp/http_server.py with `args` and waits (up to a minute) for its port.
    fn start(args: &[&str]) -> Self {
        let python = installed_program("venv/bin/python");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/http_server.py");
        let mut child = Command::new(python)
            .arg(script)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the HTTP fixture server");
        let stdout = child.stdout.take().unwrap();
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let port = lines.by_ref().map_while(Result::ok).find_map(|l| l.strip_prefix("PORT ").map(str::to_string));
            let _ = send.send(port);
            // Keep reading so the server never blocks on a full pipe.
            for _ in lines {}
        });
        let port = receive.recv_timeout(Duration::from_secs(60)).ok().flatten();
        let Some(port) = port else {
            let _ = child.kill();
            panic!("the HTTP fixture server {args:?} did not print its port within 60 s (see its stderr above)");
        };
        Self { child, url: format!("http://127.0.0.1:{port}/mcp") }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Setup {
    _dir: TempDir,
    ctx: ToolContext,
    registry: ToolRegistry,
    notes: Vec<String>,
}

/// A registry with the built-ins and the servers of `servers` (a `mcpServers` object).
fn register(servers: Value, timeout: Duration) -> Result<Setup, ToolError> {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let mut registry = ToolRegistry::builtins(&ctx);
    let config = write_config(dir.path(), servers);
    let notes = register_servers(&mut registry, &config, McpLimits::with_timeout(timeout))?;
    Ok(Setup { _dir: dir, ctx, registry, notes })
}

fn write_config(dir: &Path, servers: Value) -> PathBuf {
    let path = dir.join("mcp.json");
    std::fs::write(&path, json!({"mcpServers": servers}).to_string()).unwrap();
    path
}

/// Lists, calls, and a tool's error, on the server started with `args`.
fn lists_and_calls(args: &[&str]) {
    let server = HttpServer::start(args);
    let s = register(json!({"web": {"url": server.url}}), Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("registering the HTTP server {args:?}: {e}"));
    let names = s.registry.names();
    for name in ["add", "echo", "fail", "hang", "flood", "calculator"] {
        assert!(names.contains(&name), "{name} missing from {names:?} (notes: {:?})", s.notes);
    }
    assert!(s.notes.is_empty(), "{:?}", s.notes);
    let add = s.registry.spec("add").unwrap();
    assert_eq!(add.description, "Add two numbers. Returns their sum.");
    assert_eq!(add.args_schema["required"], json!(["a", "b"]), "{}", add.args_schema);
    assert!(add.output_schema.as_ref().unwrap()["properties"]["sum"].is_object(), "{:?}", add.output_schema);
    assert_eq!(s.registry.call("add", &json!({"a": 2, "b": 3.5}), &s.ctx).unwrap(), json!({"sum": 5.5}));
    assert_eq!(s.registry.call("echo", &json!({"message": "héllo"}), &s.ctx).unwrap(), json!({"text": "héllo"}));
    let error = s.registry.call("fail", &json!({}), &s.ctx).unwrap_err();
    assert!(matches!(error, ToolError::Reported { .. }), "{error:?}");
    assert!(error.to_string().contains("the fail tool always fails: nothing to do"), "{error}");
    // Calls from several threads at once share the connection.
    let (registry, ctx) = (&s.registry, &s.ctx);
    std::thread::scope(|scope| {
        let handles: Vec<_> =
            (0..4).map(|i| scope.spawn(move || registry.call("add", &json!({"a": i, "b": 1}), ctx))).collect();
        for (i, handle) in handles.into_iter().enumerate() {
            assert_eq!(handle.join().unwrap().unwrap(), json!({"sum": i as f64 + 1.0}));
        }
    });
}

#[test]
fn a_stateful_http_server_lists_and_calls_its_tools() {
    lists_and_calls(&[]);
}

#[test]
fn a_stateless_http_server_lists_and_calls_its_tools() {
    lists_and_calls(&["--stateless"]);
}

#[test]
fn an_http_server_older_than_the_stateless_protocol_is_reached_through_initialize() {
    lists_and_calls(&["--legacy"]);
    lists_and_calls(&["--legacy", "--stateless"]);
}

#[test]
fn a_hanging_or_flooding_http_tool_is_a_clear_error() {
    let server = HttpServer::start(&[]);
    let s = register(json!({"web": {"url": server.url}}), Duration::from_secs(3)).unwrap();
    let started = Instant::now();
    let error = s.registry.call("hang", &json!({}), &s.ctx).unwrap_err().to_string();
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(3) && took < Duration::from_secs(10), "took {took:?}");
    assert!(error.contains("MCP server 'web': tool 'hang' did not answer within 3.0 s"), "{error}");
    assert!(error.contains("--mcp-timeout") && error.contains(&server.url), "{error}");
    let error = s.registry.call("flood", &json!({}), &s.ctx).unwrap_err();
    assert!(matches!(error, ToolError::OutputTooLarge { limit: 262_144, .. }), "{error:?}");
    // The server is still there for the next call.
    assert_eq!(s.registry.call("echo", &json!({"message": "still"}), &s.ctx).unwrap(), json!({"text": "still"}));
}

#[test]
fn a_stale_tool_list_is_listed_again_before_a_call() {
    // Every `tools/list` answer is stale at once (`ttlMs: 0`): the list is asked for again before each call.
    let server = HttpServer::start(&["--ttl-ms", "0"]);
    let s = register(json!({"web": {"url": server.url}}), Duration::from_secs(30)).unwrap();
    assert_eq!(s.registry.call("echo", &json!({"message": "a"}), &s.ctx).unwrap(), json!({"text": "a"}));
    assert_eq!(s.registry.call("retire", &json!({}), &s.ctx).unwrap(), json!({"text": "echo retired"}));
    let error = s.registry.call("echo", &json!({"message": "b"}), &s.ctx).unwrap_err().to_string();
    assert!(error.contains("MCP server 'web'") && error.contains("tool 'echo' is no longer offered"), "{error}");

    // Protocols before 2026-07-28 give no hint: the list stays as first listed, so the retired tool is still
    // called, and it is the server that says it has no such tool.
    let server = HttpServer::start(&["--legacy"]);
    let s = register(json!({"web": {"url": server.url}}), Duration::from_secs(30)).unwrap();
    s.registry.call("retire", &json!({}), &s.ctx).unwrap();
    let error = s.registry.call("echo", &json!({"message": "b"}), &s.ctx).unwrap_err().to_string();
    assert!(!error.contains("no longer offered") && error.contains("echo"), "{error}");
}

#[test]
fn a_refused_connection_is_an_error_naming_the_server_and_url() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let started = Instant::now();
    let error = register(json!({"gone": {"url": url}}), Duration::from_secs(10)).err().expect("an error");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    let error = error.to_string();
    assert!(error.starts_with("MCP server 'gone':"), "{error}");
    assert!(error.contains(&url), "{error}");
    assert!(error.contains("Connection refused"), "says the connection was refused: {error}");
    assert!(!error.contains("rmcp::"), "no type names: {error}");
}

#[test]
fn http_entries_are_read_as_other_clients_write_them() {
    let file = Path::new("/configs/mcp.json");
    let config = parse_config(
        r#"{"mcpServers": {
            "remote": {"url": "https://example.invalid/mcp", "type": "http", "headers": {"Authorization": "Bearer s3cret", "X-Team": 7}},
            "plain": {"url": "http://127.0.0.1:8000/mcp"},
            "typed": {"type": "streamable-http", "url": "http://localhost:9/mcp"},
            "local": {"command": "./bin/server", "type": "stdio"}
        }}"#,
        file,
    )
    .unwrap();
    assert_eq!(config.servers.len(), 4, "{config:?}");
    let remote = config.servers.iter().find(|s| s.name == "remote").unwrap();
    let Transport::Http(http) = &remote.transport else { panic!("{remote:?}") };
    assert_eq!(http.url, "https://example.invalid/mcp");
    assert_eq!(http.headers.get("Authorization").map(String::as_str), Some("Bearer s3cret"));
    assert_eq!(http.headers.get("X-Team").map(String::as_str), Some("7"));
    assert!(!format!("{remote:?}").contains("s3cret"), "header values stay out of debug output: {remote:?}");
    assert!(matches!(config.servers.iter().find(|s| s.name == "local").unwrap().transport, Transport::Stdio(_)));

    let refused =
        |entry: &str| parse_config(&format!(r#"{{"mcpServers": {{"x": {entry}}}}}"#), file).unwrap_err().to_string();
    let both = refused(r#"{"command": "server", "url": "http://127.0.0.1:8000/mcp"}"#);
    assert!(
        both.contains("/configs/mcp.json") && both.contains("server 'x' has both \"command\" and \"url\""),
        "{both}"
    );
    let neither = refused(r#"{"args": []}"#);
    assert!(neither.contains("server 'x' has no \"command\"") && neither.contains("\"url\""), "{neither}");
    let sse = refused(r#"{"type": "sse", "url": "http://127.0.0.1:8000/sse"}"#);
    assert!(sse.contains("legacy SSE transport"), "{sse}");
    let scheme = refused(r#"{"url": "ftp://example.invalid/mcp"}"#);
    assert!(scheme.contains("http:// or https://"), "{scheme}");
    let mismatch = refused(r#"{"type": "stdio", "url": "http://127.0.0.1:8000/mcp"}"#);
    assert!(mismatch.contains("\"type\": \"stdio\""), "{mismatch}");
    let reserved = refused(r#"{"url": "http://127.0.0.1:8000/mcp", "headers": {"Mcp-Session-Id": "1"}}"#);
    assert!(reserved.contains("Mcp-Session-Id") && reserved.contains("leave it out"), "{reserved}");
    let secret = refused(r#"{"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer a\nb"}}"#);
    assert!(secret.contains("Authorization") && !secret.contains("Bearer"), "the value is not shown: {secret}");
}

fn tandem(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tandem")).args(args).env_remove("TANDEM_MCP").output().expect("run tandem")
}

#[test]
fn tools_list_shows_an_http_servers_tools() {
    let server = HttpServer::start(&["--stateless"]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), json!({"web": {"url": server.url}}));
    let workspace = dir.path().to_str().unwrap();
    let output = tandem(&["tools", "list", "--workspace", workspace, "--mcp", config.to_str().unwrap(), "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let tools = listed["tools"].as_array().unwrap();
    let add = tools.iter().find(|t| t["name"] == "add").unwrap_or_else(|| panic!("{listed:#}"));
    assert_eq!(add["description"], "Add two numbers. Returns their sum.");
    assert!(tools.iter().any(|t| t["name"] == "echo"), "{listed:#}");

    let both = write_config(dir.path(), json!({"odd": {"command": "python3", "url": server.url}}));
    let output = tandem(&["tools", "list", "--workspace", workspace, "--mcp", both.to_str().unwrap()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("server 'odd' has both \"command\" and \"url\""), "{stderr}");
}

#[test]
fn a_given_plan_runs_its_steps_on_an_http_server() {
    let server = HttpServer::start(&[]);
    let scratch = Scratch::new();
    let config = scratch.write("mcp.json", &json!({"mcpServers": {"web": {"url": server.url}}}).to_string());
    let plan = scratch.write(
        "plan.json",
        r#"{"goal": "add then echo", "steps": [
            {"id": "s1", "tool": "add", "args": {"a": 19, "b": 23}},
            {"id": "s2", "tool": "echo", "args": {"message": "sum is $s1.sum$"}, "depends_on": ["s1"]}]}"#,
    );
    let ws = scratch.workspace();
    let args = [
        "run",
        "--plan",
        plan.to_str().unwrap(),
        "--workspace",
        ws.to_str().unwrap(),
        "--mcp",
        config.to_str().unwrap(),
        "--mcp-timeout",
        "30",
    ];
    let (json, output) = scratch.tandem_json(&args);
    assert!(output.status.success(), "{json:#}\n{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(json["stop"], "done", "{json:#}");
    assert_eq!(json["steps"][0]["tool"], "add", "{json:#}");
    assert_eq!(json["steps"][0]["output"], json!({"sum": 42.0}), "{json:#}");
    let echoed = json["steps"][1]["output"]["text"].as_str().unwrap_or_default();
    assert!(echoed.starts_with("sum is 42"), "the first step's output reached the second: {json:#}");
}
