//! The library's error type: one enum whose variants carry the context a user needs to act (file, key, token id).

use std::path::PathBuf;

/// Every failure the library reports. Module-level errors convert into it with `?`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Load(#[from] crate::llm::LoadError),
    #[error(transparent)]
    Tokenizer(#[from] crate::llm::tokenizer::TokenizerError),
    #[error(transparent)]
    Template(#[from] crate::llm::chat::TemplateError),
    #[error(transparent)]
    Generate(#[from] crate::decode::GenerateError),
    #[error(transparent)]
    Constraint(#[from] crate::decode::constraint::ConstraintError),
    #[error(transparent)]
    Plan(#[from] crate::agent::PlanError),
    #[error(transparent)]
    Tool(#[from] crate::tools::ToolError),
    #[error("tensor operation failed: {0}")]
    Candle(#[from] candle_core::Error),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid input file {path}: {message}")]
    InvalidInput { path: PathBuf, message: String },
    #[error("{0}")]
    Usage(String),
}

/// Shorthand used across the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error with a sentence saying what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { context: context.into(), source }
    }
}
