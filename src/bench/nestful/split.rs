//! A published NESTFUL split: its samples ([`super::data`]) and its tool catalogue ([`super::catalogue`]) read
//! from one directory together.

use std::path::{Path, PathBuf};

use super::catalogue::load_tools;
use super::data::{load_samples, BenchDataError, DataIssue, NestfulSample, NestfulTool, DATA_FILE, SPEC_FILE};

/// A loaded NESTFUL split.
#[derive(Debug, Clone, Default)]
pub struct NestfulData {
    /// Samples in file order.
    pub samples: Vec<NestfulSample>,
    /// The tool catalogue in file order.
    pub tools: Vec<NestfulTool>,
    /// Samples and tools that could not be read.
    pub skipped: Vec<DataIssue>,
    /// Samples kept although their sequence looks wrong (a duplicate label, a dangling reference).
    pub warnings: Vec<DataIssue>,
}

/// Loads a NESTFUL split from `dir`: [`DATA_FILE`] and [`SPEC_FILE`] where they are there, else the one
/// `*-data.json` and the one `*-spec.json` the directory holds (every published split is laid out so).
pub fn load(dir: &Path) -> Result<NestfulData, BenchDataError> {
    let samples = load_samples(&split_file(dir, DATA_FILE, "-data.json")?)?;
    let tools = load_tools(&split_file(dir, SPEC_FILE, "-spec.json")?)?;
    Ok(NestfulData {
        samples: samples.items,
        tools: tools.items,
        skipped: [samples.skipped, tools.skipped].concat(),
        warnings: [samples.warnings, tools.warnings].concat(),
    })
}

/// `dir/preferred` if it exists, else the one file in `dir` whose name ends with `suffix`.
fn split_file(dir: &Path, preferred: &str, suffix: &'static str) -> Result<PathBuf, BenchDataError> {
    let path = dir.join(preferred);
    if path.exists() {
        return Ok(path);
    }
    let io = |source| BenchDataError::Io { path: dir.to_path_buf(), source };
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(suffix)))
        .collect();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(BenchDataError::Split { dir: dir.to_path_buf(), suffix, found: String::new() }),
        _ => Err(BenchDataError::Split {
            dir: dir.to_path_buf(),
            suffix,
            found: found.iter().filter_map(|p| p.file_name()?.to_str()).collect::<Vec<_>>().join(", "),
        }),
    }
}
