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
    /// The command line asks for something that cannot be done as asked: a missing or conflicting argument, a
    /// flag value out of range, a feature this build lacks. Exit code 2.
    #[error("{0}")]
    Usage(String),
    /// A run cannot be found, resumed or locked, or its log lacks what resuming needs.
    #[error("{0}")]
    Run(String),
    /// A model cannot serve the request: no chat template, one sequence only, no such device.
    #[error("{0}")]
    Model(String),
    /// The agent's models produced something that cannot be used (an invalid plan or call), or a human stopped
    /// a step.
    #[error("{0}")]
    Agent(String),
    /// A run was stopped at a safe point before its end (the server is shutting down, the run waits for a
    /// decision, or it was cancelled): its log ends at the last whole event, and it can be resumed from there.
    #[error("{0}")]
    Interrupted(String),
    /// A benchmark's data, records or peer program are missing, unreadable or failed.
    #[error("{0}")]
    Bench(String),
    /// A value could not be written as JSON (a bug: please report it with the command that showed it).
    #[error("encoding {what} as JSON: {source}")]
    Encode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// Something that should not happen did (a bug: please report it with the command and `-vv` log).
    #[error("internal error: {0}")]
    Internal(String),
}

/// Shorthand used across the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error with a sentence saying what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { context: context.into(), source }
    }

    /// Wraps a JSON encoding error with what was being encoded.
    pub fn encode(what: &'static str) -> impl FnOnce(serde_json::Error) -> Self {
        move |source| Error::Encode { what, source }
    }

    /// The process exit code for this error: 2 for usage errors (what the user asked for, including input files
    /// that cannot be used), 1 for everything else. A run that stops before finishing is not an error: it exits 3
    /// (see `commands::Outcome`).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) | Error::InvalidInput { .. } => 2,
            _ => 1,
        }
    }
}
