//! A lock per model id so that two processes (parallel tests, two terminals) never pull the same model at once:
//! the second waits, then finds the finished file. The operating system releases the lock when its holder dies,
//! so a crashed pull never blocks later ones.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use fs2::FileExt;

use super::error::{io, StoreError};

/// Held while a pull runs; the lock file is removed and the lock released when it is dropped.
pub struct PullLock {
    file: File,
    path: PathBuf,
}

impl PullLock {
    /// Takes the exclusive lock at `path`, calling `on_wait` once if another process holds it and then waiting.
    pub fn acquire(path: &Path, on_wait: impl Fn()) -> Result<Self, StoreError> {
        let mut told = false;
        loop {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(io(format!("opening lock file {}", path.display())))?;
            match file.try_lock_exclusive() {
                Ok(()) => {}
                Err(e) if is_contended(&e) => {
                    if !told {
                        on_wait();
                        told = true;
                    }
                    file.lock_exclusive().map_err(io(format!("waiting for lock {}", path.display())))?;
                }
                Err(e) => return Err(StoreError::Io { context: format!("locking {}", path.display()), source: e }),
            }
            // The previous holder removes the file before unlocking; if it did so after we opened it, our lock is
            // on an orphan inode that nobody else will see, so start over with the current file.
            if still_linked(&file, path) {
                let mut lock = Self { file, path: path.to_path_buf() };
                lock.record_pid();
                return Ok(lock);
            }
        }
    }

    /// Writes our pid into the file: only for people looking at a lock file, the lock itself is the flock.
    fn record_pid(&mut self) {
        let _ = self.file.set_len(0);
        let _ = write!(self.file, "{}", std::process::id());
    }
}

fn is_contended(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock || e.raw_os_error() == fs2::lock_contended_error().raw_os_error()
}

#[cfg(unix)]
fn still_linked(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(open), Ok(now)) => open.dev() == now.dev() && open.ino() == now.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn still_linked(_file: &File, _path: &Path) -> bool {
    true
}

impl Drop for PullLock {
    fn drop(&mut self) {
        // Removing before unlocking is what `still_linked` relies on. Elsewhere an open file cannot be removed,
        // so the (empty) lock file simply stays.
        if cfg!(unix) {
            let _ = std::fs::remove_file(&self.path);
        }
        let _ = FileExt::unlock(&self.file);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::PullLock;

    #[test]
    fn a_second_holder_waits_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf.lock");
        let first = PullLock::acquire(&path, || panic!("nobody holds it yet")).unwrap();
        let waited = AtomicBool::new(false);
        let released = AtomicBool::new(false);
        std::thread::scope(|s| {
            let second = s.spawn(|| {
                let lock = PullLock::acquire(&path, || waited.store(true, Ordering::SeqCst)).unwrap();
                assert!(released.load(Ordering::SeqCst), "got the lock while the first still held it");
                drop(lock);
            });
            // Let go only once the second is known to be waiting.
            for _ in 0..1000 {
                if waited.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(waited.load(Ordering::SeqCst), "the second never reported waiting");
            released.store(true, Ordering::SeqCst);
            drop(first);
            second.join().unwrap();
        });
        assert!(waited.load(Ordering::SeqCst));
        assert!(!path.exists(), "the last holder removes the lock file");
    }
}
