//! Tokenizers built from GGUF metadata (`tokenizer.ggml.*`): byte-level BPE (`gpt2`, Qwen) and
//! SentencePiece-style BPE with byte fallback (`llama`, Gemma).
//!
//! There is no `tokenizer.json` offline, so we describe the tokenizer to the `tokenizers` crate as a JSON
//! document built from the metadata (the format is stable across its versions, unlike its builder API).
//! Decoding goes through our own id → bytes table: it is exact by construction and lets streaming hold back
//! incomplete UTF-8 sequences.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;
use serde_json::json;

/// Errors building or using a tokenizer.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("tokenizer metadata key '{0}' is missing")]
    MissingKey(String),
    #[error("tokenizer metadata key '{key}' should be {expected}")]
    WrongType { key: String, expected: &'static str },
    #[error("tokenizer type '{0}' is not supported (supported: gpt2, llama)")]
    UnsupportedModel(String),
    #[error("tokenizer metadata is inconsistent: {0}")]
    Inconsistent(String),
    #[error("token id {id} is outside the vocabulary of {vocab} tokens")]
    UnknownId { id: u32, vocab: usize },
    #[error("tokenizer: {0}")]
    Library(String),
}

/// Which algorithm the tokenizer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerKind {
    /// Byte-level BPE (GPT-2 style; Qwen).
    Bpe,
    /// SentencePiece-style BPE with `▁` for spaces and byte fallback (Llama, Gemma).
    SentencePiece,
}

/// GGUF token types (`tokenizer.ggml.token_type`).
mod token_type {
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
    pub const UNUSED: i32 = 5;
    pub const BYTE: i32 = 6;
}

/// The pre-tokenizer split used by Qwen2 (`tokenizer.ggml.pre = qwen2`) and GPT-4-style vocabularies.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A tokenizer with the metadata the rest of the engine needs (stop tokens, token bytes for grammars).
pub struct GgufTokenizer {
    inner: tokenizers::Tokenizer,
    kind: TokenizerKind,
    tokens: Vec<String>,
    types: Vec<i32>,
    bytes: Vec<Vec<u8>>,
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
}

fn get<'a>(md: &'a HashMap<String, Value>, key: &str) -> Result<&'a Value, TokenizerError> {
    md.get(key).ok_or_else(|| TokenizerError::MissingKey(key.to_string()))
}

fn string_array(md: &HashMap<String, Value>, key: &str) -> Result<Vec<String>, TokenizerError> {
    let wrong = || TokenizerError::WrongType { key: key.to_string(), expected: "an array of strings" };
    match get(md, key)? {
        Value::Array(items) => items.iter().map(|v| v.to_string().map(|s| s.clone()).map_err(|_| wrong())).collect(),
        _ => Err(wrong()),
    }
}

fn number_array<T>(md: &HashMap<String, Value>, key: &str, convert: impl Fn(&Value) -> Option<T>) -> Result<Vec<T>, TokenizerError> {
    let wrong = || TokenizerError::WrongType { key: key.to_string(), expected: "an array of numbers" };
    match get(md, key)? {
        Value::Array(items) => items.iter().map(|v| convert(v).ok_or_else(wrong)).collect(),
        _ => Err(wrong()),
    }
}

fn optional_id(md: &HashMap<String, Value>, key: &str) -> Option<u32> {
    md.get(key).and_then(|v| v.to_u32().ok().or_else(|| v.to_i32().ok().map(|i| i as u32)))
}

fn optional_bool(md: &HashMap<String, Value>, key: &str) -> Option<bool> {
    md.get(key).and_then(|v| v.to_bool().ok())
}

fn as_i32(v: &Value) -> Option<i32> {
    v.to_i32().ok().or_else(|| v.to_u32().ok().map(|u| u as i32)).or_else(|| v.to_u8().ok().map(i32::from))
}

fn as_f32(v: &Value) -> Option<f32> {
    v.to_f32().ok().or_else(|| v.to_f64().ok().map(|f| f as f32))
}

/// GPT-2's byte → printable character table (bytes that are printable map to themselves, the rest to 256+n).
pub fn gpt2_byte_to_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let code = if printable {
            b as u32
        } else {
            next += 1;
            next - 1
        };
        table[b as usize] = char::from_u32(code).unwrap_or('\0');
    }
    table
}

/// SentencePiece merges derived from scores: every token that splits into two vocabulary tokens yields a
/// merge, ranked by the merged token's score (higher first). SentencePiece's BPE repeatedly merges the
/// adjacent pair whose merged piece scores highest, which is what a BPE merge list in that order reproduces.
pub fn merges_from_scores(tokens: &[String], scores: &[f32], mergeable: impl Fn(usize) -> bool) -> Vec<(String, String)> {
    let index: HashMap<&str, usize> = tokens.iter().enumerate().map(|(i, t)| (t.as_str(), i)).collect();
    let mut merges: Vec<(f32, usize, usize, usize)> = Vec::new();
    for (id, token) in tokens.iter().enumerate() {
        if !mergeable(id) || token.chars().nth(1).is_none() {
            continue;
        }
        for (split, _) in token.char_indices().skip(1) {
            let (left, right) = token.split_at(split);
            if let (Some(&l), Some(&r)) = (index.get(left), index.get(right)) {
                if mergeable(l) && mergeable(r) {
                    merges.push((scores.get(id).copied().unwrap_or(0.0), id, l, r));
                }
            }
        }
    }
    merges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    merges.into_iter().map(|(_, _, l, r)| (tokens[l].clone(), tokens[r].clone())).collect()
}

impl GgufTokenizer {
    /// Builds the tokenizer from GGUF metadata.
    pub fn from_gguf(md: &HashMap<String, Value>) -> Result<Self, TokenizerError> {
        let model = match get(md, "tokenizer.ggml.model")? {
            Value::String(s) => s.clone(),
            _ => return Err(TokenizerError::WrongType { key: "tokenizer.ggml.model".into(), expected: "a string" }),
        };
        let tokens = string_array(md, "tokenizer.ggml.tokens")?;
        let types = match md.get("tokenizer.ggml.token_type") {
            Some(_) => number_array(md, "tokenizer.ggml.token_type", as_i32)?,
            None => vec![1; tokens.len()],
        };
        if types.len() != tokens.len() {
            return Err(TokenizerError::Inconsistent(format!("{} tokens but {} token types", tokens.len(), types.len())));
        }
        let kind = match model.as_str() {
            "gpt2" => TokenizerKind::Bpe,
            "llama" => TokenizerKind::SentencePiece,
            other => return Err(TokenizerError::UnsupportedModel(other.to_string())),
        };
        let is_added = |t: i32| t == token_type::CONTROL || t == token_type::USER_DEFINED;
        let added_tokens: Vec<serde_json::Value> = tokens
            .iter()
            .zip(&types)
            .enumerate()
            .filter(|(_, (_, &t))| is_added(t))
            .map(|(id, (content, &t))| {
                json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false,
                       "normalized": false, "special": t == token_type::CONTROL})
            })
            .collect();
        let vocab: serde_json::Map<String, serde_json::Value> = tokens
            .iter()
            .zip(&types)
            .enumerate()
            .filter(|(_, (_, &t))| t != token_type::UNUSED)
            .map(|(id, (tok, _))| (tok.clone(), json!(id)))
            .collect();
        let spec = match kind {
            TokenizerKind::Bpe => {
                let merges: Vec<serde_json::Value> = string_array(md, "tokenizer.ggml.merges")?
                    .iter()
                    .map(|m| match m.split_once(' ') {
                        Some((a, b)) => Ok(json!([a, b])),
                        None => Err(TokenizerError::Inconsistent(format!("merge '{m}' is not two tokens"))),
                    })
                    .collect::<Result<_, _>>()?;
                json!({
                    "version": "1.0", "truncation": null, "padding": null, "added_tokens": added_tokens,
                    "normalizer": null,
                    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                        {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated", "invert": false},
                        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]},
                    "post_processor": null,
                    "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
                    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                              "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                              "ignore_merges": false, "vocab": vocab, "merges": merges}
                })
            }
            TokenizerKind::SentencePiece => {
                let scores = number_array(md, "tokenizer.ggml.scores", as_f32)?;
                let mergeable = |id: usize| types.get(id).is_some_and(|&t| t == 1);
                let merges: Vec<serde_json::Value> =
                    merges_from_scores(&tokens, &scores, mergeable).into_iter().map(|(a, b)| json!([a, b])).collect();
                let unk = optional_id(md, "tokenizer.ggml.unknown_token_id").and_then(|id| tokens.get(id as usize));
                let prepend = optional_bool(md, "tokenizer.ggml.add_space_prefix").unwrap_or(false);
                let mut normalizers = Vec::new();
                if prepend {
                    normalizers.push(json!({"type": "Prepend", "prepend": "▁"}));
                }
                normalizers.push(json!({"type": "Replace", "pattern": {"String": " "}, "content": "▁"}));
                json!({
                    "version": "1.0", "truncation": null, "padding": null, "added_tokens": added_tokens,
                    "normalizer": {"type": "Sequence", "normalizers": normalizers},
                    "pre_tokenizer": null, "post_processor": null,
                    "decoder": {"type": "Sequence", "decoders": [
                        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                        {"type": "ByteFallback"}, {"type": "Fuse"}]},
                    "model": {"type": "BPE", "dropout": null, "unk_token": unk, "continuing_subword_prefix": null,
                              "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true,
                              "ignore_merges": false, "vocab": vocab, "merges": merges}
                })
            }
        };
        let inner: tokenizers::Tokenizer =
            serde_json::from_value(spec).map_err(|e| TokenizerError::Library(format!("building the tokenizer: {e}")))?;
        let bytes = token_bytes_table(kind, &tokens, &types);
        Ok(Self {
            inner,
            kind,
            bos: optional_id(md, "tokenizer.ggml.bos_token_id").filter(|&id| (id as usize) < tokens.len()),
            eos: optional_id(md, "tokenizer.ggml.eos_token_id").filter(|&id| (id as usize) < tokens.len()),
            add_bos: optional_bool(md, "tokenizer.ggml.add_bos_token").unwrap_or(false),
            tokens,
            types,
            bytes,
        })
    }

    /// Encodes text; special tokens written in the text (e.g. `<|im_start|>`) become their single ids.
    pub fn encode(&self, text: &str, add_bos: bool) -> Result<Vec<u32>, TokenizerError> {
        let encoding = self.inner.encode(text, false).map_err(|e| TokenizerError::Library(e.to_string()))?;
        let mut ids = Vec::with_capacity(encoding.len() + 1);
        if add_bos {
            ids.extend(self.bos);
        }
        ids.extend_from_slice(encoding.get_ids());
        Ok(ids)
    }

    /// Whether the model expects a BOS token before the prompt (`tokenizer.ggml.add_bos_token`).
    pub fn add_bos_by_default(&self) -> bool {
        self.add_bos && self.bos.is_some()
    }

    /// Decodes ids to text, special tokens included. Invalid UTF-8 (a cut multi-byte character) becomes U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        let mut bytes = Vec::new();
        for &id in ids {
            bytes.extend_from_slice(self.bytes_of(id)?);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn bytes_of(&self, id: u32) -> Result<&[u8], TokenizerError> {
        self.bytes.get(id as usize).map(Vec::as_slice).ok_or(TokenizerError::UnknownId { id, vocab: self.tokens.len() })
    }

    /// Number of token rows in the metadata.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// The exact bytes token `id` stands for (special tokens: their text).
    pub fn token_bytes(&self, id: u32) -> Option<Vec<u8>> {
        self.bytes.get(id as usize).cloned()
    }

    /// Every token's bytes, indexed by id.
    pub fn all_token_bytes(&self) -> &[Vec<u8>] {
        &self.bytes
    }

    /// The token's text as stored in the vocabulary.
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// Control or user-defined tokens (`<|im_start|>`, `<end_of_turn>`, …).
    pub fn is_special(&self, id: u32) -> bool {
        self.types.get(id as usize).is_some_and(|&t| t == token_type::CONTROL || t == token_type::USER_DEFINED)
    }

    /// Control tokens only (never plain text, unlike some user-defined whitespace tokens).
    pub fn is_control(&self, id: u32) -> bool {
        self.types.get(id as usize).is_some_and(|&t| t == token_type::CONTROL)
    }

    /// Rows that stand for nothing (Qwen's `[PAD…]` rows): never to be generated.
    pub fn is_unused(&self, id: u32) -> bool {
        self.types.get(id as usize).is_some_and(|&t| t == token_type::UNUSED)
    }

    /// The id of a token given by its vocabulary text.
    pub fn token_to_id(&self, text: &str) -> Option<u32> {
        self.inner.token_to_id(text)
    }

    /// Beginning-of-sequence token.
    pub fn bos_token(&self) -> Option<u32> {
        self.bos
    }

    /// End-of-sequence token.
    pub fn eos_token(&self) -> Option<u32> {
        self.eos
    }

    /// Tokens that end a reply: EOS plus the end-of-turn tokens chat models use.
    pub fn stop_tokens(&self) -> Vec<u32> {
        let mut stops: Vec<u32> = self.eos.into_iter().collect();
        for text in ["<|im_end|>", "<|endoftext|>", "<end_of_turn>", "<eos>"] {
            if let Some(id) = self.token_to_id(text) {
                if !stops.contains(&id) {
                    stops.push(id);
                }
            }
        }
        stops
    }

    /// The algorithm.
    pub fn kind(&self) -> TokenizerKind {
        self.kind
    }
}

/// The bytes of every token. Byte-level BPE: undo the GPT-2 character mapping. SentencePiece: `▁` is a space
/// and `<0xXX>` is that byte. Control and user-defined tokens stand for their text.
fn token_bytes_table(kind: TokenizerKind, tokens: &[String], types: &[i32]) -> Vec<Vec<u8>> {
    let char_to_byte: HashMap<char, u8> =
        gpt2_byte_to_char().iter().enumerate().map(|(b, &c)| (c, b as u8)).collect();
    tokens
        .iter()
        .zip(types)
        .map(|(token, &t)| {
            if t == token_type::CONTROL || t == token_type::USER_DEFINED || t == token_type::UNUSED {
                return token.as_bytes().to_vec();
            }
            match kind {
                TokenizerKind::Bpe => token
                    .chars()
                    .map(|c| char_to_byte.get(&c).copied())
                    .collect::<Option<Vec<u8>>>()
                    .unwrap_or_else(|| token.as_bytes().to_vec()),
                TokenizerKind::SentencePiece => {
                    if t == token_type::BYTE {
                        if let Some(b) = token.strip_prefix("<0x").and_then(|h| h.strip_suffix('>')).and_then(|h| u8::from_str_radix(h, 16).ok()) {
                            return vec![b];
                        }
                    }
                    token.replace('▁', " ").into_bytes()
                }
            }
        })
        .collect()
}

/// Incremental decoding for streaming: returns text as soon as it forms complete UTF-8 characters.
pub struct TokenStream<'a> {
    tokenizer: &'a GgufTokenizer,
    pending: Vec<u8>,
}

impl<'a> TokenStream<'a> {
    /// A stream over `tokenizer`'s ids.
    pub fn new(tokenizer: &'a GgufTokenizer) -> Self {
        Self { tokenizer, pending: Vec::new() }
    }

    /// Adds a token; returns the newly completed text, if any.
    pub fn push(&mut self, id: u32) -> Result<Option<String>, TokenizerError> {
        self.pending.extend_from_slice(self.tokenizer.bytes_of(id)?);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            // An incomplete sequence at the end waits for more bytes; an invalid one is flushed lossily.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.pending.len(),
        };
        if valid == 0 {
            return Ok(None);
        }
        let rest = self.pending.split_off(valid);
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending = rest;
        Ok(Some(text))
    }

    /// Flushes whatever is left (an incomplete character becomes U+FFFD).
    pub fn finish(&mut self) -> Result<Option<String>, TokenizerError> {
        if self.pending.is_empty() {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        Ok(Some(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_table_is_a_bijection_with_printable_bytes_kept() {
        let table = gpt2_byte_to_char();
        let unique: std::collections::HashSet<char> = table.iter().copied().collect();
        assert_eq!(unique.len(), 256);
        assert_eq!(table[b'A' as usize], 'A');
        assert_eq!(table[b' ' as usize], 'Ġ');
        assert_eq!(table[b'\n' as usize], 'Ċ');
    }

    #[test]
    fn merges_follow_scores() {
        let tokens: Vec<String> = ["a", "b", "c", "ab", "bc", "abc"].iter().map(|s| s.to_string()).collect();
        let scores = [0.0, 0.0, 0.0, -1.0, -0.5, -2.0];
        let merges = merges_from_scores(&tokens, &scores, |_| true);
        let names: Vec<String> = merges.iter().map(|(a, b)| format!("{a}+{b}")).collect();
        // bc (-0.5) before ab (-1.0) before the two ways to make abc (-2.0).
        assert_eq!(names, ["b+c", "a+b", "a+bc", "ab+c"]);
    }
}
