//! llguidance's view of our tokenizer: the token trie built from exact token bytes, padded to the logits width,
//! and canonical tokenization of forced bytes through our own tokenizer.
//!
//! We implement toktrie's `TokenizerEnv` ourselves instead of using `toktrie_hf_tokenizers`, which pins
//! `tokenizers` 0.21 while candle 0.11 pulls 0.23.

use std::sync::Arc;

use llguidance::toktrie::{TokRxInfo, TokTrie, TokenId, TokenizerEnv, INVALID_TOKEN};

use super::ConstraintError;
use crate::llm::tokenizer::GgufTokenizer;

/// The token table the grammar engine works on.
pub(crate) struct TokenEnvironment {
    trie: TokTrie,
    tokenizer: Arc<GgufTokenizer>,
    /// One bit per row (same layout as llguidance's `SimpleVob`): set for rows that may never be emitted
    /// under a grammar — `[PAD…]`/unused rows and logit rows past the tokenizer's vocabulary.
    never: Vec<u32>,
    /// The non-zero words of `never` as (word index, bits): a handful for Qwen's 271 `[PAD…]` rows.
    never_words: Vec<(usize, u32)>,
    /// The tokenizer's stop tokens (end of turn / end of sequence); allowed only where the grammar accepts.
    stops: Vec<TokenId>,
}

impl TokenEnvironment {
    /// Builds the table with `n_rows` rows (≥ the tokenizer's vocabulary; the logits width).
    pub(crate) fn new(tokenizer: Arc<GgufTokenizer>, n_rows: usize) -> Result<Self, ConstraintError> {
        let vocab = tokenizer.vocab_size();
        let n = n_rows.max(vocab);
        let n_u32 = u32::try_from(n)
            .ok()
            .filter(|&n| n < INVALID_TOKEN)
            .ok_or_else(|| ConstraintError::TokenTable(format!("{n} token rows do not fit llguidance's 32-bit ids")))?;
        let mut never = vec![0u32; n.div_ceil(32)];
        let mut words: Vec<Vec<u8>> = Vec::with_capacity(n);
        for id in 0..n_u32 {
            let bytes =
                if (id as usize) < vocab && !tokenizer.is_unused(id) { tokenizer.token_bytes(id) } else { None };
            let word = match bytes {
                // An empty word is never in the trie, so a mask never allows it; `never` also stops the
                // cheap validation path from accepting it (a zero-byte token would pass every grammar).
                None => Vec::new(),
                Some([]) => Vec::new(),
                // Control tokens (`<|im_start|>`, `<end_of_turn>`, Gemma's `<unusedN>`) get llguidance's special
                // marker: plain-text grammar rules can never produce them.
                Some(b) if tokenizer.is_control(id) => {
                    let mut marked = Vec::with_capacity(b.len() + 1);
                    marked.push(TokTrie::SPECIAL_TOKEN_MARKER);
                    marked.extend_from_slice(b);
                    marked
                }
                Some(b) => b.to_vec(),
            };
            if word.is_empty() {
                never[id as usize / 32] |= 1 << (id % 32);
            }
            words.push(word);
        }
        let stops: Vec<TokenId> = tokenizer.stop_tokens().into_iter().filter(|&id| id < n_u32).collect();
        // Without any stop token the grammar can still end by completing (the loop stops there); INVALID_TOKEN
        // keeps llguidance from treating some real row as end-of-sequence.
        let mut info = TokRxInfo::new(n_u32, stops.first().copied().unwrap_or(INVALID_TOKEN));
        info.tok_bos = tokenizer.bos_token();
        let trie = TokTrie::from(&info, &words);
        let trie = if stops.is_empty() { trie } else { trie.with_eos_tokens(&stops) };
        let never_words = never.iter().enumerate().filter(|(_, &w)| w != 0).map(|(i, &w)| (i, w)).collect();
        Ok(Self { trie, tokenizer, never, never_words, stops })
    }

    /// Rows in the table (the logits width).
    pub(crate) fn n_tokens(&self) -> usize {
        self.trie.vocab_size()
    }

    /// Whether `token` may never be emitted under any grammar (padding, unused rows, out of range).
    pub(crate) fn is_never(&self, token: TokenId) -> bool {
        self.never.get(token as usize / 32).is_none_or(|w| w & (1 << (token % 32)) != 0)
    }

    /// Rows that may never be emitted, as (word index, bits) in `SimpleVob` layout.
    pub(crate) fn never_words(&self) -> &[(usize, u32)] {
        &self.never_words
    }

    /// The stop tokens the grammar knows as end-of-sequence.
    pub(crate) fn stops(&self) -> &[TokenId] {
        &self.stops
    }

    /// Text of `tokens`, for error messages (our tokenizer's decoding; the trie's if an id is unknown to it).
    pub(crate) fn text(&self, tokens: &[TokenId]) -> String {
        self.tokenizer.decode(tokens).unwrap_or_else(|_| self.trie.decode_str(tokens))
    }

    /// The bytes of one token as text, for error messages.
    pub(crate) fn piece(&self, token: TokenId) -> String {
        match self.tokenizer.token_bytes(token) {
            Some(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            None => format!("<row {token}>"),
        }
    }
}

impl TokenizerEnv for TokenEnvironment {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    /// Canonical tokenization of forced bytes, so that fast-forwarded tokens are the ones the model would
    /// have seen in training. Text naming a control token (`<|im_end|>` inside a JSON string) must stay
    /// text, so such splits — and byte strings that are not UTF-8 — fall back to greedy trie tokenization.
    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        match std::str::from_utf8(s) {
            Ok(text) => match self.tokenizer.encode(text, false) {
                Ok(ids) if ids.iter().all(|&id| !self.tokenizer.is_control(id) && !self.is_never(id)) => ids,
                _ => self.trie.greedy_tokenize(s),
            },
            Err(_) => self.trie.greedy_tokenize(s),
        }
    }
}
