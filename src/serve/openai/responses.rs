//! `POST /v1/responses`: OpenAI's Responses API (the Agents SDK's and Codex-style clients'), on chat completions'
//! machinery. The request is translated into the chat-completions body it means (`input` items and
//! `instructions` into messages, function calls and their outputs into assistant `tool_calls` and `tool`
//! messages, flat function tools, `text.format` into `response_format`) and checked by the chat parser, so the
//! chat template, the tool-call grammar and the call parsing are chat's; a chat error's field is named back in
//! the Responses request's terms. The answer is built by `responses_output`, whole or as typed events.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::serve::openai::chat::{check_schema_bytes, json_body, now, submit, Submitted};
use crate::serve::openai::request::{self, MAX_TOP_LOGPROBS};
use crate::serve::openai::response_store::{ResponseStore, MAX_AGE, MAX_STORED};
use crate::serve::openai::responses_output::Builder;
use crate::serve::plumbing::engine::JobEvent;
use crate::serve::plumbing::error::ApiError;
use crate::serve::AppState;

/// The handler.
pub async fn responses(State(state): State<Arc<AppState>>, body: Result<Bytes, BytesRejection>) -> Response {
    match start(&state, body).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

async fn start(state: &Arc<AppState>, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let value = json_body(state, body)?;
    let Value::Object(fields) = &value else {
        return Err(ApiError::bad_request("the request body must be a JSON object", None));
    };
    let (chat_body, sources) = translate(fields, &state.responses)?;
    check_schema_bytes(state, &chat_body)?;
    let store = match fields.get("store") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(store)) => *store,
        Some(_) => return Err(ApiError::invalid("store", "store must be true or false")),
    };
    let mut request = request::parse(&chat_body).map_err(|e| rename(e, &sources))?;
    request.options.logprobs = parse_logprobs(fields)?;
    let stream = request.options.stream;
    let submitted = submit(state, request, "max_output_tokens").await?;
    let builder = Builder::new(base(fields, &state.id_of(submitted.role), store));
    // The conversation so far, kept with the answer's output items for a later `previous_response_id`.
    let conversation = chat_body["messages"].as_array().cloned().unwrap_or_default();
    let keep: Keep = match store {
        true => {
            let state = state.clone();
            Box::new(move |response: &Value| keep_response(&state, conversation, response))
        }
        false => Box::new(|_: &Value| {}),
    };
    if stream {
        Ok(stream_answer(builder, submitted, keep).into_response())
    } else {
        let answer = whole_answer(builder, submitted).await?;
        keep(&answer);
        Ok(Json(answer).into_response())
    }
}

/// What to do with a finished response (store it, or not).
type Keep = Box<dyn FnOnce(&Value) + Send>;

/// Stores a response: the conversation that asked for it, then its output items as chat messages.
fn keep_response(state: &AppState, mut conversation: Vec<Value>, response: &Value) {
    let (Some(id), Some(output)) = (response["id"].as_str(), response["output"].as_array()) else { return };
    let mut sources = Sources::new();
    for (i, item) in output.iter().enumerate() {
        // The server's own items always translate; one that did not would only leave the conversation shorter.
        if add_item(item, &format!("output[{i}]"), &mut conversation, &mut sources).is_err() {
            return;
        }
    }
    state.responses.keep(id, conversation);
}

/// The response object's fields that do not depend on the answer: its id and model, and the request's settings
/// as OpenAI echoes them.
fn base(fields: &Map<String, Value>, model: &str, store: bool) -> Value {
    let get = |name: &str, default: Value| fields.get(name).filter(|v| !v.is_null()).cloned().unwrap_or(default);
    json!({
        "id": format!("resp_{:016x}", rand::random::<u64>()),
        "object": "response",
        "created_at": now(),
        "model": model,
        "error": null,
        "incomplete_details": null,
        "instructions": get("instructions", Value::Null),
        "max_output_tokens": get("max_output_tokens", Value::Null),
        "metadata": get("metadata", json!({})),
        "parallel_tool_calls": get("parallel_tool_calls", json!(true)),
        "temperature": get("temperature", json!(1.0)),
        "top_p": get("top_p", json!(1.0)),
        "tool_choice": get("tool_choice", json!("auto")),
        "tools": get("tools", json!([])),
        "text": get("text", json!({"format": {"type": "text"}})),
        "store": store,
        "previous_response_id": get("previous_response_id", Value::Null),
        "truncation": "disabled",
        "usage": null,
    })
}

/// Log-probabilities, asked for with `include: ["message.output_text.logprobs"]` and `top_logprobs`.
fn parse_logprobs(fields: &Map<String, Value>) -> Result<Option<usize>, ApiError> {
    let included = match fields.get("include") {
        None | Some(Value::Null) => false,
        Some(Value::Array(items)) => items.iter().any(|i| i.as_str() == Some("message.output_text.logprobs")),
        Some(_) => return Err(ApiError::invalid("include", "include must be a list of strings")),
    };
    let top = match fields.get("top_logprobs") {
        None | Some(Value::Null) => 0,
        Some(value) => match value.as_u64() {
            Some(n) if n as usize <= MAX_TOP_LOGPROBS => n as usize,
            _ => return Err(ApiError::invalid("top_logprobs", format!("top_logprobs is 0 to {MAX_TOP_LOGPROBS}"))),
        },
    };
    Ok(included.then_some(top))
}

/// Which Responses field each chat message came from (`instructions`, `input[3]`), to name chat's errors back.
type Sources = Vec<String>;

/// Puts a chat error's field in the Responses request's terms: `messages[2].content` → `input[1].content`,
/// `tools[0].function.name` → `tools[0].name`, `response_format…` → `text.format`, `max_tokens` →
/// `max_output_tokens`.
fn rename(mut error: ApiError, sources: &Sources) -> ApiError {
    let Some(param) = error.param.take() else { return error };
    let renamed = if let Some(rest) = param.strip_prefix("messages[") {
        let (index, tail) = rest.split_once(']').unwrap_or((rest, ""));
        match index.parse::<usize>().ok().and_then(|i| sources.get(i)) {
            Some(source) => format!("{source}{}", if source == "instructions" { "" } else { tail }),
            None => "input".to_string(),
        }
    } else if param.starts_with("messages") {
        "input".to_string()
    } else if param.starts_with("response_format") {
        "text.format".to_string()
    } else if param.starts_with("max_") {
        "max_output_tokens".to_string()
    } else {
        param.replace(".function.", ".")
    };
    error.param = Some(renamed);
    error
}

/// Fields of the Responses API this server does not do: refused, never ignored.
const REFUSED: [(&str, &str); 3] = [
    (
        "conversation",
        "conversations are not stored here: continue one with previous_response_id, or send it whole \
                      as input items",
    ),
    ("background", "background responses are not supported"),
    ("prompt", "stored prompt templates are not supported: send instructions and input"),
];

/// The chat-completions body a Responses request means, and where each of its messages came from.
fn translate(fields: &Map<String, Value>, stored: &ResponseStore) -> Result<(Value, Sources), ApiError> {
    for (name, why) in REFUSED {
        match fields.get(name) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => {}
            Some(_) => return Err(ApiError::invalid(name, format!("{name}: {why}"))),
        }
    }
    let mut messages: Vec<Value> = Vec::new();
    let mut sources: Sources = Vec::new();
    match fields.get("instructions") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => {
            messages.push(json!({"role": "system", "content": text}));
            sources.push("instructions".into());
        }
        Some(_) => return Err(ApiError::invalid("instructions", "instructions must be a string")),
    }
    match fields.get("previous_response_id") {
        None | Some(Value::Null) => {}
        Some(Value::String(id)) => {
            let earlier = stored.conversation(id).ok_or_else(|| {
                ApiError::invalid(
                    "previous_response_id",
                    format!(
                        "previous_response_id: no stored response {id:?}: this server keeps the newest \
                         {MAX_STORED} responses for {} minutes, in memory (not those sent with store: false, nor across a restart); send the \
                         whole conversation as input items instead",
                        MAX_AGE.as_secs() / 60
                    ),
                )
            })?;
            sources.extend(std::iter::repeat_n("previous_response_id".to_string(), earlier.len()));
            messages.extend(earlier);
        }
        Some(_) => return Err(ApiError::invalid("previous_response_id", "previous_response_id must be a string")),
    }
    match fields.get("input") {
        Some(Value::String(text)) => {
            messages.push(json!({"role": "user", "content": text}));
            sources.push("input".into());
        }
        Some(Value::Array(items)) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                add_item(item, &format!("input[{i}]"), &mut messages, &mut sources)?;
            }
        }
        Some(Value::Array(_)) => return Err(ApiError::invalid("input", "input must not be empty")),
        None | Some(Value::Null) => return Err(ApiError::invalid("input", "input is required")),
        Some(_) => return Err(ApiError::invalid("input", "input must be a string or a list of items")),
    }
    let mut body = Map::new();
    body.insert("model".into(), fields.get("model").cloned().unwrap_or(Value::Null));
    body.insert("messages".into(), Value::Array(messages));
    for name in ["temperature", "top_p", "seed", "stream", "parallel_tool_calls", "asks", "user"] {
        if let Some(value) = fields.get(name) {
            body.insert(name.into(), value.clone());
        }
    }
    if let Some(max) = fields.get("max_output_tokens") {
        body.insert("max_tokens".into(), max.clone());
    }
    if let Some(tools) = translate_tools(fields.get("tools"))? {
        body.insert("tools".into(), tools);
    }
    if let Some(choice) = translate_tool_choice(fields.get("tool_choice"))? {
        body.insert("tool_choice".into(), choice);
    }
    if let Some(format) = translate_format(fields.get("text"))? {
        body.insert("response_format".into(), format);
    }
    Ok((Value::Object(body), sources))
}

/// Text of an item's content: a string, or `input_text` / `output_text` parts.
fn item_text(content: Option<&Value>, at: &str) -> Result<String, ApiError> {
    match content {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for (j, part) in parts.iter().enumerate() {
                match (part.get("type").and_then(Value::as_str), part.get("text").and_then(Value::as_str)) {
                    (Some("input_text" | "output_text" | "text"), Some(t)) => text.push_str(t),
                    _ => {
                        return Err(ApiError::invalid(
                            format!("{at}.content[{j}]"),
                            "only text content ({\"type\": \"input_text\", \"text\": ...}) is supported",
                        ))
                    }
                }
            }
            Ok(text)
        }
        _ => Err(ApiError::invalid(format!("{at}.content"), "content must be a string or a list of text parts")),
    }
}

/// Adds one input item as chat messages: a message; a function call (joined to the assistant message before it,
/// so parallel calls are one turn); a function call's output (a tool message).
fn add_item(item: &Value, at: &str, messages: &mut Vec<Value>, sources: &mut Sources) -> Result<(), ApiError> {
    let Value::Object(item) = item else {
        return Err(ApiError::invalid(at, "each input item must be an object"));
    };
    let string = |name: &str| -> Result<String, ApiError> {
        item.get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| ApiError::invalid(format!("{at}.{name}"), format!("{name} must be a string")))
    };
    match item.get("type").and_then(Value::as_str).unwrap_or("message") {
        "message" => {
            let role = string("role")?;
            messages.push(json!({"role": role, "content": item_text(item.get("content"), at)?}));
            sources.push(at.to_string());
        }
        "function_call" => {
            let call = json!({"id": string("call_id")?, "type": "function",
                              "function": {"name": string("name")?, "arguments": string("arguments")?}});
            let joins = messages.last().is_some_and(|m| m["role"] == "assistant" && sources.last().is_some());
            if joins {
                let last = messages.last_mut().expect("checked");
                match last.get_mut("tool_calls").and_then(Value::as_array_mut) {
                    Some(calls) => calls.push(call),
                    None => last["tool_calls"] = json!([call]),
                }
            } else {
                messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call]}));
                sources.push(at.to_string());
            }
        }
        "function_call_output" => {
            let output = match item.get("output") {
                Some(Value::String(text)) => text.clone(),
                other => item_text(other, at)
                    .map_err(|_| ApiError::invalid(format!("{at}.output"), "output must be a string or text parts"))?,
            };
            messages.push(json!({"role": "tool", "tool_call_id": string("call_id")?, "content": output}));
            sources.push(at.to_string());
        }
        // A model's thinking from an earlier output, sent back with it: the templates leave earlier thinking
        // out, and so does the conversation.
        "reasoning" => {}
        other => {
            return Err(ApiError::invalid(
                format!("{at}.type"),
                format!(
                    "input items of type {other:?} are not supported: use message, function_call, \
                     function_call_output and reasoning"
                ),
            ))
        }
    }
    Ok(())
}

/// Flat function tools (`{"type": "function", "name", "description", "parameters", "strict"}`) in chat's shape.
fn translate_tools(value: Option<&Value>) -> Result<Option<Value>, ApiError> {
    let items = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(ApiError::invalid("tools", "tools must be a list of function tools")),
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, tool) in items.iter().enumerate() {
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            return Err(ApiError::invalid(
                format!("tools[{i}].type"),
                "only function tools are supported (the server runs no hosted tools)",
            ));
        }
        let mut function = Map::new();
        for name in ["name", "description", "parameters"] {
            if let Some(value) = tool.get(name).filter(|v| !v.is_null()) {
                function.insert(name.into(), value.clone());
            }
        }
        out.push(json!({"type": "function", "function": function}));
    }
    Ok(Some(Value::Array(out)))
}

/// `tool_choice`: the strings as chat's, `{"type": "function", "name"}` as chat's named choice.
fn translate_tool_choice(value: Option<&Value>) -> Result<Option<Value>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(s @ Value::String(_)) => Ok(Some(s.clone())),
        Some(Value::Object(choice)) if choice.get("type").and_then(Value::as_str) == Some("function") => {
            match choice.get("name").and_then(Value::as_str) {
                Some(name) => Ok(Some(json!({"type": "function", "function": {"name": name}}))),
                None => Err(ApiError::invalid("tool_choice.name", "a function tool_choice needs its name")),
            }
        }
        Some(_) => Err(ApiError::invalid(
            "tool_choice",
            "tool_choice is none, auto, required or {\"type\": \"function\", \"name\": ...}",
        )),
    }
}

/// `text.format` as chat's `response_format`.
fn translate_format(text: Option<&Value>) -> Result<Option<Value>, ApiError> {
    let Some(format) = text.filter(|t| !t.is_null()).and_then(|t| t.get("format")).filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
        Some("json_schema") => {
            let mut schema = Map::new();
            for name in ["name", "schema", "strict"] {
                if let Some(value) = format.get(name) {
                    schema.insert(name.into(), value.clone());
                }
            }
            Ok(Some(json!({"type": "json_schema", "json_schema": schema})))
        }
        _ => Err(ApiError::invalid("text.format.type", "text.format.type is text, json_object or json_schema")),
    }
}

/// Collects the whole answer.
async fn whole_answer(mut builder: Builder, mut submitted: Submitted) -> Result<Value, ApiError> {
    loop {
        match submitted.answers.recv().await {
            Some(JobEvent::Done(Ok(finished))) => return Ok(builder.finish(&finished).1),
            Some(JobEvent::Done(Err(e))) => return Err(e),
            Some(event) => {
                builder.push(event);
            }
            None => return Err(ApiError::internal("the generation slot stopped mid-answer")),
        }
    }
}

/// One typed event: `event: <type>` and its JSON.
fn typed(event: &Value) -> Event {
    Event::default().event(event["type"].as_str().unwrap_or("message")).data(event.to_string())
}

/// Streams the answer's typed events; the client's leaving cancels the job (as chat's).
fn stream_answer(
    mut builder: Builder,
    submitted: Submitted,
    keep: Keep,
) -> Sse<ReceiverStream<Result<Event, Infallible>>> {
    let (events, stream) = mpsc::channel::<Result<Event, Infallible>>(16);
    let Submitted { mut answers, guard, .. } = submitted;
    tokio::spawn(async move {
        let _guard = guard;
        let mut pending = builder.start();
        loop {
            for event in pending.drain(..) {
                if events.send(Ok(typed(&event))).await.is_err() {
                    return;
                }
            }
            // A client gone before the next event (no event to send yet) is seen at once, as chat's.
            let next = tokio::select! {
                event = answers.recv() => event,
                () = events.closed() => return,
            };
            match next {
                Some(JobEvent::Done(Ok(finished))) => {
                    let (events, response) = builder.finish(&finished);
                    keep(&response);
                    pending = events;
                }
                // Headers are out: a failure is told in the stream, and it still ends with a `response.*` event.
                Some(JobEvent::Done(Err(e))) => pending = builder.fail(&e),
                Some(event) => {
                    pending = builder.push(event);
                    continue;
                }
                None => pending = builder.fail(&ApiError::internal("the generation slot stopped mid-answer")),
            }
            for event in pending.drain(..) {
                if events.send(Ok(typed(&event))).await.is_err() {
                    return;
                }
            }
            return;
        }
    });
    Sse::new(ReceiverStream::new(stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_items_become_the_chat_conversation() {
        let body = json!({
            "model": "m", "instructions": "Be brief.", "max_output_tokens": 20, "user": "alice",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
                {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
                {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{\"city\": \"Lyon\"}"},
                {"type": "function_call_output", "call_id": "c1", "output": "18C"},
                {"type": "function_call_output", "call_id": "c2", "output": "20C"}
            ],
            "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
            "tool_choice": {"type": "function", "name": "get_weather"},
            "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}, "strict": true}}
        });
        let (chat, sources) = translate(body.as_object().unwrap(), &ResponseStore::default()).unwrap();
        let request = request::parse(&chat).unwrap();
        assert_eq!(request.messages.len(), 5, "{chat}");
        assert_eq!(request.messages[0]["role"], "system");
        assert_eq!(request.messages[2]["tool_calls"].as_array().unwrap().len(), 2, "parallel calls are one turn");
        assert_eq!(request.messages[4]["tool_call_id"], "c2");
        assert_eq!(request.functions[0].name, "get_weather");
        assert!(request.json_schema.is_some());
        assert_eq!(request.options.max_tokens, Some(20));
        assert_eq!(request.options.user.as_deref(), Some("alice"));
        assert_eq!(sources, ["instructions", "input[0]", "input[1]", "input[3]", "input[4]"]);
    }

    #[test]
    fn a_stored_response_continues_under_the_new_instructions() {
        let store = ResponseStore::default();
        store.keep(
            "resp_1",
            vec![
                json!({"role": "system", "content": "old"}),
                json!({"role": "user", "content": "My name is Ada."}),
                json!({"role": "assistant", "content": "OK"}),
            ],
        );
        let body = json!({"model": "m", "instructions": "new", "previous_response_id": "resp_1",
                          "input": "What is my name?"});
        let (chat, sources) = translate(body.as_object().unwrap(), &store).unwrap();
        let contents: Vec<&str> =
            chat["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap()).collect();
        assert_eq!(contents, ["new", "My name is Ada.", "OK", "What is my name?"]);
        assert_eq!(sources, ["instructions", "previous_response_id", "previous_response_id", "input"]);
    }

    #[test]
    fn errors_name_the_responses_field() {
        let fail = |body: Value| {
            let fields = body.as_object().unwrap().clone();
            let e = match translate(&fields, &ResponseStore::default()) {
                Err(e) => e,
                Ok((chat, sources)) => rename(request::parse(&chat).unwrap_err(), &sources),
            };
            e.param.unwrap_or_default()
        };
        let input = json!([{"role": "user", "content": "hi"}]);
        assert_eq!(fail(json!({"model": "m", "input": input, "previous_response_id": "r"})), "previous_response_id");
        assert_eq!(fail(json!({"model": "m", "input": [{"type": "input_image"}]})), "input[0].type");
        assert_eq!(
            fail(json!({"model": "m", "input": [{"role": "user", "content": "x"},
                {"type": "function_call_output", "call_id": "nope", "output": "1"}]})),
            "input[1].tool_call_id"
        );
        assert_eq!(fail(json!({"model": "m", "input": input, "tools": [{"type": "web_search"}]})), "tools[0].type");
        assert_eq!(
            fail(json!({"model": "m", "input": input, "tools": [{"type": "function", "name": "bad name"}]})),
            "tools[0].name"
        );
        assert_eq!(
            fail(json!({"model": "m", "input": input, "text": {"format": {"type": "xml"}}})),
            "text.format.type"
        );
    }
}
