//! Helpers shared by the integration tests: locating real models (pulled through the store on first use).
#![allow(dead_code)]

pub mod tiny;

use std::path::PathBuf;

/// The path of a real model from the manifest, pulling it into the cache if needed.
/// Panics with a clear message when it cannot be had: a real-model test never skips silently.
pub fn real_model(id: &str) -> PathBuf {
    // Temporary until the store lands: the cache layout is `<cache>/<id>.gguf`.
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache"));
    let path = base.join("tandem/models").join(format!("{id}.gguf"));
    assert!(path.exists(), "model {id} not found at {}", path.display());
    path
}
