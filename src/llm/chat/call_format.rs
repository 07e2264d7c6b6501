//! Each model family's way of writing tool calls, told from its chat template, and reading the calls back out of a
//! finished reply: Hermes/Qwen `<tool_call>{…}</tool_call>`, Llama 3.x's bare JSON (`"parameters"`) and its
//! `<|python_tag|>` built-in calls, Mistral's `[TOOL_CALLS][…]`, Phi-4-mini's `<|tool_call|>[…]<|/tool_call|>`.
//! The text around the calls is the reply's content. The format is told once, when a model's template is
//! compiled (`ChatTemplate::call_format`); [`CallSyntax`] then says, for that model's tokenizer, whether each
//! marker is one control token (which a grammar must name by id) or plain text.

use serde_json::{json, Map, Value};

use crate::llm::tokenizer::GgufTokenizer;

/// A tool call read back from a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The function's name.
    pub name: String,
    /// Its arguments as a JSON text (as the API sends them).
    pub arguments: String,
}

/// A family's tool-call format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFormat {
    /// `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`, one block per call (Qwen2.5, Qwen3, Hermes).
    Hermes,
    /// A bare `{"name": …, "parameters": …}` object (or a list of them), or `<|python_tag|>` followed by a call:
    /// JSON, or a built-in tool's `name.call(key="value", …)` (Llama 3.1–3.3).
    Llama3,
    /// `[TOOL_CALLS]` then a JSON list of `{"name", "arguments"[, "id"]}` (Mistral 7B v0.3, Nemo, Small).
    Mistral,
    /// `<|tool_call|>` then a JSON list (or object) of calls, closed by `<|/tool_call|>` (Phi-4-mini); also the
    /// `functools[…]` form some Phi-4-mini builds write.
    Phi4,
}

const HERMES_OPEN: &str = "<tool_call>";
const HERMES_CLOSE: &str = "</tool_call>";
const PYTHON_TAG: &str = "<|python_tag|>";
const MISTRAL_OPEN: &str = "[TOOL_CALLS]";
const PHI4_OPEN: &str = "<|tool_call|>";
const PHI4_CLOSE: &str = "<|/tool_call|>";
const FUNCTOOLS: &str = "functools";

impl CallFormat {
    /// The format a chat template asks for, told by the markers it writes; Hermes when it names none (the form
    /// `tandem serve` itself asks models for).
    pub fn from_template(source: &str) -> Self {
        if source.contains(MISTRAL_OPEN) {
            CallFormat::Mistral
        } else if source.contains(PHI4_OPEN) || source.contains("<|/tool|>") {
            CallFormat::Phi4
        } else if source.contains(HERMES_OPEN) {
            CallFormat::Hermes
        } else if source.contains(PYTHON_TAG) || source.contains("<|start_header_id|>") {
            CallFormat::Llama3
        } else {
            CallFormat::Hermes
        }
    }

    /// The format's name, as docs and logs give it.
    pub fn name(self) -> &'static str {
        match self {
            CallFormat::Hermes => "hermes",
            CallFormat::Llama3 => "llama3",
            CallFormat::Mistral => "mistral",
            CallFormat::Phi4 => "phi4",
        }
    }

    /// What opens a marked call block: `<tool_call>`, `<|python_tag|>`, `[TOOL_CALLS]`, `<|tool_call|>`.
    pub fn open(self) -> &'static str {
        match self {
            CallFormat::Hermes => HERMES_OPEN,
            CallFormat::Llama3 => PYTHON_TAG,
            CallFormat::Mistral => MISTRAL_OPEN,
            CallFormat::Phi4 => PHI4_OPEN,
        }
    }

    /// What closes a marked call block, where the format closes it.
    pub fn close(self) -> Option<&'static str> {
        match self {
            CallFormat::Hermes => Some(HERMES_CLOSE),
            CallFormat::Phi4 => Some(PHI4_CLOSE),
            CallFormat::Llama3 | CallFormat::Mistral => None,
        }
    }

    /// The key a call's arguments go under: Llama 3's templates ask for `parameters`, the others `arguments`.
    pub fn arguments_key(self) -> &'static str {
        match self {
            CallFormat::Llama3 => "parameters",
            _ => "arguments",
        }
    }

    /// Whether one block holds a JSON list of calls (Mistral, Phi-4) rather than one call per block.
    pub fn lists_calls(self) -> bool {
        matches!(self, CallFormat::Mistral | CallFormat::Phi4)
    }

    /// Splits a finished reply into its content (the text outside the calls, trimmed) and the calls, in order. A
    /// call that does not parse stays in the content, so nothing the model wrote is lost.
    pub fn parse(self, text: &str) -> (String, Vec<ToolCall>) {
        match self {
            CallFormat::Hermes => between_markers(text, HERMES_OPEN, Some(HERMES_CLOSE)),
            CallFormat::Mistral => between_markers(text, MISTRAL_OPEN, None),
            CallFormat::Phi4 => {
                let (content, calls) = between_markers(text, PHI4_OPEN, Some(PHI4_CLOSE));
                if !calls.is_empty() {
                    return (content, calls);
                }
                match content.split_once(FUNCTOOLS) {
                    Some((before, after)) if after.trim_start().starts_with('[') => match calls_in(after.trim()) {
                        Some(calls) => (before.trim().to_string(), calls),
                        None => (content, Vec::new()),
                    },
                    _ => (content, Vec::new()),
                }
            }
            CallFormat::Llama3 => llama3(text),
        }
    }
}

/// One marker of a call format in a model's vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    /// Its text, as the model's output decodes it.
    pub text: &'static str,
    /// The control token that stands for it, when the vocabulary has one: plain-text grammar rules can never
    /// produce a control token, so a grammar names it by id.
    pub token: Option<u32>,
}

impl Marker {
    fn new(text: &'static str, tokenizer: &GgufTokenizer) -> Self {
        let token = tokenizer.token_to_id(text).filter(|&id| tokenizer.is_control(id));
        Self { text, token }
    }
}

/// A call format with its markers looked up in one model's vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallSyntax {
    /// The format.
    pub format: CallFormat,
    /// What opens a marked block.
    pub open: Marker,
    /// What closes it, if anything.
    pub close: Option<Marker>,
}

impl CallSyntax {
    /// `format`'s markers in `tokenizer`'s vocabulary.
    pub fn new(format: CallFormat, tokenizer: &GgufTokenizer) -> Self {
        Self {
            format,
            open: Marker::new(format.open(), tokenizer),
            close: format.close().map(|text| Marker::new(text, tokenizer)),
        }
    }
}

/// Calls written after `open` (and up to `close`, or to the end when there is none), any number of times.
fn between_markers(text: &str, open: &str, close: Option<&str>) -> (String, Vec<ToolCall>) {
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        let body_start = start + open.len();
        let (body, after) = match close.and_then(|c| rest[body_start..].find(c).map(|end| (end, c.len()))) {
            Some((end, len)) => (&rest[body_start..body_start + end], &rest[body_start + end + len..]),
            None => (&rest[body_start..], ""),
        };
        match calls_in(body.trim()) {
            Some(found) => {
                content.push_str(&rest[..start]);
                calls.extend(found);
            }
            None => content.push_str(&rest[..rest.len() - after.len()]),
        }
        rest = after;
    }
    content.push_str(rest);
    (content.trim().to_string(), calls)
}

/// One call object, or a list of them; `None` unless every element is a call.
fn calls_in(body: &str) -> Option<Vec<ToolCall>> {
    match serde_json::from_str::<Value>(body).ok()? {
        Value::Array(items) => items.iter().map(call_of).collect(),
        object => call_of(&object).map(|call| vec![call]),
    }
}

/// `{"name": …, "arguments" | "parameters": …}`; arguments given as a JSON string are taken as that JSON.
fn call_of(value: &Value) -> Option<ToolCall> {
    let name = value.get("name")?.as_str()?.to_string();
    let arguments = match value.get("arguments").or_else(|| value.get("parameters")) {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(text)) if serde_json::from_str::<Value>(text).is_ok_and(|v| v.is_object()) => text.clone(),
        Some(args @ Value::Object(_)) => args.to_string(),
        Some(_) => return None,
    };
    Some(ToolCall { name, arguments })
}

/// Llama 3.x: `<|python_tag|>` then JSON or `tool.call(k=v, …)`; else a reply that is, whole, one call's JSON (or a
/// list of them).
fn llama3(text: &str) -> (String, Vec<ToolCall>) {
    let trimmed = text.trim();
    if let Some((before, after)) = trimmed.split_once(PYTHON_TAG) {
        let body = after.trim().trim_end_matches("<|eom_id|>").trim();
        if let Some(calls) = calls_in(body).or_else(|| builtin_call(body).map(|c| vec![c])) {
            return (before.trim().to_string(), calls);
        }
        return (trimmed.to_string(), Vec::new());
    }
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        if let Some(calls) = calls_in(trimmed) {
            return (String::new(), calls);
        }
    }
    (trimmed.to_string(), Vec::new())
}

/// A built-in tool's call as Llama 3.1 writes it: `brave_search.call(query="…")`; values are JSON literals or
/// strings in single or double quotes.
fn builtin_call(body: &str) -> Option<ToolCall> {
    let (name, rest) = body.split_once(".call(")?;
    let inner = rest.strip_suffix(')')?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let mut arguments = Map::new();
    let mut rest = inner.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let after = after.trim_start();
        let (value, remaining) = python_value(after)?;
        arguments.insert(key.trim().to_string(), value);
        rest = remaining.trim_start().strip_prefix(',').unwrap_or(remaining).trim_start();
    }
    Some(ToolCall { name: name.to_string(), arguments: json!(arguments).to_string() })
}

/// One keyword argument's value and the text after it.
fn python_value(text: &str) -> Option<(Value, &str)> {
    let quote = text.chars().next()?;
    if quote == '"' || quote == '\'' {
        let mut escaped = false;
        for (i, c) in text.char_indices().skip(1) {
            match c {
                '\\' if !escaped => escaped = true,
                c if c == quote && !escaped => {
                    let raw = &text[1..i];
                    let value = raw.replace(&format!("\\{quote}"), &quote.to_string()).replace("\\\\", "\\");
                    return Some((Value::String(value), &text[i + 1..]));
                }
                _ => escaped = false,
            }
        }
        return None;
    }
    let end = text.find(',').unwrap_or(text.len());
    let literal = text[..end].trim();
    let value = match literal {
        "True" => Value::Bool(true),
        "False" => Value::Bool(false),
        "None" => Value::Null,
        other => serde_json::from_str(other).ok()?,
    };
    Some((value, &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall { name: name.into(), arguments: arguments.into() }
    }

    #[test]
    fn templates_tell_their_format() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat_templates");
        let format = |name: &str| CallFormat::from_template(&std::fs::read_to_string(dir.join(name)).unwrap());
        assert_eq!(format("qwen3.jinja"), CallFormat::Hermes);
        assert_eq!(format("smollm3.jinja"), CallFormat::Hermes);
        assert_eq!(format("llama-3.1.jinja"), CallFormat::Llama3);
        assert_eq!(format("llama-3.2.jinja"), CallFormat::Llama3);
        assert_eq!(format("mistral-nemo.jinja"), CallFormat::Mistral);
        assert_eq!(format("phi-4-mini.jinja"), CallFormat::Phi4);
        assert_eq!(format("smollm2.jinja"), CallFormat::Hermes, "no tool format: serve's own");
        assert_eq!(format("gemma3.jinja"), CallFormat::Hermes, "no tool format: serve's own");
    }

    #[test]
    fn hermes_blocks_are_calls_and_the_rest_is_content() {
        let text = "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>\n\
                    <tool_call>\n{\"name\": \"g\", \"arguments\": \"{\\\"y\\\": 2}\"}\n</tool_call>";
        let (content, calls) = CallFormat::Hermes.parse(text);
        assert_eq!(content, "Let me check.");
        assert_eq!(calls, [call("f", r#"{"x":1}"#), call("g", r#"{"y": 2}"#)]);
        // A block that is not a call stays in the content.
        let (content, calls) = CallFormat::Hermes.parse("<tool_call>not json</tool_call>");
        assert_eq!((content.as_str(), calls.len()), ("<tool_call>not json</tool_call>", 0));
    }

    #[test]
    fn llama3_json_python_tag_and_builtin_calls() {
        let (content, calls) =
            CallFormat::Llama3.parse("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
        assert_eq!((content.as_str(), calls), ("", vec![call("get_weather", r#"{"city":"Paris"}"#)]));
        let (_, calls) = CallFormat::Llama3.parse("<|python_tag|>{\"name\": \"f\", \"parameters\": {}}<|eom_id|>");
        assert_eq!(calls, [call("f", "{}")]);
        let (_, calls) =
            CallFormat::Llama3.parse("<|python_tag|>brave_search.call(query=\"it's \\\"new\\\"\", n=3, safe=True)");
        assert_eq!(calls, [call("brave_search", r#"{"query":"it's \"new\"","n":3,"safe":true}"#)]);
        let (content, calls) = CallFormat::Llama3.parse("The answer is {x}.");
        assert_eq!((content.as_str(), calls.len()), ("The answer is {x}.", 0));
    }

    #[test]
    fn mistral_and_phi4_lists() {
        let (content, calls) = CallFormat::Mistral
            .parse("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": [1]}, \"id\": \"abc123def\"}, {\"name\": \"g\", \"arguments\": {}}]");
        assert_eq!((content.as_str(), calls), ("", vec![call("f", r#"{"a":[1]}"#), call("g", "{}")]));
        let (content, calls) = CallFormat::Phi4
            .parse("Sure.<|tool_call|>[{\"name\": \"f\", \"arguments\": {\"q\": \"x\"}}]<|/tool_call|>");
        assert_eq!((content.as_str(), calls), ("Sure.", vec![call("f", r#"{"q":"x"}"#)]));
        let (_, calls) = CallFormat::Phi4.parse("functools[{\"name\": \"f\", \"arguments\": {}}]");
        assert_eq!(calls, [call("f", "{}")]);
    }
}
