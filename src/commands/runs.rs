//! `tandem runs list` and `tandem runs show`: past runs from their logs, as a table, a timeline, or JSON.

use std::path::Path;

use crate::agent::log::runs::load_run;
use crate::agent::log::summary::run_summary;
use crate::agent::setup::open_runs_dir;
use crate::agent::{RunState, RunsDir};
use crate::cli::RunsCommand;
use crate::commands::run_view::describe;
use crate::progress::clip;
use crate::{Error, Result};

/// Runs `tandem runs …`.
pub fn run(command: RunsCommand) -> Result<()> {
    match command {
        RunsCommand::List { runs } => list(&open_runs_dir(runs.runs_dir.as_ref())),
        RunsCommand::Show { id, runs, json } => {
            let runs = open_runs_dir(runs.runs_dir.as_ref());
            let (id, dir) = runs.find(&id)?;
            if json {
                let summary = run_summary(&id, &dir)?;
                println!("{}", serde_json::to_string_pretty(&summary).map_err(Error::encode("the run summary"))?);
                Ok(())
            } else {
                show(&id, &dir)
            }
        }
    }
}

fn list(runs: &RunsDir) -> Result<()> {
    let ids = runs.ids()?;
    if ids.is_empty() {
        println!("no runs yet under {} (start one with `tandem run \"goal\"`)", runs.root().display());
        return Ok(());
    }
    println!("{:<21} {:<11} {:>5} {:>8}  goal", "id", "status", "steps", "seconds");
    for id in ids {
        let contents = load_run(&runs.root().join(&id))?;
        let state = RunState::replay(&contents.records);
        let seconds = state.last_ms.saturating_sub(state.started_ms) as f64 / 1000.0;
        println!(
            "{:<21} {:<11} {:>5} {:>8.1}  {}",
            id,
            state.status(),
            state.steps_run,
            seconds,
            clip(&state.goal, 60)
        );
    }
    Ok(())
}

fn show(id: &str, dir: &Path) -> Result<()> {
    let contents = load_run(dir)?;
    println!("run {id}  ({})", dir.display());
    let start = contents.records.first().map_or(0, |r| r.at_ms);
    for record in &contents.records {
        if let Some(text) = describe(&record.event) {
            let offset = record.at_ms.saturating_sub(start) as f64 / 1000.0;
            let mut lines = text.lines();
            println!("{offset:>8.1}s  {}", lines.next().unwrap_or_default());
            for line in lines {
                println!("           {line}");
            }
        }
    }
    for bad in &contents.bad_lines {
        println!("   (unreadable line) {bad}");
    }
    let state = RunState::replay(&contents.records);
    if state.finished.is_none() {
        println!("   the log ends here: the run was interrupted; `tandem resume {id}` continues it");
    }
    Ok(())
}
