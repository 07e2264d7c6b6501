//! The Hugging Face hub source, for users who are online. It must cost almost nothing offline: a short
//! connectivity probe runs first, and any failure falls through to the next source.

use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// Host probed before using the hub.
const HUB_HOST: &str = "huggingface.co:443";
/// How long the probe may take in all.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether the hub is worth trying: not disabled (`HF_HUB_OFFLINE=1` or `TANDEM_OFFLINE=1`) and reachable.
pub fn hub_reachable() -> bool {
    let disabled = |key: &str| std::env::var(key).is_ok_and(|v| !v.is_empty() && v != "0");
    if disabled("HF_HUB_OFFLINE") || disabled("TANDEM_OFFLINE") {
        return false;
    }
    // Name resolution has no timeout of its own: run it on a thread and stop waiting after the deadline.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let reachable = HUB_HOST
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.next())
            .is_some_and(|addr| TcpStream::connect_timeout(&addr, PROBE_TIMEOUT).is_ok());
        let _ = tx.send(reachable);
    });
    rx.recv_timeout(PROBE_TIMEOUT).unwrap_or(false)
}

/// Downloads `file` from `repo` into the hub cache under `cache_dir`; returns the downloaded path.
pub fn download(repo: &str, file: &str, cache_dir: &Path) -> Result<PathBuf, String> {
    let api = hf_hub::api::sync::ApiBuilder::new()
        .with_cache_dir(cache_dir.to_path_buf())
        .with_progress(true)
        .build()
        .map_err(|e| e.to_string())?;
    api.model(repo.to_string()).get(file).map_err(|e| e.to_string())
}
