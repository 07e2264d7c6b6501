//! SHA-256 of files and streams, and the sidecar that remembers a verified file so it is not rehashed on every load.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use sha2::{Digest, Sha256};

/// A writer that hashes and counts what passes through it.
pub struct HashingWriter<W: Write> {
    inner: W,
    hasher: Sha256,
    written: u64,
}

impl<W: Write> HashingWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self { inner, hasher: Sha256::new(), written: 0 }
    }
    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }
    /// The inner writer and the lower-case hex digest.
    pub fn finish(self) -> (W, String) {
        (self.inner, hex::encode(self.hasher.finalize()))
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Hashes a file, calling `progress` with the bytes read after each chunk.
pub fn sha256_file(path: &Path, mut progress: impl FnMut(u64)) -> std::io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 4 << 20];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        progress(n as u64);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// What a verification saw: the file's size and modification time, and its hash.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VerifiedStamp {
    pub size: u64,
    pub mtime_ns: u128,
    pub sha256: String,
}

/// The sidecar path next to a model file.
pub fn stamp_path(model: &Path) -> PathBuf {
    let mut name = model.file_name().unwrap_or_default().to_os_string();
    name.push(".verified");
    model.with_file_name(name)
}

fn size_and_mtime(path: &Path) -> std::io::Result<(u64, u128)> {
    let meta = std::fs::metadata(path)?;
    let mtime = meta.modified()?.duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    Ok((meta.len(), mtime))
}

/// Records that `model` (as it is now) has hash `sha256`.
pub fn write_stamp(model: &Path, sha256: &str) -> std::io::Result<()> {
    let (size, mtime_ns) = size_and_mtime(model)?;
    let stamp = VerifiedStamp { size, mtime_ns, sha256: sha256.to_string() };
    let text = serde_json::to_string(&stamp).map_err(std::io::Error::other)?;
    std::fs::write(stamp_path(model), text)
}

/// Whether a stamp says `model`, unchanged since, has hash `sha256`.
pub fn stamp_matches(model: &Path, sha256: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(stamp_path(model)) else { return false };
    let Ok(stamp) = serde_json::from_str::<VerifiedStamp>(&text) else { return false };
    match size_and_mtime(model) {
        Ok((size, mtime_ns)) => stamp.size == size && stamp.mtime_ns == mtime_ns && stamp.sha256 == sha256,
        Err(_) => false,
    }
}
