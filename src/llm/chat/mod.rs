//! Chat templates from GGUF metadata (`tokenizer.chat_template`), rendered with minijinja the way Hugging Face
//! `apply_chat_template` renders them: `trim_blocks` and `lstrip_blocks` on, Python string and dict methods
//! (`.startswith`, `.strip`, `.items()`) through minijinja-contrib's pycompat, `raise_exception`,
//! `strftime_now`, and a `tojson` that writes what Python's `json.dumps` writes (`", "` and `": "` separators,
//! keys in their given order, no HTML escaping): models were trained on prompts rendered that way, so tool
//! schemas are shown to them in that exact form.
//!
//! This module compiles and renders templates; `call_format` tells a template's tool-call format and reads calls
//! back in it; `tools_shown` where it shows a request's tools; `templates` holds the built-in ones, `functions` the functions
//! Hugging Face's environment provides (`raise_exception`, `strftime_now`), and `tojson` the JSON written into
//! prompts (the `tojson` filter, and JSON as template values with key order kept).

mod call_format;
mod functions;
mod templates;
mod tojson;
mod tools_shown;

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;
use minijinja::{Environment, Error as JinjaError};

pub use self::call_format::{CallFormat, CallSyntax, Marker, ToolCall};
pub(crate) use self::functions::civil_from_days;
use self::functions::{raise_exception, raised_message, strftime_now};
pub use self::templates::GEMMA3_TEMPLATE;
use self::tojson::{ordered_json, tojson};
use self::tools_shown::place_tools;
pub use self::tools_shown::ToolsShown;

/// Errors loading or rendering a chat template.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The template source is not valid Jinja (reported when the template is compiled, not at render time).
    #[error("the chat template does not parse{}: {message}", .line.map(|l| format!(" (line {l})")).unwrap_or_default())]
    Syntax {
        /// minijinja's description of the problem.
        message: String,
        /// The line of the template where it was found.
        line: Option<usize>,
    },
    /// The template itself refused the conversation through `raise_exception(...)`, e.g. Gemma's
    /// "Conversation roles must alternate user/assistant/user/assistant/...".
    #[error("the chat template rejected the conversation: {0}")]
    Raised(String),
    /// Rendering failed for another reason (a filter applied to the wrong type, an undefined call, …).
    #[error("rendering the chat template failed: {0}")]
    Render(String),
    /// A metadata key that should hold the template (or a token text) holds something else.
    #[error("metadata key '{key}' should be {expected}")]
    WrongType {
        /// The metadata key.
        key: String,
        /// What it should hold.
        expected: &'static str,
    },
    /// `tools` must be a JSON array of tool (function) schemas, as Hugging Face templates iterate it.
    #[error("the tools passed to the chat template must be a JSON array of schemas, not {0}")]
    ToolsNotAnArray(&'static str),
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    /// A message with any role (`tool` for tool results, as Qwen's template expects).
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self { role: role.into(), content: content.into() }
    }
    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::new("system", text)
    }
    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new("user", text)
    }
    /// An assistant message.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new("assistant", text)
    }
}

/// A compiled chat template with the BOS/EOS texts it may print.
#[derive(Clone)]
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    bos_token: String,
    eos_token: String,
    /// The tool-call format the template asks for, told once here from its source.
    call_format: CallFormat,
    /// Where it shows a request's tools, told by rendering it the first time a request brings tools (the agent's
    /// roles never do, so their loads skip the probe).
    tools_shown: std::sync::OnceLock<ToolsShown>,
    /// Whether it has a thinking switch, told by rendering it both ways the first time a caller asks.
    thinking_switch: std::sync::OnceLock<bool>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("source_chars", &self.source.len())
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .field("call_format", &self.call_format)
            .field("tools_shown", &self.tools_shown.get())
            .field("thinking_switch", &self.thinking_switch.get())
            .finish()
    }
}

const TEMPLATE_NAME: &str = "chat_template";

/// Values a caller adds to a template's context beside the conversation (Hugging Face's `**kwargs` of
/// `apply_chat_template`, the OpenAI servers' `chat_template_kwargs`).
pub type TemplateKwargs = serde_json::Map<String, serde_json::Value>;

/// The values agent roles render with: thinking off where a template has the switch (`enable_thinking`, read by
/// Qwen3's and SmolLM3's templates): the agent's grammars ask for the plan, call or answer at once, and a model
/// rendered in thinking mode would start with a `<think>` block the grammar forbids.
pub fn thinking_off() -> TemplateKwargs {
    thinking(false)
}

/// The values that turn a template's thinking mode on or off (`enable_thinking`; `tandem run --think` turns it on
/// for the planner).
pub fn thinking(on: bool) -> TemplateKwargs {
    let mut kwargs = TemplateKwargs::new();
    kwargs.insert("enable_thinking".into(), serde_json::Value::Bool(on));
    kwargs
}

impl ChatTemplate {
    /// Compiles `source`; syntax errors are reported here, not at render time.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self, TemplateError> {
        let mut env = Environment::new();
        // Hugging Face's environment: jinja2 with trim_blocks and lstrip_blocks (keep_trailing_newline off,
        // undefined values lenient: both minijinja's defaults too).
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_filter("tojson", tojson);
        env.add_template_owned(TEMPLATE_NAME, source.to_string())
            .map_err(|e| TemplateError::Syntax { message: describe(&e), line: e.line() })?;
        Ok(Self {
            env,
            source: source.to_string(),
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
            call_format: CallFormat::from_template(source),
            tools_shown: std::sync::OnceLock::new(),
            thinking_switch: std::sync::OnceLock::new(),
        })
    }

    /// The template from GGUF metadata (`tokenizer.chat_template`, with BOS/EOS texts looked up from
    /// `tokenizer.ggml.{bos,eos}_token_id`); for `gemma3` files without one, [`GEMMA3_TEMPLATE`]; else `None`.
    pub fn from_gguf(md: &HashMap<String, Value>, architecture: &str) -> Result<Option<Self>, TemplateError> {
        let source = match md.get("tokenizer.chat_template") {
            Some(Value::String(source)) => source.as_str(),
            Some(_) => {
                return Err(TemplateError::WrongType { key: "tokenizer.chat_template".into(), expected: "a string" })
            }
            None if architecture == "gemma3" => GEMMA3_TEMPLATE,
            None => return Ok(None),
        };
        let bos = token_text(md, "tokenizer.ggml.bos_token_id")?;
        let eos = token_text(md, "tokenizer.ggml.eos_token_id")?;
        Self::new(source, &bos, &eos).map(Some)
    }

    /// Renders a conversation. `tools` is a JSON array of tool schemas (e.g. `{"type": "function", "function":
    /// {...}}`) for templates with a tools section; `add_generation_prompt` opens the assistant's turn.
    ///
    /// The result may start with the BOS text (Gemma's does): [`GgufTokenizer::encode`] does not add a second
    /// one.
    ///
    /// [`GgufTokenizer::encode`]: crate::llm::tokenizer::GgufTokenizer::encode
    pub fn render(
        &self,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
    ) -> Result<String, TemplateError> {
        self.render_kwargs(messages, tools, add_generation_prompt, &TemplateKwargs::new())
    }

    /// As [`ChatTemplate::render`], with `kwargs` added to the template's context as Hugging Face's
    /// `apply_chat_template(**kwargs)` adds them (`enable_thinking` for Qwen3's and SmolLM3's switch; a template
    /// that does not read a value ignores it).
    pub fn render_kwargs(
        &self,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
        kwargs: &TemplateKwargs,
    ) -> Result<String, TemplateError> {
        self.render_with(minijinja::Value::from_serialize(messages), tools, add_generation_prompt, kwargs)
    }

    /// Renders a conversation given as JSON messages (`{"role", "content", "tool_calls", "tool_call_id", …}`, the
    /// shape Hugging Face templates read, with key order kept): for conversations whose messages carry more than
    /// a role and a text, such as an assistant's tool calls. Otherwise as [`ChatTemplate::render_kwargs`].
    pub fn render_json(
        &self,
        messages: &[serde_json::Value],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
        kwargs: &TemplateKwargs,
    ) -> Result<String, TemplateError> {
        let messages: Vec<minijinja::Value> = messages.iter().map(ordered_json).collect();
        self.render_with(minijinja::Value::from(messages), tools, add_generation_prompt, kwargs)
    }

    /// Renders a request's conversation with its `tools` (an OpenAI tools array) placed where the template shows
    /// them ([`ToolsShown`]): passed as `tools`, or written into the system message for a template that reads
    /// them there or shows none. Otherwise as [`ChatTemplate::render_json`].
    pub fn render_request(
        &self,
        messages: &[serde_json::Value],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
        kwargs: &TemplateKwargs,
    ) -> Result<String, TemplateError> {
        let Some(tools) = tools.filter(|t| t.as_array().is_some_and(|a| !a.is_empty())) else {
            return self.render_json(messages, tools, add_generation_prompt, kwargs);
        };
        let (placed, pass_tools) = place_tools(self.tools_shown(), self.call_format, messages, tools);
        self.render_json(&placed, pass_tools.then_some(tools), add_generation_prompt, kwargs)
    }

    /// Renders the template with messages already in the template's value model; `tools` must be a JSON array.
    /// The caller's `kwargs` come first, so the conversation's own names (`messages`, `tools`, …) always win.
    fn render_with(
        &self,
        messages: minijinja::Value,
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
        kwargs: &TemplateKwargs,
    ) -> Result<String, TemplateError> {
        let tools = match tools {
            None => None,
            Some(array @ serde_json::Value::Array(_)) => Some(ordered_json(array)),
            Some(other) => return Err(TemplateError::ToolsNotAnArray(json_kind(other))),
        };
        let template = self.env.get_template(TEMPLATE_NAME).map_err(|e| TemplateError::Render(describe(&e)))?;
        let mut values: std::collections::BTreeMap<&str, minijinja::Value> =
            kwargs.iter().map(|(name, value)| (name.as_str(), ordered_json(value))).collect();
        values.insert("messages", messages);
        values.insert("tools", minijinja::Value::from_serialize(tools));
        values.insert("add_generation_prompt", minijinja::Value::from(add_generation_prompt));
        values.insert("bos_token", minijinja::Value::from(self.bos_token.as_str()));
        values.insert("eos_token", minijinja::Value::from(self.eos_token.as_str()));
        template.render(values).map_err(|e| match raised_message(&e) {
            Some(message) => TemplateError::Raised(message),
            None => TemplateError::Render(describe(&e)),
        })
    }

    /// The names a caller's template values may not take: the conversation's own.
    pub const RESERVED: [&'static str; 5] = ["messages", "tools", "add_generation_prompt", "bos_token", "eos_token"];

    /// The template's source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The tool-call format the template asks for (Hermes when it names none).
    pub fn call_format(&self) -> CallFormat {
        self.call_format
    }

    /// Whether the template has a thinking switch: one conversation rendered with `enable_thinking` on and off
    /// comes out different (Qwen3's and SmolLM3's do; a template that never reads the value does not).
    pub fn has_thinking_switch(&self) -> bool {
        *self.thinking_switch.get_or_init(|| {
            let probe = [ChatMessage::system("Be brief."), ChatMessage::user("Hi")];
            let render = |on| self.render_kwargs(&probe, None, true, &thinking(on)).ok();
            render(true) != render(false)
        })
    }

    /// Where the template shows a request's tools.
    pub fn tools_shown(&self) -> ToolsShown {
        *self.tools_shown.get_or_init(|| ToolsShown::probe(self))
    }

    /// The text `bos_token` renders to.
    pub fn bos_token(&self) -> &str {
        &self.bos_token
    }

    /// The text `eos_token` renders to.
    pub fn eos_token(&self) -> &str {
        &self.eos_token
    }
}

/// The text of the token a metadata id key points at; empty when the key is absent.
fn token_text(md: &HashMap<String, Value>, key: &str) -> Result<String, TemplateError> {
    let Some(value) = md.get(key) else {
        return Ok(String::new());
    };
    let id = match *value {
        Value::U32(id) => Some(u64::from(id)),
        Value::I32(id) => u64::try_from(id).ok(),
        Value::U64(id) => Some(id),
        Value::I64(id) => u64::try_from(id).ok(),
        _ => return Err(TemplateError::WrongType { key: key.to_string(), expected: "an integer token id" }),
    };
    let tokens = match md.get("tokenizer.ggml.tokens") {
        Some(Value::Array(tokens)) => tokens.as_slice(),
        _ => &[],
    };
    // A negative or out-of-range id means "no such token"; the tokenizer reports bad ids with more context.
    Ok(id
        .and_then(|id| usize::try_from(id).ok())
        .and_then(|id| tokens.get(id))
        .and_then(|v| v.to_string().ok().cloned())
        .unwrap_or_default())
}

/// minijinja's message with the template line, without its multi-line debug context.
fn describe(e: &JinjaError) -> String {
    let mut text = match e.detail() {
        Some(detail) => format!("{}: {detail}", e.kind()),
        None => e.kind().to_string(),
    };
    if let Some(line) = e.line() {
        text.push_str(&format!(" (line {line})"));
    }
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        text.push_str(&format!(": {inner}"));
        source = inner.source();
    }
    text
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render_str(
        source: &str,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
    ) -> Result<String, TemplateError> {
        ChatTemplate::new(source, "<s>", "</s>")?.render(messages, tools, false)
    }

    #[test]
    fn gemma_template_folds_the_system_text_into_the_first_turn() {
        let t = ChatTemplate::new(GEMMA3_TEMPLATE, "<bos>", "<eos>").unwrap();
        let out = t.render(&[ChatMessage::system("Be brief."), ChatMessage::user("Hi ")], None, true).unwrap();
        assert_eq!(out, "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
        let out = t
            .render(&[ChatMessage::user("Hi"), ChatMessage::assistant("Hello!"), ChatMessage::user("Bye")], None, false)
            .unwrap();
        assert_eq!(
            out,
            "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n\
             <start_of_turn>user\nBye<end_of_turn>\n"
        );
    }

    #[test]
    fn gemma_template_rejects_non_alternating_roles() {
        let t = ChatTemplate::new(GEMMA3_TEMPLATE, "<bos>", "<eos>").unwrap();
        let err = t.render(&[ChatMessage::user("a"), ChatMessage::user("b")], None, true).unwrap_err();
        assert!(matches!(&err, TemplateError::Raised(m) if m.contains("must alternate")), "{err}");
    }

    #[test]
    fn syntax_errors_surface_at_compile_time_with_the_line() {
        let err = ChatTemplate::new("line one\n{% for x in %}", "", "").unwrap_err();
        assert!(matches!(&err, TemplateError::Syntax { line: Some(2), .. }), "{err:?}");
        assert!(err.to_string().contains("line 2"), "{err}");
        assert!(matches!(ChatTemplate::new("{{ unclosed", "", ""), Err(TemplateError::Syntax { .. })));
        assert!(matches!(ChatTemplate::new("{% if x %}no end", "", ""), Err(TemplateError::Syntax { .. })));
    }

    #[test]
    fn raise_exception_is_its_own_error() {
        let err = render_str("{{ raise_exception('no system role') }}", &[], None).unwrap_err();
        assert!(matches!(&err, TemplateError::Raised(m) if m == "no system role"), "{err:?}");
        let err = render_str("{{ 1 + 'a' }}", &[], None).unwrap_err();
        assert!(matches!(err, TemplateError::Render(_)), "{err:?}");
    }

    #[test]
    fn python_string_and_dict_methods_work() {
        let messages = [ChatMessage::user("  Hello there  ")];
        let out = render_str(
            "{{ messages[0].content.strip() }}|{{ messages[0].content.strip().startswith('Hello') }}|\
             {{ messages[0].content.split() | length }}|{% for k, v in tools[0].items() %}{{ k }}={{ v }};{% endfor %}",
            &messages,
            Some(&serde_json::json!([{"z": 1, "a": 2}])),
        )
        .unwrap();
        assert_eq!(out, "Hello there|True|2|z=1;a=2;", "booleans print as Python's");
    }

    #[test]
    fn tojson_writes_what_python_json_dumps_writes() {
        let tools = serde_json::json!([{"type": "function", "function": {"name": "read_file", "description":
            "Read a user's <file> & more", "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
            "required": ["path"], "x": 1.5, "big": 1e20, "small": 0.00001, "n": null, "ok": true, "e": {}, "l": []}}}]);
        let out = render_str("{% for t in tools %}{{ t | tojson }}{% endfor %}", &[], Some(&tools)).unwrap();
        assert_eq!(
            out,
            r#"{"type": "function", "function": {"name": "read_file", "description": "Read a user's <file> & more", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "x": 1.5, "big": 1e+20, "small": 1e-05, "n": null, "ok": true, "e": {}, "l": []}}}"#
        );
        let out = render_str(
            "{{ tools[0] | tojson(indent=2, sort_keys=true) }}",
            &[],
            Some(&serde_json::json!([{"b": [1, 2], "a": "é\n"}])),
        )
        .unwrap();
        assert_eq!(out, "{\n  \"a\": \"é\\n\",\n  \"b\": [\n    1,\n    2\n  ]\n}");
        let out =
            render_str("{{ tools[0] | tojson(ensure_ascii=true) }}", &[], Some(&serde_json::json!(["é🦀"]))).unwrap();
        assert_eq!(out, r#""\u00e9\ud83e\udd80""#);
    }

    #[test]
    fn tools_must_be_an_array() {
        let err = render_str("{{ tools }}", &[], Some(&serde_json::json!({"name": "f"}))).unwrap_err();
        assert!(matches!(err, TemplateError::ToolsNotAnArray("an object")));
    }
}
