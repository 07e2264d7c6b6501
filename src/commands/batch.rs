//! `tandem batch`: runs the batch engine (`agent::batch_run`) on the flags' settings, then prints the summary (and
//! one JSON object with `--json`).

use crate::agent::batch::merge::merge_results;
use crate::agent::batch::run::run_batch;
use crate::agent::batch::BatchSummary;
use crate::cli::{BatchArgs, BatchCommand, BatchMergeArgs};
use crate::commands::Outcome;
use crate::progress::Reporter;
use crate::{Error, Result};

/// Runs `tandem batch` (or `tandem batch merge`).
pub fn run(args: BatchArgs, reporter: &dyn Reporter) -> Result<Outcome> {
    if let Some(BatchCommand::Merge(merge)) = &args.command {
        return merge_shards(merge);
    }
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
            summary.results.display()
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

/// `tandem batch merge`: joins the shards' results and prints the totals.
fn merge_shards(args: &BatchMergeArgs) -> Result<Outcome> {
    let s = merge_results(&args.files, &args.out)?;
    eprintln!(
        "batch merge: {} shard file(s) of {}: {} goal(s), {} done, {} failed, {:.1} s of goal wall time; planner {} \
         call(s), {} → {} tokens; executor {} call(s), {} → {} tokens; results in {}",
        args.files.len(),
        s.goals_file.display(),
        s.lines,
        s.done,
        s.failed,
        s.wall_s,
        s.planner.calls,
        s.planner.tokens_in,
        s.planner.tokens_out,
        s.executor.calls,
        s.executor.tokens_in,
        s.executor.tokens_out,
        s.results.display()
    );
    if args.json {
        println!("{}", serde_json::to_string(&s).map_err(Error::encode("the merge summary"))?);
    }
    Ok(Outcome::Done)
}
