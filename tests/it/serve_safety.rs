//! `tandem serve` against hostile requests, over real HTTP to the real binary with the real 0.5B model: bodies
//! not declared JSON (415), foreign `Origin` and `Host` headers (403) and an origin allowed by flag, a
//! non-loopback address without a key and an empty key (refused at start, exit 2), the run routes while runs are
//! off, and each per-request cap (schema bytes, prompt tokens, before the listing pass too, run budgets, open event
//! streams), every refusal naming its cap; the page's own origin behind `--allow-host`, and the browser SDK's
//! preflight.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::serve::{agent, call, Server, KEY, MODEL};

/// Status, JSON body and `Access-Control-Allow-Origin` of a request with the given headers (the key always).
fn send(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&str>) -> (u16, Value, Option<String>) {
    let mut request = agent().request(method, url).set("Authorization", &format!("Bearer {KEY}"));
    for (name, value) in headers {
        request = request.set(name, value);
    }
    let result = match body {
        Some(body) => request.send_string(body),
        None => request.call(),
    };
    let response = match result {
        Ok(response) | Err(ureq::Error::Status(_, response)) => response,
        Err(e) => panic!("{method} {url}: {e}"),
    };
    let status = response.status();
    let allow_origin = response.header("access-control-allow-origin").map(str::to_string);
    let text = response.into_string().unwrap();
    let value = if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(json!(text)) };
    (status, value, allow_origin)
}

/// The error code of an answer.
fn code(answer: &Value) -> &str {
    answer["error"]["code"].as_str().unwrap_or("")
}

fn one_token_chat() -> String {
    json!({"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "Hi"}]}).to_string()
}

#[test]
fn serve_refuses_cross_site_requests_unless_allowed_and_caps_each_request() {
    let server = Server::start(&[
        "--api-key",
        KEY,
        "--allow-origin",
        "https://app.example.com",
        "--max-schema-bytes",
        "2000",
        "--max-prompt-tokens",
        "64",
    ]);
    let chat = server.url("/v1/chat/completions");
    let body = one_token_chat();
    let log = || server.log.lock().unwrap().clone();

    // A web page's simple POST (no preflight): text/plain, a form, or no type at all. Refused before the handler.
    for content_type in [Some("text/plain"), Some("application/x-www-form-urlencoded"), None] {
        let headers: Vec<(&str, &str)> = content_type.map(|t| ("Content-Type", t)).into_iter().collect();
        let (status, answer, _) = send("POST", &chat, &headers, Some(&body));
        assert_eq!((status, code(&answer)), (415, "unsupported_media_type"), "{content_type:?}: {answer}");
        assert_eq!(answer["error"]["type"], "invalid_request_error", "{answer}");
    }
    // JSON with a charset parameter is JSON.
    let json_type = ("Content-Type", "application/json; charset=utf-8");
    let (status, answer, _) = send("POST", &chat, &[json_type], Some(&body));
    assert_eq!(status, 200, "{answer}\n{}", log());

    // A foreign page: refused, on every route (unknown paths too), and no CORS header lets it read anything.
    for path in ["/v1/chat/completions", "/v1/models", "/health", "/", "/nowhere"] {
        let method = if path == "/v1/chat/completions" { "POST" } else { "GET" };
        let headers = [json_type, ("Origin", "https://evil.example")];
        let (status, answer, allow) =
            send(method, &server.url(path), &headers, Some(body.as_str()).filter(|_| method == "POST"));
        assert_eq!((status, code(&answer)), (403, "origin_not_allowed"), "{path}: {answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains("--allow-origin"), "{answer}");
        assert_eq!(allow, None);
    }
    // A DNS-rebinding page: its own name in Host. Refused even without an Origin.
    for host in ["evil.example", "evil.example:8080", "127.0.0.1.evil.example"] {
        let (status, answer, _) = send("GET", &server.url("/v1/models"), &[("Host", host)], None);
        assert_eq!((status, code(&answer)), (403, "host_not_allowed"), "{host}: {answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains("--allow-host"), "{answer}");
    }
    // Loopback names with any port pass, and so does the origin given with --allow-origin, with its CORS header.
    for host in ["localhost:1", "127.0.0.1", "[::1]:8080"] {
        let (status, answer, _) = send("GET", &server.url("/v1/models"), &[("Host", host)], None);
        assert_eq!(status, 200, "{host}: {answer}");
    }
    let (status, answer, allow) = send("POST", &chat, &[json_type, ("Origin", "https://app.example.com")], Some(&body));
    assert_eq!((status, allow.as_deref()), (200, Some("https://app.example.com")), "{answer}");
    let preflight = [("Origin", "https://app.example.com"), ("Access-Control-Request-Method", "POST")];
    let (status, _, allow) = send("OPTIONS", &chat, &preflight, None);
    assert_eq!((status, allow.as_deref()), (204, Some("https://app.example.com")));

    // Agent runs are off unless --allow-runs: every run route says so.
    for (method, path) in [("POST", "/v1/runs"), ("GET", "/v1/runs"), ("GET", "/v1/runs/x/events")] {
        let body = Some(r#"{"goal": "list the files"}"#).filter(|_| method == "POST");
        let (status, answer, _) = send(method, &server.url(path), &[("Content-Type", "application/json")], body);
        assert_eq!((status, code(&answer)), (403, "runs_disabled"), "{method} {path}: {answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains("--allow-runs"), "{answer}");
    }

    // Schemas larger than --max-schema-bytes, before any work.
    let big = json!({"type": "object", "properties": {"a": {"type": "string", "description": "x".repeat(3000)}}});
    let request = json!({"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "Hi"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "big", "schema": big}}});
    let (status, answer) = call("POST", &chat, Some(KEY), Some(&request.to_string()));
    assert_eq!((status, code(&answer)), (400, "schema_too_large"), "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("--max-schema-bytes"), "{answer}");

    // More prompt tokens than --max-prompt-tokens.
    let long = json!({"model": MODEL, "max_tokens": 1,
        "messages": [{"role": "user", "content": "word ".repeat(200)}]});
    let (status, answer) = call("POST", &chat, Some(KEY), Some(&long.to_string()));
    assert_eq!((status, code(&answer)), (400, "prompt_too_long"), "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("--max-prompt-tokens"), "{answer}");

    // The same with tools and `parallel_tool_calls` left on, where the listing pass would run first (it reads
    // the long message too): refused on the rendered prompt before it, so the model computes nothing. Chat and
    // the Responses API alike.
    let evaluated = || {
        let (status, health) = call("GET", &server.url("/health"), None, None);
        assert_eq!(status, 200, "{health}");
        health["evaluated_tokens"].as_u64().expect("evaluated_tokens in /health")
    };
    let weather = json!({"type": "function", "function": {"name": "get_weather", "description": "The weather.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}});
    let ask = "What is the weather in Paris and in Oslo? ".repeat(40);
    let tool_request = json!({"model": MODEL, "max_tokens": 1, "tools": [weather],
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": ask}]});
    let flat = json!({"type": "function", "name": "get_weather", "description": "The weather.",
        "parameters": weather["function"]["parameters"]});
    let response_request = json!({"model": MODEL, "max_output_tokens": 16, "tools": [flat], "input": ask});
    let before = evaluated();
    let (status, answer) = call("POST", &chat, Some(KEY), Some(&tool_request.to_string()));
    assert_eq!((status, code(&answer), answer["error"]["param"].as_str()), (400, "prompt_too_long", Some("messages")));
    let (status, answer) = call("POST", &server.url("/v1/responses"), Some(KEY), Some(&response_request.to_string()));
    assert_eq!((status, code(&answer)), (400, "prompt_too_long"), "{answer}");
    assert_eq!(evaluated(), before, "an over-long tool request cost model work (the listing pass ran)\n{}", log());
}

#[test]
fn serve_takes_posts_from_the_pages_own_origin_behind_allow_host_and_refuses_other_sites() {
    let server = Server::start(&["--api-key", KEY, "--host", "127.0.0.1", "--allow-host", "box.lan"]);
    let port: u16 = server.base.rsplit(':').next().unwrap().parse().unwrap();
    let (own, other_port) = (format!("http://box.lan:{port}"), format!("http://box.lan:{}", port.wrapping_add(1)));
    let host = format!("box.lan:{port}");
    let chat = server.url("/v1/chat/completions");
    // A request the guard lets through is answered by the handler (404 for an unknown model, no model work).
    let body = json!({"model": "no-such-model", "messages": [{"role": "user", "content": "Hi"}]}).to_string();
    let post = |origin: &str| {
        let headers = [("Content-Type", "application/json"), ("Host", host.as_str()), ("Origin", origin)];
        send("POST", &chat, &headers, Some(&body))
    };
    // The page loaded from http://box.lan:PORT posts with that origin: its own, taken, with no CORS header.
    let (status, answer, allow) = post(&own);
    assert_eq!((status, code(&answer), allow), (404, "model_not_found", None), "{answer}");
    // Another site, or the same name on another port (another server there), is still refused.
    let lookalike = format!("http://box.lan.evil.example:{port}");
    for origin in ["http://evil.example", other_port.as_str(), lookalike.as_str()] {
        let (status, answer, allow) = post(origin);
        assert_eq!((status, code(&answer), allow), (403, "origin_not_allowed", None), "{origin}: {answer}");
    }
    // A run route too (off here): the guard passes the page's own POST on to the route's own answer.
    let runs = server.url("/v1/runs/some-run/approve");
    let headers = [("Content-Type", "application/json"), ("Host", host.as_str()), ("Origin", own.as_str())];
    let (status, answer, _) = send("POST", &runs, &headers, Some("{}"));
    assert_eq!((status, code(&answer)), (403, "runs_disabled"), "{answer}");

    // The browser OpenAI SDK's preflight from an allowed origin: its `x-stainless-*` headers are granted.
    let preflight = [
        ("Origin", "http://localhost:5173"),
        ("Access-Control-Request-Method", "POST"),
        ("Access-Control-Request-Headers", "authorization,content-type,x-stainless-os,x-stainless-retry-count"),
    ];
    let response = agent().request("OPTIONS", &chat).set(preflight[0].0, preflight[0].1);
    let response = response.set(preflight[1].0, preflight[1].1).set(preflight[2].0, preflight[2].1).call().unwrap();
    assert_eq!(response.status(), 204);
    assert_eq!(response.header("access-control-allow-origin"), Some("http://localhost:5173"));
    let granted = response.header("access-control-allow-headers").unwrap_or_default().to_string();
    assert!(granted.contains("x-stainless-os") && granted.contains("x-stainless-retry-count"), "{granted}");
    let foreign = agent().request("OPTIONS", &chat).set("Origin", "http://evil.example");
    let foreign = foreign.set("Access-Control-Request-Method", "POST").call();
    assert!(matches!(foreign, Err(ureq::Error::Status(403, _))), "{foreign:?}");
}

#[test]
fn serve_caps_run_budgets_and_open_event_streams() {
    let scratch = tempfile::tempdir().unwrap();
    let runs = scratch.path().join("runs");
    let flags = ["--api-key", KEY, "--allow-runs", "--runs-dir", runs.to_str().unwrap(), "--parallel", "1"];
    let mut flags = flags.to_vec();
    flags.extend(["--max-event-streams", "1", "--max-completion-tokens", "2000"]);
    let server = Server::start(&flags);
    let post = |path: &str, body: Value| call("POST", &server.url(path), Some(KEY), Some(&body.to_string()));

    // A request may lower the server's budgets, never raise them.
    for field in ["max_steps", "max_replans", "max_seconds", "max_tokens"] {
        let (status, answer) = post("/v1/runs", json!({"goal": "x", field: 1_000_000}));
        assert_eq!((status, code(&answer)), (400, "budget_too_large"), "{field}: {answer}");
        assert_eq!(answer["error"]["param"], field, "{answer}");
    }

    // The one slot busy with a long chat: the run stays queued, and its event stream open.
    let busy = json!({"model": MODEL, "max_tokens": 2000, "stream": true, "temperature": 0,
        "messages": [{"role": "user", "content": "Count from 1 to 1000, one number per line."}]});
    let chat = agent()
        .post(&server.url("/v1/chat/completions"))
        .set("Authorization", &format!("Bearer {KEY}"))
        .set("Content-Type", "application/json")
        .send_string(&busy.to_string())
        .unwrap();
    let mut chat = BufReader::new(chat.into_reader());
    let mut line = String::new();
    chat.read_line(&mut line).unwrap();
    let (status, created) = post("/v1/runs", json!({"goal": "Say hello."}));
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    let events = server.url(&format!("/v1/runs/{id}/events"));
    let open = || agent().get(&events).set("Authorization", &format!("Bearer {KEY}")).call().map_err(Box::new);
    let first = open().expect("the first event stream");
    assert_eq!(first.header("content-type"), Some("text/event-stream"));
    let (status, answer, _) = send("GET", &events, &[], None);
    assert_eq!((status, code(&answer)), (429, "too_many_streams"), "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("--max-event-streams"), "{answer}");
    // The run cancelled, the open stream ends, and gives its place back.
    let (status, cancelled) = post(&format!("/v1/runs/{id}/cancel"), json!({}));
    assert_eq!((status, &cancelled["status"]), (200, &json!("cancelled")), "{cancelled}");
    let streamed = first.into_string().unwrap();
    assert!(streamed.contains("event: run_finished"), "{streamed}");
    // The place is given back as the stream's task ends, which may be a moment after its last byte.
    let deadline = Instant::now() + Duration::from_secs(10);
    let again = loop {
        match open() {
            Err(e) if matches!(*e, ureq::Error::Status(429, _)) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50))
            }
            other => break other.expect("a stream once the first has ended"),
        }
    };
    assert_eq!(again.header("content-type"), Some("text/event-stream"));
    drop(chat);
}

/// `tandem serve` with `args` (and `env`) that must refuse to start: its exit status and what it said.
fn refused(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tandem"));
    command.args(["serve", "--port", "0", "--planner", MODEL, "--executor", MODEL]).args(args);
    command.env_remove("TANDEM_API_KEY").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("start tandem serve");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tandem serve {args:?} did not refuse to start");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn serve_refuses_an_open_network_address_and_an_empty_key_before_it_binds() {
    let (status, said) = refused(&["--host", "0.0.0.0"], &[]);
    assert_eq!(status, Some(2), "{said}");
    assert!(said.contains("without an API key") && said.contains("--api-key") && said.contains("--no-auth"), "{said}");
    assert!(!said.contains("listening"), "{said}");
    let (status, said) = refused(&["--api-key", ""], &[]);
    assert_eq!(status, Some(2), "{said}");
    assert!(said.contains("API key is empty"), "{said}");
    let (status, said) = refused(&["--host", "0.0.0.0"], &[("TANDEM_API_KEY", "")]);
    assert_eq!(status, Some(2), "{said}");
    assert!(said.contains("API key is empty"), "{said}");
}
