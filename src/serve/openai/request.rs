//! A chat-completions request body checked field by field: every value the server uses is validated here, and a
//! bad one is a 400 naming the field (`messages[1].tool_calls[0].function.name`), never a failure later.
//! Unknown fields are ignored, as clients send options this server has no use for.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use crate::decode::Sampling;
use crate::llm::chat::{ChatTemplate, TemplateKwargs};
use crate::serve::plumbing::error::ApiError;
use crate::tools::schema_fit;

/// Stop sequences a request may give (OpenAI's limit).
const MAX_STOP: usize = 4;

/// Which tool calls a request allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// Text only.
    None,
    /// Text or calls; the model chooses, inside the grammar.
    Auto,
    /// At least one call.
    Required,
    /// A call of this function.
    Function(String),
}

/// A function the request declares.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Its name.
    pub name: String,
    /// Its argument schema, fitted (`tools::schema_fit`) for the grammar.
    pub parameters: Value,
    /// What it does, as declared (empty when not given): the listing pass names functions by it.
    pub description: String,
}

/// A checked request.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// The model id asked for.
    pub model: String,
    /// The conversation in the shape chat templates read.
    pub messages: Vec<Value>,
    /// The declared functions.
    pub functions: Vec<Function>,
    /// The tools as the chat template shows them (`[{"type": "function", "function": {...}}]`), if any.
    pub tools: Option<Value>,
    /// Which calls are allowed.
    pub tool_choice: ToolChoice,
    /// More than one call in a turn.
    pub parallel_tool_calls: bool,
    /// The JSON Schema text answers must match (`response_format`), if any.
    pub json_schema: Option<Value>,
    /// Sampling, limits, stops and streaming.
    pub options: Options,
    /// A prompt given as it is (`/v1/completions`) instead of `messages` rendered with the chat template.
    pub raw_prompt: Option<RawPrompt>,
    /// Choices to generate (chat's `n`): one job each, on the slots together.
    pub n: usize,
    /// The request's actions may be listed first (`serve::openai::asks`): the extension field `asks` (default true),
    /// turned off for every request by `--asks off`.
    pub asks: bool,
    /// Exactly this many calls when the answer is calls (set by the listing pass; `None`: as many as allowed).
    pub exact_calls: Option<usize>,
    /// Values the chat template renders with beside the conversation (`chat_template_kwargs`; `reasoning_effort:
    /// "none"` is `enable_thinking: false`).
    pub template_kwargs: TemplateKwargs,
}

/// Most bytes of `chat_template_kwargs`, as JSON.
const MAX_TEMPLATE_KWARGS_BYTES: usize = 4096;

/// Most choices one chat request may ask for.
pub const MAX_N: u64 = 8;

/// A completion's prompt, used as it is.
#[derive(Debug, Clone, PartialEq)]
pub enum RawPrompt {
    /// Text, tokenized as it is (the model's BOS added when it wants one).
    Text(String),
    /// Token ids.
    Tokens(Vec<u32>),
}

/// What every generating endpoint takes beside its prompt.
#[derive(Debug, Clone)]
pub struct Options {
    /// Temperature and nucleus.
    pub sampling: Sampling,
    /// Seed for sampling: the request's, else a random one (so unseeded requests differ).
    pub seed: u64,
    /// Most new tokens, if given.
    pub max_tokens: Option<usize>,
    /// Texts that end the answer (not included in it).
    pub stop: Vec<String>,
    /// Answer as server-sent events.
    pub stream: bool,
    /// Send a last chunk with the token usage (streaming only).
    pub include_usage: bool,
    /// Report each token's log-probability with this many alternatives (0 to 20), if asked.
    pub logprobs: Option<usize>,
    /// Text completions' `echo`: the answer opens with the prompt (and, with `logprobs`, the prompt tokens'
    /// log-probabilities, the first one's `null`).
    pub echo: bool,
    /// `ignore_eos` (llama.cpp's extension): the model's end-of-text tokens are never chosen, so a plain-text
    /// answer runs to `max_tokens` (benchmarks use it to make answers of one length).
    pub ignore_eos: bool,
    /// OpenAI's `user`: who the client serves. The grammars it compiles are its own share of the grammar cache,
    /// so one that cycles through schemas replaces its own, not everyone's.
    pub user: Option<String>,
}

/// Most characters of a request's `user`.
pub const MAX_USER_CHARS: usize = 256;

/// Most alternatives a request may ask per token (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// Sampling, seed, stops and streaming, as chat and text completions spell them (`max_tokens_fields` in order of
/// precedence). Log-probabilities are each endpoint's own.
pub fn parse_options(fields: &Map<String, Value>, max_tokens_fields: &[&str]) -> Result<Options, ApiError> {
    let temperature = optional_number(fields, "temperature", 0.0, 2.0)?.unwrap_or(1.0);
    let top_p = optional_number(fields, "top_p", 0.0, 1.0)?;
    if top_p == Some(0.0) {
        return Err(ApiError::invalid("top_p", "top_p must be above 0"));
    }
    let seed = match fields.get("seed") {
        None | Some(Value::Null) => rand::random::<u64>(),
        Some(value) => match value.as_i64() {
            Some(seed) => seed as u64,
            None => return Err(ApiError::invalid("seed", "seed must be an integer")),
        },
    };
    let mut max_tokens = None;
    for name in max_tokens_fields {
        if let Some(n) = optional_count(fields, name)? {
            max_tokens = Some(n);
            break;
        }
    }
    let stop = parse_stop(fields.get("stop"))?;
    let stream = optional_bool(fields, "stream")?.unwrap_or(false);
    let ignore_eos = optional_bool(fields, "ignore_eos")?.unwrap_or(false);
    let include_usage = match fields.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(options)) => match options.get("include_usage") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(ApiError::invalid("stream_options.include_usage", "must be a boolean")),
        },
        Some(_) => return Err(ApiError::invalid("stream_options", "stream_options must be an object")),
    };
    let user = match fields.get("user") {
        None | Some(Value::Null) => None,
        Some(Value::String(user)) if user.chars().count() <= MAX_USER_CHARS => Some(user.clone()),
        Some(_) => {
            return Err(ApiError::invalid(
                "user",
                format!("user must be a string of at most {MAX_USER_CHARS} characters"),
            ))
        }
    };
    Ok(Options {
        sampling: Sampling::from_temperature(temperature, None, top_p.filter(|p| *p < 1.0)),
        seed,
        max_tokens,
        stop,
        stream,
        include_usage,
        logprobs: None,
        echo: false,
        ignore_eos,
        user,
    })
}

/// `n`, the number of choices (1 to [`MAX_N`]; each is a job of its own, streamed or not).
pub fn parse_n(fields: &Map<String, Value>) -> Result<usize, ApiError> {
    match fields.get("n") {
        None | Some(Value::Null) => Ok(1),
        Some(n) => match n.as_u64() {
            Some(n @ 1..=MAX_N) => Ok(n as usize),
            _ => Err(ApiError::invalid("n", format!("n must be an integer from 1 to {MAX_N}"))),
        },
    }
}

/// Chat's `logprobs` (a boolean) and `top_logprobs` (0 to 20, only with `logprobs`).
fn parse_chat_logprobs(fields: &Map<String, Value>) -> Result<Option<usize>, ApiError> {
    let wanted = optional_bool(fields, "logprobs")?.unwrap_or(false);
    let top = match fields.get("top_logprobs") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_u64() {
            Some(n) if n as usize <= MAX_TOP_LOGPROBS => Some(n as usize),
            _ => {
                return Err(ApiError::invalid(
                    "top_logprobs",
                    format!("top_logprobs must be an integer from 0 to {MAX_TOP_LOGPROBS}"),
                ))
            }
        },
    };
    match (wanted, top) {
        (false, Some(_)) => Err(ApiError::invalid("top_logprobs", "top_logprobs needs logprobs: true")),
        (false, None) => Ok(None),
        (true, top) => Ok(Some(top.unwrap_or(0))),
    }
}

/// A body's fields and the `model` it asks for, checked as chat and text completions check them.
pub(crate) fn fields_and_model(body: &Value) -> Result<(&Map<String, Value>, String), ApiError> {
    let Value::Object(fields) = body else {
        return Err(ApiError::bad_request("the request body must be a JSON object", None));
    };
    let model = match fields.get("model") {
        Some(Value::String(model)) if !model.is_empty() => model.clone(),
        Some(_) => return Err(ApiError::invalid("model", "model must be a non-empty string")),
        None => return Err(ApiError::invalid("model", "model is required: one of the ids GET /v1/models lists")),
    };
    Ok((fields, model))
}

/// Checks a parsed body.
pub fn parse(body: &Value) -> Result<ChatRequest, ApiError> {
    let (fields, model) = fields_and_model(body)?;
    let messages = parse_messages(fields.get("messages"))?;
    let (functions, tools) = parse_tools(fields.get("tools"))?;
    let tool_choice = parse_tool_choice(fields.get("tool_choice"), &functions)?;
    let parallel_tool_calls = optional_bool(fields, "parallel_tool_calls")?.unwrap_or(true);
    let asks = optional_bool(fields, "asks")?.unwrap_or(true);
    let json_schema = parse_response_format(fields.get("response_format"))?;
    let mut options = parse_options(fields, &["max_completion_tokens", "max_tokens"])?;
    options.logprobs = parse_chat_logprobs(fields)?;
    let n = parse_n(fields)?;
    let template_kwargs = parse_template_kwargs(fields)?;
    Ok(ChatRequest {
        model,
        messages,
        functions,
        tools,
        tool_choice,
        parallel_tool_calls,
        json_schema,
        options,
        raw_prompt: None,
        n,
        asks,
        exact_calls: None,
        template_kwargs,
    })
}

/// `chat_template_kwargs` (an object of values for the template, as vLLM and llama-server take it) and
/// `reasoning_effort` (OpenAI's; `"none"` turns a template's thinking switch off, the other efforts leave the
/// template's default, since the templates we run have no levels).
fn parse_template_kwargs(fields: &Map<String, Value>) -> Result<TemplateKwargs, ApiError> {
    let mut kwargs = match fields.get("chat_template_kwargs") {
        None | Some(Value::Null) => TemplateKwargs::new(),
        Some(Value::Object(kwargs)) => kwargs.clone(),
        Some(_) => return Err(ApiError::invalid(
            "chat_template_kwargs",
            "chat_template_kwargs must be an object of values for the chat template, as {\"enable_thinking\": false}",
        )),
    };
    if let Some(name) = kwargs.keys().find(|name| ChatTemplate::RESERVED.contains(&name.as_str())) {
        return Err(ApiError::invalid(
            "chat_template_kwargs",
            format!("chat_template_kwargs cannot set {name:?}: the request's own fields give it"),
        ));
    }
    if serde_json::to_vec(&kwargs).map_or(usize::MAX, |bytes| bytes.len()) > MAX_TEMPLATE_KWARGS_BYTES {
        return Err(ApiError::invalid(
            "chat_template_kwargs",
            format!("chat_template_kwargs takes at most {MAX_TEMPLATE_KWARGS_BYTES} bytes of JSON"),
        ));
    }
    match fields.get("reasoning_effort") {
        None | Some(Value::Null) => {}
        Some(Value::String(effort)) if effort == "none" => {
            kwargs.entry("enable_thinking").or_insert(Value::Bool(false));
        }
        Some(Value::String(effort)) if ["minimal", "low", "medium", "high"].contains(&effort.as_str()) => {}
        Some(_) => {
            return Err(ApiError::invalid(
                "reasoning_effort",
                "reasoning_effort is one of none, minimal, low, medium, high",
            ))
        }
    }
    Ok(kwargs)
}

pub(crate) fn optional_bool(fields: &Map<String, Value>, name: &str) -> Result<Option<bool>, ApiError> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(ApiError::invalid(name, format!("{name} must be a boolean"))),
    }
}

pub(crate) fn optional_number(
    fields: &Map<String, Value>,
    name: &str,
    low: f64,
    high: f64,
) -> Result<Option<f64>, ApiError> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_f64() {
            Some(x) if (low..=high).contains(&x) => Ok(Some(x)),
            _ => Err(ApiError::invalid(name, format!("{name} must be a number from {low} to {high}"))),
        },
    }
}

pub(crate) fn optional_count(fields: &Map<String, Value>, name: &str) -> Result<Option<usize>, ApiError> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_u64() {
            Some(n) if n >= 1 => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
            _ => Err(ApiError::invalid(name, format!("{name} must be a positive integer"))),
        },
    }
}

fn parse_stop(value: Option<&Value>) -> Result<Vec<String>, ApiError> {
    let stops =
        match value {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .map(|s| s.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| ApiError::invalid("stop", "stop must be a string or a list of strings"))?,
            Some(_) => return Err(ApiError::invalid("stop", "stop must be a string or a list of strings")),
        };
    if stops.len() > MAX_STOP || stops.iter().any(String::is_empty) {
        return Err(ApiError::invalid("stop", format!("stop takes 1 to {MAX_STOP} non-empty strings")));
    }
    Ok(stops)
}

/// A message's text: a string, or a list of text parts (joined); `None` for null or absent.
fn content_text(value: Option<&Value>, at: &str) -> Result<Option<String>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for (i, part) in parts.iter().enumerate() {
                match (part.get("type").and_then(Value::as_str), part.get("text").and_then(Value::as_str)) {
                    (Some("text"), Some(t)) => text.push_str(t),
                    _ => {
                        return Err(ApiError::invalid(
                            format!("{at}.content[{i}]"),
                            "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported",
                        ))
                    }
                }
            }
            Ok(Some(text))
        }
        Some(_) => Err(ApiError::invalid(format!("{at}.content"), "content must be a string or a list of parts")),
    }
}

fn parse_messages(value: Option<&Value>) -> Result<Vec<Value>, ApiError> {
    let items = match value {
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(Value::Array(_)) => return Err(ApiError::invalid("messages", "messages must not be empty")),
        Some(_) => return Err(ApiError::invalid("messages", "messages must be a list of message objects")),
        None => return Err(ApiError::invalid("messages", "messages is required")),
    };
    let mut call_ids: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("messages[{i}]");
        let Value::Object(message) = item else {
            return Err(ApiError::invalid(at, "each message must be an object with a role"));
        };
        let role = match message.get("role").and_then(Value::as_str) {
            Some("developer") => "system",
            Some(role @ ("system" | "user" | "assistant" | "tool")) => role,
            Some(other) => {
                return Err(ApiError::invalid(
                    format!("{at}.role"),
                    format!("unknown role {other:?}: use system, developer, user, assistant or tool"),
                ))
            }
            None => return Err(ApiError::invalid(format!("{at}.role"), "role is required")),
        };
        let content = content_text(message.get("content"), &at)?;
        let mut rendered = Map::new();
        rendered.insert("role".into(), json!(role));
        match role {
            "assistant" => {
                let calls = parse_assistant_calls(message.get("tool_calls"), &at, &mut call_ids)?;
                if content.is_none() && calls.is_empty() {
                    return Err(ApiError::invalid(
                        format!("{at}.content"),
                        "an assistant message needs content or tool_calls",
                    ));
                }
                rendered.insert("content".into(), json!(content.unwrap_or_default()));
                if !calls.is_empty() {
                    rendered.insert("tool_calls".into(), Value::Array(calls));
                }
            }
            "tool" => {
                let id = match message.get("tool_call_id") {
                    Some(Value::String(id)) => id.clone(),
                    _ => {
                        return Err(ApiError::invalid(
                            format!("{at}.tool_call_id"),
                            "a tool message needs tool_call_id",
                        ))
                    }
                };
                if !call_ids.contains(&id) {
                    return Err(ApiError::invalid(
                        format!("{at}.tool_call_id"),
                        format!("tool_call_id {id:?} answers no tool call of an earlier assistant message"),
                    ));
                }
                let Some(content) = content else {
                    return Err(ApiError::invalid(format!("{at}.content"), "a tool message needs content"));
                };
                rendered.insert("content".into(), json!(content));
                rendered.insert("tool_call_id".into(), json!(id));
            }
            _ => {
                let Some(content) = content else {
                    return Err(ApiError::invalid(format!("{at}.content"), "content is required"));
                };
                rendered.insert("content".into(), json!(content));
            }
        }
        out.push(Value::Object(rendered));
    }
    Ok(out)
}

/// An assistant message's tool calls as templates read them: arguments as a JSON value (the API sends a string).
fn parse_assistant_calls(value: Option<&Value>, at: &str, ids: &mut HashSet<String>) -> Result<Vec<Value>, ApiError> {
    let calls = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(calls)) => calls,
        Some(_) => return Err(ApiError::invalid(format!("{at}.tool_calls"), "tool_calls must be a list")),
    };
    let mut out = Vec::with_capacity(calls.len());
    for (j, call) in calls.iter().enumerate() {
        let here = format!("{at}.tool_calls[{j}]");
        let id = call.get("id").and_then(Value::as_str).ok_or_else(|| {
            ApiError::invalid(format!("{here}.id"), "each tool call needs an id (tool messages answer it)")
        })?;
        let function = call.get("function").ok_or_else(|| ApiError::invalid(format!("{here}.function"), "required"))?;
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::invalid(format!("{here}.function.name"), "must be a string"))?;
        let arguments = match function.get("arguments") {
            Some(Value::String(text)) => serde_json::from_str::<Value>(text).map_err(|e| {
                ApiError::invalid(format!("{here}.function.arguments"), format!("not a JSON text: {e}"))
            })?,
            Some(object @ Value::Object(_)) => object.clone(),
            _ => return Err(ApiError::invalid(format!("{here}.function.arguments"), "must be a JSON string")),
        };
        ids.insert(id.to_string());
        out.push(json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}));
    }
    Ok(out)
}

fn valid_function_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn parse_tools(value: Option<&Value>) -> Result<(Vec<Function>, Option<Value>), ApiError> {
    let items = match value {
        None | Some(Value::Null) => return Ok((Vec::new(), None)),
        Some(Value::Array(items)) if items.is_empty() => return Ok((Vec::new(), None)),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(ApiError::invalid("tools", "tools must be a list of function tools")),
    };
    let mut functions: Vec<Function> = Vec::with_capacity(items.len());
    let mut shown = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("tools[{i}]");
        if item.get("type").and_then(Value::as_str) != Some("function") {
            return Err(ApiError::invalid(format!("{at}.type"), "only tools of type \"function\" are supported"));
        }
        let Some(Value::Object(function)) = item.get("function") else {
            return Err(ApiError::invalid(format!("{at}.function"), "a function tool needs a function object"));
        };
        let name = match function.get("name") {
            Some(Value::String(name)) if valid_function_name(name) => name.clone(),
            _ => {
                return Err(ApiError::invalid(
                    format!("{at}.function.name"),
                    "a function name is 1 to 64 letters, digits, underscores or dashes",
                ))
            }
        };
        if functions.iter().any(|f| f.name == name) {
            return Err(ApiError::invalid(
                format!("{at}.function.name"),
                format!("function {name:?} is declared twice"),
            ));
        }
        let parameters = match function.get("parameters") {
            None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
            Some(schema @ Value::Object(_)) => schema.clone(),
            Some(_) => {
                return Err(ApiError::invalid(
                    format!("{at}.function.parameters"),
                    "parameters must be a JSON Schema object",
                ))
            }
        };
        // Odd dialects (Python type names, `nullable`) are normalised the way the agent's tools are.
        let (fitted, _notes) = schema_fit::fit(&parameters);
        let mut declared = json!({"name": name, "parameters": parameters});
        if let Some(description) = function.get("description").and_then(Value::as_str) {
            declared["description"] = json!(description);
        }
        shown.push(json!({"type": "function", "function": declared}));
        let description = function.get("description").and_then(Value::as_str).unwrap_or_default().to_string();
        functions.push(Function { name, parameters: fitted, description });
    }
    Ok((functions, Some(Value::Array(shown))))
}

fn parse_tool_choice(value: Option<&Value>, functions: &[Function]) -> Result<ToolChoice, ApiError> {
    let choice = match value {
        None | Some(Value::Null) => {
            return Ok(if functions.is_empty() { ToolChoice::None } else { ToolChoice::Auto });
        }
        Some(Value::String(s)) => match s.as_str() {
            "none" => ToolChoice::None,
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            other => {
                return Err(ApiError::invalid(
                    "tool_choice",
                    format!("unknown tool_choice {other:?}: use none, auto, required or a function"),
                ))
            }
        },
        Some(object @ Value::Object(_)) => {
            match object.get("function").and_then(|f| f.get("name")).and_then(Value::as_str) {
                Some(name) if object.get("type").and_then(Value::as_str) == Some("function") => {
                    ToolChoice::Function(name.to_string())
                }
                _ => {
                    return Err(ApiError::invalid(
                        "tool_choice",
                        "a named tool_choice is {\"type\": \"function\", \"function\": {\"name\": ...}}",
                    ))
                }
            }
        }
        Some(_) => return Err(ApiError::invalid("tool_choice", "tool_choice must be a string or an object")),
    };
    match &choice {
        ToolChoice::Required if functions.is_empty() => {
            Err(ApiError::invalid("tool_choice", "tool_choice \"required\" needs tools"))
        }
        ToolChoice::Function(name) if !functions.iter().any(|f| &f.name == name) => Err(ApiError::invalid(
            "tool_choice",
            format!("tool_choice names function {name:?}, which tools does not declare"),
        )),
        _ => Ok(choice),
    }
}

fn parse_response_format(value: Option<&Value>) -> Result<Option<Value>, ApiError> {
    let Some(format) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "object"}))),
        Some("json_schema") => match format.get("json_schema").and_then(|j| j.get("schema")) {
            Some(schema @ (Value::Object(_) | Value::Bool(true))) => Ok(Some(schema.clone())),
            _ => Err(ApiError::invalid(
                "response_format.json_schema.schema",
                "json_schema needs a schema object ({\"name\": ..., \"schema\": {...}, \"strict\": true})",
            )),
        },
        _ => Err(ApiError::invalid("response_format.type", "response_format.type is text, json_object or json_schema")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kwargs_of(extra: Value) -> Result<TemplateKwargs, String> {
        let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        parse(&body).map(|request| request.template_kwargs).map_err(|e| e.message)
    }

    #[test]
    fn template_values_come_from_chat_template_kwargs_and_reasoning_effort_none() {
        assert_eq!(kwargs_of(json!({})).unwrap(), TemplateKwargs::new());
        let off = json!({"enable_thinking": false});
        assert_eq!(Value::Object(kwargs_of(json!({"chat_template_kwargs": off})).unwrap()), off);
        assert_eq!(Value::Object(kwargs_of(json!({"reasoning_effort": "none"})).unwrap()), off);
        // The client's own switch wins over the effort; efforts the templates have no levels for change nothing.
        let on = json!({"chat_template_kwargs": {"enable_thinking": true}, "reasoning_effort": "none"});
        assert_eq!(kwargs_of(on).unwrap()["enable_thinking"], true);
        assert_eq!(kwargs_of(json!({"reasoning_effort": "high"})).unwrap(), TemplateKwargs::new());
        assert!(kwargs_of(json!({"reasoning_effort": "max"})).unwrap_err().contains("none, minimal"));
        assert!(kwargs_of(json!({"chat_template_kwargs": "x"})).unwrap_err().contains("object"));
        let reserved = kwargs_of(json!({"chat_template_kwargs": {"messages": []}})).unwrap_err();
        assert!(reserved.contains("\"messages\""), "{reserved}");
        let long = json!({"chat_template_kwargs": {"x": "y".repeat(5000)}});
        assert!(kwargs_of(long).unwrap_err().contains("4096 bytes"));
    }
}
