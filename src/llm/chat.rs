//! Chat templates from GGUF metadata (`tokenizer.chat_template`), rendered with minijinja the way Hugging Face
//! `apply_chat_template` renders them: `trim_blocks` and `lstrip_blocks` on, Python string and dict methods
//! (`.startswith`, `.strip`, `.items()`) through minijinja-contrib's pycompat, `raise_exception`,
//! `strftime_now`, and a `tojson` that writes what Python's `json.dumps` writes (`", "` and `": "` separators,
//! keys in their given order, no HTML escaping): models were trained on prompts rendered that way, so tool
//! schemas are shown to them in that exact form.

use std::collections::HashMap;
use std::sync::Arc;

use candle_core::quantized::gguf_file::Value;
use minijinja::value::{Enumerator, Kwargs, Object, ObjectRepr, Value as JinjaValue, ValueKind};
use minijinja::{context, Environment, Error as JinjaError, ErrorKind};

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

/// Google's Gemma 3 chat template (text-only part), for Gemma files that carry no template (base models).
/// Gemma has no system role: the system text opens the first user turn. Roles must alternate user/model.
pub const GEMMA3_TEMPLATE: &str = r#"{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {{- message['content'] | trim }}
    {{- '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{ '<start_of_turn>model\n' }}
{%- endif -%}
"#;

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
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("source_chars", &self.source.len())
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .finish()
    }
}

const TEMPLATE_NAME: &str = "chat_template";

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
        Ok(Self { env, source: source.to_string(), bos_token: bos_token.to_string(), eos_token: eos_token.to_string() })
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
        let tools = match tools {
            None => None,
            Some(array @ serde_json::Value::Array(_)) => Some(ordered_json(array)),
            Some(other) => return Err(TemplateError::ToolsNotAnArray(json_kind(other))),
        };
        let template = self.env.get_template(TEMPLATE_NAME).map_err(|e| TemplateError::Render(describe(&e)))?;
        template
            .render(context! {
                messages => messages,
                tools => tools,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos_token,
                eos_token => self.eos_token,
            })
            .map_err(|e| match raised_message(&e) {
                Some(message) => TemplateError::Raised(message),
                None => TemplateError::Render(describe(&e)),
            })
    }

    /// The template's source.
    pub fn source(&self) -> &str {
        &self.source
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

// ---------------------------------------------------------------------------------------------------------
// Functions and filters that Hugging Face's environment provides.

/// Marks an error raised by the template's own `raise_exception` call.
#[derive(Debug)]
struct RaisedByTemplate(String);

impl std::fmt::Display for RaisedByTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RaisedByTemplate {}

fn raise_exception(message: String) -> Result<JinjaValue, JinjaError> {
    Err(JinjaError::new(ErrorKind::InvalidOperation, message.clone()).with_source(RaisedByTemplate(message)))
}

fn raised_message(e: &JinjaError) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(raised) = err.downcast_ref::<RaisedByTemplate>() {
            return Some(raised.0.clone());
        }
        source = err.source();
    }
    None
}

/// `strftime_now(format)`: the current UTC time, as Llama 3 style templates print "Today Date".
fn strftime_now(format: String) -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    strftime(&format, secs)
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/// Formats a Unix time (UTC) with the common C `strftime` directives; unknown ones are copied as written.
fn strftime(format: &str, unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let secs_of_day = unix_secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let weekday = (days + 3).rem_euclid(7) as usize; // 1970-01-01 was a Thursday; index 0 = Monday.
    let day_of_year = days - days_from_civil(year, 1, 1) + 1;
    let (hour, minute, second) = (secs_of_day / 3600, secs_of_day / 60 % 60, secs_of_day % 60);
    let month_name = MONTHS[(month - 1) as usize];
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        // `%-d` (no padding) is a glibc extension that templates use.
        let mut directive = chars.next();
        let unpadded = directive == Some('-');
        if unpadded {
            directive = chars.next();
        }
        let num = |n: i64, width: usize| {
            if unpadded {
                n.to_string()
            } else {
                format!("{n:0width$}")
            }
        };
        match directive {
            Some('Y') => out.push_str(&year.to_string()),
            Some('y') => out.push_str(&num(year.rem_euclid(100), 2)),
            Some('m') => out.push_str(&num(month, 2)),
            Some('d') => out.push_str(&num(day, 2)),
            Some('e') => out.push_str(&format!("{day:2}")),
            Some('j') => out.push_str(&num(day_of_year, 3)),
            Some('H') => out.push_str(&num(hour as i64, 2)),
            Some('M') => out.push_str(&num(minute as i64, 2)),
            Some('S') => out.push_str(&num(second as i64, 2)),
            Some('B') => out.push_str(month_name),
            Some('b') | Some('h') => out.push_str(&month_name[..3]),
            Some('A') => out.push_str(WEEKDAYS[weekday]),
            Some('a') => out.push_str(&WEEKDAYS[weekday][..3]),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                if unpadded {
                    out.push('-');
                }
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (Howard Hinnant's algorithm).
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// (year, month, day) → days since 1970-01-01, the inverse of [`civil_from_days`].
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `tojson` as Hugging Face defines it: `json.dumps(x, ensure_ascii=False, indent=None, separators=None,
/// sort_keys=False)`. minijinja's built-in writes compact JSON and escapes `<`, `>`, `&` and `'` for HTML,
/// which would show a model its tool schemas in a form it never saw in training.
fn tojson(value: &JinjaValue, kwargs: Kwargs) -> Result<JinjaValue, JinjaError> {
    let indent: Option<JinjaValue> = kwargs.get("indent")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let separators: Option<JinjaValue> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => match v.as_str() {
            Some(s) => Some(s.to_string()),
            None => match v.as_i64() {
                Some(n) => Some(" ".repeat(usize::try_from(n).unwrap_or(0))),
                None => {
                    let message = "tojson: indent must be an integer or a string";
                    return Err(JinjaError::new(ErrorKind::InvalidOperation, message));
                }
            },
        },
    };
    let (item_sep, key_sep) = match separators {
        Some(v) if !v.is_none() => {
            let parts: Vec<String> =
                v.try_iter()?.map(|p| p.as_str().map(str::to_string)).collect::<Option<_>>().ok_or_else(|| {
                    JinjaError::new(ErrorKind::InvalidOperation, "tojson: separators must be two strings")
                })?;
            match <[String; 2]>::try_from(parts) {
                Ok([item, key]) => (item, key),
                Err(_) => {
                    return Err(JinjaError::new(ErrorKind::InvalidOperation, "tojson: separators must be two strings"))
                }
            }
        }
        // Python's defaults: ", " without indent, "," with it (the newline follows).
        _ => (if indent.is_some() { "," } else { ", " }.to_string(), ": ".to_string()),
    };
    let writer = PyJson {
        indent,
        item_sep,
        key_sep,
        ensure_ascii: ensure_ascii.unwrap_or(false),
        sort_keys: sort_keys.unwrap_or(false),
    };
    let mut out = String::new();
    writer.write(value, 0, &mut out)?;
    Ok(JinjaValue::from(out))
}

/// Python's `json.dumps` layout.
struct PyJson {
    indent: Option<String>,
    item_sep: String,
    key_sep: String,
    ensure_ascii: bool,
    sort_keys: bool,
}

impl PyJson {
    fn write(&self, value: &JinjaValue, depth: usize, out: &mut String) -> Result<(), JinjaError> {
        match value.kind() {
            ValueKind::Undefined | ValueKind::None => out.push_str("null"),
            ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
            ValueKind::Number => {
                if value.is_integer() {
                    out.push_str(&value.to_string());
                } else {
                    out.push_str(&python_float(f64::try_from(value.clone())?));
                }
            }
            ValueKind::String => self.write_str(value.as_str().unwrap_or_default(), out),
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<JinjaValue> = value.try_iter()?.collect();
                self.write_container('[', ']', items.len(), depth, out, |i, out| {
                    self.write(&items[i], depth + 1, out)
                })?;
            }
            ValueKind::Map => {
                let mut keys: Vec<JinjaValue> = value.try_iter()?.collect();
                if self.sort_keys {
                    keys.sort_by_key(key_text);
                }
                self.write_container('{', '}', keys.len(), depth, out, |i, out| {
                    self.write_str(&key_text(&keys[i]), out);
                    out.push_str(&self.key_sep);
                    self.write(&value.get_item(&keys[i])?, depth + 1, out)
                })?;
            }
            other => {
                return Err(JinjaError::new(
                    ErrorKind::InvalidOperation,
                    format!("tojson: a {other} value is not JSON"),
                ))
            }
        }
        Ok(())
    }

    fn write_container(
        &self,
        open: char,
        close: char,
        len: usize,
        depth: usize,
        out: &mut String,
        mut item: impl FnMut(usize, &mut String) -> Result<(), JinjaError>,
    ) -> Result<(), JinjaError> {
        out.push(open);
        if len == 0 {
            out.push(close);
            return Ok(());
        }
        for i in 0..len {
            if i > 0 {
                out.push_str(&self.item_sep);
            }
            if let Some(indent) = &self.indent {
                out.push('\n');
                out.push_str(&indent.repeat(depth + 1));
            }
            item(i, out)?;
        }
        if let Some(indent) = &self.indent {
            out.push('\n');
            out.push_str(&indent.repeat(depth));
        }
        out.push(close);
        Ok(())
    }

    fn write_str(&self, s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 || (self.ensure_ascii && !(' '..='~').contains(&c)) => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
}

/// Python converts non-string keys with `str()`-like rules: numbers as digits, booleans as `true`/`false`.
fn key_text(key: &JinjaValue) -> String {
    match key.as_str() {
        Some(s) => s.to_string(),
        None if key.kind() == ValueKind::Bool => if key.is_true() { "true" } else { "false" }.to_string(),
        None if key.is_none() => "null".to_string(),
        None => key.to_string(),
    }
}

/// Python's `repr(float)`: shortest round-trip digits, exponent form outside 1e-4 ≤ |x| < 1e16 written as
/// `1e+16` / `1e-05`, and `NaN` / `Infinity` as `json.dumps` writes them.
fn python_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    // Rust's Debug uses the same shortest digits and the same switch to exponent form as Python's repr.
    let text = format!("{x:?}");
    match text.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => text,
    }
}

// ---------------------------------------------------------------------------------------------------------
// JSON → template values with key order kept (minijinja's own maps sort their keys).

/// A JSON object as a template map that iterates its keys in the given order.
#[derive(Debug)]
struct OrderedMap(Vec<(JinjaValue, JinjaValue)>);

impl Object for OrderedMap {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &JinjaValue) -> Option<JinjaValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.0.iter().map(|(k, _)| k.clone()).collect())
    }
}

fn ordered_json(value: &serde_json::Value) -> JinjaValue {
    match value {
        serde_json::Value::Null => JinjaValue::from(()),
        serde_json::Value::Bool(b) => JinjaValue::from(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                JinjaValue::from(i)
            } else if let Some(u) = n.as_u64() {
                JinjaValue::from(u)
            } else {
                JinjaValue::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => JinjaValue::from(s.as_str()),
        serde_json::Value::Array(items) => JinjaValue::from(items.iter().map(ordered_json).collect::<Vec<_>>()),
        serde_json::Value::Object(map) => JinjaValue::from_object(OrderedMap(
            map.iter().map(|(k, v)| (JinjaValue::from(k.as_str()), ordered_json(v))).collect(),
        )),
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

    #[test]
    fn strftime_formats_known_dates() {
        // 2024-07-26 13:45:09 UTC, a Friday.
        let t = 1_722_001_509;
        assert_eq!(strftime("%d %b %Y", t), "26 Jul 2024");
        assert_eq!(strftime("%Y-%m-%d %H:%M:%S", t), "2024-07-26 13:45:09");
        assert_eq!(strftime("%A %B %-d, day %j, %% %q", t), "Friday July 26, day 208, % %q");
        assert_eq!(strftime("%d/%m/%y %a", 0), "01/01/70 Thu");
        assert_eq!(strftime("%Y-%m-%d", 951_782_400), "2000-02-29");
        for days in [-1000, 0, 59, 365, 11_016, 20_000, 100_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn python_floats() {
        assert_eq!(python_float(1.0), "1.0");
        assert_eq!(python_float(0.1), "0.1");
        assert_eq!(python_float(1e16), "1e+16");
        assert_eq!(python_float(1.5e-7), "1.5e-07");
        assert_eq!(python_float(123456.789), "123456.789");
        assert_eq!(python_float(f64::NAN), "NaN");
    }
}
