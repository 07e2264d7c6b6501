//! Errors compiling or applying a constraint, and how llguidance's compile errors become precise ones. Kept apart
//! from the engine so the crate's error type can name them without depending on the engine.

use super::spec::ConstraintKind;

/// Errors compiling or applying a constraint.
#[derive(Debug, thiserror::Error)]
pub enum ConstraintError {
    /// The schema uses JSON Schema keywords llguidance does not implement; we refuse rather than drop them.
    #[error("the JSON Schema uses {} the grammar engine does not support: {}; remove {} or express the constraint as a Lark grammar (output is never left unconstrained)",
        if keywords.len() == 1 { "a keyword" } else { "keywords" }, keywords.join(", "), if keywords.len() == 1 { "it" } else { "them" })]
    UnsupportedKeyword {
        /// The keywords, as written in the schema (e.g. `uniqueItems`).
        keywords: Vec<String>,
    },
    /// A `"format"` value llguidance does not know.
    #[error("the JSON Schema asks for string format \"{format}\", which the grammar engine does not know; remove it or use a \"pattern\"")]
    UnsupportedFormat {
        /// The format name.
        format: String,
    },
    /// The schema, grammar or regex does not compile.
    #[error("the {kind} does not compile: {message}")]
    Compile {
        /// What was being compiled.
        kind: ConstraintKind,
        /// llguidance's message.
        message: String,
    },
    /// The grammar rejected a committed token (the loop committed something the mask forbids).
    #[error("the grammar rejected token {token} ({piece:?}) at output position {position}: {message}; output so far: {text:?}")]
    Rejected {
        /// The token id.
        token: u32,
        /// Its text.
        piece: String,
        /// Tokens committed before it.
        position: usize,
        /// Output so far.
        text: String,
        /// Why.
        message: String,
    },
    /// A token id outside the token table (wider than the logits).
    #[error("token id {token} is outside the grammar engine's token table of {n_tokens} rows")]
    TokenOutOfRange {
        /// The token id.
        token: u32,
        /// Rows in the table.
        n_tokens: usize,
    },
    /// No token can continue the output (should not happen with a sound grammar).
    #[error("the grammar allows no token at output position {position}; output so far: {text:?}")]
    DeadEnd {
        /// Tokens committed so far.
        position: usize,
        /// Output so far.
        text: String,
    },
    /// Any other failure inside the grammar engine mid-generation.
    #[error("grammar engine error at output position {position}: {message}; output so far: {text:?}")]
    Matcher {
        /// Tokens committed so far.
        position: usize,
        /// Output so far.
        text: String,
        /// llguidance's message.
        message: String,
    },
    /// The token budget ran out before the output matched the grammar: the partial output is not valid.
    #[error("reached the limit of {max_tokens} tokens before the output matched the grammar; raise the token limit. Output so far: {text:?}")]
    MaxTokens {
        /// The budget.
        max_tokens: usize,
        /// Output so far.
        text: String,
    },
    /// Building the token table or the parser factory failed.
    #[error("building the grammar engine's token table failed: {0}")]
    TokenTable(String),
}

/// Maps an llguidance compile error (its full `{:#}` chain) to a precise error.
pub(crate) fn classify_compile_error(kind: ConstraintKind, message: String) -> ConstraintError {
    if let Some(rest) = message.split_once("Unimplemented keys:").map(|(_, rest)| rest) {
        return ConstraintError::UnsupportedKeyword { keywords: parse_key_list(rest) };
    }
    if message.contains("oneOf constraints are not supported") {
        return ConstraintError::UnsupportedKeyword { keywords: vec!["oneOf".into()] };
    }
    if let Some(rest) = message.split_once("Unknown format:").map(|(_, rest)| rest) {
        let format = rest.split(['\n', '"']).next().unwrap_or("").trim().to_string();
        return ConstraintError::UnsupportedFormat { format };
    }
    ConstraintError::Compile { kind, message }
}

/// Parses llguidance's `["uniqueItems", "contains"]` (a Rust `Debug` list) into names.
fn parse_key_list(rest: &str) -> Vec<String> {
    let list = match (rest.find('['), rest.find(']')) {
        (Some(open), Some(close)) if open < close => &rest[open + 1..close],
        _ => rest.lines().next().unwrap_or(""),
    };
    let keys: Vec<String> =
        list.split(',').map(|k| k.trim().trim_matches('"').to_string()).filter(|k| !k.is_empty()).collect();
    if keys.is_empty() {
        vec![rest.trim().to_string()]
    } else {
        keys
    }
}
