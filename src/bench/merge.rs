//! `tandem bench merge`: joins the run directories of a sharded benchmark (`--shard K/N`) into one run directory
//! per pair, with the report one unsharded run writes, after checking that the shards belong together: every
//! shard of every pair present once, one suite, the same settings and model files, no sample recorded twice with
//! different results.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::bench::records::{sample_key, BenchRecorder};
use crate::bench::suites::{run_name, write_pairs_report, write_summary, Pair, Suite};
use crate::settings::{Mode, Shard};
use crate::{Error, Result};

/// One shard's finished run directory, read.
struct ShardRun {
    dir: PathBuf,
    suite: Suite,
    pair: Pair,
    shard: Shard,
    /// The settings and model files the shards must agree on.
    agreed: Value,
    models: Value,
}

/// Reads a directory's `summary.json`.
fn summary_of(dir: &Path) -> Result<Value> {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path).map_err(|_| {
        Error::Usage(format!(
            "{} has no summary.json: the shard did not finish; resume it (--resume {}) and merge again",
            dir.display(),
            dir.display()
        ))
    })?;
    serde_json::from_str(&text).map_err(|e| Error::Usage(format!("{}: not a benchmark summary ({e})", path.display())))
}

/// The shard runs a directory stands for: itself, or each pair's run of a `bench pairs` report.
fn shard_runs(dir: &Path) -> Result<Vec<ShardRun>> {
    let summary = summary_of(dir)?;
    if let Some(rows) = summary.as_array() {
        let dirs: Vec<PathBuf> = rows.iter().filter_map(|row| row["run_dir"].as_str().map(PathBuf::from)).collect();
        return dirs.iter().map(|d| shard_run(d, summary_of(d)?)).collect();
    }
    Ok(vec![shard_run(dir, summary)?])
}

fn shard_run(dir: &Path, summary: Value) -> Result<ShardRun> {
    let bad = |what: &str| Error::Usage(format!("{}: summary.json {what}", dir.display()));
    let suite = summary["suite"].as_str().and_then(Suite::from_name).ok_or_else(|| bad("names no known suite"))?;
    let shard: Shard = serde_json::from_value(summary["shard"].clone())
        .map_err(|_| bad("names no shard: was the run made with --shard?"))?;
    let mode: Mode = serde_json::from_value(summary["pair"]["mode"].clone()).map_err(|_| bad("names no mode"))?;
    let pair = Pair {
        planner: summary["pair"]["planner"].as_str().ok_or_else(|| bad("names no planner"))?.to_string(),
        executor: summary["pair"]["executor"].as_str().ok_or_else(|| bad("names no executor"))?.to_string(),
        mode,
    };
    // A model file's path may differ from node to node; its id and SHA-256 may not.
    let files: Vec<Value> = summary["models"]
        .as_array()
        .map(|models| models.iter().map(|m| json!({"id": m["id"], "sha256": m["sha256"]})).collect())
        .unwrap_or_default();
    let agreed = json!({"settings": summary["settings"], "models": files, "shards": shard.count});
    Ok(ShardRun { dir: dir.to_path_buf(), suite, pair, shard, agreed, models: summary["models"].clone() })
}

/// A record without what says when and where it ran: what two records of a sample must share.
fn result_of(record: &Value) -> Value {
    let mut record = record.clone();
    if let Some(fields) = record.as_object_mut() {
        fields.retain(|name, _| {
            !matches!(name.as_str(), "ms" | "seconds" | "run_log" | "run_dir" | "run_id" | "workspace")
                && !name.ends_with("_ms")
                && !name.ends_with("_s")
        });
    }
    record
}

/// Checks one pair's shards: each index once, none missing.
fn check_pair(pair: &Pair, runs: &[&ShardRun]) -> Result<()> {
    let count = runs[0].shard.count;
    let mut by_index: BTreeMap<usize, &Path> = BTreeMap::new();
    for run in runs {
        if let Some(other) = by_index.insert(run.shard.index, &run.dir) {
            return Err(Error::Usage(format!(
                "{}: shard {} is given twice: {} and {}",
                pair.label(),
                run.shard,
                other.display(),
                run.dir.display()
            )));
        }
    }
    let missing: Vec<String> =
        (0..count).filter(|i| !by_index.contains_key(i)).map(|i| format!("{i}/{count}")).collect();
    if !missing.is_empty() {
        return Err(Error::Usage(format!(
            "{}: shard(s) {} missing: merge needs the run directories of all {count} shards",
            pair.label(),
            missing.join(", ")
        )));
    }
    Ok(())
}

/// One pair's records from all its shards; a sample in two shards must have the same result.
fn pair_records(runs: &[&ShardRun]) -> Result<Vec<Value>> {
    let mut records: Vec<Value> = Vec::new();
    let mut seen: BTreeMap<String, (usize, &Path)> = BTreeMap::new();
    for run in runs {
        let (shard_records, bad) = BenchRecorder::read(&run.dir)?;
        for line in bad {
            eprintln!("unreadable record skipped: {line}");
        }
        for record in shard_records {
            let key = sample_key(&record["sample"]);
            match seen.get(&key) {
                Some(&(i, other)) => {
                    if result_of(&records[i]) != result_of(&record) {
                        return Err(Error::Usage(format!(
                            "sample {key} is in {} and in {} with different results; remove one record",
                            other.display(),
                            run.dir.display()
                        )));
                    }
                }
                None => {
                    seen.insert(key, (records.len(), &run.dir));
                    records.push(record);
                }
            }
        }
    }
    Ok(records)
}

/// `tandem bench merge DIRS --out OUT`: one merged run directory per pair (and the pairs report for several),
/// each with the summary one unsharded run writes.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<()> {
    let mut runs = Vec::new();
    for dir in dirs {
        runs.extend(shard_runs(dir)?);
    }
    let first = runs.first().ok_or_else(|| Error::Usage("give the shards' run directories to merge".into()))?;
    for run in &runs[1..] {
        if run.suite != first.suite {
            return Err(Error::Usage(format!(
                "{} is {} but {} is {}: merge one suite at a time",
                first.dir.display(),
                first.suite.name(),
                run.dir.display(),
                run.suite.name()
            )));
        }
    }
    // Pairs in the order first met; each pair's shards must agree with each other, and every pair with the first
    // on the settings (the model files differ from pair to pair).
    let mut pairs: Vec<(Pair, Vec<&ShardRun>)> = Vec::new();
    for run in &runs {
        match pairs.iter_mut().find(|(pair, _)| *pair == run.pair) {
            Some((_, group)) => group.push(run),
            None => pairs.push((run.pair.clone(), vec![run])),
        }
    }
    for run in &runs {
        let group = &pairs.iter().find(|(pair, _)| *pair == run.pair).expect("grouped above").1;
        let (a, b) = (&group[0].agreed, &run.agreed);
        let (settings_differ, models_differ) = (a["settings"] != b["settings"], a["models"] != b["models"]);
        if settings_differ || models_differ || a["shards"] != b["shards"] || first.agreed["settings"] != b["settings"] {
            let (other, what) = if first.agreed["settings"] != b["settings"] {
                (first, format!("settings {} vs {}", first.agreed["settings"], b["settings"]))
            } else if a["shards"] != b["shards"] {
                (group[0], format!("{} vs {} shards", a["shards"], b["shards"]))
            } else {
                (group[0], format!("model files {} vs {}", a["models"], b["models"]))
            };
            return Err(Error::Usage(format!(
                "{} and {} were run with different settings or models ({what}); merge only the shards of one benchmark",
                other.dir.display(),
                run.dir.display()
            )));
        }
    }
    let suite = first.suite;
    let mut rows = Vec::new();
    for (pair, group) in &pairs {
        check_pair(pair, group)?;
        let records = pair_records(group)?;
        let mut recorder = BenchRecorder::create(out, &format!("{}-merged", run_name(suite, pair)))?;
        for record in &records {
            recorder.append(record)?;
        }
        let shards: Vec<&Path> = group.iter().map(|run| run.dir.as_path()).collect();
        let about = json!({"settings": group[0].agreed["settings"], "merged_from": shards});
        let summary = write_summary(&recorder, suite, pair, group[0].models.clone(), &records, about)?;
        rows.push((pair.clone(), summary, recorder.dir().to_path_buf()));
    }
    if rows.len() > 1 {
        write_pairs_report(suite, &rows, out, &format!("pairs-{}-merged", suite.name()))?;
    }
    Ok(())
}
