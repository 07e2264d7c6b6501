//! `POST /v1/chat/completions`: the body checked, the job queued, and the answer sent whole or as server-sent
//! events in OpenAI's chunk shape (text deltas; a tool call's first delta with its id and name once the name is
//! written, then its arguments in parts as they are written; the finish reason; and the usage in a last chunk when
//! `stream_options.include_usage` asks). `n` choices are `n` jobs, streamed interleaved with their indexes.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio_stream::wrappers::{ReceiverStream, UnboundedReceiverStream};
use tokio_stream::{StreamExt, StreamMap};

use crate::serve::openai::logprobs::{self, Logprob};
use crate::serve::openai::output::Piece;
use crate::serve::openai::reasoning;
use crate::serve::openai::request::{self, ChatRequest};
use crate::serve::plumbing::engine::{Finished, Job, JobEvent, Role, Work};
use crate::serve::plumbing::error::ApiError;
use crate::serve::AppState;

/// Sets the job's cancel flag when the request's handler or stream is dropped (the client went away).
pub struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// What every chunk and answer of one completion repeats.
#[derive(Clone)]
struct Header {
    id: String,
    created: u64,
    model: String,
}

/// A request's body as JSON: 413 past the server's limit, 400 when it is not JSON.
pub fn json_body(state: &AppState, body: Result<Bytes, BytesRejection>) -> Result<Value, ApiError> {
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError {
                status: StatusCode::PAYLOAD_TOO_LARGE,
                message: format!(
                    "the request body is larger than the server's limit of {} bytes",
                    state.max_body_bytes
                ),
                param: None,
                code: Some("request_too_large"),
            }
        } else {
            ApiError::bad_request(format!("the request body could not be read: {rejection}"), None)
        }
    })?;
    serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}"), None))
}

/// The handler.
pub async fn completions(State(state): State<Arc<AppState>>, body: Result<Bytes, BytesRejection>) -> Response {
    match start(&state, body).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

async fn start(state: &AppState, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let value = json_body(state, body)?;
    check_schema_bytes(state, &value)?;
    let request = request::parse(&value)?;
    let max_param = if value.get("max_completion_tokens").is_some() { "max_completion_tokens" } else { "max_tokens" };
    let (stream, include_usage) = (request.options.stream, request.options.include_usage);
    let logprobs = request.options.logprobs.is_some();
    let submitted = submit_choices(state, request, max_param).await?;
    let header = Header {
        id: format!("chatcmpl-{:016x}", rand::random::<u64>()),
        created: now(),
        model: state.id_of(submitted[0].role),
    };
    if stream {
        return Ok(stream_answer(header, submitted, include_usage).into_response());
    }
    let answer = whole_choices(submitted, |one| whole_answer(header.clone(), one.answers, one.guard, logprobs)).await?;
    Ok(Json(answer).into_response())
}

/// Queues a request's `n` choices: one job each, with seeds one apart (so a seeded request repeats all of them),
/// queued together so the slots generate them in the same passes.
pub async fn submit_choices(
    state: &AppState,
    request: ChatRequest,
    max_param: &str,
) -> Result<Vec<Submitted>, ApiError> {
    let mut started = Vec::with_capacity(request.n);
    for i in 0..request.n {
        let mut one = request.clone();
        one.options.seed = request.options.seed.wrapping_add(i as u64);
        started.push(submit(state, one, max_param).await?);
    }
    Ok(started)
}

/// The whole answers of `n` choices (each made by `answer`, in the shape of a one-choice answer) as one answer:
/// the first's fields, every choice with its index, the prompt counted once as OpenAI counts it and the choices'
/// tokens added up.
pub async fn whole_choices<F, A>(submitted: Vec<Submitted>, answer: A) -> Result<Value, ApiError>
where
    A: Fn(Submitted) -> F,
    F: std::future::Future<Output = Result<Value, ApiError>>,
{
    let mut whole = Value::Null;
    let mut choices = Vec::with_capacity(submitted.len());
    let mut completion_tokens = 0;
    for (i, one) in submitted.into_iter().enumerate() {
        let mut one = answer(one).await?;
        completion_tokens += one["usage"]["completion_tokens"].as_u64().unwrap_or(0);
        let mut choice = one["choices"][0].take();
        choice["index"] = json!(i);
        choices.push(choice);
        if whole.is_null() {
            whole = one;
        }
    }
    let prompt_tokens = whole["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
    whole["usage"]["completion_tokens"] = json!(completion_tokens);
    whole["usage"]["total_tokens"] = json!(prompt_tokens + completion_tokens);
    whole["choices"] = Value::Array(choices);
    Ok(whole)
}

/// The usage of a streamed answer's choices together: the prompt once, the choices' tokens added up.
pub struct ChoicesUsage {
    total: Option<Finished>,
    ended: usize,
    choices: usize,
}

impl ChoicesUsage {
    pub fn new(choices: usize) -> Self {
        ChoicesUsage { total: None, ended: 0, choices }
    }

    /// Counts one choice's end; the usage of them all once the last has ended.
    pub fn end(&mut self, finished: &Finished) -> Option<Value> {
        self.ended += 1;
        let total = self.total.get_or_insert(Finished { completion_tokens: 0, listing_tokens: 0, ..*finished });
        total.completion_tokens += finished.completion_tokens;
        total.listing_tokens += finished.listing_tokens;
        (self.ended == self.choices).then(|| usage(total))
    }
}

/// A job queued and started: its events, the guard that cancels it when dropped, and the model's role.
pub struct Submitted {
    /// The job's events after `Accepted`.
    pub answers: UnboundedReceiver<JobEvent>,
    /// Cancels the job when the answer is dropped (the client went away).
    pub guard: CancelOnDrop,
    /// The model it runs on.
    pub role: Role,
}

/// Finds the model, checks the token budget (`max_param` names the request's field), queues the job and waits
/// until it starts: errors before the start get their own status code.
pub async fn submit(state: &AppState, mut request: ChatRequest, max_param: &str) -> Result<Submitted, ApiError> {
    request.asks &= state.asks;
    let role = state.role_of(&request.model).ok_or_else(|| {
        ApiError::not_found(
            format!(
                "the model {:?} is not served here; GET /v1/models lists {}",
                request.model,
                state.model_ids().join(", ")
            ),
            "model_not_found",
        )
    })?;
    let max_tokens = request.options.max_tokens.unwrap_or(state.max_tokens);
    if max_tokens > state.max_tokens {
        return Err(ApiError::invalid(
            max_param,
            format!("at most {} new tokens per completion on this server", state.max_tokens),
        ));
    }
    let (events, mut answers) = mpsc::unbounded_channel();
    let cancel = Arc::new(AtomicBool::new(false));
    let job = Job {
        role,
        request,
        max_tokens,
        events,
        cancel: cancel.clone(),
        limits: state.limits,
        submitted: Instant::now(),
    };
    state.engine.submit(Work::Chat(Box::new(job)))?;
    let guard = CancelOnDrop(cancel);
    match answers.recv().await {
        Some(JobEvent::Accepted) => Ok(Submitted { answers, guard, role }),
        Some(JobEvent::Done(Err(e))) => Err(e),
        _ => Err(ApiError::internal("the generation slot ended the request without an answer")),
    }
}

/// Refuses `tools` and `response_format` larger together than the server's cap (`--max-schema-bytes`): their
/// grammar's compile time and the prompt grow with them.
pub fn check_schema_bytes(state: &AppState, value: &Value) -> Result<(), ApiError> {
    let size = |field: &str| value.get(field).map_or(0, |v| v.to_string().len());
    let (tools, format) = (size("tools"), size("response_format"));
    if tools + format > state.max_schema_bytes {
        return Err(ApiError::over_cap(
            if tools >= format { "tools" } else { "response_format" },
            format!(
                "tools and response_format are {} bytes of JSON together; this server takes at most {} \
                 (--max-schema-bytes)",
                tools + format,
                state.max_schema_bytes
            ),
            "schema_too_large",
        ));
    }
    Ok(())
}

pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

pub fn call_id() -> String {
    format!("call_{:016x}", rand::random::<u64>())
}

pub fn usage(finished: &Finished) -> Value {
    json!({
        "prompt_tokens": finished.prompt_tokens,
        "completion_tokens": finished.completion_tokens,
        "total_tokens": finished.prompt_tokens + finished.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": finished.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": finished.listing_tokens}
    })
}

/// `finished` with the answer's `thought` tokens counted in `reasoning_tokens` (beside the listing pass's).
fn with_reasoning(finished: &Finished, thought: usize) -> Finished {
    Finished { listing_tokens: finished.listing_tokens + thought, ..*finished }
}

/// The deltas of an answer's parts: thinking as `reasoning_content`, the rest as `content`.
fn part_deltas(parts: Vec<reasoning::Part>) -> Vec<Value> {
    parts
        .into_iter()
        .map(|part| match part {
            reasoning::Part::Reasoning(r) => json!({"reasoning_content": r}),
            reasoning::Part::Content(c) => json!({"content": c}),
        })
        .collect()
}

fn call_json(name: &str, arguments: &str) -> Value {
    json!({"id": call_id(), "type": "function", "function": {"name": name, "arguments": arguments}})
}

/// Collects the whole answer.
async fn whole_answer(
    header: Header,
    mut answers: UnboundedReceiver<JobEvent>,
    _guard: CancelOnDrop,
    want_logprobs: bool,
) -> Result<Value, ApiError> {
    let mut whole = reasoning::Whole::default();
    let mut calls = Vec::new();
    let mut lps: Vec<Logprob> = Vec::new();
    loop {
        match answers.recv().await {
            Some(JobEvent::Logprob(lp)) => lps.push(lp),
            Some(JobEvent::Piece(Piece::Text(piece))) => whole.push(piece),
            Some(JobEvent::Piece(Piece::CallEnd(call))) => calls.push(call_json(&call.name, &call.arguments)),
            Some(
                JobEvent::Piece(Piece::CallBegin(_) | Piece::CallArguments(_)) | JobEvent::Accepted | JobEvent::Echo(_),
            ) => {}
            Some(JobEvent::Done(Ok(finished))) => {
                let (reasoning, text, thought) = std::mem::take(&mut whole).finish();
                let finished = with_reasoning(&finished, thought);
                let mut message =
                    json!({"role": "assistant", "content": if calls.is_empty() { json!(text) } else { Value::Null }});
                if let Some(reasoning) = reasoning {
                    message["reasoning_content"] = json!(reasoning);
                }
                if !calls.is_empty() {
                    message["tool_calls"] = Value::Array(calls);
                }
                return Ok(json!({
                    "id": header.id,
                    "object": "chat.completion",
                    "created": header.created,
                    "model": header.model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finished.reason,
                        "logprobs": if want_logprobs { logprobs::chat(&lps) } else { Value::Null }}],
                    "usage": usage(&finished)
                }));
            }
            Some(JobEvent::Done(Err(e))) => return Err(e),
            None => return Err(ApiError::internal("the generation slot stopped mid-answer")),
        }
    }
}

/// A chunk of choice `index` with the log-probabilities of the tokens its delta adds.
fn chunk(header: &Header, index: usize, delta: Value, finish_reason: Option<&str>, logprobs: Value) -> Event {
    data(json!({
        "id": header.id,
        "object": "chat.completion.chunk",
        "created": header.created,
        "model": header.model,
        "choices": [{"index": index, "delta": delta, "finish_reason": finish_reason, "logprobs": logprobs}]
    }))
}

pub fn data(value: Value) -> Event {
    Event::default().data(value.to_string())
}

/// What a streamed answer makes of one job event (see [`stream_chunks`]).
pub enum Chunk {
    /// Events to send now (a piece of text may make none, or two: see `reasoning`).
    Send(Vec<Event>),
    /// Nothing to send for this one.
    Skip,
    /// The choice is finished: these go out (after the last choice's, `[DONE]`).
    Last(Vec<Event>),
}

/// Streams an answer as OpenAI's chunked endpoints do (chat and completions): `opening` first, then each event of
/// each choice's job (`answers[i]` is choice `i`'s, interleaved as they come) as `translate` makes it, then
/// `[DONE]` once every choice has ended. Headers are out by then, so a failure mid-answer is an error object in the
/// stream, and the stream ends. A task does the sending; when the client goes away the response body (and with it
/// the chunk channel) is dropped, the task ends, and the guards cancel the generations.
pub fn stream_chunks(
    opening: Vec<Event>,
    submitted: Vec<Submitted>,
    mut translate: impl FnMut(usize, JobEvent) -> Chunk + Send + 'static,
) -> Sse<ReceiverStream<Result<Event, Infallible>>> {
    let (chunks, stream) = mpsc::channel::<Result<Event, Infallible>>(16);
    let mut open = submitted.len();
    let mut merged = StreamMap::new();
    let mut guards = Vec::with_capacity(open);
    for (i, one) in submitted.into_iter().enumerate() {
        merged.insert(i, UnboundedReceiverStream::new(one.answers));
        guards.push(one.guard);
    }
    tokio::spawn(async move {
        let _guards = guards;
        let send = |event: Event| {
            let chunks = chunks.clone();
            async move { chunks.send(Ok(event)).await.is_ok() }
        };
        for event in opening {
            if !send(event).await {
                return;
            }
        }
        while open > 0 {
            // A client that leaves before the next event (while its prompt is prefilled or its grammar compiles,
            // when nothing is sent) drops the response body, and with it the channel's receiver: stop at once.
            let next = tokio::select! {
                event = merged.next() => event,
                () = chunks.closed() => return,
            };
            match next {
                Some((_, JobEvent::Done(Err(e)))) => {
                    let _ = send(data(e.body())).await;
                    return;
                }
                None => {
                    let _ = send(data(ApiError::internal("the generation slot stopped mid-answer").body())).await;
                    return;
                }
                Some((i, event)) => match translate(i, event) {
                    Chunk::Send(events) => {
                        for event in events {
                            if !send(event).await {
                                return;
                            }
                        }
                    }
                    Chunk::Skip => {}
                    Chunk::Last(events) => {
                        for event in events {
                            if !send(event).await {
                                return;
                            }
                        }
                        open -= 1;
                    }
                },
            }
        }
        let _ = send(Event::default().data("[DONE]")).await;
    });
    Sse::new(ReceiverStream::new(stream))
}

/// Streams the answer as chat completion chunks: each choice's assistant role first, then its text and tool-call
/// deltas.
fn stream_answer(
    header: Header,
    submitted: Vec<Submitted>,
    include_usage: bool,
) -> Sse<ReceiverStream<Result<Event, Infallible>>> {
    let n = submitted.len();
    let opening =
        (0..n).map(|i| chunk(&header, i, json!({"role": "assistant", "content": ""}), None, Value::Null)).collect();
    // Per choice: its calls so far, and the log-probabilities of tokens whose text has not gone out yet (they go
    // with the next delta).
    let mut calls = vec![0usize; n];
    let mut splits: Vec<reasoning::Split> = (0..n).map(|_| reasoning::Split::default()).collect();
    let mut pending: Vec<Vec<Logprob>> = vec![Vec::new(); n];
    let mut usage_of = ChoicesUsage::new(n);
    let take_lps = |lps: &mut Vec<Logprob>| {
        if lps.is_empty() {
            Value::Null
        } else {
            logprobs::chat(&std::mem::take(lps))
        }
    };
    stream_chunks(opening, submitted, move |i, event| match event {
        JobEvent::Logprob(lp) => {
            pending[i].push(lp);
            Chunk::Skip
        }
        // The log-probabilities go with the first delta the piece makes (a piece held back waits with them).
        JobEvent::Piece(Piece::Text(piece)) => Chunk::Send(
            part_deltas(splits[i].push(piece))
                .into_iter()
                .map(|delta| chunk(&header, i, delta, None, take_lps(&mut pending[i])))
                .collect(),
        ),
        // OpenAI's shape: the first delta of a call has its index, id, type and name, the next ones its index and
        // a part of its arguments.
        JobEvent::Piece(Piece::CallBegin(name)) => {
            let mut delta = call_json(&name, "");
            delta["index"] = json!(calls[i]);
            calls[i] += 1;
            Chunk::Send(vec![chunk(&header, i, json!({"tool_calls": [delta]}), None, take_lps(&mut pending[i]))])
        }
        JobEvent::Piece(Piece::CallArguments(part)) => {
            let delta = json!({"index": calls[i].saturating_sub(1), "function": {"arguments": part}});
            Chunk::Send(vec![chunk(&header, i, json!({"tool_calls": [delta]}), None, take_lps(&mut pending[i]))])
        }
        JobEvent::Piece(Piece::CallEnd(_)) | JobEvent::Accepted | JobEvent::Echo(_) => Chunk::Skip,
        JobEvent::Done(Ok(finished)) => {
            let finished = with_reasoning(&finished, splits[i].reasoning_tokens());
            let mut last: Vec<Event> = part_deltas(splits[i].finish())
                .into_iter()
                .map(|delta| chunk(&header, i, delta, None, Value::Null))
                .collect();
            last.push(chunk(&header, i, json!({}), Some(finished.reason), take_lps(&mut pending[i])));
            if let Some(usage) = usage_of.end(&finished).filter(|_| include_usage) {
                last.push(data(json!({
                    "id": header.id, "object": "chat.completion.chunk", "created": header.created,
                    "model": header.model, "choices": [], "usage": usage
                })));
            }
            Chunk::Last(last)
        }
        // Taken by `stream_chunks` before it asks.
        JobEvent::Done(Err(_)) => Chunk::Skip,
    })
}
