//! Benchmark suites run whole (`tandem bench tasks|nestful|bfcl|pairs|rescore`): a suite sample by sample with a
//! progress bar, every record kept, the summaries written (JSON, Markdown; a chart for pairs).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::agent::rules::RuleSet;
use crate::agent::{LazyModels, ModelSource};
use crate::bench::records::{run_samples, BenchRecorder};
use crate::bench::task_servers::WebServer;
use crate::bench::tasks::{parse_suite, run_task, Task, TaskSetup, TaskSuite, BUILTIN_TASKS};
use crate::engine::Engine;
use crate::progress::Reporter;
use crate::settings::{Drafting, Mode, PairSettings, SuiteSettings};
use crate::store::ModelStore;
use crate::{Error, Result};

/// A suite's name, its scorer over records, and its headline columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// End-to-end tasks.
    Tasks,
    /// NESTFUL planning.
    Nestful,
    /// BFCL single calls.
    Bfcl,
}

impl Suite {
    /// The suite's name in paths and summaries.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Tasks => "tasks",
            Suite::Nestful => "nestful",
            Suite::Bfcl => "bfcl",
        }
    }

    /// The suite of a name ([`Suite::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        [Suite::Tasks, Suite::Nestful, Suite::Bfcl].into_iter().find(|s| s.name() == name)
    }

    /// The summary of a suite's records.
    pub fn summarise(self, records: &[Value]) -> Value {
        match self {
            Suite::Tasks => crate::bench::tasks::summarise(records),
            Suite::Nestful => crate::bench::nestful::runner::summarise(records),
            Suite::Bfcl => crate::bench::bfcl::runner::summarise(records),
        }
    }

    /// A record with its score recomputed from its prediction and gold (tasks keep theirs: their checks read
    /// the workspace, which the run directory keeps).
    pub fn rescore(self, record: Value) -> Value {
        match self {
            Suite::Tasks => record,
            Suite::Nestful => crate::bench::nestful::runner::rescore(record),
            Suite::Bfcl => crate::bench::bfcl::runner::rescore(record),
        }
    }

    /// The name of the headline quality figure.
    pub fn quality_name(self) -> &'static str {
        match self {
            Suite::Tasks => "success rate",
            Suite::Nestful => "F1 parameters",
            Suite::Bfcl => "AST accuracy",
        }
    }

    /// The headline quality figure (0..1) of a summary, for tables and charts.
    pub fn quality(self, summary: &Value) -> f64 {
        let key = match self {
            Suite::Tasks => "success_rate",
            Suite::Nestful => "f1_params",
            Suite::Bfcl => "accuracy",
        };
        summary[key].as_f64().unwrap_or(0.0)
    }
}

/// The planner and executor of one run, and how the planner works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    /// Planner id or path.
    pub planner: String,
    /// Executor id or path.
    pub executor: String,
    /// Plan-ahead, or step for the executor-alone baseline.
    pub mode: Mode,
}

impl Pair {
    /// A short label: `planner → executor`, with the mode when it is not plan-ahead.
    pub fn label(&self) -> String {
        let short = |id: &str| id.trim_end_matches("-q4_k_m").trim_end_matches("-instruct").to_string();
        let base = if self.planner == self.executor {
            format!("{} alone", short(&self.planner))
        } else {
            format!("{} → {}", short(&self.planner), short(&self.executor))
        };
        if self.mode == Mode::PlanAhead {
            base
        } else {
            format!("{base} ({} mode)", self.mode.name())
        }
    }
}

/// Id, path and SHA-256 of a model, for the records (resolving pulls it if needed).
fn model_record(id: &str, reporter: &dyn Reporter) -> Result<Value> {
    let resolved = ModelStore::open()?.resolve(id, reporter)?;
    Ok(json!({"id": id, "path": resolved.path, "sha256": resolved.sha256}))
}

/// The settings a suite's samples and scores depend on (besides the pair): what the shards of one benchmark
/// must agree on, kept in `settings.json` from the start and in `summary.json` at the end.
pub fn settings_record(args: &SuiteSettings) -> Value {
    let mut record = json!({
        "data": args.data, "tools": args.tools, "tools_top_k": args.tools_top_k, "no_grammar": args.no_grammar,
        "categories": args.bfcl_categories(), "limit": args.limit, "seed": args.seed,
    });
    // Only when searching, so the runs of before plan search keep their settings (and can be resumed).
    if args.pair.plans > 1 {
        record["plans"] = json!(args.pair.plans);
    }
    record
}

/// The recorder: a fresh directory under `--out` (named for the shard, with `--shard`), or the `--resume` one.
fn recorder(args: &SuiteSettings, name: &str) -> Result<BenchRecorder> {
    let started = json!({"shard": args.shard, "settings": settings_record(args)});
    let recorder = match &args.resume {
        Some(dir) => {
            if !dir.join(BenchRecorder::SAMPLES).exists() {
                return Err(Error::Bench(format!("{} holds no benchmark records to resume", dir.display())));
            }
            let kept = std::fs::read_to_string(dir.join("settings.json")).ok();
            if let Some(mut kept) = kept.and_then(|t| serde_json::from_str::<Value>(&t).ok()) {
                // A resumed run may take more samples (a larger --limit); the rest must be as it was.
                let mut now = started.clone();
                kept["settings"]["limit"] = Value::Null;
                now["settings"]["limit"] = Value::Null;
                if kept != now {
                    return Err(Error::Usage(format!(
                        "{} was run with other settings or another shard ({kept}); resume it with the same flags",
                        dir.display()
                    )));
                }
            }
            BenchRecorder::open(dir)?
        }
        None => {
            let name = match &args.shard {
                Some(shard) => format!("{name}-{}", shard.tag()),
                None => name.to_string(),
            };
            let recorder = BenchRecorder::create(&args.out, &name)?;
            let text = serde_json::to_string_pretty(&started).map_err(Error::encode("the settings"))?;
            recorder.write("settings.json", &text)?;
            recorder
        }
    };
    Ok(recorder.with_shard(args.shard))
}

/// Writes `summary.json` and `summary.md` for one suite run and prints the Markdown. `about` adds fields to
/// `summary.json` (the shard and settings of a run; the shards of a merge).
pub fn write_summary(
    recorder: &BenchRecorder,
    suite: Suite,
    pair: &Pair,
    models: Value,
    records: &[Value],
    about: Value,
) -> Result<Value> {
    let summary = suite.summarise(records);
    let mut document = json!({
        "suite": suite.name(),
        "pair": {"planner": pair.planner, "executor": pair.executor, "mode": pair.mode},
        "models": models,
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "finished_unix_ms": crate::agent::log::events::now_ms(),
        "summary": summary,
    });
    if let (Some(document), Some(about)) = (document.as_object_mut(), about.as_object()) {
        document.extend(about.clone());
    }
    let text = serde_json::to_string_pretty(&document).map_err(Error::encode("the summary"))?;
    recorder.write("summary.json", &text)?;
    let markdown = markdown_table(suite, &[(pair.clone(), summary.clone())]);
    recorder.write("summary.md", &markdown)?;
    println!("{markdown}");
    println!("records: {}", recorder.dir().join(BenchRecorder::SAMPLES).display());
    Ok(summary)
}

/// A Markdown table with one row per pair: every numeric summary field as a column.
pub fn markdown_table(suite: Suite, rows: &[(Pair, Value)]) -> String {
    let columns: Vec<String> = rows
        .first()
        .and_then(|(_, s)| s.as_object())
        .map(|o| o.iter().filter(|(_, v)| v.is_number()).map(|(k, _)| k.clone()).collect())
        .unwrap_or_default();
    let mut out = format!(
        "### {}\n\n| pair | {} |\n| --- |{}\n",
        suite.name(),
        columns.join(" | "),
        " --- |".repeat(columns.len())
    );
    for (pair, summary) in rows {
        let cells: Vec<String> = columns
            .iter()
            .map(|c| match summary[c].as_f64() {
                Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
                Some(v) => format!("{v:.3}"),
                None => "—".into(),
            })
            .collect();
        out.push_str(&format!("| {} | {} |\n", pair.label(), cells.join(" | ")));
    }
    out
}

/// The pair the settings' planner, executor and mode name.
pub fn pair_of(args: &SuiteSettings) -> Pair {
    Pair { planner: args.pair.planner.clone(), executor: args.pair.executor.clone(), mode: args.pair.mode }
}

fn lazy_models<'r>(args: &SuiteSettings, pair: &Pair, reporter: &'r dyn Reporter) -> Result<LazyModels<'r>> {
    Ok(Engine::new(args.compute, Drafting::WhereExact)?.models(&pair.planner, &pair.executor, reporter))
}

/// The tasks suite of `--data`, or the built-in suite.
fn load_tasks(args: &SuiteSettings) -> Result<TaskSuite> {
    match &args.data {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
            parse_suite(&text, path)
        }
        None => parse_suite(BUILTIN_TASKS, Path::new("benches/tasks.toml")),
    }
}

/// The tasks of `categories` (all when none is named), in the suite's order; a category no task has is an error
/// that lists the suite's categories.
fn in_categories(tasks: Vec<Task>, categories: &[String]) -> Result<Vec<Task>> {
    if categories.is_empty() {
        return Ok(tasks);
    }
    let known: BTreeSet<&str> = tasks.iter().map(|t| t.category.as_str()).collect();
    if let Some(unknown) = categories.iter().find(|c| !known.contains(c.as_str())) {
        let known: Vec<&str> = known.into_iter().collect();
        return Err(Error::Usage(format!(
            "no task of this suite has the category '{unknown}' (its categories: {})",
            known.join(", ")
        )));
    }
    Ok(tasks.into_iter().filter(|t| categories.contains(&t.category)).collect())
}

/// Runs one suite for one pair; returns the summary and the run directory.
pub fn run_suite(suite: Suite, args: &SuiteSettings, pair: &Pair, reporter: &dyn Reporter) -> Result<(Value, PathBuf)> {
    if matches!(suite, Suite::Nestful) && !args.categories.is_empty() {
        return Err(Error::Usage("--categories picks BFCL's or the tasks suite's categories; NESTFUL has none".into()));
    }
    // Read before the run directory is made, so a bad file or category leaves nothing behind.
    let mut task_suite = if matches!(suite, Suite::Tasks) { Some(load_tasks(args)?) } else { None };
    let tasks = match task_suite.as_mut() {
        Some(s) => in_categories(std::mem::take(&mut s.task), &args.categories)?,
        None => vec![],
    };
    let mut recorder = recorder(args, &run_name(suite, pair))?;
    reporter.message(&format!("{} for {}: records in {}", suite.name(), pair.label(), recorder.dir().display()));
    let mut models = lazy_models(args, pair, reporter)?;
    let records = match suite {
        Suite::Tasks => {
            let samples: Vec<(Value, _)> =
                tasks.into_iter().take(args.limit.unwrap_or(usize::MAX)).map(|t| (json!(t.id), t)).collect();
            let dir = recorder.dir().to_path_buf();
            let task_suite = task_suite.unwrap_or_else(|| TaskSuite {
                task: vec![],
                servers: Default::default(),
                pages: Default::default(),
                pages_port: None,
            });
            let web = match task_suite.pages.is_empty() {
                true => None,
                false => Some(WebServer::start(&task_suite.pages, task_suite.pages_port)?),
            };
            if let Some(web) = &web {
                reporter.message(&format!("the suite's pages are served at {}", web.address()));
                if let Some(asked) = task_suite.pages_port.filter(|&p| p != web.port()) {
                    // The goals then carry another address than on other runs, so their plans may differ.
                    reporter.message(&format!(
                        "port {asked} (the suite's pages_port) is taken, so the pages are on {} instead; goals that \
                         name the address differ from other runs' (free the port to compare runs goal by goal)",
                        web.port()
                    ));
                }
            }
            let setup = TaskSetup {
                bench_dir: &dir,
                // This run's pair: the matrix's models and mode, the suite's settings for the rest.
                pair: PairSettings {
                    planner: pair.planner.clone(),
                    executor: pair.executor.clone(),
                    mode: pair.mode,
                    ..args.pair.clone()
                },
                tools_top_k: args.tools_top_k,
                servers: &task_suite.servers,
                web: web.as_ref().map(WebServer::address),
            };
            run_samples(&samples, &mut recorder, reporter, "tasks", |task| {
                run_task(task, &setup, &mut models as &mut dyn ModelSource)
            })?
        }
        Suite::Nestful => crate::bench::nestful::runner::run(args, &mut recorder, reporter, &mut models)?,
        Suite::Bfcl => crate::bench::bfcl::runner::run(args, &mut recorder, reporter, &mut models)?,
    };
    let mut model_ids = vec![model_record(&pair.planner, reporter)?];
    if pair.executor != pair.planner {
        model_ids.push(model_record(&pair.executor, reporter)?);
    }
    let about = json!({"shard": args.shard, "settings": settings_record(args)});
    let summary = write_summary(&recorder, suite, pair, json!(model_ids), &records, about)?;
    Ok((summary, recorder.dir().to_path_buf()))
}

/// A suite run's directory name (before its stamp): the suite and the pair.
pub fn run_name(suite: Suite, pair: &Pair) -> String {
    format!("{}-{}", suite.name(), slug(pair))
}

fn slug(pair: &Pair) -> String {
    let short = |id: &str| {
        Path::new(id)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or(id)
            .replace("qwen2.5-coder-", "q")
            .replace("-instruct-q4_k_m", "")
    };
    let mut slug = format!("{}+{}", short(&pair.planner), short(&pair.executor));
    if pair.mode != Mode::PlanAhead {
        slug.push_str(&format!("+{}", pair.mode.name()));
    }
    slug
}

/// Where `bench rescore --mend` writes a run's records as today's mends make them, beside `samples.jsonl`.
pub const MENDED_RECORDS: &str = "samples.mended.jsonl";

/// `tandem bench rescore DIR [--mend [PROFILE] [--data DIR]]`: recomputes the summary from the records; with
/// `mend`, a NESTFUL run's plans are first read again from the planner's text through today's plan mends of that
/// profile (`data`: the
/// NESTFUL data directory, as `bench nestful --data`), and those records are written to [`MENDED_RECORDS`].
pub fn rescore(dir: &Path, mend: Option<RuleSet>, data: Option<&Path>) -> Result<()> {
    let summary_path = dir.join("summary.json");
    let suite_name = std::fs::read_to_string(&summary_path)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["suite"].as_str().map(str::to_string))
        .or_else(|| dir.file_name()?.to_str()?.split('-').next().map(str::to_string))
        .unwrap_or_default();
    let suite = Suite::from_name(&suite_name).ok_or_else(|| {
        Error::Bench(format!("cannot tell which suite {} holds (no summary.json, unknown name)", dir.display()))
    })?;
    let (records, bad) = BenchRecorder::read(dir)?;
    for line in &bad {
        eprintln!("unreadable record skipped: {line}");
    }
    let records: Vec<Value> = if let Some(profile) = mend {
        if suite != Suite::Nestful {
            return Err(Error::Usage(format!(
                "--mend reads NESTFUL plans again, and {} holds a {suite_name} run; leave --mend out",
                dir.display()
            )));
        }
        let data_dir = crate::bench::nestful::runner::data_dir(data, "nestful")?;
        let tools = crate::bench::nestful::load(&data_dir).map_err(|e| Error::Bench(e.to_string()))?.tools;
        let records: Vec<Value> =
            records.into_iter().map(|r| crate::bench::nestful::runner::remend(r, &tools, profile)).collect();
        // The run's own records stay as they were; the plans as mended today go beside them.
        let path = dir.join(MENDED_RECORDS);
        let lines: String = records.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(&path, lines).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        eprintln!("records with today's mends: {}", path.display());
        records
    } else {
        records.into_iter().map(|r| suite.rescore(r)).collect()
    };
    let summary = suite.summarise(&records);
    println!("{}", serde_json::to_string_pretty(&summary).map_err(Error::encode("the summary"))?);
    Ok(())
}

/// The pairs `bench pairs` runs: the planner × executor matrix, then (unless `--no-baselines`) each model alone
/// and each executor alone in step mode (ReAct-style, no separate planner). Suites that use one role only
/// (NESTFUL: the planner; BFCL: the executor) run each distinct model once.
pub fn pair_matrix(suite: Suite, planners: &[String], executors: &[String], baselines: bool) -> Vec<Pair> {
    let pair = |p: &str, e: &str, mode: Mode| Pair { planner: p.into(), executor: e.into(), mode };
    let mut pairs = Vec::new();
    let mut push = |candidate: Pair| {
        if !pairs.contains(&candidate) {
            pairs.push(candidate);
        }
    };
    match suite {
        Suite::Nestful => planners.iter().for_each(|p| push(pair(p, p, Mode::PlanAhead))),
        Suite::Bfcl => executors.iter().for_each(|e| push(pair(e, e, Mode::PlanAhead))),
        Suite::Tasks => {
            for p in planners {
                for e in executors {
                    push(pair(p, e, Mode::PlanAhead));
                }
            }
            if baselines {
                for m in planners.iter().chain(executors) {
                    push(pair(m, m, Mode::PlanAhead));
                }
                for e in executors {
                    push(pair(e, e, Mode::Step));
                }
            }
        }
    }
    pairs
}

/// What `tandem bench pairs` runs: a suite over a matrix of models.
#[derive(Debug, Clone)]
pub struct PairsSettings {
    /// The suite run for every pair.
    pub suite: Suite,
    /// Planner models (ids or paths).
    pub planners: Vec<String>,
    /// Executor models (ids or paths).
    pub executors: Vec<String>,
    /// Also each model alone, and each executor alone in step mode.
    pub baselines: bool,
    /// The suite's settings (their planner and executor are ignored).
    pub suite_settings: SuiteSettings,
}

/// `tandem bench pairs`.
pub fn pairs(args: &PairsSettings, reporter: &dyn Reporter) -> Result<()> {
    let suite = args.suite;
    let matrix = pair_matrix(suite, &args.planners, &args.executors, args.baselines);
    reporter.message(&format!("{} pair(s) on {}", matrix.len(), suite.name()));
    let mut suite_args = args.suite_settings.clone();
    suite_args.resume = None;
    let mut rows = Vec::new();
    for pair in &matrix {
        let (summary, dir) = run_suite(suite, &suite_args, pair, reporter)?;
        rows.push((pair.clone(), summary, dir));
    }
    let name = match &args.suite_settings.shard {
        Some(shard) => format!("pairs-{}-{}", suite.name(), shard.tag()),
        None => format!("pairs-{}", suite.name()),
    };
    write_pairs_report(suite, &rows, &args.suite_settings.out, &name)
}

/// Writes the report of a matrix of pairs (`summary.md`, `summary.json` naming each pair's run directory,
/// `chart.svg`) into a fresh directory `<out>/<name>-<stamp>` and prints the table.
pub fn write_pairs_report(suite: Suite, rows: &[(Pair, Value, PathBuf)], out: &Path, name: &str) -> Result<()> {
    let report = BenchRecorder::create(out, name)?;
    let table: Vec<(Pair, Value)> = rows.iter().map(|(p, s, _)| (p.clone(), s.clone())).collect();
    let markdown = markdown_table(suite, &table);
    report.write("summary.md", &markdown)?;
    let document: Vec<Value> = rows
        .iter()
        .map(|(p, s, d)| json!({"planner": p.planner, "executor": p.executor, "mode": p.mode, "summary": s, "run_dir": d}))
        .collect();
    report.write("summary.json", &serde_json::to_string_pretty(&document).map_err(Error::encode("the summary"))?)?;
    let points: Vec<crate::bench::chart::Point> = rows
        .iter()
        .map(|(p, s, _)| crate::bench::chart::Point {
            label: p.label(),
            seconds: s["median_seconds"].as_f64().unwrap_or(0.0),
            quality: suite.quality(s),
        })
        .collect();
    let chart = crate::bench::chart::scatter_svg(
        &format!("{}: quality vs latency", suite.name()),
        suite.quality_name(),
        &points,
    );
    let chart_path = report.write("chart.svg", &chart)?;
    println!("{markdown}\nchart: {}", chart_path.display());
    Ok(())
}
