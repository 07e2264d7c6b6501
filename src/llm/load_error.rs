//! Why a model file could not be loaded: errors that name the file, the key or the tensor. Apart from the loader,
//! so the crate's error type can name them without depending on the loader.

use std::path::PathBuf;

/// Why a model file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot open model file {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a GGUF file (it starts with {found:?}, expected \"GGUF\"); is it a safetensors or partial download?")]
    BadMagic { path: PathBuf, found: String },
    #[error("{path}: cannot read the GGUF header: {message} (the file may be truncated or corrupt; `tandem models verify` checks cached models)")]
    BadHeader { path: PathBuf, message: String },
    #[error("{path}: tensor '{tensor}' is {type_name} (ggml type {number}), a type Tandem does not run; use a file of F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 or the K-quants Q2_K to Q6_K (Q4_K_M is the usual choice), or requantize this one with llama.cpp's llama-quantize")]
    UnsupportedTensorType { path: PathBuf, tensor: String, type_name: &'static str, number: u32 },
    #[error("{path}: metadata key '{key}' is missing")]
    MissingKey { path: PathBuf, key: String },
    #[error("{path}: metadata key '{key}' should be {expected}")]
    WrongKeyType { path: PathBuf, key: String, expected: &'static str },
    #[error("{path}: architecture '{architecture}' is not supported (supported: {supported})")]
    UnsupportedArchitecture { path: PathBuf, architecture: String, supported: String },
    #[error("{path}: tensor '{name}' is missing")]
    MissingTensor { path: PathBuf, name: String },
    #[error("{path}: tensor '{name}' ends at byte {end} but the file has only {file_size} bytes (truncated download? run `tandem models verify`)")]
    Truncated { path: PathBuf, name: String, end: u64, file_size: u64 },
    #[error("{path}: tensor '{name}': {message}")]
    BadTensor { path: PathBuf, name: String, message: String },
}
