//! Errors building or using a tokenizer.

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
    #[error(
        "byte-level BPE pre-tokenizer '{0}' (tokenizer.ggml.pre) is not supported; supported: {supported}",
        supported = super::pre::PreTokenizer::supported()
    )]
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
