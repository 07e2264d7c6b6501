//! Chat templates with hostile conversations: the real models' templates (Qwen2.5-Coder's from its GGUF file, and
//! the built-in Gemma 3 one) render any message text, role, tool name and tool-call arguments, in both the shape
//! `tandem serve` passes (`render_json`) and plain messages (`render`), or refuse it with an error in words.
//!
//! Input: one flags byte, then UTF-8 text (invalid bytes replaced, as no caller passes raw bytes).
//! - flags bit 0: Gemma 3 instead of Qwen2.5; bit 1: open the assistant's turn; bit 2: declare tools;
//!   bit 3: the text is JSON, `{"messages": [...], "tools": ...}` or a bare messages array, passed as it is
//!   (any JSON: `render_json` is public and must not panic on shapes `serve`'s request check would refuse).
//! - otherwise the text is messages separated by U+001E, each `role U+001F content [U+001F tool name U+001F
//!   arguments]`; a tool name makes an assistant message a tool call (and declares that tool), and a `tool`
//!   message answers the call before it, as `serve` builds them.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use tandem::llm::chat::{ChatMessage, ChatTemplate, TemplateError, GEMMA3_TEMPLATE};

/// Qwen2.5-Coder-0.5B-Instruct's `tokenizer.chat_template`, copied from the GGUF file the tests use.
const QWEN25_TEMPLATE: &str = include_str!("../templates/qwen2.5-coder-instruct.jinja");

fn qwen() -> &'static ChatTemplate {
    static T: OnceLock<ChatTemplate> = OnceLock::new();
    T.get_or_init(|| ChatTemplate::new(QWEN25_TEMPLATE, "<|endoftext|>", "<|im_end|>").unwrap())
}

fn gemma() -> &'static ChatTemplate {
    static T: OnceLock<ChatTemplate> = OnceLock::new();
    T.get_or_init(|| ChatTemplate::new(GEMMA3_TEMPLATE, "<bos>", "<eos>").unwrap())
}

/// An error must say something; a `tools` that is not an array is refused as such before rendering.
fn check(result: Result<String, TemplateError>, tools: Option<&Value>) -> Option<String> {
    match result {
        Ok(text) => Some(text),
        Err(error) => {
            assert!(!error.to_string().is_empty());
            if let Some(tools) = tools {
                assert_eq!(tools.is_array(), !matches!(error, TemplateError::ToolsNotAnArray(_)), "{error}");
            }
            None
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let (template, is_qwen) = if flags & 1 == 0 { (qwen(), true) } else { (gemma(), false) };
    let open_turn = flags & 2 != 0;

    if flags & 8 != 0 {
        let Ok(value) = serde_json::from_str::<Value>(&text) else { return };
        let (messages, tools) = match value {
            Value::Array(messages) => (messages, None),
            Value::Object(mut fields) => match fields.remove("messages") {
                Some(Value::Array(messages)) => (messages, fields.remove("tools")),
                _ => return,
            },
            _ => return,
        };
        let _ = check(template.render_json(&messages, tools.as_ref(), open_turn), tools.as_ref());
        return;
    }

    let mut plain = Vec::new();
    let mut messages = Vec::new();
    let mut tools = Vec::new();
    let mut last_call = None;
    for (i, record) in text.split('\u{1e}').take(64).enumerate() {
        let mut fields = record.split('\u{1f}');
        let role = fields.next().unwrap_or_default();
        let content = fields.next().unwrap_or_default();
        let name = fields.next();
        let arguments = fields.next().unwrap_or("{}");
        plain.push(ChatMessage::new(role, content));
        let mut message = json!({"role": role, "content": content});
        match (role, name) {
            ("assistant", Some(name)) => {
                let id = format!("call_{i}");
                let arguments = serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| Value::from(arguments));
                message["tool_calls"] =
                    json!([{"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]);
                tools.push(json!({"type": "function", "function": {"name": name, "description": content,
                    "parameters": {"type": "object", "properties": {}}}}));
                last_call = Some(id);
            }
            ("tool", _) => message["tool_call_id"] = json!(last_call.clone().unwrap_or_default()),
            _ => {}
        }
        messages.push(message);
    }
    let tools = (flags & 4 != 0).then(|| Value::Array(tools));
    let rendered = check(template.render_json(&messages, tools.as_ref(), open_turn), tools.as_ref());
    // Qwen's template prints every user message's text as it is: hostile text must not be lost or cut.
    if let (true, Some(out)) = (is_qwen, &rendered) {
        for message in &plain {
            if message.role == "user" {
                assert!(out.contains(&message.content), "user text {:?} missing from the prompt", message.content);
            }
        }
    }
    let _ = check(template.render(&plain, tools.as_ref(), open_turn), tools.as_ref());
});
