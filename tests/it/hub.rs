//! `tandem models pull hf:OWNER/REPO/FILE.gguf` and `models add` of whole and split models, through hf-hub's real
//! client against a stand-in hub on loopback (`HF_ENDPOINT`): the machines here have no route to the real one. The
//! stand-in answers as the hub's resolve endpoint does for what hf-hub reads (a ranged GET, `ETag`,
//! `X-Repo-Commit`, `Content-Range`), serving the files of a folder.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use tandem::llm::gguf::GgufFile;
use tandem::progress::SilentReporter;
use tandem::store::{Manifest, ModelStore, StoreError};

use crate::common::twins::{split_gguf, write_twin, Family, Quant};

/// The stand-in hub: `<root>/<owner>/<repo>/<file>` served at `/<owner>/<repo>/resolve/main/<file>`.
struct Hub {
    root: PathBuf,
    /// Requests that sent file bytes (not the one-byte probes hf-hub makes first).
    downloads: Arc<AtomicUsize>,
    endpoint: String,
    _runtime: tokio::runtime::Runtime,
}

#[derive(Clone)]
struct Served {
    root: PathBuf,
    downloads: Arc<AtomicUsize>,
}

async fn resolve(
    State(served): State<Served>,
    UrlPath((owner, repo, _revision, file)): UrlPath<(String, String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let Ok(bytes) = std::fs::read(served.root.join(&owner).join(&repo).join(&file)) else {
        return (StatusCode::NOT_FOUND, "Entry not found").into_response();
    };
    let range = headers.get(header::RANGE).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("bytes="));
    let (start, end) = match range.and_then(|r| r.split_once('-')) {
        Some((start, end)) => {
            (start.parse::<usize>().unwrap_or(0), end.parse::<usize>().map(|e| e + 1).unwrap_or(bytes.len()))
        }
        None => (0, bytes.len()),
    };
    let end = end.min(bytes.len());
    if end - start > 1 {
        served.downloads.fetch_add(1, Ordering::SeqCst);
    }
    let etag = format!("\"{}\"", hex(&Sha256::digest(&bytes)));
    let content_range = format!("bytes {start}-{}/{}", end.saturating_sub(1), bytes.len());
    let headers = [
        (header::ETAG.as_str(), etag),
        ("x-repo-commit", "0123456789abcdef0123456789abcdef01234567".to_string()),
        (header::CONTENT_RANGE.as_str(), content_range),
    ];
    (StatusCode::PARTIAL_CONTENT, headers, bytes[start..end].to_vec()).into_response()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Hub {
    fn start(root: &Path) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let downloads = Arc::new(AtomicUsize::new(0));
        let served = Served { root: root.to_path_buf(), downloads: downloads.clone() };
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .route("/{owner}/{repo}/resolve/{revision}/{file}", axum::routing::get(resolve))
            .with_state(served);
        runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
        Hub { root: root.to_path_buf(), downloads, endpoint, _runtime: runtime }
    }

    /// Puts `file` into the stand-in's `repo` (`OWNER/NAME`).
    fn publish(&self, repo: &str, file: &Path) {
        let folder = self.root.join(repo);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::copy(file, folder.join(file.file_name().unwrap())).unwrap();
    }

    fn downloads(&self) -> usize {
        self.downloads.load(Ordering::SeqCst)
    }
}

/// `tandem models ARGS` with the stand-in as the hub and `cache` as the model cache (proxies unset, so loopback is
/// reached directly).
fn tandem_models(hub: &Hub, cache: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tandem"));
    command.arg("models").args(args).env("TANDEM_CACHE_DIR", cache).env("HF_ENDPOINT", &hub.endpoint);
    for name in ["TANDEM_OFFLINE", "HF_HUB_OFFLINE", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"] {
        command.env_remove(name);
    }
    command.env("NO_PROXY", "127.0.0.1").stdin(std::process::Stdio::null()).output().unwrap()
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// The names of the files in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// A Qwen2 twin as one file and as three parts, in `dir`.
fn twin_and_parts(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let whole = dir.join("Tiny-Q4_K_M.gguf");
    write_twin(&whole, Family::Qwen2, Quant::KQuant);
    let parts = split_gguf(&whole, 3);
    (whole, parts)
}

#[test]
fn a_hub_name_is_pulled_whole_and_a_split_one_part_by_part() {
    let dir = tempfile::tempdir().unwrap();
    let (whole, parts) = twin_and_parts(dir.path());
    let hub = Hub::start(&dir.path().join("hub"));
    hub.publish("tandem-tests/Tiny-GGUF", &whole);
    for part in &parts {
        hub.publish("tandem-tests/Tiny-Split-GGUF", part);
    }
    let cache = dir.path().join("cache");

    // A whole file: kept as owner--repo--file, byte for byte.
    let pulled = tandem_models(&hub, &cache, &["pull", "hf:tandem-tests/Tiny-GGUF/Tiny-Q4_K_M.gguf"]);
    assert!(pulled.status.success(), "{}", text(&pulled));
    let kept = cache.join("tandem-tests--tiny-gguf--tiny-q4_k_m.gguf");
    assert_eq!(std::fs::read(&kept).unwrap(), std::fs::read(&whole).unwrap());
    assert_eq!(hub.downloads(), 1);

    // A split model named by its second part: every part is pulled, under the names gguf-split gave them.
    let name = "hf:tandem-tests/Tiny-Split-GGUF/Tiny-Q4_K_M-00002-of-00003.gguf";
    let pulled = tandem_models(&hub, &cache, &["pull", name]);
    assert!(pulled.status.success(), "{}", text(&pulled));
    assert_eq!(hub.downloads(), 4, "{}", text(&pulled));
    for (index, part) in parts.iter().enumerate() {
        let kept = cache.join(format!("tandem-tests--tiny-split-gguf--tiny-q4_k_m-{:05}-of-00003.gguf", index + 1));
        assert_eq!(std::fs::read(&kept).unwrap(), std::fs::read(part).unwrap(), "{}", kept.display());
    }
    assert!(!names(&cache).iter().any(|n| n.ends_with(".partial")), "{:?}", names(&cache));

    // The id is the model's; it loads as one file from the cache, offline, by id or by any part's hub name.
    let offline = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tandem"));
        command.arg("models").args(args).env("TANDEM_CACHE_DIR", &cache).env("TANDEM_OFFLINE", "1");
        command.stdin(std::process::Stdio::null()).output().unwrap()
    };
    let path_of = |model: &str| PathBuf::from(String::from_utf8_lossy(&offline(&["path", model]).stdout).trim());
    let first = path_of("hf:tandem-tests/Tiny-Split-GGUF/Tiny-Q4_K_M-00003-of-00003.gguf");
    assert_eq!(first, cache.join("tandem-tests--tiny-split-gguf--tiny-q4_k_m-00001-of-00003.gguf"));
    assert_eq!(path_of("tandem-tests--tiny-split-gguf--tiny-q4_k_m"), first);
    assert_eq!(GgufFile::open(&first).unwrap().part_count(), 3);
    let list = text(&offline(&["list"]));
    for id in ["tandem-tests--tiny-gguf--tiny-q4_k_m ", "tandem-tests--tiny-split-gguf--tiny-q4_k_m "] {
        assert_eq!(list.matches(id).count(), 1, "{id}: {list}");
    }
    assert!(!list.contains("-of-0000"), "a part is not a model of its own: {list}");

    // Pulled again: nothing is downloaded; with --force every part is.
    assert!(tandem_models(&hub, &cache, &["pull", name]).status.success());
    assert_eq!(hub.downloads(), 4);
    assert!(tandem_models(&hub, &cache, &["pull", "--force", name]).status.success());
    assert_eq!(hub.downloads(), 7);
}

#[test]
fn a_split_model_with_a_part_missing_on_the_hub_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (_, parts) = twin_and_parts(dir.path());
    let hub = Hub::start(&dir.path().join("hub"));
    hub.publish("tandem-tests/Broken-GGUF", &parts[0]);
    hub.publish("tandem-tests/Broken-GGUF", &parts[1]);
    let cache = dir.path().join("cache");
    let pulled = tandem_models(&hub, &cache, &["pull", "hf:tandem-tests/Broken-GGUF/Tiny-Q4_K_M-00001-of-00003.gguf"]);
    let said = text(&pulled);
    assert!(!pulled.status.success(), "{said}");
    assert!(said.contains("Tiny-Q4_K_M-00003-of-00003.gguf"), "the missing part is named: {said}");
    let left: Vec<String> =
        names(&cache).into_iter().filter(|n| n.contains(".gguf") && !n.ends_with(".lock")).collect();
    assert!(left.is_empty(), "no part or partial is left: {left:?}");

    let bad = tandem_models(&hub, &cache, &["pull", "hf:Tiny-Q4_K_M.gguf"]);
    assert!(!bad.status.success() && text(&bad).contains("hf:OWNER/REPO/FILE.gguf"), "{}", text(&bad));
}

#[test]
fn models_add_of_a_split_part_keeps_every_part_under_one_id() {
    let dir = tempfile::tempdir().unwrap();
    let (_, parts) = twin_and_parts(dir.path());
    let cache = dir.path().join("cache");
    let store = ModelStore::with(Manifest::parse("model = []", "empty").unwrap(), cache.clone()).with_hub(false);
    let (id, first, sha) = store.add(&parts[1], None, &SilentReporter).unwrap();
    assert_eq!(id, "tiny-q4_k_m");
    assert_eq!(first, cache.join("tiny-q4_k_m-00001-of-00003.gguf"));
    assert_eq!(sha, hex(&Sha256::digest(std::fs::read(&parts[0]).unwrap())));
    assert_eq!(store.added_ids(), ["tiny-q4_k_m"]);
    let resolved = store.resolve("tiny-q4_k_m", &SilentReporter).unwrap();
    assert_eq!((resolved.path.as_path(), resolved.sha256.as_deref()), (first.as_path(), Some(sha.as_str())));
    assert_eq!(GgufFile::open(&resolved.path).unwrap().part_count(), 3);
    let err = store.add(&parts[0], None, &SilentReporter).unwrap_err();
    assert!(matches!(err, StoreError::IdTaken { .. }), "{err}");

    // A part missing beside the one given: refused naming it, nothing copied.
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    for part in &parts[..2] {
        std::fs::copy(part, other.join(part.file_name().unwrap())).unwrap();
    }
    let err = store.add(&other.join(parts[0].file_name().unwrap()), Some("other"), &SilentReporter).unwrap_err();
    assert!(matches!(&err, StoreError::MissingFile(p) if p.ends_with("Tiny-Q4_K_M-00003-of-00003.gguf")), "{err}");
    assert_eq!(store.added_ids(), ["tiny-q4_k_m"]);
}
