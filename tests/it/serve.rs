//! `tandem serve` over real HTTP: the binary started on a free port with the real 0.5B model, driven by a Rust
//! HTTP client (plain and streamed chat, every tool_choice, strict json_schema, bad requests of many kinds, the
//! API key, a client that goes away mid-stream or during its prompt's prefill, a full queue) and by the real `openai` Python package
//! (installed by scripts/install-openai-client.sh on first use). Answers are kept to a few tokens.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::real_model;

pub(crate) const MODEL: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m";
pub(crate) const KEY: &str = "test-key-3141";

/// A running server, killed when dropped.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) base: String,
    pub(crate) log: Arc<Mutex<String>>,
}

impl Server {
    /// `tandem serve` with one model (planner = executor = the 0.5B) on a free port, plus `extra` flags.
    pub(crate) fn start(extra: &[&str]) -> Server {
        real_model(MODEL);
        Server::start_model(MODEL, extra)
    }

    /// `tandem serve` with `model` (an id or a .gguf path) as planner and executor, plus `extra` flags.
    pub(crate) fn start_model(model: &str, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tandem"))
            .args(["serve", "--port", "0", "--planner", model, "--executor", model, "--no-prefix-store"])
            .args(extra)
            .env_remove("TANDEM_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tandem serve");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let log = Arc::new(Mutex::new(String::new()));
        let mut base = None;
        for line in lines.by_ref() {
            let line = line.unwrap_or_default();
            log.lock().unwrap().push_str(&format!("{line}\n"));
            if let Some(rest) = line.split("listening on ").nth(1) {
                base = Some(rest.split_whitespace().next().unwrap().to_string());
                break;
            }
        }
        let Some(base) = base else {
            let _ = child.kill();
            panic!("tandem serve did not start:\n{}", log.lock().unwrap());
        };
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        Server { child, base, log }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(Duration::from_secs(300)).build()
}

/// Status and JSON body of a request (`key` as a Bearer token when given).
pub(crate) fn call(method: &str, url: &str, key: Option<&str>, body: Option<&str>) -> (u16, Value) {
    let mut request = agent().request(method, url).set("Content-Type", "application/json");
    if let Some(key) = key {
        request = request.set("Authorization", &format!("Bearer {key}"));
    }
    let result = match body {
        Some(body) => request.send_string(body),
        None => request.call(),
    };
    let response = match result {
        Ok(response) => response,
        Err(ureq::Error::Status(_, response)) => response,
        Err(e) => panic!("{method} {url}: {e}"),
    };
    let status = response.status();
    let text = response.into_string().unwrap();
    let value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {url} → {status}: not JSON ({e}): {text}"));
    (status, value)
}

fn chat(server: &Server, body: &Value) -> (u16, Value) {
    call("POST", &server.url("/v1/chat/completions"), Some(KEY), Some(&body.to_string()))
}

/// The `data:` payloads of a streamed answer, `[DONE]` included.
pub(crate) fn stream(server: &Server, body: &Value) -> Vec<String> {
    stream_at(&server.url("/v1/chat/completions"), body)
}

/// [`stream`] to a chat-completions URL (from another thread).
pub(crate) fn stream_at(url: &str, body: &Value) -> Vec<String> {
    let response = agent()
        .post(url)
        .set("Authorization", &format!("Bearer {KEY}"))
        .set("Content-Type", "application/json")
        .send_string(&body.to_string())
        .unwrap_or_else(|e| panic!("stream request: {e}"));
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    let mut text = String::new();
    response.into_reader().read_to_string(&mut text).unwrap();
    text.lines().filter_map(|l| l.strip_prefix("data: ")).map(str::to_string).collect()
}

fn weather_tool() -> Value {
    json!({"type": "function", "function": {"name": "get_weather", "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"], "additionalProperties": false}}})
}

fn time_tool() -> Value {
    json!({"type": "function", "function": {"name": "get_time", "description": "Current time in a time zone.",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 40}},
            "required": ["zone"], "additionalProperties": false}}})
}

/// Checks every call of an answer against the declared tools' schemas; returns the calls' names.
fn checked_calls(answer: &Value, tools: &[Value]) -> Vec<String> {
    let calls = answer["choices"][0]["message"]["tool_calls"].as_array().cloned().unwrap_or_default();
    calls
        .iter()
        .map(|call| {
            assert_eq!(call["type"], "function", "{call}");
            assert!(call["id"].as_str().is_some_and(|id| !id.is_empty()), "{call}");
            let name = call["function"]["name"].as_str().unwrap();
            let tool =
                tools.iter().find(|t| t["function"]["name"] == name).unwrap_or_else(|| panic!("undeclared {name}"));
            let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
            let schema = &tool["function"]["parameters"];
            assert!(jsonschema::is_valid(schema, &args), "{args} does not fit {schema}");
            name.to_string()
        })
        .collect()
}

#[test]
fn serve_answers_chat_tools_and_schemas_and_refuses_bad_requests() {
    let server = Server::start(&["--api-key", KEY, "--max-body", "65536", "--max-completion-tokens", "256"]);
    let (status, health) = call("GET", &server.url("/health"), None, None);
    assert_eq!((status, &health["status"]), (200, &json!("ok")), "health needs no key");
    let (status, models) = call("GET", &server.url("/v1/models"), Some(KEY), None);
    assert_eq!(status, 200);
    assert_eq!(models["data"][0]["id"], MODEL, "{models}");

    // Plain chat, then the same request streamed: the same greedy text, and the usage in the last chunk.
    let question = json!({"model": MODEL, "max_tokens": 8, "temperature": 0,
        "messages": [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Name a colour."}]});
    let (status, answer) = chat(&server, &question);
    assert_eq!(status, 200, "{answer}");
    let text = answer["choices"][0]["message"]["content"].as_str().unwrap().to_string();
    assert!(!text.trim().is_empty(), "{answer}");
    assert_eq!(answer["object"], "chat.completion");
    assert!(answer["usage"]["completion_tokens"].as_u64().unwrap() > 0, "{answer}");
    let mut streamed_question = question.clone();
    streamed_question["stream"] = json!(true);
    streamed_question["stream_options"] = json!({"include_usage": true});
    let events = stream(&server, &streamed_question);
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect();
    let joined: String =
        chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect::<Vec<_>>().concat();
    assert_eq!(joined, text, "streamed and whole answers differ");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]), "{usage}");
    for count in ["prompt_tokens", "completion_tokens", "total_tokens"] {
        assert_eq!(usage["usage"][count], answer["usage"][count], "{usage}");
    }
    // The same prompt again: the slot's cache holds it (all but its last token, whose logits are computed).
    let prompt_tokens = answer["usage"]["prompt_tokens"].as_u64().unwrap();
    assert_eq!(usage["usage"]["prompt_tokens_details"]["cached_tokens"], prompt_tokens - 1, "{usage}");
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk"));

    // A stop sequence ends the answer before it.
    let mut stopped = question.clone();
    let cut = text.chars().nth(1).map(String::from).unwrap_or_else(|| text.clone());
    stopped["stop"] = json!([cut.clone()]);
    let (status, answer) = chat(&server, &stopped);
    assert_eq!(status, 200, "{answer}");
    let stopped_text = answer["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(!stopped_text.contains(&cut) && text.starts_with(stopped_text), "{stopped_text:?} vs {text:?}");
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");

    // Tools under each tool_choice.
    let tools = vec![weather_tool(), time_tool()];
    let ask = |choice: Value, parallel: bool| {
        json!({"model": MODEL, "max_tokens": 60, "temperature": 0, "tools": tools, "tool_choice": choice,
            "parallel_tool_calls": parallel,
            "messages": [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]})
    };
    let (status, required) = chat(&server, &ask(json!("required"), false));
    assert_eq!(status, 200, "{required}");
    assert_eq!(required["choices"][0]["finish_reason"], "tool_calls", "{required}");
    assert_eq!(required["choices"][0]["message"]["content"], Value::Null);
    let names = checked_calls(&required, &tools);
    assert_eq!(names.len(), 1, "parallel_tool_calls false allows one call: {required}");
    let (status, named) = chat(&server, &ask(json!({"type": "function", "function": {"name": "get_time"}}), true));
    assert_eq!(status, 200, "{named}");
    let names = checked_calls(&named, &tools);
    assert!(!names.is_empty() && names.iter().all(|n| n == "get_time"), "{named}");
    let (status, none) = chat(&server, &ask(json!("none"), true));
    assert_eq!(status, 200, "{none}");
    let text = none["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(none["choices"][0]["message"].get("tool_calls").is_none() && !text.contains("<tool_call>"), "{none}");
    let (status, auto) = chat(&server, &ask(json!("auto"), true));
    assert_eq!(status, 200, "{auto}");
    // The 0.5B answers this as bare JSON (`{"name": "get_weather", …}` without its tags): under `auto` that is a
    // call too, so the client gets a tool call, not JSON text.
    assert_eq!(auto["choices"][0]["finish_reason"], "tool_calls", "{auto}");
    assert!(!checked_calls(&auto, &tools).is_empty(), "{auto}");
    // A streamed call begins with its name, then its arguments come in parts as they are written.
    let mut streamed_call = ask(json!("required"), false);
    streamed_call["stream"] = json!(true);
    let events = stream(&server, &streamed_call);
    let deltas: Vec<Value> = events
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array().cloned())
        .flatten()
        .collect();
    assert!(deltas.len() > 2, "the arguments come in parts: {events:?}");
    assert!(deltas.iter().all(|d| d["index"] == 0), "{deltas:?}");
    let whole = &required["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(deltas[0]["function"]["name"], whole["name"]);
    assert_eq!(deltas[0]["type"], "function");
    assert!(deltas[0]["id"].as_str().is_some_and(|id| id.starts_with("call_")), "{deltas:?}");
    assert!(deltas[1..].iter().all(|d| d.get("id").is_none() && d["function"].get("name").is_none()), "{deltas:?}");
    let arguments: String = deltas.iter().map(|d| d["function"]["arguments"].as_str().unwrap()).collect();
    let (a, b): (Value, Value) = (
        serde_json::from_str(&arguments).unwrap(),
        serde_json::from_str(whole["arguments"].as_str().unwrap()).unwrap(),
    );
    assert_eq!(a, b, "streamed and whole calls differ");

    // A conversation with a call and its result.
    let call_id = required["choices"][0]["message"]["tool_calls"][0]["id"].clone();
    let followup = json!({"model": MODEL, "max_tokens": 16, "temperature": 0, "tools": tools, "messages": [
        {"role": "user", "content": "What is the weather in Paris, in celsius?"},
        required["choices"][0]["message"].clone(),
        {"role": "tool", "tool_call_id": call_id, "content": "{\"temperature\": 18, \"sky\": \"clear\"}"}]});
    let (status, answer) = chat(&server, &followup);
    assert_eq!(status, 200, "{answer}");

    // Strict json_schema.
    let person = json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name", "age"],
        "additionalProperties": false});
    let (status, shaped) = chat(
        &server,
        &json!({"model": MODEL, "max_tokens": 40, "temperature": 0.7, "seed": 7,
            "messages": [{"role": "user", "content": "Invent a person."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": person, "strict": true}}}),
    );
    assert_eq!(status, 200, "{shaped}");
    let value: Value = serde_json::from_str(shaped["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert!(jsonschema::is_valid(&person, &value), "{value}");

    // Bad requests: the right status, OpenAI's error shape, the field named; never a 500.
    let url = server.url("/v1/chat/completions");
    let bad = |body: &str| call("POST", &url, Some(KEY), Some(body));
    let message = json!([{"role": "user", "content": "hi"}]);
    let cases: Vec<(String, u16, Option<&str>)> = vec![
        ("{not json".into(), 400, None),
        (json!({"model": MODEL}).to_string(), 400, Some("messages")),
        (json!({"model": MODEL, "messages": []}).to_string(), 400, Some("messages")),
        (json!({"messages": message}).to_string(), 400, Some("model")),
        (json!({"model": MODEL, "messages": message, "temperature": 5}).to_string(), 400, Some("temperature")),
        (json!({"model": MODEL, "messages": message, "max_tokens": 0}).to_string(), 400, Some("max_tokens")),
        (json!({"model": MODEL, "messages": message, "max_tokens": 100000}).to_string(), 400, Some("max_tokens")),
        (json!({"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]}).to_string(), 400, Some("messages[0].role")),
        (json!({"model": MODEL, "messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "nope", "content": "1"}]}).to_string(), 400, Some("messages[1].tool_call_id")),
        (json!({"model": MODEL, "messages": message, "tools": [weather_tool()], "tool_choice": {"type": "function", "function": {"name": "fly"}}}).to_string(), 400, Some("tool_choice")),
        (json!({"model": MODEL, "messages": message, "tool_choice": "required"}).to_string(), 400, Some("tool_choice")),
        (json!({"model": MODEL, "messages": message, "tools": [{"type": "function", "function": {"name": "bad name!"}}]}).to_string(), 400, Some("tools[0].function.name")),
        (json!({"model": MODEL, "messages": message, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": true}}}}).to_string(), 400, Some("response_format")),
        (json!({"model": MODEL, "messages": message, "n": 9}).to_string(), 400, Some("n")),
        (json!({"model": "no-such-model", "messages": message}).to_string(), 404, None),
        (json!({"model": MODEL, "messages": [{"role": "user", "content": "x".repeat(70_000)}]}).to_string(), 413, None),
    ];
    for (body, want, param) in cases {
        let (status, error) = bad(&body);
        let shown = &body[..body.len().min(120)];
        assert_eq!(status, want, "{shown} → {error}");
        assert!(error["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{shown} → {error}");
        assert!(error["error"]["type"].is_string(), "{error}");
        if let Some(param) = param {
            assert_eq!(error["error"]["param"], param, "{shown} → {error}");
        }
    }
    let (status, error) = call("POST", &url, None, Some(&question.to_string()));
    assert_eq!((status, &error["error"]["code"]), (401, &json!("invalid_api_key")), "no key");
    let (status, _) = call("GET", &server.url("/v1/models"), Some("wrong"), None);
    assert_eq!(status, 401, "wrong key");
    let (status, error) = call("GET", &server.url("/v1/nothing"), Some(KEY), None);
    assert_eq!(status, 404, "{error}");
    let (_, health) = call("GET", &server.url("/health"), None, None);
    assert_eq!(health["running"], 0, "{health}\n{}", server.log.lock().unwrap());
}

/// Polls /health until `done` holds for it (or panics after a minute).
fn wait_for_health(server: &Server, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let (_, health) = call("GET", &server.url("/health"), None, None);
        if done(&health) {
            return health;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{what}: {health}\n{}", server.log.lock().unwrap());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn serve_cancels_a_stream_whose_client_left_and_refuses_when_the_queue_is_full() {
    let server = Server::start(&["--parallel", "1", "--queue", "1", "--max-completion-tokens", "2000"]);
    let long = json!({"model": MODEL, "max_tokens": 2000, "stream": true, "temperature": 0,
        "messages": [{"role": "user", "content": "Count from 1 to 1000, one number per line."}]});
    // A client that reads a few chunks and hangs up: its generation stops long before 2000 tokens.
    let open = || {
        let request = agent().post(&server.url("/v1/chat/completions")).set("Content-Type", "application/json");
        request.send_string(&long.to_string()).unwrap()
    };
    let mut reader = BufReader::new(open().into_reader());
    let mut seen = 0;
    let mut line = String::new();
    while seen < 4 {
        line.clear();
        reader.read_line(&mut line).unwrap();
        seen += usize::from(line.starts_with("data: "));
    }
    drop(reader);
    let health = wait_for_health(&server, "the abandoned generation was not cancelled", |h| {
        h["cancelled"] == 1 && h["running"] == 0
    });
    assert_eq!(health["completed"], 0, "{health}");

    // One generation runs, one waits, the third is refused with 503 in OpenAI's shape.
    let first = open();
    wait_for_health(&server, "the first generation did not start", |h| h["running"] == 1);
    let url = server.url("/v1/chat/completions");
    let second = std::thread::spawn({
        let body = long.to_string();
        let url = url.clone();
        move || {
            let response = agent().post(&url).set("Content-Type", "application/json").send_string(&body);
            // Read one chunk, then hang up.
            response.map(|r| BufReader::new(r.into_reader()).lines().next().map(|l| l.is_ok())).ok().flatten()
        }
    });
    wait_for_health(&server, "the second request was not queued", |h| h["queued"] == 1);
    let (status, error) = call("POST", &url, None, Some(&long.to_string()));
    assert_eq!(status, 503, "{error}");
    assert_eq!(error["error"]["code"], "queue_full", "{error}");
    drop(first);
    assert_eq!(second.join().unwrap(), Some(true), "the queued request ran once the slot was free");
    wait_for_health(&server, "the generations were not cancelled", |h| h["running"] == 0 && h["queued"] == 0);
}

/// The real `openai` package, installed on first use (pinned, under target/openai-client).
pub(crate) fn openai_python() -> std::path::PathBuf {
    static INSTALL: OnceLock<Result<(), String>> = OnceLock::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let installed = INSTALL.get_or_init(|| {
        let output = Command::new(root.join("scripts/install-openai-client.sh"))
            .output()
            .map_err(|e| format!("could not run scripts/install-openai-client.sh: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "scripts/install-openai-client.sh failed ({}):\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    });
    if let Err(why) = installed {
        panic!("{why}");
    }
    root.join("target/openai-client/venv/bin/python")
}

/// A client that leaves while its long prompt is prefilled stops the prefill itself (between its chunks), not
/// only the decoding after it: the job is counted cancelled, the slot frees having run fewer tokens than the prompt
/// has, and serves the next request.
#[test]
fn a_client_leaving_during_prefill_stops_the_prefill() {
    // Long enough that its prefill takes many chunks (of 512 tokens) even on a fast machine.
    const PROMPT: usize = 16_000;
    let server = Server::start(&["--parallel", "1", "--max-prompt-tokens", "20000"]);
    // Token ids: the prompt's length is exact, and the job starts its prefill as soon as it is taken.
    let body = json!({"model": MODEL, "prompt": vec![1000u32; PROMPT], "max_tokens": 1, "stream": true});
    let response = agent()
        .post(&server.url("/v1/completions"))
        .set("Content-Type", "application/json")
        .send_string(&body.to_string())
        .unwrap();
    // The answer's headers are out once the job is accepted: its prompt is being run now.
    wait_for_health(&server, "the long prompt's job did not start", |h| h["running"] == 1);
    drop(response);
    let health = wait_for_health(&server, "the prefill went on after its client left", |h| {
        h["cancelled"] == 1 && h["running"] == 0
    });
    assert_eq!(health["completed"], 0, "{health}");
    let evaluated = health["evaluated_tokens"].as_u64().expect("evaluated_tokens in /health");
    assert!(
        evaluated < PROMPT as u64,
        "{evaluated} tokens were run for a {PROMPT}-token prompt whose client left during its prefill: {health}"
    );
    // The slot is free again.
    let short = json!({"model": MODEL, "prompt": "One, two,", "max_tokens": 2, "temperature": 0});
    let (status, answer) = call("POST", &server.url("/v1/completions"), None, Some(&short.to_string()));
    assert_eq!(status, 200, "{answer}");
    let health = wait_for_health(&server, "the next request did not complete", |h| h["completed"] == 1);
    assert!(health["evaluated_tokens"].as_u64() > Some(evaluated), "{health}");
}

#[test]
fn the_openai_python_client_gets_chat_streams_tool_calls_and_schemas() {
    let python = openai_python();
    let server = Server::start(&["--api-key", KEY]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/openai_client.py");
    let output = Command::new(python)
        .arg(script)
        .args([&server.url("/v1"), KEY, MODEL])
        .output()
        .expect("run the openai client script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("all checks passed"),
        "openai client checks failed:\n{stdout}\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&output.stderr),
        server.log.lock().unwrap()
    );
}

/// The `(event, data)` pairs of a run's events stream, read until the server ends it.
pub(crate) fn run_events(server: &Server, id: &str) -> Vec<(String, String)> {
    let response = agent()
        .get(&server.url(&format!("/v1/runs/{id}/events")))
        .set("Authorization", &format!("Bearer {KEY}"))
        .call()
        .unwrap_or_else(|e| panic!("events of run {id}: {e}"));
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    let mut text = String::new();
    response.into_reader().read_to_string(&mut text).unwrap();
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let field = |name: &str| {
                block.lines().find_map(|l| l.strip_prefix(name)).unwrap_or_else(|| panic!("no {name} in {block:?}"))
            };
            (field("event: ").to_string(), field("data: ").to_string())
        })
        .collect()
}

#[test]
fn serve_runs_the_agent_streams_its_events_and_keeps_the_run_across_a_restart() {
    let runs = tempfile::tempdir().unwrap();
    let runs_dir = runs.path().to_str().unwrap();
    let server = Server::start(&["--runs-dir", runs_dir, "--api-key", KEY, "--allow-runs"]);
    let url = server.url("/v1/runs");

    // Bad requests name their field and leave no run behind.
    for (body, param) in [
        (json!({}), "goal"),
        (json!({"goal": 5}), "goal"),
        (json!({"goal": "  "}), "goal"),
        (json!({"goal": "What is 2+2?", "max_steps": "two"}), "max_steps"),
        (json!({"goal": "What is 2+2?", "max_replans": -1}), "max_replans"),
        (json!({"goal": "What is 2+2?", "approve": "steps"}), "approve"),
        (json!({"goal": "What is 2+2?", "tools": ["shell"]}), "tools"),
    ] {
        let (status, error) = call("POST", &url, Some(KEY), Some(&body.to_string()));
        assert_eq!(status, 400, "{body} → {error}");
        assert_eq!(error["error"]["param"], param, "{body} → {error}");
        assert_eq!(error["error"]["type"], "invalid_request_error", "{error}");
    }
    let (status, _) = call("POST", &url, Some(KEY), Some("[1, 2"));
    assert_eq!(status, 400);
    let (status, _) = call("POST", &url, None, Some(&json!({"goal": "What is 2+2?"}).to_string()));
    assert_eq!(status, 401, "runs need the key too");
    assert_eq!(std::fs::read_dir(runs.path()).map(|d| d.count()).unwrap_or(0), 0, "a refused run left a log");
    for path in ["/v1/runs/no-such-run", "/v1/runs/no-such-run/events", "/v1/runs/..%2F..%2Fetc/events"] {
        let (status, error) = call("GET", &server.url(path), Some(KEY), None);
        assert_eq!(status, 404, "{path} → {error}");
    }

    // A run: 201 with its id, its events streamed to run_finished, its summary.
    let body = json!({"goal": "What is 12*4+5?", "max_replans": 0, "max_steps": 4, "approve": "none"});
    let (status, created) = call("POST", &url, Some(KEY), Some(&body.to_string()));
    assert_eq!(status, 201, "{created}\n{}", server.log.lock().unwrap());
    let id = created["id"].as_str().expect("a run id").to_string();
    let events = run_events(&server, &id);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.first(), Some(&"run_started"), "{names:?}\n{}", server.log.lock().unwrap());
    assert_eq!(names.last(), Some(&"run_finished"), "{names:?}\n{}", server.log.lock().unwrap());
    let records: Vec<Value> = events.iter().map(|(_, data)| serde_json::from_str(data).unwrap()).collect();
    for (seq, (record, (name, _))) in records.iter().zip(&events).enumerate() {
        assert_eq!(record["seq"], seq, "{record}");
        assert_eq!(record["event"], name.as_str(), "{record}");
    }
    assert_eq!(records[0]["goal"], "What is 12*4+5?");
    assert_eq!(records[0]["settings"]["max_steps"], 4, "{}", records[0]);
    assert_eq!(records[0]["settings"]["max_replans"], 0, "{}", records[0]);
    assert_eq!(records[0]["settings"]["approve"], "none", "{}", records[0]);
    // The stream is the log, line for line.
    let log = std::fs::read_to_string(runs.path().join(&id).join("events.jsonl")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let data: Vec<&str> = events.iter().map(|(_, data)| data.as_str()).collect();
    assert_eq!(data, lines);

    let summary_url = server.url(&format!("/v1/runs/{id}"));
    let (status, summary) = call("GET", &summary_url, Some(KEY), None);
    assert_eq!(status, 200, "{summary}");
    assert_eq!(summary["run_id"], id.as_str());
    assert_eq!(summary["status"], "finished", "{summary}");
    assert_eq!(summary["goal"], "What is 12*4+5?");
    let finished = records.last().unwrap();
    assert_eq!(summary["stop"], finished["stop"], "{summary}");
    let steps = names.iter().filter(|n| **n == "step_finished").count();
    assert_eq!(summary["steps"].as_array().map(Vec::len), Some(steps), "{summary}");
    if let Some(answer) = records.iter().find(|r| r["event"] == "answer") {
        assert_eq!(summary["answer"], answer["text"], "{summary}");
    }

    // A restarted server on the same runs directory still has the run: the same summary, the same events.
    drop(server);
    let server = Server::start(&["--runs-dir", runs_dir, "--api-key", KEY, "--allow-runs"]);
    let (status, again) = call("GET", &server.url(&format!("/v1/runs/{id}")), Some(KEY), None);
    assert_eq!(status, 200, "{again}");
    assert_eq!(again, summary);
    let replayed = run_events(&server, &id);
    assert_eq!(replayed, events);
}
