//! `tandem serve`'s APIs beside chat, over real HTTP with the real 0.5B model: text completions' seeds (unseeded
//! samples differ, seeded ones repeat) and cached prompt tokens, the fields they refuse, `GET /metrics` scraped
//! and parsed, and the real `openai` Python package driving completions, logprobs and the Responses API
//! (`tests/serve/openai_api.py`). Answers are kept to a few tokens.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::serve::{agent, call, openai_python, stream_at, Server, KEY, MODEL};

/// A prompt of 20 tokens, which the slot's KV cache serves again from the second request on (a 5-token prompt
/// was seen not to be reused by a fresh server's cache: a matter of the engine's cache slots, not of this API).
const ANIMALS: &str = "Here is a long list of the animals that I like the most in the whole wide world: the";

fn completion(server: &Server, body: &Value) -> (u16, Value) {
    call("POST", &server.url("/v1/completions"), Some(KEY), Some(&body.to_string()))
}

/// The samples of `/metrics`: each line's name with its labels, and its value; panics on a line that is neither a
/// comment nor `name{labels} number`.
pub(crate) fn scrape(server: &Server) -> HashMap<String, f64> {
    let response = agent()
        .get(&server.url("/metrics"))
        .set("Authorization", &format!("Bearer {KEY}"))
        .call()
        .unwrap_or_else(|e| panic!("GET /metrics: {e}"));
    assert!(response.content_type().starts_with("text/plain"), "{}", response.content_type());
    let text = response.into_string().unwrap();
    let mut samples = HashMap::new();
    for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (name, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("not a sample: {line:?}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("not a number in {line:?}"));
        samples.insert(name.to_string(), value);
    }
    samples
}

#[test]
fn completions_sample_randomly_unless_seeded_and_metrics_count_them() {
    let server = Server::start(&["--api-key", KEY]);
    let sample = |seed: Option<u64>| {
        let mut body = json!({"model": MODEL, "prompt": ANIMALS, "max_tokens": 6,
                              "temperature": 1.5});
        if let Some(seed) = seed {
            body["seed"] = json!(seed);
        }
        let (status, answer) = completion(&server, &body);
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["object"], "text_completion");
        answer
    };
    // The first request computes the whole prompt, the next ones reuse it from the slot's cache (a pass of other
    // shape, whose logits can round differently): the two after the first are alike in every way but time.
    let first = sample(Some(42));
    let again = sample(Some(42));
    let third = sample(Some(42));
    assert_eq!(again["choices"][0]["text"], third["choices"][0]["text"], "the same seed samples the same text");
    let cached = again["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap();
    let prompt_tokens = again["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(cached > 0 && cached < prompt_tokens, "the repeated prompt is reused from the cache: {again}");
    // Without a seed each request draws its own: at temperature 1.5, four 6-token samples all alike would be a
    // seed fixed again.
    let texts: Vec<String> = (0..4).map(|_| sample(None)["choices"][0]["text"].as_str().unwrap().to_string()).collect();
    assert!(texts.iter().any(|t| t != &texts[0]), "unseeded samples all equal: {texts:?}");

    for (body, param) in [
        (json!({"model": MODEL, "prompt": "x", "suffix": "y"}), "suffix"),
        (json!({"model": MODEL, "prompt": "x", "n": 9}), "n"),
        (json!({"model": MODEL, "prompt": ["a", "b"]}), "prompt"),
        (json!({"model": MODEL, "prompt": "x", "max_tokens": 100000}), "max_tokens"),
    ] {
        let (status, error) = completion(&server, &body);
        assert_eq!((status, error["error"]["param"].as_str()), (400, Some(param)), "{body}: {error}");
    }
    let (status, error) = call(
        "POST",
        &server.url("/v1/responses"),
        Some(KEY),
        Some(&json!({"model": MODEL, "input": "hi", "previous_response_id": "resp_1"}).to_string()),
    );
    assert_eq!((status, error["error"]["param"].as_str()), (400, Some("previous_response_id")), "{error}");

    let (status, _) = call("GET", &server.url("/metrics"), None, None);
    assert_eq!(status, 401, "/metrics needs the key like every /v1 route");
    let foreign = agent().get(&server.url("/metrics")).set("Host", "evil.example").call();
    assert!(matches!(foreign, Err(ureq::Error::Status(403, _))), "a foreign Host is refused");
    let m = scrape(&server);
    let completion_tokens: u64 =
        [&first, &again, &third].iter().map(|a| a["usage"]["completion_tokens"].as_u64().unwrap()).sum();
    assert_eq!(m["tandem_generation_duration_seconds_count"], 7.0, "{m:?}");
    assert_eq!(m["tandem_generation_duration_seconds_bucket{le=\"+Inf\"}"], 7.0);
    assert!(m["tandem_completion_tokens_total"] >= completion_tokens as f64, "{m:?}");
    assert!(m["tandem_prompt_tokens_cached_total"] >= cached as f64, "{m:?}");
    assert!(m["tandem_prompt_tokens_total"] >= 7.0 * prompt_tokens as f64, "{m:?}");
    assert_eq!(m["tandem_queue_depth"], 0.0);
    assert_eq!(m["tandem_slots_busy"], 0.0);
    assert_eq!(m["tandem_http_requests_total{route=\"/v1/completions\",status=\"200\"}"], 7.0, "{m:?}");
    assert_eq!(m["tandem_http_requests_total{route=\"/v1/completions\",status=\"400\"}"], 4.0, "{m:?}");
    assert_eq!(m["tandem_http_requests_total{route=\"/metrics\",status=\"401\"}"], 1.0, "{m:?}");

    // n choices, one job each.
    let chat = |body: Value| call("POST", &server.url("/v1/chat/completions"), Some(KEY), Some(&body.to_string()));
    let ask = json!([{"role": "user", "content": "Name an animal."}]);
    let (status, answer) = chat(json!({"model": MODEL, "messages": ask, "n": 2, "max_tokens": 3, "seed": 1}));
    assert_eq!(status, 200, "{answer}");
    let choices = answer["choices"].as_array().unwrap();
    assert_eq!(choices.iter().map(|c| c["index"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1], "{answer}");
    assert!(choices.iter().all(|c| c["message"]["content"].is_string()), "{answer}");
    assert!(answer["usage"]["completion_tokens"].as_u64().unwrap() >= 2, "{answer}");
    let (status, error) = chat(json!({"model": MODEL, "messages": ask, "n": 9}));
    assert_eq!((status, error["error"]["param"].as_str()), (400, Some("n")), "{error}");
}

/// Each choice's text and finish reason from a stream's chunks (`choices[].text` or `choices[].delta.content`),
/// by index, and the usage chunk's completion tokens.
fn streamed_choices(lines: &[String]) -> (Vec<(String, Option<String>)>, Option<u64>) {
    assert_eq!(lines.last().map(String::as_str), Some("[DONE]"), "{lines:?}");
    let mut choices: Vec<(String, Option<String>)> = Vec::new();
    let mut completion_tokens = None;
    for line in &lines[..lines.len() - 1] {
        let chunk: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(chunk.get("error").is_none(), "{chunk}");
        if let Some(tokens) = chunk["usage"]["completion_tokens"].as_u64() {
            completion_tokens = Some(tokens);
        }
        for choice in chunk["choices"].as_array().unwrap() {
            let i = choice["index"].as_u64().unwrap() as usize;
            if choices.len() <= i {
                choices.resize(i + 1, (String::new(), None));
            }
            let text = choice["text"].as_str().or(choice["delta"]["content"].as_str()).unwrap_or("");
            choices[i].0.push_str(text);
            if let Some(reason) = choice["finish_reason"].as_str() {
                assert!(choices[i].1.is_none(), "choice {i} finished twice: {lines:?}");
                choices[i].1 = Some(reason.to_string());
            }
        }
    }
    (choices, completion_tokens)
}

#[test]
fn n_choices_stream_interleaved_and_echo_scores_the_prompt() {
    let server = Server::start(&["--api-key", KEY]);
    // n streamed choices: each choice's chunks carry its index, and a seeded stream gives each choice the text the
    // same request gives it whole (the choices' seeds are one apart in both).
    for (path, body) in [
        (
            "/v1/chat/completions",
            json!({"model": MODEL, "messages": [{"role": "user", "content": "Name an animal."}],
                                        "n": 3, "max_tokens": 5, "seed": 7, "temperature": 1.0}),
        ),
        (
            "/v1/completions",
            json!({"model": MODEL, "prompt": ANIMALS, "n": 2, "max_tokens": 5, "seed": 7,
                                   "temperature": 1.0}),
        ),
    ] {
        let (status, whole) = call("POST", &server.url(path), Some(KEY), Some(&body.to_string()));
        assert_eq!(status, 200, "{whole}");
        let mut streamed = body.clone();
        streamed["stream"] = json!(true);
        streamed["stream_options"] = json!({"include_usage": true});
        let (choices, usage) = streamed_choices(&stream_at(&server.url(path), &streamed));
        let n = body["n"].as_u64().unwrap() as usize;
        assert_eq!(choices.len(), n, "{path}: {choices:?}");
        for (i, (text, reason)) in choices.iter().enumerate() {
            let choice = &whole["choices"][i];
            let expected = choice["text"].as_str().or(choice["message"]["content"].as_str()).unwrap();
            assert_eq!(text, expected, "{path}: choice {i} streamed and whole differ");
            assert_eq!(reason.as_deref(), choice["finish_reason"].as_str(), "{path}: choice {i}");
        }
        assert_eq!(usage, whole["usage"]["completion_tokens"].as_u64(), "{path}: the choices' tokens add up");
    }

    // echo: the answer opens with the prompt, and the generated text is the one asked without echo.
    let ask = |extra: Value| {
        let mut body = json!({"model": MODEL, "prompt": ANIMALS, "max_tokens": 4, "temperature": 0});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let (status, answer) = completion(&server, &body);
        assert_eq!(status, 200, "{answer}");
        answer
    };
    let plain = ask(json!({"logprobs": 5}));
    let echoed = ask(json!({"logprobs": 5, "echo": true}));
    let plain_text = plain["choices"][0]["text"].as_str().unwrap();
    assert_eq!(echoed["choices"][0]["text"].as_str().unwrap(), format!("{ANIMALS}{plain_text}"), "{echoed}");
    let lp = &echoed["choices"][0]["logprobs"];
    let tokens: Vec<&str> = lp["tokens"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let prompt_tokens = echoed["usage"]["prompt_tokens"].as_u64().unwrap() as usize;
    let completion_tokens = echoed["usage"]["completion_tokens"].as_u64().unwrap() as usize;
    assert_eq!(tokens.len(), prompt_tokens + completion_tokens, "{lp}");
    assert_eq!(tokens.concat(), format!("{ANIMALS}{plain_text}"), "the tokens spell the prompt and the answer");
    assert!(lp["token_logprobs"][0].is_null() && lp["top_logprobs"][0].is_null(), "the first token is unscored");
    assert!(lp["token_logprobs"].as_array().unwrap()[1..].iter().all(|v| v.as_f64().unwrap() <= 0.0), "{lp}");
    assert_eq!(
        lp["token_logprobs"].as_array().unwrap()[prompt_tokens..],
        plain["choices"][0]["logprobs"]["token_logprobs"].as_array().unwrap()[..]
    );
    // A prompt token's alternatives are the distribution a completion of the prompt cut before it sees: scored in
    // one pass over the prompt, generated after a prefill, the same numbers.
    for k in [3, prompt_tokens - 1] {
        let cut = ask(json!({"prompt": tokens[..k].concat(), "max_tokens": 1, "logprobs": 5}));
        let generated = &cut["choices"][0]["logprobs"]["top_logprobs"][0];
        let scored = &lp["top_logprobs"][k];
        let keys = |v: &Value| {
            let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            keys.sort();
            keys
        };
        assert_eq!(keys(generated), keys(scored), "position {k}: {generated} vs {scored}");
        for (token, value) in scored.as_object().unwrap() {
            let other = generated[token].as_f64().unwrap();
            assert!((value.as_f64().unwrap() - other).abs() < 2e-3, "position {k}, {token:?}: {value} vs {other}");
        }
    }
}

#[test]
fn the_openai_python_client_gets_completions_logprobs_and_responses() {
    let python = openai_python();
    let server = Server::start(&["--api-key", KEY]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/openai_api.py");
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
