//! `tandem batch`: runs the batch engine (`agent::batch_run`) on the flags' settings, then prints the summary (and
//! one JSON object with `--json`).

use crate::agent::batch::BatchSummary;
use crate::agent::batch_run::run_batch;
use crate::cli::BatchArgs;
use crate::commands::Outcome;
use crate::progress::Reporter;
use crate::{Error, Result};

/// Runs `tandem batch`.
pub fn run(args: BatchArgs, reporter: &dyn Reporter) -> Result<Outcome> {
    let settings = args.settings();
    let summary = run_batch(&settings, reporter)?;
    eprintln!("{}", summary_text(&summary));
    if args.runner.json {
        println!("{}", serde_json::to_string(&summary).map_err(Error::encode("the batch summary"))?);
    }
    if summary.failed > 0 {
        return Ok(Outcome::Stopped(format!(
            "{} of {} goal(s) did not finish; their records in {} say why (--retry-failed runs them again)",
            summary.failed,
            summary.done + summary.failed,
            args.out.display()
        )));
    }
    Ok(Outcome::Done)
}

/// The summary in words.
fn summary_text(s: &BatchSummary) -> String {
    let sharing = match (s.planner_goals_per_pass, s.executor_goals_per_pass) {
        (Some(planner), Some(executor)) => format!(
            "; {} goals at a time, a forward pass served {planner:.2} goals on average (planner), {executor:.2} \
             (executor)",
            s.parallel
        ),
        _ => String::new(),
    };
    format!(
        "batch: {} done, {} failed, {} skipped in {:.1} s ({:.2} goals/min); planner {} call(s), {} → {} tokens \
         ({:.1} tokens out/s); executor {} call(s), {} → {} tokens ({:.1} tokens out/s){sharing}; results in {}",
        s.done,
        s.failed,
        s.skipped,
        s.wall_s,
        s.goals_per_minute,
        s.planner.calls,
        s.planner.tokens_in,
        s.planner.tokens_out,
        s.planner_tokens_out_per_s,
        s.executor.calls,
        s.executor.tokens_in,
        s.executor.tokens_out,
        s.executor_tokens_out_per_s,
        s.results.display()
    )
}
