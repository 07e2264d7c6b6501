//! Models outside the manifest: a `.gguf` file given by path (hashed once; the hash is kept in a sidecar under
//! `<cache>/external/` and trusted while the file's size and mtime are unchanged), a file kept in the cache under
//! an id of the user's choosing (`tandem models add`), and `hf:OWNER/REPO/FILE.gguf`, downloaded from the Hugging
//! Face hub into the cache under an id made from the repository and file name.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::cache::partial_of;
use super::error::io;
use super::{hub, split, stamp, ModelStore, ResolvedModel, StoreError};
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

/// `hf:OWNER/REPO/FILE.gguf` split into the repository, the file, and the cache id `owner--repo--file` (for a
/// part of a split model, `FILE` without its `-00001-of-00003`: the id names the whole model).
pub fn parse_hub_name(spec: &str) -> Result<(String, String, String), StoreError> {
    let bad = || StoreError::BadHubName(spec.to_string());
    let rest = spec.strip_prefix(HUB_PREFIX).ok_or_else(bad)?;
    let (repo, file) = rest.rsplit_once('/').ok_or_else(bad)?;
    let parts: Vec<&str> = repo.split('/').collect();
    if parts.len() != 2 || parts.iter().any(|p| p.is_empty()) || !file.to_ascii_lowercase().ends_with(".gguf") {
        return Err(bad());
    }
    let model = split::parse(file).map(|name| name.stem).unwrap_or_else(|| file.to_string());
    let id = format!("{}--{}--{}", parts[0], parts[1], id_from_file_name(Path::new(&model))).to_ascii_lowercase();
    let id: String = id.chars().map(|c| if id_char(c) { c } else { '-' }).collect();
    Ok((repo.to_string(), file.to_string(), id))
}

/// The id a file in the cache is kept under: `<id>.gguf`, or the first part of a split model (its other parts
/// belong to that id and name none of their own).
fn kept_id(file_name: &str) -> Option<String> {
    match split::parse(file_name) {
        Some(name) => (name.part == 1).then_some(name.stem),
        None => file_name.strip_suffix(".gguf").map(str::to_string),
    }
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
            .filter_map(|e| e.file_name().to_str().and_then(kept_id))
            .filter(|id| valid_id(id) && self.manifest.get(id).is_none())
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// An id kept in the cache outside the manifest, with its hash; `None` when there is no such file.
    pub(super) fn resolve_added(&self, id: &str, reporter: &dyn Reporter) -> Result<Option<ResolvedModel>, StoreError> {
        if !valid_id(id) || self.manifest.get(id).is_some() {
            return Ok(None);
        }
        let Some(path) = self.layout.kept(id) else {
            return Ok(None);
        };
        let beside = path == self.layout.model(id);
        let sha = self.known_sha(&self.layout.stamp(id, &path), &path, !beside, reporter)?;
        Ok(Some(ResolvedModel { path, id: Some(id.to_string()), sha256: Some(sha) }))
    }

    /// Copies `source` into the cache as `<id>.gguf` (id: `id`, else made from the file name), hashed on the way;
    /// returns the id, the new path and the SHA-256. A part of a split model brings every part, kept as
    /// `<id>-00001-of-0000N.gguf` … (the id made from the name before the part number); the path returned is the
    /// first part's, the hash too. Refuses a file that is not GGUF, a split model with a part missing, an id the
    /// manifest uses and an id already in the cache.
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
        let split = source.file_name().and_then(|n| n.to_str()).and_then(split::parse);
        let sources: Vec<PathBuf> = match &split {
            Some(name) => name.all().into_iter().map(|part| source.with_file_name(part)).collect(),
            None => vec![source.to_path_buf()],
        };
        if let Some(missing) = sources.iter().find(|part| !part.is_file()) {
            return Err(StoreError::MissingFile(missing.clone()));
        }
        let named = split.as_ref().map(|name| source.with_file_name(&name.stem)).unwrap_or_else(|| source.into());
        let id = id.map(str::to_string).unwrap_or_else(|| id_from_file_name(&named));
        let targets = self.free_targets(&id, split.as_ref())?;
        let mut parts = Vec::new();
        for (from, target) in sources.iter().zip(targets) {
            let partial = partial_of(&target);
            if let Err(e) = std::fs::copy(from, &partial) {
                remove_partials(&parts);
                let _ = std::fs::remove_file(&partial);
                return Err(io(format!("copying {} to {}", from.display(), partial.display()))(e));
            }
            parts.push((partial, target));
        }
        self.install_parts(&id, &parts, reporter).map(|(path, sha)| (id, path, sha))
    }

    /// The cache files a new model `id` goes to (`split`: each part's, the first first), refused where the manifest
    /// uses the id or the cache has it already; the cache directory is created.
    fn free_targets(&self, id: &str, split: Option<&split::SplitName>) -> Result<Vec<PathBuf>, StoreError> {
        if !valid_id(id) {
            return Err(StoreError::BadId(id.to_string()));
        }
        if self.manifest.get(id).is_some() {
            return Err(StoreError::IdTaken { id: id.to_string(), place: "the manifest".into() });
        }
        if let Some(kept) = self.layout.kept(id) {
            return Err(StoreError::IdTaken { id: id.to_string(), place: kept.display().to_string() });
        }
        std::fs::create_dir_all(self.layout.root())
            .map_err(io(format!("creating {}", self.layout.root().display())))?;
        Ok(match split {
            Some(name) => {
                (1..=name.count).map(|part| self.layout.root().join(split::part_name(id, part, name.count))).collect()
            }
            None => vec![self.layout.model(id)],
        })
    }

    /// Hashes each `(partial, target)` and renames it to its target, the first part last (so the model is found
    /// only once every part is in place), and writes the first part's stamp; returns the first target and its
    /// SHA-256. On failure no partial is left.
    fn install_parts(
        &self,
        id: &str,
        parts: &[(PathBuf, PathBuf)],
        reporter: &dyn Reporter,
    ) -> Result<(PathBuf, String), StoreError> {
        let mut first_sha = None;
        for (index, (partial, _)) in parts.iter().enumerate() {
            let label = match parts.len() {
                1 => format!("hashing {id}"),
                count => format!("hashing {id}, part {} of {count}", index + 1),
            };
            let size = std::fs::metadata(partial).map_err(io(format!("reading {}", partial.display())));
            let hashed = size.and_then(|size| self.hash_with_progress(partial, size.len(), &label, reporter));
            let (_, sha) = hashed.inspect_err(|_| remove_partials(parts))?;
            first_sha.get_or_insert(sha);
        }
        for (partial, target) in parts.iter().rev() {
            std::fs::rename(partial, target)
                .map_err(io(format!("renaming {} to {}", partial.display(), target.display())))
                .inspect_err(|_| remove_partials(parts))?;
        }
        let (first, sha) = (parts[0].1.clone(), first_sha.expect("at least one part"));
        let beside = first == self.layout.model(id);
        if let Err(e) = stamp::write(&self.layout.stamp(id, &first), &first, &sha, !beside) {
            tracing::debug!(id, error = %e, "could not write the hash stamp");
        }
        Ok((first, sha))
    }

    /// `hf:OWNER/REPO/FILE.gguf`: the cached copy when there is one, else downloaded from the hub into the cache
    /// (for a part of a split model, every part). Offline (or with the hub switched off) a model not yet cached is
    /// an error that says what to do.
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
        let split = split::parse(&file);
        let files = split.as_ref().map(split::SplitName::all).unwrap_or_else(|| vec![file.clone()]);
        let targets = self.free_targets(&id, split.as_ref())?;
        let hub_dir = self.layout.hub();
        let mut parts = Vec::new();
        for (index, (file, target)) in files.iter().zip(targets).enumerate() {
            let of = if files.len() > 1 { format!(", part {} of {}", index + 1, files.len()) } else { String::new() };
            reporter.message(&format!("downloading {repo}/{file} from the Hugging Face hub as {id}{of}"));
            let partial = partial_of(&target);
            let blob = hub::download(&repo, file, &hub_dir, &format!("downloading {id}{of}"), reporter)
                .map_err(|message| StoreError::Hub { repo: repo.clone(), file: file.clone(), message });
            let moved = blob.and_then(|blob| {
                std::fs::rename(&blob, &partial)
                    .or_else(|_| std::fs::copy(&blob, &partial).map(|_| ()))
                    .map_err(io(format!("copying {}", blob.display())))
            });
            if let Err(e) = moved {
                remove_partials(&parts);
                return Err(e);
            }
            parts.push((partial, target));
        }
        let result = self.install_parts(&id, &parts, reporter);
        let _ = std::fs::remove_dir_all(hub::repo_folder(&hub_dir, &repo));
        let (path, sha) = result?;
        Ok(ResolvedModel { path, id: Some(id), sha256: Some(sha) })
    }

    /// `models pull hf:OWNER/REPO/FILE.gguf`: as [`ModelStore::resolve_hub`], and with `force` the cached copy (every
    /// part of a split one) is removed first, so it is downloaded again.
    pub(super) fn pull_hub(&self, spec: &str, force: bool, reporter: &dyn Reporter) -> Result<PathBuf, StoreError> {
        let (_, _, id) = parse_hub_name(spec)?;
        if force {
            for file in self.layout.kept_files(&id) {
                stamp::remove(&self.layout.stamp(&id, &file));
                if file.exists() {
                    std::fs::remove_file(&file).map_err(io(format!("removing {}", file.display())))?;
                }
            }
        }
        self.resolve_hub(spec, reporter).map(|resolved| resolved.path)
    }
}

/// Removes the partial files of `parts` (best effort: a failed pull or copy leaves none behind).
fn remove_partials(parts: &[(PathBuf, PathBuf)]) {
    for (partial, _) in parts {
        let _ = std::fs::remove_file(partial);
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
