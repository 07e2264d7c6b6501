//! The assistant prefill that makes llama-server honour `tool_choice: "required"` as Tandem does: the opening of
//! a call block, sent to llama-server only, as the last (assistant) message of every `tools` request.
//!
//! Why it is needed: llama.cpp's chat code (common/chat-auto-parser-generator.cpp in the build
//! scripts/build-llama-server.sh makes) reads Qwen's template as Hermes-style `<tool_call>` blocks and, under
//! `required`, applies a grammar from the first token, but that grammar lets any text that holds no
//! `<tool_call>` come before the call (`content until <tool_call>`, optional) and only then requires one. The
//! 0.5B model writes its call as bare JSON text and explains it, so every answer was text run on to `max_tokens`,
//! with no call. Tandem's grammar allows no text before a call. With the block's opening prefilled (llama-server
//! continues a final assistant message: `--prefill-assistant`, its default), the grammar starts inside the call,
//! the text parsed for calls includes the prefill, and every answer is a call, with no other change to the
//! template, the request or llama-server's grammar. The prefill's tokens are prompt tokens on llama-server's
//! side (two for Qwen: `<tool_call>` and a newline).

use std::path::Path;

use crate::llm::chat::CallFormat;
use crate::llm::GgufFile;
use crate::{Error, Result};

/// What llama-server is prefilled with under `tool_choice: required` for the model at `model`: the Hermes block
/// opening `<tool_call>\n` where the file's chat template writes calls in that format (Qwen2.5, Qwen3, Hermes),
/// nothing otherwise (the other families' handling in llama.cpp has not been checked, so they run as they are).
pub fn required_call_prefill(model: &Path) -> Result<Option<String>> {
    let file = GgufFile::open(model).map_err(|e| Error::Bench(format!("reading the chat template: {e}")))?;
    let template = match file.content.metadata.get("tokenizer.chat_template") {
        Some(candle_core::quantized::gguf_file::Value::String(source)) => source.as_str(),
        _ => return Ok(None),
    };
    Ok(template_prefill(template))
}

/// The prefill for a chat template's source (see [`required_call_prefill`]).
fn template_prefill(template: &str) -> Option<String> {
    let format = CallFormat::from_template(template);
    // `from_template` says Hermes when a template names no marker at all; llama.cpp would then parse bare JSON.
    (format == CallFormat::Hermes && template.contains(format.open())).then(|| format!("{}\n", format.open()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_template_that_writes_hermes_blocks_gets_the_block_opening() {
        let qwen = "{%- if tools %}<tools>{{ tools }}</tools> within <tool_call></tool_call> XML tags{%- endif %}";
        assert_eq!(template_prefill(qwen).as_deref(), Some("<tool_call>\n"));
        assert_eq!(template_prefill("{{ '<|start_header_id|>' }}<|python_tag|>"), None, "Llama 3");
        assert_eq!(template_prefill("[TOOL_CALLS] <tool_call>"), None, "Mistral");
        assert_eq!(template_prefill("{{ messages[0].content }}"), None, "names no call format");
    }
}
