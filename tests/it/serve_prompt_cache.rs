//! `tandem serve`'s prompt cache over real HTTP with the real 0.5B model: a prompt sent again after another prompt
//! took its slot (A, B, A, as `tandem bench serve` cycles its messages) is read back from the cache, all but its
//! last token, and answers as it did the first time; `usage` and `/metrics` count the reuse. With the cache off
//! (`--prompt-cache-mib 0`) the same requests reuse only the shared opening, so the test can tell.

use serde_json::{json, Value};

use crate::serve::{call, Server, KEY, MODEL};
use crate::serve_api::scrape;

/// Long enough (more than 16 tokens) that both questions' prompts go to the same cache slot of the one
/// generation slot, so the second overwrites the first there.
const SYSTEM: &str = "You are a careful assistant of a small software team. Answer in one short sentence, plainly, \
                      without lists, code or greetings.";
const FIRST: &str = "What does a compiler do?";
const SECOND: &str = "Why do teams review each other's changes before they merge them?";

/// A greedy chat answer to `question` under [`SYSTEM`].
fn ask(server: &Server, question: &str) -> Value {
    let body = json!({"model": MODEL, "max_tokens": 12, "temperature": 0,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]});
    let (status, answer) = call("POST", &server.url("/v1/chat/completions"), Some(KEY), Some(&body.to_string()));
    assert_eq!(status, 200, "{answer}");
    answer
}

fn usage(answer: &Value, field: &str) -> u64 {
    let value = if field == "cached_tokens" {
        &answer["usage"]["prompt_tokens_details"]["cached_tokens"]
    } else {
        &answer["usage"][field]
    };
    value.as_u64().unwrap_or_else(|| panic!("no {field}: {answer}"))
}

/// The three answers to FIRST, SECOND, FIRST on a fresh server with `extra` flags, and the cached prompt tokens
/// `/metrics` counted.
fn first_second_first(extra: &[&str]) -> ([Value; 3], f64) {
    let flags = [&["--api-key", KEY, "--parallel", "1"], extra].concat();
    let server = Server::start(&flags);
    let answers = [ask(&server, FIRST), ask(&server, SECOND), ask(&server, FIRST)];
    let metrics = scrape(&server);
    (answers, metrics["tandem_prompt_tokens_cached_total"])
}

#[test]
fn a_prompt_sent_again_after_another_is_read_back_from_the_prompt_cache() {
    let ([first, second, again], cached_total) = first_second_first(&[]);
    let prompt_tokens = usage(&again, "prompt_tokens");
    assert_eq!(usage(&first, "prompt_tokens"), prompt_tokens);
    // The whole prompt but its last token (whose logits are computed) came from the cache.
    assert_eq!(usage(&again, "cached_tokens"), prompt_tokens - 1, "{again}");
    assert_eq!(again["choices"][0]["message"]["content"], first["choices"][0]["message"]["content"], "{again}");
    // The second question was computed after the shared opening: it is not a repeat.
    assert!(usage(&second, "cached_tokens") + 5 < usage(&second, "prompt_tokens"), "{second}");
    let counted: u64 = [&first, &second, &again].iter().map(|a| usage(a, "cached_tokens")).sum();
    assert_eq!(cached_total, counted as f64, "/metrics counts the same cached tokens as the answers' usage");

    // Without the prompt cache the repeat finds only the opening it shares with the second question.
    let ([off_first, _, off_again], _) = first_second_first(&["--prompt-cache-mib", "0"]);
    assert!(usage(&off_again, "cached_tokens") + 5 < prompt_tokens, "{off_again}");
    assert_eq!(off_again["choices"][0]["message"]["content"], off_first["choices"][0]["message"]["content"]);
}
