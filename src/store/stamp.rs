//! The `.verified` sidecar: what a full SHA-256 check saw (size, mtime, hash), so that later loads trust the file
//! without rehashing it for as long as its size and modification time are unchanged. `verify` always rehashes.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// The sidecar's content (JSON).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stamp {
    /// File size when hashed.
    pub size: u64,
    /// Modification time when hashed, in nanoseconds since the Unix epoch.
    pub mtime_ns: u128,
    /// The hash that was found.
    pub sha256: String,
    /// The model file the stamp is about (recorded for files outside the cache, whose stamp is not beside them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
}

fn size_and_mtime(path: &Path) -> std::io::Result<(u64, u128)> {
    let meta = std::fs::metadata(path)?;
    let mtime = meta.modified()?.duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    Ok((meta.len(), mtime))
}

/// Records, in `stamp_file`, that `model` as it is now hashes to `sha256`; `record_path` stores the model's absolute
/// path too (for a stamp kept away from its file). Written to a temporary name and renamed, so a reader never sees
/// half a stamp.
pub fn write(stamp_file: &Path, model: &Path, sha256: &str, record_path: bool) -> std::io::Result<()> {
    let (size, mtime_ns) = size_and_mtime(model)?;
    let path = if record_path { Some(std::path::absolute(model)?) } else { None };
    let stamp = Stamp { size, mtime_ns, sha256: sha256.to_string(), path };
    let text = serde_json::to_string(&stamp).map_err(std::io::Error::other)?;
    if let Some(parent) = stamp_file.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut tmp = stamp_file.as_os_str().to_os_string();
    tmp.push(format!(".tmp{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, stamp_file)
}

/// Whether `stamp_file` vouches that `model`, unchanged since (same size and mtime), hashes to `sha256`.
pub fn matches(stamp_file: &Path, model: &Path, sha256: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(stamp_file) else {
        return false;
    };
    let Ok(stamp) = serde_json::from_str::<Stamp>(&text) else {
        return false;
    };
    if let Some(recorded) = &stamp.path {
        let Ok(now) = std::path::absolute(model) else {
            return false;
        };
        if *recorded != now {
            return false;
        }
    }
    match size_and_mtime(model) {
        Ok((size, mtime_ns)) => stamp.size == size && stamp.mtime_ns == mtime_ns && stamp.sha256 == sha256,
        Err(_) => false,
    }
}

/// The hash `stamp_file` records for `model`, when the stamp is about this file (its recorded path, if any) as it
/// is now (same size and mtime); `None` otherwise.
pub fn vouched(stamp_file: &Path, model: &Path) -> Option<String> {
    let stamp: Stamp = serde_json::from_str(&std::fs::read_to_string(stamp_file).ok()?).ok()?;
    matches(stamp_file, model, &stamp.sha256).then_some(stamp.sha256)
}

/// Removes a stamp (after a failed verification); a missing stamp is fine.
pub fn remove(stamp_file: &Path) {
    let _ = std::fs::remove_file(stamp_file);
}
