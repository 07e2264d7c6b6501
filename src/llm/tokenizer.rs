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

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;
use serde_json::json;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::{AddedToken, DecoderWrapper, NormalizerWrapper, PreTokenizerWrapper};

use super::packed_strings::PackedStrings;

/// Errors building or using a tokenizer.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// A metadata key the tokenizer needs is absent.
    #[error("tokenizer metadata key '{0}' is missing")]
    MissingKey(String),
    /// A metadata key holds a value of the wrong type (an element of an array, when `index` is set).
    #[error("tokenizer metadata key '{key}'{} should be {expected}", .index.map(|i| format!(" (element {i})")).unwrap_or_default())]
    WrongType {
        /// The metadata key.
        key: String,
        /// The offending array element, if the key holds an array.
        index: Option<usize>,
        /// What the key should hold.
        expected: &'static str,
    },
    /// `tokenizer.ggml.model` names an algorithm this build does not implement.
    #[error("tokenizer type '{0}' is not supported (supported: gpt2, llama)")]
    UnsupportedModel(String),
    /// `tokenizer.ggml.pre` names a pre-tokenizer (split regex) this build does not know.
    #[error("byte-level BPE pre-tokenizer '{0}' is not supported (supported: qwen2, llama3/llama-bpe, gpt-2/default)")]
    UnsupportedPreTokenizer(String),
    /// A per-token array does not have one entry per token.
    #[error("tokenizer metadata key '{key}' has {found} entries, but there are {expected} tokens")]
    LengthMismatch {
        /// The metadata key.
        key: String,
        /// The number of tokens (`tokenizer.ggml.tokens`).
        expected: usize,
        /// The number of entries found.
        found: usize,
    },
    /// A special token id (BOS, EOS, UNK) points past the vocabulary.
    #[error("tokenizer metadata key '{key}' is token id {id}, outside the vocabulary of {vocab} tokens")]
    IdOutOfRange {
        /// The metadata key.
        key: String,
        /// The id it holds.
        id: u64,
        /// The number of tokens.
        vocab: usize,
    },
    /// An entry of `tokenizer.ggml.merges` is not two vocabulary tokens separated by a space.
    #[error("tokenizer merge #{index} '{merge}' is not two vocabulary tokens separated by one space")]
    BadMerge {
        /// Position in `tokenizer.ggml.merges` (its rank).
        index: usize,
        /// The merge as stored.
        merge: String,
    },
    /// Two rows of the vocabulary have the same text, so text cannot name one token.
    #[error("token text {text:?} appears twice in the vocabulary (ids {first} and {second})")]
    DuplicateToken {
        /// The token text.
        text: String,
        /// The id the text resolves to.
        first: u32,
        /// The other id with the same text.
        second: u32,
    },
    /// The `tokenizers` crate rejected the tokenizer we described.
    #[error("building the tokenizer failed: {0}")]
    Build(String),
    /// Encoding failed inside the `tokenizers` crate.
    #[error("encoding {chars} characters failed: {message}")]
    Encode {
        /// Length of the input, in characters.
        chars: usize,
        /// The library's message.
        message: String,
    },
    /// A token id is not a row of the vocabulary.
    #[error("token id {id} is outside the vocabulary of {vocab} tokens")]
    UnknownId {
        /// The id.
        id: u32,
        /// The number of tokens.
        vocab: usize,
    },
}

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

/// The pre-tokenizer split used by Qwen2 (`tokenizer.ggml.pre = qwen2`): GPT-4's, with single digits.
const QWEN2_SPLIT: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Llama 3's split (`llama3`, `llama-bpe`): GPT-4's, digits in groups of up to three.
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// GPT-2's split (`gpt-2`, `default`, or no `pre` key).
const GPT2_SPLIT: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Texts that end a reply in the chat formats we know, besides the model's EOS.
const END_OF_TURN_TEXTS: [&str; 4] = ["<|im_end|>", "<|endoftext|>", "<end_of_turn>", "<eos>"];

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

// ---------------------------------------------------------------------------------------------------------
// Metadata readers: every failure names the key (and the array element).

fn get<'a>(md: &'a HashMap<String, Value>, key: &str) -> Result<&'a Value, TokenizerError> {
    md.get(key).ok_or_else(|| TokenizerError::MissingKey(key.to_string()))
}

fn wrong(key: &str, index: Option<usize>, expected: &'static str) -> TokenizerError {
    TokenizerError::WrongType { key: key.to_string(), index, expected }
}

fn string_value<'a>(md: &'a HashMap<String, Value>, key: &str) -> Result<Option<&'a str>, TokenizerError> {
    match md.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(wrong(key, None, "a string")),
    }
}

fn array<'a>(md: &'a HashMap<String, Value>, key: &str, expected: &'static str) -> Result<&'a [Value], TokenizerError> {
    match get(md, key)? {
        Value::Array(items) => Ok(items),
        _ => Err(wrong(key, None, expected)),
    }
}

fn string_array(md: &HashMap<String, Value>, key: &str) -> Result<Vec<String>, TokenizerError> {
    array(md, key, "an array of strings")?
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::String(s) => Ok(s.clone()),
            _ => Err(wrong(key, Some(i), "a string")),
        })
        .collect()
}

fn number_array<T>(
    md: &HashMap<String, Value>,
    key: &str,
    expected: &'static str,
    convert: impl Fn(&Value) -> Option<T>,
) -> Result<Vec<T>, TokenizerError> {
    array(md, key, "an array of numbers")?
        .iter()
        .enumerate()
        .map(|(i, v)| convert(v).ok_or_else(|| wrong(key, Some(i), expected)))
        .collect()
}

/// Any integer type, as converters write ids and types with different widths.
fn as_i64(v: &Value) -> Option<i64> {
    match *v {
        Value::U8(x) => Some(x.into()),
        Value::I8(x) => Some(x.into()),
        Value::U16(x) => Some(x.into()),
        Value::I16(x) => Some(x.into()),
        Value::U32(x) => Some(x.into()),
        Value::I32(x) => Some(x.into()),
        Value::U64(x) => i64::try_from(x).ok(),
        Value::I64(x) => Some(x),
        _ => None,
    }
}

fn as_i32(v: &Value) -> Option<i32> {
    as_i64(v).and_then(|x| i32::try_from(x).ok())
}

fn as_f32(v: &Value) -> Option<f32> {
    match *v {
        Value::F32(x) => Some(x),
        Value::F64(x) => Some(x as f32),
        _ => as_i64(v).map(|x| x as f32),
    }
}

fn optional_bool(md: &HashMap<String, Value>, key: &str) -> Result<Option<bool>, TokenizerError> {
    match md.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(wrong(key, None, "a boolean")),
    }
}

/// A special token id. Negative values mean "none" (some converters write -1).
fn optional_id(md: &HashMap<String, Value>, key: &str, vocab: usize) -> Result<Option<u32>, TokenizerError> {
    let Some(value) = md.get(key) else {
        return Ok(None);
    };
    let id = as_i64(value).ok_or_else(|| wrong(key, None, "an integer token id"))?;
    if id < 0 {
        return Ok(None);
    }
    match u32::try_from(id) {
        Ok(id) if (id as usize) < vocab => Ok(Some(id)),
        _ => Err(TokenizerError::IdOutOfRange { key: key.to_string(), id: id as u64, vocab }),
    }
}

// ---------------------------------------------------------------------------------------------------------
// Pure helpers.

/// GPT-2's byte → printable character table: bytes that are printable map to themselves, the others (controls,
/// space, DEL, NBSP, soft hyphen) to U+0100 upwards in byte order. Byte-level BPE vocabularies are written in it.
pub fn gpt2_byte_to_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let code = if printable {
            u32::from(b)
        } else {
            next += 1;
            next - 1
        };
        // All codes are below U+0144, far from the surrogate range: the conversion cannot fail.
        table[b as usize] = char::from_u32(code).unwrap_or('\0');
    }
    table
}

/// SentencePiece merges derived from scores (GGUF `llama` vocabularies store scores, not merges).
///
/// SentencePiece's BPE encoder starts from characters and repeatedly merges the adjacent pair whose
/// concatenation is a vocabulary piece with the highest score (leftmost on ties). A BPE merge list reproduces
/// that exactly when it holds, for every mergeable piece, every way of splitting it into two mergeable pieces,
/// ranked by the merged piece's score (higher score = lower rank = merged earlier): whichever segmentation is
/// current, the pair the list ranks first is the pair SentencePiece would pick. Equal scores are ordered by
/// id, then by split point, so the result is deterministic. Only `mergeable` pieces take part (normal pieces:
/// SentencePiece never builds control, user-defined, unused or byte pieces by merging).
pub fn merges_from_scores(
    tokens: &[String],
    scores: &[f32],
    mergeable: impl Fn(usize) -> bool,
) -> Vec<(String, String)> {
    let mut index: HashMap<&str, u32, FxBuild> = HashMap::with_capacity_and_hasher(tokens.len(), FxBuild::default());
    for (id, token) in tokens.iter().enumerate() {
        if mergeable(id) {
            // The first row wins, as in the vocabulary map.
            index.entry(token.as_str()).or_insert(id as u32);
        }
    }
    // (score, merged id, left id, right id): ids instead of strings until the final order is known.
    let mut merges: Vec<(f32, u32, u32, u32)> = Vec::with_capacity(tokens.len() * 2);
    for (id, token) in tokens.iter().enumerate() {
        if !mergeable(id) || index.get(token.as_str()) != Some(&(id as u32)) {
            continue;
        }
        let score = scores.get(id).copied().unwrap_or(0.0);
        for (split, _) in token.char_indices().skip(1) {
            let (left, right) = token.split_at(split);
            if let Some(&l) = index.get(left) {
                if let Some(&r) = index.get(right) {
                    merges.push((score, id as u32, l, r));
                }
            }
        }
    }
    merges.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    merges.into_iter().map(|(_, _, l, r)| (tokens[l as usize].clone(), tokens[r as usize].clone())).collect()
}

/// FxHash (rustc's hasher): the merge derivation does millions of short-string lookups, where SipHash's DoS
/// resistance buys nothing (the keys come from the model file) and costs about half the time.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }
    fn write_u8(&mut self, b: u8) {
        self.write(&[b]);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxBuild = std::hash::BuildHasherDefault<FxHasher>;

/// Splits `pending` into the longest prefix that is complete UTF-8 (invalid bytes replaced by U+FFFD) and
/// the incomplete multi-byte sequence at its end, which is kept in `pending` for the next token's bytes.
fn take_complete_utf8(pending: &mut Vec<u8>) -> String {
    let mut out = String::new();
    let mut start = 0;
    loop {
        match std::str::from_utf8(&pending[start..]) {
            Ok(text) => {
                out.push_str(text);
                start = pending.len();
                break;
            }
            Err(e) => {
                let valid_end = start + e.valid_up_to();
                // `valid_up_to` guarantees this slice is UTF-8; the lossy call only avoids an unwrap.
                out.push_str(&String::from_utf8_lossy(&pending[start..valid_end]));
                match e.error_len() {
                    // Bytes that can never start or continue a character: replace them and go on.
                    Some(len) => {
                        out.push(char::REPLACEMENT_CHARACTER);
                        start = valid_end + len;
                    }
                    // A sequence cut short at the end: wait for more bytes.
                    None => {
                        start = valid_end;
                        break;
                    }
                }
            }
        }
    }
    pending.drain(..start);
    out
}

/// The bytes of every token. Byte-level BPE: undo the GPT-2 character mapping. SentencePiece: `▁` is a space
/// and `<0xXX>` is that byte. Control, user-defined and unused tokens stand for their text, as llama.cpp prints
/// them (Gemma stores its user-defined whitespace tokens with real spaces and newlines).
fn token_bytes_table(kind: TokenizerKind, tokens: &[String], types: &[i32]) -> PackedStrings {
    let char_to_byte: HashMap<char, u8> = gpt2_byte_to_char().iter().enumerate().map(|(b, &c)| (c, b as u8)).collect();
    tokens
        .iter()
        .zip(types)
        .map(|(token, &t)| {
            if matches!(t, token_type::CONTROL | token_type::USER_DEFINED | token_type::UNUSED) {
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
                        if let Some(b) = parse_byte_token(token) {
                            return vec![b];
                        }
                    }
                    token.replace('▁', " ").into_bytes()
                }
            }
        })
        .collect()
}

/// `<0x41>` → 0x41.
fn parse_byte_token(token: &str) -> Option<u8> {
    let hex = token.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

fn component<T: serde::de::DeserializeOwned>(what: &str, spec: serde_json::Value) -> Result<T, TokenizerError> {
    serde_json::from_value(spec).map_err(|e| TokenizerError::Build(format!("{what}: {e}")))
}

// ---------------------------------------------------------------------------------------------------------

impl GgufTokenizer {
    /// Builds the tokenizer from GGUF metadata (`tokenizer.ggml.*`).
    ///
    /// Measured on the 2-core dev machine (release build, under load): about 0.2–0.3 s for Qwen's 152k tokens
    /// and 151k merges, about 0.8–0.9 s for Gemma's 262k tokens (513k merges derived from scores, ~0.35 s of it).
    pub fn from_gguf(md: &HashMap<String, Value>) -> Result<Self, TokenizerError> {
        let model = string_value(md, "tokenizer.ggml.model")?
            .ok_or_else(|| TokenizerError::MissingKey("tokenizer.ggml.model".into()))?;
        let kind = match model {
            "gpt2" => TokenizerKind::Bpe,
            "llama" => TokenizerKind::SentencePiece,
            other => return Err(TokenizerError::UnsupportedModel(other.to_string())),
        };
        let tokens = string_array(md, "tokenizer.ggml.tokens")?;
        let types = match md.get("tokenizer.ggml.token_type") {
            Some(_) => number_array(md, "tokenizer.ggml.token_type", "an integer token type", as_i32)?,
            None => vec![token_type::NORMAL; tokens.len()],
        };
        if types.len() != tokens.len() {
            return Err(TokenizerError::LengthMismatch {
                key: "tokenizer.ggml.token_type".into(),
                expected: tokens.len(),
                found: types.len(),
            });
        }
        let n = tokens.len();
        let bos = optional_id(md, "tokenizer.ggml.bos_token_id", n)?;
        let eos = optional_id(md, "tokenizer.ggml.eos_token_id", n)?;
        let unk = optional_id(md, "tokenizer.ggml.unknown_token_id", n)?;
        // llama.cpp's defaults when the keys are absent: SentencePiece vocabularies add BOS and a space prefix.
        let spm = kind == TokenizerKind::SentencePiece;
        let add_bos = optional_bool(md, "tokenizer.ggml.add_bos_token")?.unwrap_or(spm);
        let add_space_prefix = optional_bool(md, "tokenizer.ggml.add_space_prefix")?.unwrap_or(spm);

        // Unused rows (Qwen's `[PAD…]`) stay out of the vocabulary, so encoding can never produce them.
        let mut vocab = Vocab::with_capacity(n);
        for (id, (token, &t)) in tokens.iter().zip(&types).enumerate() {
            if t == token_type::UNUSED {
                continue;
            }
            if let Some(&first) = vocab.get(token) {
                return Err(TokenizerError::DuplicateToken { text: token.clone(), first, second: id as u32 });
            }
            vocab.insert(token.clone(), id as u32);
        }

        let mut inner = match kind {
            TokenizerKind::Bpe => {
                let merges = string_array(md, "tokenizer.ggml.merges")?
                    .into_iter()
                    .enumerate()
                    .map(|(index, merge)| match merge.split_once(' ') {
                        Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok((a.to_string(), b.to_string())),
                        _ => Err(TokenizerError::BadMerge { index, merge }),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let pre = string_value(md, "tokenizer.ggml.pre")?.unwrap_or("default");
                let split = match pre {
                    "qwen2" => QWEN2_SPLIT,
                    "llama3" | "llama-bpe" | "llama-v3" => LLAMA3_SPLIT,
                    "gpt-2" | "gpt2" | "default" => GPT2_SPLIT,
                    other => return Err(TokenizerError::UnsupportedPreTokenizer(other.to_string())),
                };
                let bpe = BPE::builder()
                    .vocab_and_merges(vocab, merges)
                    .build()
                    .map_err(|e| TokenizerError::Build(format!("byte-level BPE model: {e}")))?;
                let mut inner = tokenizers::Tokenizer::new(bpe);
                // The split isolates words, numbers, punctuation runs and whitespace; ByteLevel then only maps
                // bytes to GPT-2 characters (its own regex off), as in Qwen2's tokenizer.json.
                let pre_tokenizer: PreTokenizerWrapper = component(
                    "pre-tokenizer",
                    json!({"type": "Sequence", "pretokenizers": [
                        {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated", "invert": false},
                        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}),
                )?;
                let decoder: DecoderWrapper = component(
                    "decoder",
                    json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}),
                )?;
                inner.with_pre_tokenizer(Some(pre_tokenizer));
                inner.with_decoder(Some(decoder));
                inner
            }
            TokenizerKind::SentencePiece => {
                let scores = number_array(md, "tokenizer.ggml.scores", "a number", as_f32)?;
                if scores.len() != n {
                    return Err(TokenizerError::LengthMismatch {
                        key: "tokenizer.ggml.scores".into(),
                        expected: n,
                        found: scores.len(),
                    });
                }
                let merges = merges_from_scores(&tokens, &scores, |id| types[id] == token_type::NORMAL);
                let has_byte_tokens = types.contains(&token_type::BYTE);
                let mut builder = BPE::builder().vocab_and_merges(vocab, merges).byte_fallback(has_byte_tokens);
                if let Some(unk) = unk {
                    builder = builder.unk_token(tokens[unk as usize].clone()).fuse_unk(true);
                }
                let bpe =
                    builder.build().map_err(|e| TokenizerError::Build(format!("SentencePiece BPE model: {e}")))?;
                let mut inner = tokenizers::Tokenizer::new(bpe);
                // No pre-tokenizer: SentencePiece sees the whole text, spaces escaped as `▁`.
                let mut normalizers = Vec::new();
                if add_space_prefix {
                    normalizers.push(json!({"type": "Prepend", "prepend": "▁"}));
                }
                normalizers.push(json!({"type": "Replace", "pattern": {"String": " "}, "content": "▁"}));
                let normalizer: NormalizerWrapper =
                    component("normalizer", json!({"type": "Sequence", "normalizers": normalizers}))?;
                let decoder: DecoderWrapper = component(
                    "decoder",
                    json!({"type": "Sequence", "decoders": [
                        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                        {"type": "ByteFallback"}, {"type": "Fuse"}]}),
                )?;
                inner
                    .with_normalizer(Some(normalizer))
                    .map_err(|e| TokenizerError::Build(format!("normalizer: {e}")))?;
                inner.with_decoder(Some(decoder));
                inner
            }
        };

        // Control and user-defined tokens are matched in the raw text before the model runs (as llama.cpp does),
        // so "<|im_start|>" in a rendered prompt is one token. Control tokens are special; user-defined ones are
        // text (Gemma's whitespace runs and HTML tags, Qwen's <tool_call>).
        let added = |wanted: i32| -> Vec<AddedToken> {
            tokens
                .iter()
                .zip(&types)
                .filter(|(_, &t)| t == wanted)
                .map(|(content, _)| AddedToken::from(content.clone(), wanted == token_type::CONTROL).normalized(false))
                .collect()
        };
        inner
            .add_special_tokens(added(token_type::CONTROL))
            .map_err(|e| TokenizerError::Build(format!("control tokens: {e}")))?;
        inner
            .add_tokens(added(token_type::USER_DEFINED))
            .map_err(|e| TokenizerError::Build(format!("user-defined tokens: {e}")))?;

        let bytes = token_bytes_table(kind, &tokens, &types);
        let texts: PackedStrings = tokens.iter().map(String::as_bytes).collect();
        Ok(Self { inner, kind, texts, types, bytes, bos, eos, add_bos })
    }

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

    /// Decodes ids to text, special tokens' text included: the exact inverse of [`encode`](Self::encode) (for
    /// vocabularies with `add_space_prefix`, the space that encoding prepended shows). Bytes that do not form
    /// valid UTF-8 (a cut multi-byte character) become U+FFFD; [`decode_bytes`](Self::decode_bytes) keeps them.
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        let bytes = self.decode_bytes(ids)?;
        Ok(match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// The concatenated bytes of `ids`.
    pub fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>, TokenizerError> {
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            bytes.extend_from_slice(self.bytes_of(id)?);
        }
        Ok(bytes)
    }

    fn bytes_of(&self, id: u32) -> Result<&[u8], TokenizerError> {
        self.bytes.get(id as usize).ok_or(TokenizerError::UnknownId { id, vocab: self.texts.len() })
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

    /// Tokens that end a reply: EOS, then whichever of `<|im_end|>`, `<|endoftext|>`, `<end_of_turn>` and `<eos>`
    /// the vocabulary has, without duplicates.
    pub fn stop_tokens(&self) -> Vec<u32> {
        let mut stops: Vec<u32> = self.eos.into_iter().collect();
        for id in END_OF_TURN_TEXTS.iter().filter_map(|text| self.token_to_id(text)) {
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

/// Incremental decoding for streaming: returns text as soon as it forms complete UTF-8 characters, so an emoji
/// spread over several byte tokens comes out whole.
pub struct TokenStream<'a> {
    tokenizer: &'a GgufTokenizer,
    pending: Vec<u8>,
}

impl<'a> TokenStream<'a> {
    /// A stream over `tokenizer`'s ids.
    pub fn new(tokenizer: &'a GgufTokenizer) -> Self {
        Self { tokenizer, pending: Vec::new() }
    }

    /// Adds a token; returns the newly completed text, if any. Bytes that can never become valid UTF-8 come
    /// out as U+FFFD; an incomplete character at the end waits for the next token.
    pub fn push(&mut self, id: u32) -> Result<Option<String>, TokenizerError> {
        self.pending.extend_from_slice(self.tokenizer.bytes_of(id)?);
        let text = take_complete_utf8(&mut self.pending);
        Ok((!text.is_empty()).then_some(text))
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
        assert_eq!(table[b'~' as usize], '~');
        assert_eq!(table[0xE9], 'é');
        assert_eq!(table[0], 'Ā');
        assert_eq!(table[b' ' as usize], 'Ġ');
        assert_eq!(table[b'\n' as usize], 'Ċ');
        assert_eq!(table[b'\t' as usize], 'ĉ');
        assert_eq!(table[0x7F], 'ġ');
        assert_eq!(table[0xAD], 'Ń');
    }

    #[test]
    fn merges_follow_scores() {
        let tokens: Vec<String> = ["a", "b", "c", "ab", "bc", "abc"].iter().map(|s| s.to_string()).collect();
        let scores = [0.0, 0.0, 0.0, -1.0, -0.5, -2.0];
        let merges = merges_from_scores(&tokens, &scores, |_| true);
        let names: Vec<String> = merges.iter().map(|(a, b)| format!("{a}+{b}")).collect();
        // bc (-0.5) before ab (-1.0) before the two ways to make abc (-2.0), split points in order.
        assert_eq!(names, ["b+c", "a+b", "a+bc", "ab+c"]);
    }

    #[test]
    fn merges_skip_pieces_that_are_not_mergeable() {
        let tokens: Vec<String> = ["▁", "x", "▁x", "<0x41>", "<ctl>", "▁<ctl>"].iter().map(|s| s.to_string()).collect();
        let scores = [0.0, 0.0, -1.0, 0.0, 0.0, 5.0];
        // Only normal pieces (0, 1, 2) take part: no merge builds the control-like piece 5 from piece 4.
        let merges = merges_from_scores(&tokens, &scores, |id| id <= 2);
        assert_eq!(merges, [("▁".to_string(), "x".to_string())]);
    }

    #[test]
    fn merges_split_on_characters_not_bytes() {
        let tokens: Vec<String> = ["é", "t", "ét", "▁", "▁ét"].iter().map(|s| s.to_string()).collect();
        let scores = [0.0, 0.0, -1.0, 0.0, -2.0];
        let names: Vec<String> =
            merges_from_scores(&tokens, &scores, |_| true).iter().map(|(a, b)| format!("{a}+{b}")).collect();
        assert_eq!(names, ["é+t", "▁+ét"]);
    }

    #[test]
    fn utf8_splitting_holds_back_incomplete_characters() {
        let crab = "🦀".as_bytes();
        let mut pending = b"ab".to_vec();
        pending.extend_from_slice(&crab[..2]);
        assert_eq!(take_complete_utf8(&mut pending), "ab");
        assert_eq!(pending, &crab[..2]);
        pending.extend_from_slice(&crab[2..]);
        assert_eq!(take_complete_utf8(&mut pending), "🦀");
        assert!(pending.is_empty());
        // An invalid byte is replaced, and a cut character after it is still held back.
        let mut pending = vec![b'x', 0xFF, b'y', 0xE6, 0x97];
        assert_eq!(take_complete_utf8(&mut pending), "x\u{FFFD}y");
        assert_eq!(pending, [0xE6, 0x97]);
    }

    #[test]
    fn byte_tokens_parse_only_in_their_exact_form() {
        assert_eq!(parse_byte_token("<0x0A>"), Some(b'\n'));
        assert_eq!(parse_byte_token("<0xff>"), Some(0xFF));
        assert_eq!(parse_byte_token("<0x100>"), None);
        assert_eq!(parse_byte_token("0x41"), None);
    }

    fn strings(items: &[&str]) -> Value {
        Value::Array(items.iter().map(|s| Value::String(s.to_string())).collect())
    }

    fn ints(items: &[i32]) -> Value {
        Value::Array(items.iter().map(|&i| Value::I32(i)).collect())
    }

    /// A byte-level BPE vocabulary: the 256 byte characters, a few merges, two control tokens, one unused row.
    fn tiny_bpe() -> HashMap<String, Value> {
        let mut tokens: Vec<String> = gpt2_byte_to_char().iter().map(|c| c.to_string()).collect();
        tokens
            .extend(["Ġw", "or", "orl", "Ġworl", "Ġworld", "<|im_end|>", "<|endoftext|>", "[PAD0]"].map(String::from));
        let mut types = vec![1; tokens.len()];
        let n = types.len();
        types[n - 3] = 3;
        types[n - 2] = 3;
        types[n - 1] = 5;
        let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
        HashMap::from([
            ("tokenizer.ggml.model".to_string(), Value::String("gpt2".into())),
            ("tokenizer.ggml.pre".to_string(), Value::String("qwen2".into())),
            ("tokenizer.ggml.tokens".to_string(), strings(&refs)),
            ("tokenizer.ggml.token_type".to_string(), ints(&types)),
            ("tokenizer.ggml.merges".to_string(), strings(&["Ġ w", "o r", "or l", "Ġw orl", "Ġworl d"])),
            ("tokenizer.ggml.eos_token_id".to_string(), Value::U32(n as u32 - 3)),
            ("tokenizer.ggml.bos_token_id".to_string(), Value::U32(n as u32 - 2)),
        ])
    }

    #[test]
    fn tiny_byte_level_bpe_encodes_merges_specials_and_raw_bytes() {
        let tok = GgufTokenizer::from_gguf(&tiny_bpe()).unwrap();
        let n = tok.vocab_size() as u32;
        let world = tok.token_to_id("Ġworld").unwrap();
        let ids = tok.encode("x world<|im_end|>\u{1}", false).unwrap();
        assert_eq!(ids, [u32::from(b'x'), world, n - 3, tok.token_to_id("ā").unwrap()]);
        assert_eq!(tok.decode(&ids).unwrap(), "x world<|im_end|>\u{1}");
        assert_eq!(tok.token_bytes(world).unwrap(), b" world");
        assert!(tok.is_unused(n - 1) && tok.token_to_id("[PAD0]").is_none());
        assert!(!tok.add_bos_by_default());
        assert_eq!(tok.stop_tokens(), [n - 3, n - 2]);
        assert!(matches!(tok.decode(&[n]), Err(TokenizerError::UnknownId { id, .. }) if id == n));
    }

    #[test]
    fn metadata_errors_name_the_key() {
        let mut md = tiny_bpe();
        md.remove("tokenizer.ggml.merges");
        assert!(
            matches!(GgufTokenizer::from_gguf(&md), Err(TokenizerError::MissingKey(k)) if k == "tokenizer.ggml.merges")
        );

        let mut md = tiny_bpe();
        md.insert("tokenizer.ggml.token_type".into(), ints(&[1, 1]));
        assert!(matches!(GgufTokenizer::from_gguf(&md), Err(TokenizerError::LengthMismatch { found: 2, .. })));

        let mut md = tiny_bpe();
        md.insert("tokenizer.ggml.eos_token_id".into(), Value::U32(1_000_000));
        assert!(matches!(GgufTokenizer::from_gguf(&md), Err(TokenizerError::IdOutOfRange { id: 1_000_000, .. })));

        let mut md = tiny_bpe();
        md.insert("tokenizer.ggml.merges".into(), strings(&["Ġ w", "orphan"]));
        assert!(matches!(GgufTokenizer::from_gguf(&md), Err(TokenizerError::BadMerge { index: 1, .. })));

        let mut md = tiny_bpe();
        md.insert("tokenizer.ggml.tokens".into(), Value::Array(vec![Value::String("a".into()), Value::U32(3)]));
        let err = GgufTokenizer::from_gguf(&md).unwrap_err();
        assert!(matches!(err, TokenizerError::WrongType { index: Some(1), .. }), "{err}");
        assert!(err.to_string().contains("'tokenizer.ggml.tokens' (element 1)"), "{err}");

        let mut md = tiny_bpe();
        md.insert("tokenizer.ggml.pre".into(), Value::String("starcoder".into()));
        assert!(
            matches!(GgufTokenizer::from_gguf(&md), Err(TokenizerError::UnsupportedPreTokenizer(p)) if p == "starcoder")
        );

        let mut md = tiny_bpe();
        md.insert("tokenizer.ggml.model".into(), Value::String("t5".into()));
        assert!(matches!(GgufTokenizer::from_gguf(&md), Err(TokenizerError::UnsupportedModel(m)) if m == "t5"));
    }

    /// A SentencePiece vocabulary: control tokens, byte tokens, a user-defined double space, scored pieces.
    fn tiny_spm(add_space_prefix: Option<bool>) -> HashMap<String, Value> {
        let mut tokens: Vec<String> =
            ["<pad>", "<eos>", "<bos>", "<unk>", "<end_of_turn>", "  "].map(String::from).to_vec();
        let mut types = vec![3, 3, 3, 3, 3, 4];
        let mut scores = vec![0.0f32; 6];
        for b in 0..=255u8 {
            tokens.push(format!("<0x{b:02X}>"));
            types.push(6);
            scores.push(0.0);
        }
        for (piece, score) in [("▁", -1.0), ("h", -2.0), ("i", -3.0), ("hi", -4.0), ("▁hi", -5.0), ("!", -6.0)] {
            tokens.push(piece.to_string());
            types.push(1);
            scores.push(score);
        }
        let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
        let mut md = HashMap::from([
            ("tokenizer.ggml.model".to_string(), Value::String("llama".into())),
            ("tokenizer.ggml.tokens".to_string(), strings(&refs)),
            ("tokenizer.ggml.token_type".to_string(), ints(&types)),
            ("tokenizer.ggml.scores".to_string(), Value::Array(scores.into_iter().map(Value::F32).collect())),
            ("tokenizer.ggml.bos_token_id".to_string(), Value::U32(2)),
            ("tokenizer.ggml.eos_token_id".to_string(), Value::U32(1)),
            ("tokenizer.ggml.unknown_token_id".to_string(), Value::U32(3)),
        ]);
        if let Some(prefix) = add_space_prefix {
            md.insert("tokenizer.ggml.add_space_prefix".into(), Value::Bool(prefix));
        }
        md
    }

    #[test]
    fn tiny_sentencepiece_merges_by_score_and_falls_back_to_bytes() {
        let tok = GgufTokenizer::from_gguf(&tiny_spm(Some(false))).unwrap();
        let id = |t: &str| tok.token_to_id(t).unwrap();
        assert_eq!(tok.kind(), TokenizerKind::SentencePiece);
        assert!(tok.add_bos_by_default(), "llama vocabularies add BOS unless told otherwise");
        let ids = tok.encode("hi hi  é<end_of_turn>", true).unwrap();
        // "é" is not a piece: its two UTF-8 bytes become byte tokens.
        let expected = [2, id("hi"), id("▁hi"), id("  "), id("<0xC3>"), id("<0xA9>"), 4];
        assert_eq!(ids, expected);
        assert_eq!(tok.decode(&ids[1..]).unwrap(), "hi hi  é<end_of_turn>");
        assert_eq!(tok.token_bytes(id("▁hi")).unwrap(), b" hi");
        assert_eq!(tok.token_bytes(id("<0xC3>")).unwrap(), [0xC3]);
        // BOS already written (by a chat template): not added twice.
        assert_eq!(tok.encode("<bos>hi", true).unwrap(), [2, id("hi")]);
        assert_eq!(tok.stop_tokens(), [1, 4]);
    }

    #[test]
    fn sentencepiece_space_prefix_defaults_on_as_in_llama_cpp() {
        let tok = GgufTokenizer::from_gguf(&tiny_spm(None)).unwrap();
        assert_eq!(tok.encode("hi", false).unwrap(), [tok.token_to_id("▁hi").unwrap()]);
    }
}
