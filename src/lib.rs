//! Tandem: a planner–executor agent on local GGUF models (candle for tensors, llguidance for grammars).
//!
//! The library holds everything testable; `src/main.rs` only parses the command line and maps errors to exit codes.

pub mod agent;
pub mod bench;
pub mod children;
pub mod cli;
pub mod commands;
pub mod decode;
pub mod engine;
pub mod error;
pub mod kernels;
pub mod llm;
pub mod memory;
pub mod panics;
pub mod progress;
pub mod serve;
pub mod settings;
pub mod store;
pub mod tools;

pub use error::{Error, Result};
