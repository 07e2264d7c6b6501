//! Several calls when several are asked, through `tandem serve` and the real `openai` client: a request that asks
//! for the weather in two cities gets two calls (plain and streamed), each for one of the cities, the listing
//! pass's tokens counted as `reasoning_tokens`; `"asks": false` and `--asks off` skip the pass.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::serve::{openai_python, Server, MODEL};

/// The script's answers from `server`.
fn ask(server: &Server) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/openai_asks.py");
    let output = Command::new(openai_python())
        .arg(script)
        .args([&server.url("/v1"), MODEL])
        .output()
        .expect("run the openai asks script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "openai asks script failed:\n{stdout}\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&output.stderr),
        server.log.lock().unwrap()
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The cities of an answer's `get_weather` calls, in order.
fn cities(answer: &Value) -> Vec<String> {
    let calls = answer["calls"].as_array().unwrap_or_else(|| panic!("no calls list: {answer}"));
    calls
        .iter()
        .map(|c| {
            assert_eq!(c["name"], "get_weather", "{answer}");
            c["arguments"]["city"].as_str().unwrap_or_default().to_lowercase()
        })
        .collect()
}

#[test]
fn two_cities_asked_get_two_calls_and_the_switches_turn_the_listing_off() {
    let server = Server::start(&[]);
    let answers = ask(&server);
    for kind in ["listed", "streamed"] {
        let answer = &answers[kind];
        assert_eq!(cities(answer), ["paris", "tokyo"], "{kind}: {answers}");
        assert_eq!(answer["finish"], "tool_calls", "{kind}: {answers}");
    }
    let usage = &answers["listed"]["usage"];
    let listing = usage["completion_tokens_details"]["reasoning_tokens"].as_u64().unwrap_or(0);
    assert!(listing > 0, "the listing pass's tokens are counted: {usage}");
    assert!(usage["completion_tokens"].as_u64() > Some(listing), "the calls' tokens come on top: {usage}");
    // Turned off by the request: no listing tokens. (How many calls the model then writes is its own choice.)
    let unlisted = &answers["unlisted"];
    assert_eq!(unlisted["usage"]["completion_tokens_details"]["reasoning_tokens"], 0, "{answers}");
    eprintln!("asks off by request: {} call(s): {:?}", cities(unlisted).len(), cities(unlisted));
    drop(server);
    // Turned off for the server: no listing for any request.
    let server = Server::start(&["--asks", "off"]);
    let answers = ask(&server);
    assert_eq!(answers["listed"]["usage"]["completion_tokens_details"]["reasoning_tokens"], 0, "{answers}");
    eprintln!("--asks off: {} call(s)", cities(&answers["listed"]).len());
}
