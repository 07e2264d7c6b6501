//! A benchmark run's directory: per-sample JSONL records (appended and synced one by one, so an interrupted run
//! resumes where it stopped), and the summaries written at the end (`summary.json`, `summary.md`, `chart.svg`).

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::agent::log::events::{now_ms, parse_jsonl, read_jsonl};
use crate::agent::log::runs::utc_stamp;
use crate::progress::{ProgressUnit, Reporter};
use crate::settings::Shard;
use crate::{Error, Result};

/// One benchmark run on disk.
#[derive(Debug)]
pub struct BenchRecorder {
    dir: PathBuf,
    file: File,
    done: HashSet<String>,
    shard: Option<Shard>,
}

impl BenchRecorder {
    /// The records file inside a run directory.
    pub const SAMPLES: &'static str = "samples.jsonl";

    /// A fresh run directory `<root>/<name>-<UTC stamp>`.
    pub fn create(root: &Path, name: &str) -> Result<Self> {
        std::fs::create_dir_all(root).map_err(|e| Error::io(format!("creating {}", root.display()), e))?;
        let stamp = format!("{name}-{}", utc_stamp(now_ms() / 1000));
        // Two runs started in the same second must not share a directory (the second would take the first one's
        // samples as done): the directory is created exclusively, with a suffix when the name is taken.
        for attempt in 1..=1000 {
            let dir = if attempt == 1 { root.join(&stamp) } else { root.join(format!("{stamp}-{attempt}")) };
            match std::fs::create_dir(&dir) {
                Ok(()) => return Self::open(&dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(format!("creating {}", dir.display()), e)),
            }
        }
        Err(Error::Bench(format!("could not pick a fresh run directory for {stamp} under {}", root.display())))
    }

    /// Opens a run directory, new or interrupted, to add records; samples already recorded count as done. The
    /// records file is locked while the recorder lives, so two processes cannot run one run's samples at once
    /// (each would take the other's samples as not done and run them again). A line cut short by a crash is ended,
    /// so the next record starts on a line of its own (it is reported as unreadable and its sample runs again).
    pub fn open(dir: &Path) -> Result<Self> {
        use fs2::FileExt;
        use std::io::Read;
        let path = dir.join(Self::SAMPLES);
        let mut file = OpenOptions::new()
            .read(true)
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        // A lock can outlive its holder by a moment (a child between fork and exec shares it): wait a little.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while file.try_lock_exclusive().is_err() {
            if std::time::Instant::now() >= deadline {
                return Err(Error::Bench(format!(
                    "{} is being written by another `tandem bench`; wait for it to end",
                    path.display()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        if !text.is_empty() && !text.ends_with('\n') {
            file.write_all(b"\n").map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
            file.sync_data().map_err(|e| Error::io(format!("syncing {}", path.display()), e))?;
        }
        let done = parse_jsonl(&text, &path).0.iter().filter_map(|r| r.get("sample").map(sample_key)).collect();
        Ok(Self { dir: dir.to_path_buf(), file, done, shard: None })
    }

    /// The records of a run directory, read without opening it for writing (a run still going may be read), and
    /// its unreadable lines with their numbers.
    pub fn read(dir: &Path) -> Result<(Vec<Value>, Vec<String>)> {
        read_jsonl(&dir.join(Self::SAMPLES))
    }

    /// Runs only the samples of this shard (by a hash of each sample's id).
    pub fn with_shard(mut self, shard: Option<Shard>) -> Self {
        self.shard = shard;
        self
    }

    /// Whether a sample (by its `sample` value) is this run's: every sample, or its shard's.
    pub fn holds(&self, sample: &Value) -> bool {
        self.shard.is_none_or(|shard| shard.contains(&sample_key(sample)))
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether a sample (by its `sample` value) is already recorded.
    pub fn is_done(&self, sample: &Value) -> bool {
        self.done.contains(&sample_key(sample))
    }

    /// How many samples are recorded.
    pub fn done_count(&self) -> usize {
        self.done.len()
    }

    /// Appends one record (it must have a `sample` field) and syncs it.
    pub fn append(&mut self, record: &Value) -> Result<()> {
        let path = self.dir.join(Self::SAMPLES);
        let mut line = serde_json::to_vec(record).map_err(Error::encode("a benchmark record"))?;
        line.push(b'\n');
        crate::agent::log::fault::before_record(&mut self.file, &line);
        self.file.write_all(&line).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        self.file.sync_data().map_err(|e| Error::io(format!("syncing {}", path.display()), e))?;
        if let Some(sample) = record.get("sample") {
            self.done.insert(sample_key(sample));
        }
        Ok(())
    }

    /// Every record so far, in order (unreadable lines are reported with their line numbers).
    pub fn records(&self) -> Result<(Vec<Value>, Vec<String>)> {
        Self::read(&self.dir)
    }

    /// Writes a file into the run directory.
    pub fn write(&self, name: &str, contents: &str) -> Result<PathBuf> {
        let path = self.dir.join(name);
        std::fs::write(&path, contents).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        Ok(path)
    }
}

/// What a sample is known by: its id as text.
pub fn sample_key(sample: &Value) -> String {
    match sample {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Runs `samples` one by one (skipping recorded ones), recording each; a sample that errors is recorded as a
/// failure with its error, never dropped. Returns every record of the run.
pub fn run_samples<T>(
    samples: &[(Value, T)],
    recorder: &mut BenchRecorder,
    reporter: &dyn Reporter,
    label: &str,
    mut run: impl FnMut(&T) -> Result<Value>,
) -> Result<Vec<Value>> {
    let samples: Vec<&(Value, T)> = samples.iter().filter(|(id, _)| recorder.holds(id)).collect();
    let todo: Vec<&(Value, T)> = samples.iter().copied().filter(|(id, _)| !recorder.is_done(id)).collect();
    if todo.len() < samples.len() {
        reporter.message(&format!(
            "resuming: {} of {} samples already recorded",
            samples.len() - todo.len(),
            samples.len()
        ));
    }
    let progress = reporter.start(label, Some(samples.len() as u64), ProgressUnit::Items);
    progress.set_position((samples.len() - todo.len()) as u64);
    for (id, sample) in todo {
        let started = std::time::Instant::now();
        let record = match run(sample) {
            Ok(record) => record,
            Err(e) => {
                json!({"sample": id, "error": e.to_string(), "ms": started.elapsed().as_millis() as u64})
            }
        };
        recorder.append(&record)?;
        progress.inc(1);
    }
    progress.finish();
    let (records, bad) = recorder.records()?;
    for line in bad {
        reporter.message(&format!("unreadable record skipped: {line}"));
    }
    Ok(records)
}
