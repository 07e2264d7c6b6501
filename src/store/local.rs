//! Models outside the manifest: a `.gguf` file given by path (hashed once; the hash is kept in a sidecar under
//! `<cache>/external/` and trusted while the file's size and mtime are unchanged), a file kept in the cache under
//! an id of the user's choosing (`tandem models add`), and `hf:OWNER/REPO/FILE.gguf`, downloaded from the Hugging
//! Face hub into the cache under an id made from the repository and file name.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::error::io;
use super::{hub, stamp, ModelStore, ResolvedModel, StoreError};
use crate::progress::Reporter;

/// The prefix that marks a hub name: `hf:OWNER/REPO/FILE.gguf`.
pub const HUB_PREFIX: &str = "hf:";

/// A character an id may hold: letters, digits, `.`, `-`, `_`.
fn id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')
}

/// Whether `id` is usable as a file name in the cache (the manifest's rule).
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && !id.starts_with('.') && id.chars().all(id_char)
}

/// The id a file gets when `models add` is not given one: its name without `.gguf`, lower-cased, with anything but
/// letters, digits, `.`, `-` and `_` turned into `-`.
pub fn id_from_file_name(path: &Path) -> String {
    let stem = path.file_name().and_then(|n| n.to_str()).unwrap_or("model");
    let stem = stem.strip_suffix(".gguf").or_else(|| stem.strip_suffix(".GGUF")).unwrap_or(stem);
    let id: String = stem.chars().map(|c| if id_char(c) { c.to_ascii_lowercase() } else { '-' }).collect();
    id.trim_start_matches('.').to_string()
}

/// `hf:OWNER/REPO/FILE.gguf` split into the repository, the file, and the cache id `owner--repo--file`.
pub fn parse_hub_name(spec: &str) -> Result<(String, String, String), StoreError> {
    let bad = || StoreError::BadHubName(spec.to_string());
    let rest = spec.strip_prefix(HUB_PREFIX).ok_or_else(bad)?;
    let (repo, file) = rest.rsplit_once('/').ok_or_else(bad)?;
    let parts: Vec<&str> = repo.split('/').collect();
    if parts.len() != 2 || parts.iter().any(|p| p.is_empty()) || !file.to_ascii_lowercase().ends_with(".gguf") {
        return Err(bad());
    }
    let id = format!("{}--{}--{}", parts[0], parts[1], id_from_file_name(Path::new(file))).to_ascii_lowercase();
    let id: String = id.chars().map(|c| if id_char(c) { c } else { '-' }).collect();
    Ok((repo.to_string(), file.to_string(), id))
}

fn is_gguf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic)).is_ok()
        && &magic == b"GGUF"
}

impl ModelStore {
    /// A model given by path: the file as it is, with its SHA-256 (from the sidecar when the file is unchanged since
    /// it was last hashed, else hashed now and the sidecar written).
    pub(super) fn resolve_path(&self, path: &Path, reporter: &dyn Reporter) -> Result<ResolvedModel, StoreError> {
        if !path.is_file() {
            return Err(StoreError::MissingFile(path.to_path_buf()));
        }
        let absolute = std::path::absolute(path).map_err(io(format!("resolving {}", path.display())))?;
        let key = hex::encode(&Sha256::digest(absolute.to_string_lossy().as_bytes())[..8]);
        let stamp_file = self.layout.root().join("external").join(format!("path-{key}.verified"));
        let sha = self.known_sha(&stamp_file, path, true, reporter)?;
        Ok(ResolvedModel { path: path.to_path_buf(), id: None, sha256: Some(sha) })
    }

    /// The file's SHA-256, from `stamp_file` when it vouches for the file as it is now, else by hashing it (and
    /// writing the stamp, best effort).
    fn known_sha(
        &self,
        stamp_file: &Path,
        path: &Path,
        record_path: bool,
        reporter: &dyn Reporter,
    ) -> Result<String, StoreError> {
        if let Some(sha) = stamp::vouched(stamp_file, path) {
            return Ok(sha);
        }
        let size = std::fs::metadata(path).map_err(io(format!("reading {}", path.display())))?.len();
        let (_, sha) = self.hash_with_progress(path, size, &format!("hashing {}", path.display()), reporter)?;
        if let Err(e) = stamp::write(stamp_file, path, &sha, record_path) {
            tracing::debug!(stamp = %stamp_file.display(), error = %e, "could not write the hash stamp");
        }
        Ok(sha)
    }

    /// The ids of files in the cache that the manifest does not list (added with `models add` or pulled by hub
    /// name), sorted.
    pub fn added_ids(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.layout.root()) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".gguf")).map(str::to_string))
            .filter(|id| valid_id(id) && self.manifest.get(id).is_none())
            .collect();
        ids.sort();
        ids
    }

    /// An id kept in the cache outside the manifest, with its hash; `None` when there is no such file.
    pub(super) fn resolve_added(&self, id: &str, reporter: &dyn Reporter) -> Result<Option<ResolvedModel>, StoreError> {
        let path = self.layout.model(id);
        if !valid_id(id) || self.manifest.get(id).is_some() || !path.is_file() {
            return Ok(None);
        }
        let sha = self.known_sha(&self.layout.stamp(id, &path), &path, false, reporter)?;
        Ok(Some(ResolvedModel { path, id: Some(id.to_string()), sha256: Some(sha) }))
    }

    /// Copies `source` into the cache as `<id>.gguf` (id: `id`, else made from the file name), hashed on the way;
    /// returns the id, the new path and the SHA-256. Refuses a file that is not GGUF, an id the manifest uses and an
    /// id already in the cache.
    pub fn add(
        &self,
        source: &Path,
        id: Option<&str>,
        reporter: &dyn Reporter,
    ) -> Result<(String, PathBuf, String), StoreError> {
        if !source.is_file() {
            return Err(StoreError::MissingFile(source.to_path_buf()));
        }
        if !is_gguf(source) {
            return Err(StoreError::NotGguf(source.to_path_buf()));
        }
        let id = id.map(str::to_string).unwrap_or_else(|| id_from_file_name(source));
        if !valid_id(&id) {
            return Err(StoreError::BadId(id));
        }
        if self.manifest.get(&id).is_some() {
            return Err(StoreError::IdTaken { id: id.clone(), place: "the manifest".into() });
        }
        let target = self.layout.model(&id);
        if target.exists() {
            return Err(StoreError::IdTaken { id, place: target.display().to_string() });
        }
        std::fs::create_dir_all(self.layout.root())
            .map_err(io(format!("creating {}", self.layout.root().display())))?;
        let partial = self.layout.partial(&id);
        std::fs::copy(source, &partial).map_err(io(format!(
            "copying {} to {}",
            source.display(),
            partial.display()
        )))?;
        self.install_local(&id, &partial, reporter).map(|(path, sha)| (id, path, sha))
    }

    /// Hashes `<id>.gguf.partial`, renames it to `<id>.gguf` and writes its stamp.
    fn install_local(
        &self,
        id: &str,
        partial: &Path,
        reporter: &dyn Reporter,
    ) -> Result<(PathBuf, String), StoreError> {
        let size = std::fs::metadata(partial).map_err(io(format!("reading {}", partial.display())))?.len();
        let hashed = self.hash_with_progress(partial, size, &format!("hashing {id}"), reporter);
        let (_, sha) = hashed.inspect_err(|_| {
            let _ = std::fs::remove_file(partial);
        })?;
        let target = self.layout.model(id);
        std::fs::rename(partial, &target).map_err(io(format!(
            "renaming {} to {}",
            partial.display(),
            target.display()
        )))?;
        if let Err(e) = stamp::write(&self.layout.stamp(id, &target), &target, &sha, false) {
            tracing::debug!(id, error = %e, "could not write the hash stamp");
        }
        Ok((target, sha))
    }

    /// `hf:OWNER/REPO/FILE.gguf`: the cached copy when there is one, else downloaded from the hub into the cache.
    /// Offline (or with the hub switched off) a model not yet cached is an error that says what to do.
    pub(super) fn resolve_hub(&self, spec: &str, reporter: &dyn Reporter) -> Result<ResolvedModel, StoreError> {
        let (repo, file, id) = parse_hub_name(spec)?;
        if let Some(resolved) = self.resolve_added(&id, reporter)? {
            return Ok(resolved);
        }
        let offline = if self.try_hub { hub::unavailable() } else { Some("switched off") };
        if let Some(reason) = offline {
            return Err(StoreError::HubOffline { spec: spec.to_string(), reason: reason.to_string() });
        }
        std::fs::create_dir_all(self.layout.root())
            .map_err(io(format!("creating {}", self.layout.root().display())))?;
        let _lock = super::lock::PullLock::acquire(&self.layout.lock(&id), || {
            reporter.message(&format!("another process is pulling {id}; waiting for it"))
        })?;
        if let Some(resolved) = self.resolve_added(&id, reporter)? {
            return Ok(resolved); // another process pulled it while we waited for the lock
        }
        let hub_dir = self.layout.hub();
        reporter.message(&format!("downloading {repo}/{file} from the Hugging Face hub as {id}"));
        let blob = hub::download(&repo, &file, &hub_dir, &format!("downloading {id}"), reporter)
            .map_err(|message| StoreError::Hub { repo: repo.clone(), file: file.clone(), message })?;
        let partial = self.layout.partial(&id);
        let moved = std::fs::rename(&blob, &partial)
            .or_else(|_| std::fs::copy(&blob, &partial).map(|_| ()))
            .map_err(io(format!("copying {}", blob.display())));
        let result = moved.and_then(|()| self.install_local(&id, &partial, reporter));
        let _ = std::fs::remove_dir_all(hub::repo_folder(&hub_dir, &repo));
        let (path, sha) = result?;
        Ok(ResolvedModel { path, id: Some(id), sha256: Some(sha) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_names_split_into_repository_file_and_id() {
        let (repo, file, id) = parse_hub_name("hf:Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf").unwrap();
        assert_eq!((repo.as_str(), file.as_str()), ("Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf"));
        assert_eq!(id, "qwen--qwen3-0.6b-gguf--qwen3-0.6b-q8_0");
        assert!(valid_id(&id));
        for bad in ["hf:model.gguf", "hf:a/b", "hf:a/b/c.bin", "hf:/b/c.gguf", "hf:a/b/c/d.gguf", "Qwen/x/y.gguf"] {
            let err = parse_hub_name(bad).unwrap_err();
            assert!(err.to_string().contains("hf:OWNER/REPO/FILE.gguf"), "{bad}: {err}");
        }
    }

    #[test]
    fn ids_from_file_names_are_cache_safe() {
        assert_eq!(
            id_from_file_name(Path::new("/m/Llama-3.2-1B-Instruct-Q4_K_M.gguf")),
            "llama-3.2-1b-instruct-q4_k_m"
        );
        assert_eq!(id_from_file_name(Path::new("my model (v2).GGUF")), "my-model--v2-");
        assert_eq!(id_from_file_name(Path::new(".hidden.gguf")), "hidden");
    }
}
