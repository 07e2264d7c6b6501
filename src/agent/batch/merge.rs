//! `tandem batch merge`: joins the results files of a sharded batch (`tandem batch --shard K/N`) into one results
//! file, the one an unsharded batch would have written, after checking that the shards belong together: every
//! shard present once, the same goal file, settings and model files, no goal recorded twice with different results.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::agent::batch::{is_run_started, is_shard_header, BatchSummary, GoalKey, SHARD_HEADER};
use crate::agent::log::runs::UsageTotals;
use crate::settings::Shard;
use crate::{Error, Result};

/// One shard's results file, read.
struct ShardFile {
    path: PathBuf,
    shard: Shard,
    header: Value,
    /// The latest record of each goal, in file order of first appearance.
    records: Vec<(GoalKey, Value)>,
}

/// Where two shard headers differ, as `name: a vs b` (the shard itself left out).
pub fn header_differences(a: &Value, b: &Value) -> Vec<String> {
    let mut differences = Vec::new();
    if a["goals"] != b["goals"] {
        differences.push(format!("goals: {} vs {}", a["goals"], b["goals"]));
    }
    if a[SHARD_HEADER]["count"] != b[SHARD_HEADER]["count"] {
        differences.push(format!("shard count: {} vs {}", a[SHARD_HEADER]["count"], b[SHARD_HEADER]["count"]));
    }
    let empty = serde_json::Map::new();
    let (sa, sb) = (a["settings"].as_object().unwrap_or(&empty), b["settings"].as_object().unwrap_or(&empty));
    let mut names: Vec<&String> = sa.keys().chain(sb.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let (x, y) = (sa.get(name).unwrap_or(&Value::Null), sb.get(name).unwrap_or(&Value::Null));
        if x != y {
            differences.push(format!("{name}: {x} vs {y}"));
        }
    }
    differences
}

/// Reads one shard's results file: its header and the latest record of each goal.
fn read_shard(path: &Path) -> Result<ShardFile> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let mut header = None;
    let mut records: Vec<(GoalKey, Value)> = Vec::new();
    let mut at: HashMap<GoalKey, usize> = HashMap::new();
    for (index, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let value: Value = serde_json::from_str(line).map_err(|e| {
            Error::Usage(format!("{}:{}: not a results line ({e}); repair or remove it", path.display(), index + 1))
        })?;
        if is_shard_header(&value) {
            header = Some(value);
            continue;
        }
        // A run journaled as started is not a result; the goal's record, if the shard wrote one, comes later.
        if is_run_started(&value) {
            continue;
        }
        let key = match (value["id"].as_str(), value["line"].as_u64()) {
            (Some(id), _) => GoalKey::Id(id.to_string()),
            (None, Some(line)) => GoalKey::Line(line as usize),
            (None, None) => {
                return Err(Error::Usage(format!("{}:{}: a record without id or line", path.display(), index + 1)))
            }
        };
        // A later record of a goal (a --retry-failed rerun) replaces the earlier one, as on resuming.
        match at.get(&key) {
            Some(&i) => records[i].1 = value,
            None => {
                at.insert(key.clone(), records.len());
                records.push((key, value));
            }
        }
    }
    let header = header.ok_or_else(|| {
        Error::Usage(format!("{} is not a shard's results (no shard header): was it run with --shard?", path.display()))
    })?;
    let shard: Shard = serde_json::from_value(header[SHARD_HEADER].clone())
        .map_err(|e| Error::Usage(format!("{}: unreadable shard header ({e})", path.display())))?;
    Ok(ShardFile { path: path.to_path_buf(), shard, header, records })
}

/// What a goal's result is, for telling whether two records of it agree (not when or where it ran).
fn result_of(record: &Value) -> Value {
    serde_json::json!({
        "goal": record["goal"], "stop": record["stop"], "answer": record["answer"], "error": record["error"],
    })
}

/// Checks that the shards are one whole batch: the same count, each index once, none missing, the same settings.
fn check_shards(files: &[ShardFile]) -> Result<()> {
    let first = &files[0];
    for file in &files[1..] {
        let differences = header_differences(&first.header, &file.header);
        if !differences.is_empty() {
            return Err(Error::Usage(format!(
                "{} and {} were run with different settings or models ({}); merge only the shards of one batch",
                first.path.display(),
                file.path.display(),
                differences.join("; ")
            )));
        }
    }
    let count = first.shard.count;
    let mut by_index: BTreeMap<usize, &Path> = BTreeMap::new();
    for file in files {
        if let Some(other) = by_index.insert(file.shard.index, &file.path) {
            return Err(Error::Usage(format!(
                "shard {} is given twice: {} and {}",
                file.shard,
                other.display(),
                file.path.display()
            )));
        }
    }
    let missing: Vec<String> =
        (0..count).filter(|i| !by_index.contains_key(i)).map(|i| format!("{i}/{count}")).collect();
    if !missing.is_empty() {
        return Err(Error::Usage(format!(
            "shard(s) {} missing: merge needs the results of all {count} shards",
            missing.join(", ")
        )));
    }
    Ok(())
}

/// Merges shard results files into `out` (which must not exist yet); returns the totals over every goal.
pub fn merge_results(paths: &[PathBuf], out: &Path) -> Result<BatchSummary> {
    if paths.is_empty() {
        return Err(Error::Usage("give the shards' results files to merge".into()));
    }
    if out.exists() {
        return Err(Error::Usage(format!("{} exists; give the merged results a new --out", out.display())));
    }
    let files = paths.iter().map(|p| read_shard(p)).collect::<Result<Vec<_>>>()?;
    check_shards(&files)?;
    let mut merged: Vec<(GoalKey, Value)> = Vec::new();
    let mut seen: HashMap<GoalKey, (usize, &Path)> = HashMap::new();
    for file in &files {
        for (key, record) in &file.records {
            match seen.get(key) {
                Some(&(i, other)) => {
                    if result_of(&merged[i].1) != result_of(record) {
                        return Err(Error::Usage(format!(
                            "goal {key} is in {} and in {} with different results; remove one record",
                            other.display(),
                            file.path.display()
                        )));
                    }
                }
                None => {
                    seen.insert(key.clone(), (merged.len(), &file.path));
                    merged.push((key.clone(), record.clone()));
                }
            }
        }
    }
    // The goal file's order, as an unsharded batch run one goal at a time writes it.
    merged.sort_by_key(|(_, record)| record["line"].as_u64().unwrap_or(u64::MAX));
    let mut text = Vec::new();
    let mut summary = BatchSummary {
        goals_file: PathBuf::from(files[0].header["goals"].as_str().unwrap_or_default()),
        results: out.to_path_buf(),
        lines: merged.len(),
        ..BatchSummary::default()
    };
    for (_, record) in &merged {
        serde_json::to_writer(&mut text, record).map_err(Error::encode("a batch result"))?;
        text.push(b'\n');
        let done = record["stop"] == "done" && record["error"].is_null();
        if done {
            summary.done += 1;
        } else {
            summary.failed += 1;
        }
        let usage = |role: &str| serde_json::from_value::<UsageTotals>(record[role].clone()).unwrap_or_default();
        summary.planner.merge(&usage("planner"));
        summary.executor.merge(&usage("executor"));
        summary.wall_s += record["wall_s"].as_f64().unwrap_or(0.0);
    }
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(out)
        .map_err(|e| Error::io(format!("creating {}", out.display()), e))?;
    file.write_all(&text).map_err(|e| Error::io(format!("writing {}", out.display()), e))?;
    file.sync_all().map_err(|e| Error::io(format!("syncing {}", out.display()), e))?;
    Ok(summary)
}
