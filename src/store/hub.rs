//! The Hugging Face hub source, for users who are online. Offline it must cost almost nothing: a connection probe
//! with a short deadline runs first (once per process), and any failure falls through to the next source.

use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

use crate::progress::{Progress, ProgressUnit, Reporter};

/// hf-hub's default endpoint, used unless `HF_ENDPOINT` is set.
const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// How long the probe (name resolution and TCP connect) may take in all.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why the hub was not tried, or `None` when it is worth trying: not switched off (`TANDEM_OFFLINE=1` or
/// `HF_HUB_OFFLINE=1`) and the endpoint (or the HTTPS proxy) accepts a TCP connection within two seconds.
pub fn unavailable() -> Option<&'static str> {
    if crate::settings::env::offline() {
        return Some("switched off (HF_HUB_OFFLINE / TANDEM_OFFLINE)");
    }
    static REACHABLE: OnceLock<bool> = OnceLock::new();
    if *REACHABLE.get_or_init(probe) {
        None
    } else {
        Some("offline (no connection within 2 s)")
    }
}

/// `host:port` to probe: the HTTPS proxy if one is configured, else the endpoint.
fn probe_target() -> String {
    let proxy = crate::settings::env::https_proxy();
    host_port(&proxy.unwrap_or_else(endpoint))
}

/// `host:port` of a URL such as `https://user@host:8080/path` (port from the scheme when absent).
fn host_port(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("https", url));
    let authority = rest.split('/').next().unwrap_or(rest);
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    if authority.rsplit_once(':').is_some_and(|(_, port)| port.parse::<u16>().is_ok()) {
        authority.to_string()
    } else {
        let port = if scheme == "http" { 80 } else { 443 };
        format!("{authority}:{port}")
    }
}

fn endpoint() -> String {
    crate::settings::env::hf_endpoint().unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
}

fn probe() -> bool {
    let target = probe_target();
    // Name resolution has no timeout of its own: run it on a thread and stop waiting at the deadline.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let reachable = target
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.next())
            .is_some_and(|addr| TcpStream::connect_timeout(&addr, PROBE_TIMEOUT).is_ok());
        let _ = tx.send(reachable);
    });
    rx.recv_timeout(PROBE_TIMEOUT).unwrap_or(false)
}

/// Adapts hf-hub's progress callbacks to our `Reporter` (hf-hub's own bars are off: the library never prints).
struct HubProgress<'a> {
    reporter: &'a dyn Reporter,
    label: String,
    bar: Option<Box<dyn Progress>>,
}

impl hf_hub::api::Progress for HubProgress<'_> {
    fn init(&mut self, size: usize, _filename: &str) {
        self.bar = Some(self.reporter.start(&self.label, Some(size as u64), ProgressUnit::Bytes));
    }
    fn update(&mut self, size: usize) {
        if let Some(bar) = &self.bar {
            bar.inc(size as u64);
        }
    }
    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish();
        }
    }
}

/// Downloads `file` from `repo` into the hub cache `cache_dir` (resuming a partial download there); returns the
/// path of the downloaded blob itself (not the snapshot symlink), so the caller can move it.
pub fn download(
    repo: &str,
    file: &str,
    cache_dir: &Path,
    label: &str,
    reporter: &dyn Reporter,
) -> Result<PathBuf, String> {
    let api = hf_hub::api::sync::ApiBuilder::from_env()
        .with_endpoint(endpoint())
        .with_cache_dir(cache_dir.to_path_buf())
        .with_progress(false)
        .with_retries(2)
        .build()
        .map_err(|e| e.to_string())?;
    let progress = HubProgress { reporter, label: label.to_string(), bar: None };
    let pointer = api.model(repo.to_string()).download_with_progress(file, progress).map_err(|e| e.to_string())?;
    std::fs::canonicalize(&pointer).map_err(|e| format!("{}: {e}", pointer.display()))
}

/// The folder hf-hub keeps `repo` in, inside `cache_dir` (removed after a successful pull).
pub fn repo_folder(cache_dir: &Path, repo: &str) -> PathBuf {
    cache_dir.join(hf_hub::Repo::model(repo.to_string()).folder_name())
}

#[cfg(test)]
mod tests {
    use super::host_port;

    #[test]
    fn probe_targets_come_from_urls() {
        assert_eq!(host_port("https://example.org"), "example.org:443");
        assert_eq!(host_port("http://proxy.local:3128/"), "proxy.local:3128");
        assert_eq!(host_port("http://user:secret@proxy.local:3128"), "proxy.local:3128");
        assert_eq!(host_port("http://proxy.local"), "proxy.local:80");
        assert_eq!(host_port("mirror.internal:8443"), "mirror.internal:8443");
    }
}
