//! The load: N client threads, each sending its requests one after another over HTTP (ureq, blocking) and
//! reading the streamed answer as it comes, timing the first token and taking the token counts from the usage
//! (and, for llama-server, the prompt tokens it evaluated from its `timings`).

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::workload::{Kind, Sampling, Workload};

/// What every request of one phase of a level is: its kind, sampling, model and limit, and the run's number of
/// its first request (request `r` of client `c` is number `first + c × per_client + r`: each its own message).
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    pub workload: &'a Workload,
    pub kind: Kind,
    pub sampling: Sampling,
    pub model: &'a str,
    pub max_tokens: usize,
    pub first: u64,
}

impl Batch<'_> {
    /// The run's number of request `request` of client `client`, each sending `per_client`.
    pub fn number(&self, client: usize, request: usize, per_client: usize) -> u64 {
        self.first + (client * per_client + request) as u64
    }
}

/// What one request gave.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RequestOutcome {
    /// Which client sent it, and its number among that client's requests.
    pub client: usize,
    pub request: usize,
    /// The run's number of the request: which message it sent (see `Workload::message`).
    pub prompt: u64,
    /// Seconds from sending to the first chunk with answer text or a tool call (not the empty role chunk).
    pub ttft_s: Option<f64>,
    /// Seconds from sending to the end of the stream.
    pub total_s: f64,
    /// `usage.completion_tokens` of the last chunk: the answer's tokens, as OpenAI counts them.
    pub completion_tokens: usize,
    /// Of those, `completion_tokens_details.reasoning_tokens`: thinking, and Tandem's listing pass.
    pub reasoning_tokens: usize,
    pub prompt_tokens: usize,
    /// Prompt tokens the server computed (not reused from a cache): llama-server's `timings.prompt_n`, else
    /// `prompt_tokens` less `usage.prompt_tokens_details.cached_tokens`; `None` when the server says neither.
    pub prompt_evaluated: Option<usize>,
    /// The `finish_reason`, when the stream gave one.
    pub finish_reason: Option<String>,
    /// Tool calls in the answer (deltas with an `id`).
    pub tool_calls: usize,
    /// The answer's text and the names of its calls, cut to [`ANSWER_KEPT`] characters (to see what was served).
    pub answer: String,
    /// Why the request failed: an HTTP error, an error object in the stream, a stream without usage.
    pub error: Option<String>,
}

/// What one level gave: every request's outcome and the wall time from the first request to the last answer.
#[derive(Debug, Clone)]
pub struct LevelOutcome {
    pub wall_s: f64,
    pub requests: Vec<RequestOutcome>,
}

/// Characters of each answer kept in its record.
const ANSWER_KEPT: usize = 200;

/// How long one request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// Runs one level: `clients` threads, each sending `per_client` requests in turn to `base` (`http://host:port`).
pub fn run_level(base: &str, batch: Batch, clients: usize, per_client: usize) -> LevelOutcome {
    let agent = ureq::AgentBuilder::new().timeout(REQUEST_TIMEOUT).max_idle_connections_per_host(clients).build();
    let url = format!("{}/v1/chat/completions", base.trim_end_matches('/'));
    let started = Instant::now();
    let requests = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..clients)
            .map(|client| {
                let (agent, url) = (agent.clone(), url.as_str());
                scope.spawn(move || {
                    (0..per_client)
                        .map(|request| {
                            let n = batch.number(client, request, per_client);
                            let body =
                                batch.workload.body(batch.kind, batch.sampling, batch.model, n, batch.max_tokens);
                            let mut outcome = send(&agent, url, &body);
                            (outcome.client, outcome.request, outcome.prompt) = (client, request, n);
                            outcome
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads.into_iter().flat_map(|t| t.join().unwrap_or_default()).collect()
    });
    LevelOutcome { wall_s: started.elapsed().as_secs_f64(), requests }
}

/// The cold phase: as many requests at once as the server has slots, one each, so every slot holds the shared
/// prompt (system prompt, and the tools for `tools`) before the measured phase, on llama-server as on Tandem.
/// Its outcome is reported apart; a failed request fails the warm-up.
pub fn warm_up(base: &str, batch: Batch, slots: usize) -> Result<LevelOutcome, String> {
    let outcome = run_level(base, batch, slots, 1);
    match outcome.requests.iter().find_map(|r| r.error.clone()) {
        Some(error) => Err(error),
        None => Ok(outcome),
    }
}

/// Sends one streamed request and reads its answer to the end.
pub fn send(agent: &ureq::Agent, url: &str, body: &Value) -> RequestOutcome {
    let started = Instant::now();
    let mut outcome = RequestOutcome::default();
    let response = match agent.post(url).set("Content-Type", "application/json").send_string(&body.to_string()) {
        Ok(response) => response,
        Err(ureq::Error::Status(status, response)) => {
            let text = response.into_string().unwrap_or_default();
            outcome.error = Some(format!("HTTP {status}: {}", text.chars().take(300).collect::<String>()));
            outcome.total_s = started.elapsed().as_secs_f64();
            return outcome;
        }
        Err(e) => {
            outcome.error = Some(format!("request failed: {e}"));
            outcome.total_s = started.elapsed().as_secs_f64();
            return outcome;
        }
    };
    let mut usage = None;
    let mut done = false;
    for line in BufReader::new(response.into_reader()).lines() {
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                outcome.error = Some(format!("reading the stream: {e}"));
                break;
            }
        };
        let Some(data) = line.strip_prefix("data:").map(str::trim) else { continue };
        if data == "[DONE]" {
            done = true;
            break;
        }
        let chunk: Value = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(e) => {
                outcome.error = Some(format!("a chunk is not JSON ({e}): {data}"));
                break;
            }
        };
        if let Some(error) = chunk.get("error") {
            outcome.error = Some(format!("error in the stream: {error}"));
            break;
        }
        read_chunk(&chunk, started, &mut outcome);
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            usage = Some(u.clone());
        }
        read_timings(&chunk, &mut outcome);
    }
    outcome.total_s = started.elapsed().as_secs_f64();
    if outcome.error.is_none() {
        match usage {
            Some(usage) => read_usage(&usage, &mut outcome),
            None => outcome.error = Some("the stream had no usage (stream_options.include_usage)".into()),
        }
        if !done && outcome.error.is_none() {
            outcome.error = Some("the stream ended without data: [DONE]".into());
        }
    }
    outcome
}

/// llama-server adds its `timings` to the last chunks: `prompt_n` is the prompt tokens it prefilled.
fn read_timings(chunk: &Value, outcome: &mut RequestOutcome) {
    if let Some(n) = chunk.pointer("/timings/prompt_n").and_then(Value::as_u64) {
        outcome.prompt_evaluated = Some(n as usize);
    }
}

/// Takes the token counts of the usage; the prompt tokens evaluated from its cached count, unless the server's
/// own timings said already.
fn read_usage(usage: &Value, outcome: &mut RequestOutcome) {
    let count = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64).map(|n| n as usize);
    outcome.completion_tokens = count("/completion_tokens").unwrap_or(0);
    outcome.reasoning_tokens = count("/completion_tokens_details/reasoning_tokens").unwrap_or(0);
    outcome.prompt_tokens = count("/prompt_tokens").unwrap_or(0);
    if outcome.prompt_evaluated.is_none() {
        outcome.prompt_evaluated =
            count("/prompt_tokens_details/cached_tokens").map(|cached| outcome.prompt_tokens.saturating_sub(cached));
    }
}

/// Takes what a chunk says about the answer: the first token's time, tool calls, the finish reason.
fn read_chunk(chunk: &Value, started: Instant, outcome: &mut RequestOutcome) {
    let Some(choice) = chunk.get("choices").and_then(Value::as_array).and_then(|c| c.first()) else { return };
    if let Some(delta) = choice.get("delta") {
        let text = delta.get("content").and_then(Value::as_str).is_some_and(|t| !t.is_empty());
        let calls = delta.get("tool_calls").and_then(Value::as_array);
        if outcome.ttft_s.is_none() && (text || calls.is_some_and(|c| !c.is_empty())) {
            outcome.ttft_s = Some(started.elapsed().as_secs_f64());
        }
        // A call's first delta carries its id; later deltas of a call streamed in parts carry only arguments.
        for call in calls.into_iter().flatten() {
            if call.get("id").is_some_and(|id| !id.is_null()) {
                outcome.tool_calls += 1;
            }
            if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                keep(&mut outcome.answer, &format!("[call {name}]"));
            }
        }
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            keep(&mut outcome.answer, text);
        }
    }
    if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
        outcome.finish_reason = Some(reason.to_string());
    }
}

/// Appends to the kept answer up to its limit.
fn keep(answer: &mut String, text: &str) {
    let room = ANSWER_KEPT.saturating_sub(answer.chars().count());
    answer.extend(text.chars().take(room));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fresh() -> RequestOutcome {
        RequestOutcome::default()
    }

    #[test]
    fn the_role_chunk_is_not_the_first_token_but_text_and_calls_are() {
        let started = Instant::now();
        let mut outcome = fresh();
        read_chunk(&json!({"choices": [{"delta": {"role": "assistant", "content": ""}}]}), started, &mut outcome);
        assert!(outcome.ttft_s.is_none());
        read_chunk(&json!({"choices": [{"delta": {"role": "assistant", "content": null}}]}), started, &mut outcome);
        assert!(outcome.ttft_s.is_none());
        let call = json!({"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}});
        read_chunk(&json!({"choices": [{"delta": {"tool_calls": [call]}}]}), started, &mut outcome);
        assert!(outcome.ttft_s.is_some());
        let part = json!({"index": 0, "function": {"arguments": "{}"}});
        read_chunk(
            &json!({"choices": [{"delta": {"tool_calls": [part]}, "finish_reason": "tool_calls"}]}),
            started,
            &mut outcome,
        );
        assert_eq!(outcome.tool_calls, 1);
        assert_eq!(outcome.answer, "[call f]");
        assert_eq!(outcome.finish_reason.as_deref(), Some("tool_calls"));
        let mut text = fresh();
        read_chunk(&json!({"choices": [{"delta": {"content": "Hi"}}]}), started, &mut text);
        assert!(text.ttft_s.is_some());
    }

    #[test]
    fn prompt_tokens_evaluated_come_from_the_cached_count_or_llama_servers_timings() {
        let usage = json!({"prompt_tokens": 450, "completion_tokens": 64,
            "prompt_tokens_details": {"cached_tokens": 430}, "completion_tokens_details": {"reasoning_tokens": 9}});
        let mut tandem = fresh();
        read_usage(&usage, &mut tandem);
        assert_eq!((tandem.prompt_tokens, tandem.completion_tokens, tandem.prompt_evaluated), (450, 64, Some(20)));
        assert_eq!(tandem.reasoning_tokens, 9);
        // llama-server's timings (read from its chunks first) win over its usage.
        let mut llama = fresh();
        let last = json!({"choices": [{"delta": {}, "finish_reason": "length"}],
            "timings": {"prompt_n": 445, "prompt_ms": 900.0, "predicted_n": 64}});
        read_timings(&last, &mut llama);
        read_usage(&usage, &mut llama);
        assert_eq!(llama.prompt_evaluated, Some(445));
        // A server that says neither: unknown, not zero.
        let mut bare = fresh();
        read_usage(&json!({"prompt_tokens": 9, "completion_tokens": 1}), &mut bare);
        assert_eq!(bare.prompt_evaluated, None);
    }
}
