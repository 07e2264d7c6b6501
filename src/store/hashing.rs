//! SHA-256 of files and of streams being written, so a download is hashed as it is written (no second pass).

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

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

    /// The inner writer, the byte count and the lower-case hex digest.
    pub fn finish(self) -> (W, u64, String) {
        (self.inner, self.written, hex::encode(self.hasher.finalize()))
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        // Hash only what the inner writer accepted, so a short write never hashes bytes twice.
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Hashes a file, calling `progress` with the bytes read after each chunk; returns (size, hex digest).
pub fn sha256_file(path: &Path, mut progress: impl FnMut(u64)) -> std::io::Result<(u64, String)> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 4 << 20];
    let mut total = 0u64;
    loop {
        let n = match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buffer[..n]);
        total += n as u64;
        progress(n as u64);
    }
    Ok((total, hex::encode(hasher.finalize())))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::{sha256_file, HashingWriter};

    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn the_writer_and_the_file_hash_agree_with_the_standard_vector() {
        let mut w = HashingWriter::new(Vec::new());
        w.write_all(b"a").unwrap();
        w.write_all(b"bc").unwrap();
        let (inner, size, sha) = w.finish();
        assert_eq!((inner.as_slice(), size, sha.as_str()), (&b"abc"[..], 3, ABC));
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), b"abc").unwrap();
        let mut seen = 0;
        assert_eq!(sha256_file(file.path(), |n| seen += n).unwrap(), (3, ABC.to_string()));
        assert_eq!(seen, 3);
    }
}
