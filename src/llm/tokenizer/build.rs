//! Building a tokenizer from GGUF metadata: the vocabulary, the BPE model (merges as stored, or derived from
//! scores), the pre-tokenizer or normalizer and decoder around it, and the control and user-defined tokens.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;
use serde_json::json;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::{AddedToken, DecoderWrapper, NormalizerWrapper, PreTokenizerWrapper};

use super::bytes::token_bytes_table;
use super::merges::merges_from_scores;
use super::metadata::{as_f32, as_i32, number_array, optional_bool, optional_id, string_array, string_value};
use super::pre::PreTokenizer;
use super::{token_type, GgufTokenizer, TokenizerError, TokenizerKind};
use crate::llm::packed_strings::PackedStrings;

fn component<T: serde::de::DeserializeOwned>(what: &str, spec: serde_json::Value) -> Result<T, TokenizerError> {
    serde_json::from_value(spec).map_err(|e| TokenizerError::Build(format!("{what}: {e}")))
}

impl GgufTokenizer {
    /// Builds the tokenizer from GGUF metadata (`tokenizer.ggml.*`).
    ///
    /// A large vocabulary takes a noticeable part of a second, on the path of a process's first generation: every
    /// token's text and the merge list are built, and a SentencePiece vocabulary (Gemma's) derives its merges from
    /// the scores first, a good share of its time (docs/performance.md, "Load + first token").
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
        // Byte-level BPE needs a pre-tokenizer we know, by name (never guessed: a wrong split gives wrong ids).
        let pre = match kind {
            TokenizerKind::Bpe => {
                let name = string_value(md, "tokenizer.ggml.pre")?.unwrap_or("default");
                Some(PreTokenizer::by_name(name).ok_or_else(|| TokenizerError::UnsupportedPreTokenizer(name.into()))?)
            }
            TokenizerKind::SentencePiece => None,
        };
        // llama.cpp's defaults when the keys are absent: SentencePiece vocabularies add BOS and a space prefix;
        // byte-level BPE adds BOS for the pre-tokenizers that say so (Llama 3's).
        let spm = kind == TokenizerKind::SentencePiece;
        let add_bos = optional_bool(md, "tokenizer.ggml.add_bos_token")?.unwrap_or(pre.map_or(spm, |p| p.add_bos));
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
                let pre = pre.ok_or_else(|| TokenizerError::Build("byte-level BPE without a pre-tokenizer".into()))?;
                let bpe = BPE::builder()
                    .vocab_and_merges(vocab, merges)
                    .ignore_merges(pre.ignore_merges)
                    .build()
                    .map_err(|e| TokenizerError::Build(format!("byte-level BPE model: {e}")))?;
                let mut inner = tokenizers::Tokenizer::new(bpe);
                // The splits isolate words, numbers, punctuation runs and whitespace; ByteLevel then only maps
                // bytes to GPT-2 characters (its own regex off), as in Qwen2's tokenizer.json.
                let pre_tokenizer: PreTokenizerWrapper =
                    component(&format!("pre-tokenizer '{}'", pre.name), pre.spec())?;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::tokenizer::gpt2_byte_to_char;

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
        md.insert("tokenizer.ggml.pre".into(), Value::String("deepseek-llm".into()));
        let err = GgufTokenizer::from_gguf(&md).unwrap_err();
        assert!(matches!(&err, TokenizerError::UnsupportedPreTokenizer(p) if p == "deepseek-llm"), "{err}");
        assert!(err.to_string().contains("smollm"), "the message lists what is supported: {err}");

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
