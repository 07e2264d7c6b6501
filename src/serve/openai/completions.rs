//! `POST /v1/completions`: OpenAI's text completions. The prompt (a string, or token ids) is used as it is, with no
//! chat template; sampling, stops, streaming and log-probabilities are chat's, and the job runs on the same slots.
//! `n` choices are `n` jobs (streamed interleaved); `echo` repeats the prompt, with its tokens' log-probabilities
//! when asked. Fields this server cannot honour (`suffix`, `best_of` above 1, penalties, `logit_bias`) are refused
//! with a 400 naming them, never ignored.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_stream::wrappers::ReceiverStream;

use crate::serve::openai::chat::{
    data, json_body, now, stream_chunks, submit_choices, usage, whole_choices, CancelOnDrop, ChoicesUsage, Chunk,
    Submitted,
};
use crate::serve::openai::echo::Echo;
use crate::serve::openai::logprobs::{self, TextToken};
use crate::serve::openai::output::Piece;
use crate::serve::openai::request::{
    fields_and_model, optional_bool, parse_n, parse_options, ChatRequest, RawPrompt, ToolChoice, MAX_TOP_LOGPROBS,
};
use crate::serve::plumbing::engine::JobEvent;
use crate::serve::plumbing::error::ApiError;
use crate::serve::AppState;

/// The handler.
pub async fn completions(State(state): State<Arc<AppState>>, body: Result<Bytes, BytesRejection>) -> Response {
    match start(&state, body).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

async fn start(state: &AppState, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let value = json_body(state, body)?;
    let request = parse(&value)?;
    let (stream, include_usage) = (request.options.stream, request.options.include_usage);
    let want_logprobs = request.options.logprobs.is_some();
    let submitted = submit_choices(state, request, "max_tokens").await?;
    let header = Header {
        id: format!("cmpl-{:016x}", rand::random::<u64>()),
        created: now(),
        model: state.id_of(submitted[0].role),
    };
    if stream {
        return Ok(stream_answer(header, submitted, include_usage, want_logprobs).into_response());
    }
    let answer = whole_choices(submitted, |one| whole_answer(&header, one.answers, one.guard, want_logprobs)).await?;
    Ok(Json(answer).into_response())
}

/// Checks a completions body.
fn parse(body: &Value) -> Result<ChatRequest, ApiError> {
    let (fields, model) = fields_and_model(body)?;
    refuse_unsupported(fields)?;
    let raw_prompt = parse_prompt(fields.get("prompt"))?;
    let mut options = parse_options(fields, &["max_tokens"])?;
    options.logprobs = match fields.get("logprobs") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_u64() {
            Some(n) if n as usize <= MAX_TOP_LOGPROBS => Some(n as usize),
            _ => {
                return Err(ApiError::invalid(
                    "logprobs",
                    format!("logprobs is the number of alternatives per token, 0 to {MAX_TOP_LOGPROBS}"),
                ))
            }
        },
    };
    options.echo = optional_bool(fields, "echo")?.unwrap_or(false);
    let n = parse_n(fields)?;
    Ok(ChatRequest {
        model,
        messages: Vec::new(),
        functions: Vec::new(),
        tools: None,
        tool_choice: ToolChoice::None,
        parallel_tool_calls: false,
        json_schema: None,
        options,
        raw_prompt: Some(raw_prompt),
        n,
        asks: false,
        exact_calls: None,
        template_kwargs: Default::default(),
    })
}

/// Refuses the fields of OpenAI's completions that this server does not do, unless they ask for the default.
fn refuse_unsupported(fields: &Map<String, Value>) -> Result<(), ApiError> {
    let is_default = |name: &str, value: &Value| match name {
        "best_of" => value.as_u64() == Some(1),
        "presence_penalty" | "frequency_penalty" => value.as_f64() == Some(0.0),
        "logit_bias" => value.as_object().is_some_and(Map::is_empty),
        _ => false,
    };
    for (name, why) in [
        ("suffix", "insertion (a suffix after the completion) is not supported"),
        ("best_of", "only best_of = 1: ask n choices and compare them"),
        ("presence_penalty", "penalties are not supported"),
        ("frequency_penalty", "penalties are not supported"),
        ("logit_bias", "logit_bias is not supported"),
    ] {
        match fields.get(name) {
            None | Some(Value::Null) => {}
            Some(value) if is_default(name, value) => {}
            Some(_) => return Err(ApiError::invalid(name, format!("{name}: {why}"))),
        }
    }
    Ok(())
}

/// A prompt: a string, or token ids, or a list holding one of them (one prompt per request).
fn parse_prompt(value: Option<&Value>) -> Result<RawPrompt, ApiError> {
    let ids = |items: &[Value]| -> Option<Vec<u32>> {
        items.iter().map(|v| v.as_u64().and_then(|id| u32::try_from(id).ok())).collect()
    };
    match value {
        Some(Value::String(text)) => Ok(RawPrompt::Text(text.clone())),
        Some(Value::Array(items)) => match items.as_slice() {
            [Value::String(text)] => Ok(RawPrompt::Text(text.clone())),
            [Value::Array(inner)] => ids(inner)
                .map(RawPrompt::Tokens)
                .ok_or_else(|| ApiError::invalid("prompt[0]", "token ids must be non-negative integers")),
            [] => Err(ApiError::invalid("prompt", "prompt must not be empty")),
            items if items.iter().all(Value::is_number) => ids(items)
                .map(RawPrompt::Tokens)
                .ok_or_else(|| ApiError::invalid("prompt", "token ids must be non-negative integers")),
            _ => Err(ApiError::invalid(
                "prompt",
                "one prompt per request: a string, a list of token ids, or a list holding one of them",
            )),
        },
        None | Some(Value::Null) => Err(ApiError::invalid("prompt", "prompt is required")),
        Some(_) => Err(ApiError::invalid("prompt", "prompt must be a string or a list of token ids")),
    }
}

/// What every answer and chunk repeats.
struct Header {
    id: String,
    created: u64,
    model: String,
}

fn completion(header: &Header, choices: Value) -> Value {
    json!({"id": header.id, "object": "text_completion", "created": header.created, "model": header.model,
           "system_fingerprint": null, "choices": choices})
}

/// The text and tokens an echo opens the answer with; the prompt's tokens only when log-probabilities are asked.
fn echoed(echo: Echo, want_logprobs: bool) -> (String, Vec<TextToken>) {
    (echo.text, if want_logprobs { echo.tokens.unwrap_or_default() } else { Vec::new() })
}

/// Collects one choice's whole answer.
async fn whole_answer(
    header: &Header,
    mut answers: UnboundedReceiver<JobEvent>,
    _guard: CancelOnDrop,
    want_logprobs: bool,
) -> Result<Value, ApiError> {
    let mut text = String::new();
    let mut lps: Vec<TextToken> = Vec::new();
    loop {
        match answers.recv().await {
            Some(JobEvent::Echo(echo)) => (text, lps) = echoed(echo, want_logprobs),
            Some(JobEvent::Logprob(lp)) => lps.push(TextToken::Scored(lp)),
            Some(JobEvent::Piece(Piece::Text(piece))) => text.push_str(&piece),
            Some(JobEvent::Piece(_) | JobEvent::Accepted) => {}
            Some(JobEvent::Done(Ok(finished))) => {
                let lps = if want_logprobs { logprobs::completion(&lps, 0) } else { Value::Null };
                let choice = json!({"text": text, "index": 0, "logprobs": lps, "finish_reason": finished.reason});
                let mut answer = completion(header, json!([choice]));
                answer["usage"] = usage(&finished);
                return Ok(answer);
            }
            Some(JobEvent::Done(Err(e))) => return Err(e),
            None => return Err(ApiError::internal("the generation slot stopped mid-answer")),
        }
    }
}

/// Streams the answer as completion chunks (each choice's interleaved, an echo first in its own chunk), then
/// `[DONE]` (through chat's [`stream_chunks`]).
fn stream_answer(
    header: Header,
    submitted: Vec<Submitted>,
    include_usage: bool,
    want_logprobs: bool,
) -> Sse<ReceiverStream<Result<Event, Infallible>>> {
    let n = submitted.len();
    // Per choice: log-probabilities not sent yet, and the characters sent so far (where the next tokens' text
    // offsets start).
    let mut pending: Vec<Vec<TextToken>> = (0..n).map(|_| Vec::new()).collect();
    let mut offsets = vec![0usize; n];
    let mut usage_of = ChoicesUsage::new(n);
    let take_lps = move |lps: &mut Vec<TextToken>, offset: usize| {
        if want_logprobs {
            logprobs::completion(&std::mem::take(lps), offset)
        } else {
            Value::Null
        }
    };
    let text_chunk = |header: &Header, i: usize, text: &str, lps: Value, reason: Option<&str>| {
        let choice = json!({"text": text, "index": i, "logprobs": lps, "finish_reason": reason});
        data(completion(header, json!([choice])))
    };
    stream_chunks(Vec::new(), submitted, move |i, event| match event {
        JobEvent::Echo(echo) => {
            let (text, mut lps) = echoed(echo, want_logprobs);
            let lp = take_lps(&mut lps, offsets[i]);
            offsets[i] += text.chars().count();
            Chunk::Send(vec![text_chunk(&header, i, &text, lp, None)])
        }
        JobEvent::Logprob(lp) => {
            pending[i].push(TextToken::Scored(lp));
            Chunk::Skip
        }
        JobEvent::Piece(Piece::Text(piece)) => {
            let lp = take_lps(&mut pending[i], offsets[i]);
            offsets[i] += piece.chars().count();
            Chunk::Send(vec![text_chunk(&header, i, &piece, lp, None)])
        }
        JobEvent::Piece(_) | JobEvent::Accepted => Chunk::Skip,
        JobEvent::Done(Ok(finished)) => {
            let lp = if pending[i].is_empty() { Value::Null } else { take_lps(&mut pending[i], offsets[i]) };
            let mut last = vec![text_chunk(&header, i, "", lp, Some(finished.reason))];
            if let Some(usage) = usage_of.end(&finished).filter(|_| include_usage) {
                let mut usage_chunk = completion(&header, json!([]));
                usage_chunk["usage"] = usage;
                last.push(data(usage_chunk));
            }
            Chunk::Last(last)
        }
        // Taken by `stream_chunks` before it asks.
        JobEvent::Done(Err(_)) => Chunk::Skip,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_and_refusals_name_the_field() {
        let ok = parse(&json!({"model": "m", "prompt": [[1, 2, 3]], "logprobs": 2, "echo": false})).unwrap();
        assert_eq!(ok.raw_prompt, Some(RawPrompt::Tokens(vec![1, 2, 3])));
        assert_eq!(ok.options.logprobs, Some(2));
        assert_eq!(ok.options.user, None);
        let named = parse(&json!({"model": "m", "prompt": "x", "user": "alice"})).unwrap();
        assert_eq!(named.options.user.as_deref(), Some("alice"), "the grammar cache's owner");
        assert_eq!(
            parse(&json!({"model": "m", "prompt": ["hi"]})).unwrap().raw_prompt,
            Some(RawPrompt::Text("hi".into()))
        );
        for (body, param) in [
            (json!({"model": "m", "prompt": "x", "echo": "yes"}), "echo"),
            (json!({"model": "m", "prompt": "x", "n": 9}), "n"),
            (json!({"model": "m", "prompt": "x", "suffix": "y"}), "suffix"),
            (json!({"model": "m", "prompt": "x", "best_of": 2}), "best_of"),
            (json!({"model": "m", "prompt": "x", "logit_bias": {"1": 5}}), "logit_bias"),
            (json!({"model": "m", "prompt": ["a", "b"]}), "prompt"),
            (json!({"model": "m", "prompt": [1, -2]}), "prompt"),
            (json!({"model": "m"}), "prompt"),
            (json!({"model": "m", "prompt": "x", "logprobs": 21}), "logprobs"),
            (json!({"model": "m", "prompt": "x", "user": 7}), "user"),
            (json!({"model": "m", "prompt": "x", "user": "u".repeat(257)}), "user"),
        ] {
            let e = parse(&body).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{body}: {e:?}");
        }
    }
}
