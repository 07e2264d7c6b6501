//! Helpers shared by the integration tests: locating real models (pulled through the store on first use)
//! and writing tiny synthetic models.
#![allow(dead_code)]

pub mod tiny;

use std::path::PathBuf;

use tandem::progress::SilentReporter;
use tandem::store::ModelStore;

/// The path of a real model from the manifest, pulling it into the cache if needed (the store's lock file
/// makes parallel tests wait for one pull). Panics with the store's message when it cannot be had: a
/// real-model test never skips silently.
pub fn real_model(id: &str) -> PathBuf {
    let store = ModelStore::open().unwrap_or_else(|e| panic!("opening the model store: {e}"));
    match store.resolve(id, &SilentReporter) {
        Ok(resolved) => resolved.path,
        Err(e) => panic!("real model {id} is not available: {e}"),
    }
}
