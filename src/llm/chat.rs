//! Chat templates from GGUF metadata (`tokenizer.chat_template`), rendered with minijinja the way
//! Hugging Face renders them (Python string methods through minijinja-contrib's pycompat).

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;
use minijinja::{context, Environment, Error as JinjaError, ErrorKind};

/// Errors loading or rendering a chat template.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("the chat template does not parse: {0}")]
    Syntax(String),
    #[error("rendering the chat template failed: {0}")]
    Render(String),
    #[error("metadata key 'tokenizer.chat_template' should be a string")]
    NotAString,
}

/// Gemma's turn format, for Gemma files that carry no template (base models). Gemma has no system role: the
/// system text opens the first user turn, as Google's own template does.
const GEMMA_TEMPLATE: &str = "{{ bos_token }}{% set ns = namespace(system='') %}\
{% for message in messages %}{% if message.role == 'system' %}{% set ns.system = message.content + '\n\n' %}\
{% else %}{% set role = 'model' if message.role == 'assistant' else message.role %}\
<start_of_turn>{{ role }}\n{% if loop.first or (loop.index0 == 1 and messages[0].role == 'system') %}{{ ns.system }}{% endif %}\
{{ message.content | trim }}<end_of_turn>\n{% endif %}{% endfor %}\
{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}";

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self { role: "system".into(), content: text.into() }
    }
    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self { role: "user".into(), content: text.into() }
    }
    /// An assistant message.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self { role: "assistant".into(), content: text.into() }
    }
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

const TEMPLATE_NAME: &str = "chat";

fn raise_exception(message: String) -> Result<String, JinjaError> {
    Err(JinjaError::new(ErrorKind::InvalidOperation, message))
}

impl ChatTemplate {
    /// Compiles `source`; syntax errors are reported here, not at render time.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self, TemplateError> {
        let mut env = Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", |format: String| -> String {
            // Templates use it for "today's date"; a fixed, documented value keeps prompts reproducible.
            let _ = format;
            "26 Jul 2024".to_string()
        });
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.add_template_owned(TEMPLATE_NAME, source.to_string()).map_err(|e| TemplateError::Syntax(e.to_string()))?;
        Ok(Self { env, bos_token: bos_token.to_string(), eos_token: eos_token.to_string() })
    }

    /// The template from GGUF metadata; for `gemma3` files without one, Gemma's turn format; else `None`.
    pub fn from_gguf(md: &HashMap<String, Value>, architecture: &str) -> Result<Option<Self>, TemplateError> {
        let tokens = match md.get("tokenizer.ggml.tokens") {
            Some(Value::Array(items)) => items.as_slice(),
            _ => &[],
        };
        let token = |key: &str| -> String {
            md.get(key)
                .and_then(|v| v.to_u32().ok())
                .and_then(|id| tokens.get(id as usize))
                .and_then(|v| v.to_string().ok().cloned())
                .unwrap_or_default()
        };
        let (bos, eos) = (token("tokenizer.ggml.bos_token_id"), token("tokenizer.ggml.eos_token_id"));
        match md.get("tokenizer.chat_template") {
            Some(Value::String(source)) => Ok(Some(Self::new(source, &bos, &eos)?)),
            Some(_) => Err(TemplateError::NotAString),
            None if architecture == "gemma3" => Ok(Some(Self::new(GEMMA_TEMPLATE, &bos, &eos)?)),
            None => Ok(None),
        }
    }

    /// Renders a conversation. `tools` is a JSON array of function schemas for templates with a tools section.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
    ) -> Result<String, TemplateError> {
        let template = self.env.get_template(TEMPLATE_NAME).map_err(|e| TemplateError::Render(e.to_string()))?;
        let tools = tools.map(minijinja::Value::from_serialize);
        template
            .render(context! {
                messages => messages,
                tools => tools,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos_token,
                eos_token => self.eos_token,
            })
            .map_err(|e| TemplateError::Render(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemma_fallback_folds_the_system_text_into_the_first_turn() {
        let t = ChatTemplate::new(GEMMA_TEMPLATE, "<bos>", "<eos>").unwrap();
        let out = t.render(&[ChatMessage::system("Be brief."), ChatMessage::user("Hi")], None, true).unwrap();
        assert_eq!(out, "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
    }

    #[test]
    fn syntax_errors_surface_at_compile_time() {
        assert!(matches!(ChatTemplate::new("{% for x in %}", "", ""), Err(TemplateError::Syntax(_))));
    }

    #[test]
    fn raise_exception_is_a_render_error() {
        let t = ChatTemplate::new("{{ raise_exception('no system role') }}", "", "").unwrap();
        assert!(matches!(t.render(&[], None, false), Err(TemplateError::Render(m)) if m.contains("no system role")));
    }
}
