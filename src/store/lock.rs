//! A lock file per model so that two processes (parallel tests, two terminals) never assemble the same file
//! at once: the second waits, then finds the finished file.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::StoreError;

/// Held while a pull runs; removes the lock file when dropped.
pub struct PullLock {
    path: PathBuf,
}

/// Longest wait for another process's pull.
const MAX_WAIT: Duration = Duration::from_secs(45 * 60);

fn holder_alive(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else { return true };
    match text.trim().parse::<u32>() {
        // On Linux a live process has /proc/<pid>; elsewhere assume alive and rely on the time limit.
        Ok(pid) if cfg!(target_os = "linux") => Path::new(&format!("/proc/{pid}")).exists(),
        Ok(_) => true,
        // Just created, pid not yet written.
        Err(_) => true,
    }
}

impl PullLock {
    /// Takes the lock at `path`, waiting while a live process holds it and clearing a dead holder's lock.
    pub fn acquire(path: &Path, on_wait: impl Fn()) -> Result<Self, StoreError> {
        let started = Instant::now();
        let mut told = false;
        loop {
            match OpenOptions::new().write(true).create_new(true).open(path) {
                Ok(mut file) => {
                    let _ = write!(file, "{}", std::process::id());
                    return Ok(Self { path: path.to_path_buf() });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if !holder_alive(path) {
                        let _ = std::fs::remove_file(path);
                        continue;
                    }
                    if started.elapsed() > MAX_WAIT {
                        return Err(StoreError::Locked { path: path.to_path_buf() });
                    }
                    if !told {
                        on_wait();
                        told = true;
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => return Err(StoreError::Io { context: format!("creating lock {}", path.display()), source: e }),
            }
        }
    }
}

impl Drop for PullLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
