//! Tokenizers built from GGUF metadata (`tokenizer.ggml.*`): byte-level BPE (`gpt2`, Qwen) and
//! SentencePiece-style BPE with byte fallback (`llama`, Gemma).
//!
//! Encoding goes through the `tokenizers` crate. The BPE model (the big part: up to 262k tokens and 500k
//! merges) is built through its builder API, which skips a round trip through a JSON document of that size;
//! the small pieces around it (normalizer, pre-tokenizer, decoder) are described as `tokenizer.json`
//! fragments, whose format is the one stable interface of that crate across versions.
//!
//! Decoding goes through our own id → bytes table: it is exact by construction (no decoder heuristics such as
//! space cleanup), serves the grammar engine's token trie, and lets streaming hold back incomplete UTF-8.
//!
//! Both kinds were checked against independent implementations on ~530 strings (code, prose, CJK, emoji,
//! random mixes of whitespace and special tokens): Qwen against `tiktoken` fed the same ranks and split
//! regex, Gemma against Google's `sentencepiece` fed a model proto rebuilt from the GGUF pieces, scores and
//! types. Every id sequence matched.
//!
//! [`error`] holds the errors, `metadata` reads `tokenizer.ggml.*` keys, [`pre`] maps `tokenizer.ggml.pre` names to
//! llama.cpp's split regexes, [`build`] builds the tokenizer (with `merges` deriving SentencePiece merges from
//! scores and `bytes` each token's bytes), and [`decode`] turns ids back into text, streaming included.

pub mod build;
mod bytes;
pub mod decode;
pub mod error;
mod merges;
mod metadata;
pub mod pre;

pub use self::bytes::gpt2_byte_to_char;
pub use self::decode::TokenStream;
pub use self::error::TokenizerError;
pub use self::merges::merges_from_scores;
use super::packed_strings::PackedStrings;

/// Which algorithm the tokenizer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerKind {
    /// Byte-level BPE (GPT-2 style; Qwen): `tokenizer.ggml.model = gpt2`.
    Bpe,
    /// SentencePiece-style BPE with `▁` for spaces and byte fallback (Llama, Gemma): `tokenizer.ggml.model = llama`.
    SentencePiece,
}

/// GGUF token types (`tokenizer.ggml.token_type`), the same numbers as SentencePiece's piece types.
mod token_type {
    pub const NORMAL: i32 = 1;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
    pub const UNUSED: i32 = 5;
    pub const BYTE: i32 = 6;
}

/// Texts that end a reply in the chat formats we know, besides the model's EOS: ChatML's (Qwen, SmolLM), Gemma's,
/// Llama 3's end of turn, end of message (after a `<|python_tag|>` call) and end of text, Phi's end of turn.
const END_OF_TURN_TEXTS: [&str; 8] =
    ["<|im_end|>", "<|endoftext|>", "<end_of_turn>", "<eos>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|end|>"];

/// A tokenizer with the metadata the rest of the engine needs (stop tokens, token bytes for grammars).
pub struct GgufTokenizer {
    inner: tokenizers::Tokenizer,
    kind: TokenizerKind,
    /// Each token's vocabulary text (UTF-8), indexed by id.
    texts: PackedStrings,
    types: Vec<i32>,
    /// The bytes each token stands for, indexed by id.
    bytes: PackedStrings,
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
}

impl std::fmt::Debug for GgufTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufTokenizer")
            .field("kind", &self.kind)
            .field("vocab_size", &self.texts.len())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("add_bos", &self.add_bos)
            .finish_non_exhaustive()
    }
}

impl GgufTokenizer {
    /// Encodes text. Control and user-defined tokens written in the text (e.g. `<|im_start|>`) become their
    /// single ids. `add_bos` prepends the BOS token, if the model has one and the text does not already start
    /// with it (chat templates such as Gemma's write `<bos>` themselves).
    pub fn encode(&self, text: &str, add_bos: bool) -> Result<Vec<u32>, TokenizerError> {
        let encoding = self
            .inner
            .encode_fast(text, false)
            .map_err(|e| TokenizerError::Encode { chars: text.chars().count(), message: e.to_string() })?;
        let ids = encoding.get_ids();
        let mut out = Vec::with_capacity(ids.len() + 1);
        if let (true, Some(bos)) = (add_bos, self.bos) {
            if ids.first() != Some(&bos) {
                out.push(bos);
            }
        }
        out.extend_from_slice(ids);
        Ok(out)
    }

    /// Whether the model expects a BOS token before the prompt (`tokenizer.ggml.add_bos_token`; when absent,
    /// true for SentencePiece vocabularies and false for byte-level BPE, as in llama.cpp).
    pub fn add_bos_by_default(&self) -> bool {
        self.add_bos && self.bos.is_some()
    }

    /// Number of token rows in the metadata (unused rows included; the model's logits may be wider still).
    pub fn vocab_size(&self) -> usize {
        self.texts.len()
    }

    /// The exact bytes token `id` stands for (special tokens: their text); `None` past the vocabulary.
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        self.bytes.get(id as usize)
    }

    /// The token's text as stored in the vocabulary (byte-level BPE: in GPT-2 characters, e.g. `Ġworld`).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.texts.get(id as usize).and_then(|text| std::str::from_utf8(text).ok())
    }

    /// Control or user-defined tokens (`<|im_start|>`, `<end_of_turn>`, Qwen's `<tool_call>`, Gemma's `\n`).
    pub fn is_special(&self, id: u32) -> bool {
        self.types.get(id as usize).is_some_and(|&t| t == token_type::CONTROL || t == token_type::USER_DEFINED)
    }

    /// Control tokens only (never plain text, unlike Gemma's user-defined whitespace tokens).
    pub fn is_control(&self, id: u32) -> bool {
        self.types.get(id as usize).is_some_and(|&t| t == token_type::CONTROL)
    }

    /// Rows that stand for nothing (Qwen's `[PAD…]` rows): encoding never produces them; never to be generated.
    pub fn is_unused(&self, id: u32) -> bool {
        self.types.get(id as usize).is_some_and(|&t| t == token_type::UNUSED)
    }

    /// The id of a token given by its vocabulary text (`<|im_end|>`, `Ġworld`, `▁world`); unused rows have none.
    pub fn token_to_id(&self, text: &str) -> Option<u32> {
        self.inner.token_to_id(text)
    }

    /// Beginning-of-sequence token (`tokenizer.ggml.bos_token_id`).
    pub fn bos_token(&self) -> Option<u32> {
        self.bos
    }

    /// End-of-sequence token (`tokenizer.ggml.eos_token_id`).
    pub fn eos_token(&self) -> Option<u32> {
        self.eos
    }

    /// Tokens that end a reply: EOS, then whichever end-of-turn tokens of the chat formats we know the vocabulary
    /// has as special tokens (`<|im_end|>`, `<|eot_id|>`, `<end_of_turn>`, `<|end|>`, …), without duplicates.
    pub fn stop_tokens(&self) -> Vec<u32> {
        let mut stops: Vec<u32> = self.eos.into_iter().collect();
        for id in END_OF_TURN_TEXTS.iter().filter_map(|text| self.token_to_id(text)).filter(|&id| self.is_special(id)) {
            if !stops.contains(&id) {
                stops.push(id);
            }
        }
        stops
    }

    /// The algorithm.
    pub fn kind(&self) -> TokenizerKind {
        self.kind
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use candle_core::quantized::gguf_file::Value;

    use super::*;

    /// A Llama 3-style byte-level BPE vocabulary: two ordinary tokens, then control tokens (Llama 3's and Phi's ends
    /// of turn among them); `end_type` is the type of the `<|end|>` row.
    fn llama3_like(end_type: i32) -> HashMap<String, Value> {
        let tokens = [
            "end",
            "Ġturn",
            "<|begin_of_text|>",
            "<|start_header_id|>",
            "<|eot_id|>",
            "<|eom_id|>",
            "<|end_of_text|>",
            "<|end|>",
        ];
        let types = [1, 1, 3, 3, 3, 3, 3, end_type];
        HashMap::from([
            ("tokenizer.ggml.model".to_string(), Value::String("gpt2".into())),
            ("tokenizer.ggml.pre".to_string(), Value::String("llama-bpe".into())),
            ("tokenizer.ggml.tokens".to_string(), Value::Array(tokens.map(|t| Value::String(t.into())).to_vec())),
            ("tokenizer.ggml.token_type".to_string(), Value::Array(types.map(Value::I32).to_vec())),
            ("tokenizer.ggml.merges".to_string(), Value::Array(Vec::new())),
            ("tokenizer.ggml.bos_token_id".to_string(), Value::U32(2)),
            ("tokenizer.ggml.eos_token_id".to_string(), Value::U32(4)),
        ])
    }

    #[test]
    fn llama3_and_phi_ends_of_turn_are_stop_tokens() {
        let tok = GgufTokenizer::from_gguf(&llama3_like(token_type::CONTROL)).unwrap();
        let id = |t: &str| tok.token_to_id(t).unwrap();
        // EOS (`<|eot_id|>` here) first and once, then `<|eom_id|>`, `<|end_of_text|>` and Phi's `<|end|>`.
        assert_eq!(tok.stop_tokens(), [id("<|eot_id|>"), id("<|eom_id|>"), id("<|end_of_text|>"), id("<|end|>")]);
        // Ordinary tokens and other control tokens do not end a reply.
        for other in ["end", "Ġturn", "<|begin_of_text|>", "<|start_header_id|>"] {
            assert!(!tok.stop_tokens().contains(&id(other)), "{other}");
        }
        // A row spelled `<|end|>` that is ordinary text is not one either.
        let tok = GgufTokenizer::from_gguf(&llama3_like(token_type::NORMAL)).unwrap();
        assert!(!tok.stop_tokens().contains(&tok.token_to_id("<|end|>").unwrap()));
        assert_eq!(tok.stop_tokens().len(), 3);
    }
}
