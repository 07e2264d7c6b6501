//! A run as one JSON object (outcome, answer, plan, steps, usage, timings), read back from its log: what
//! `tandem run --json`, `tandem runs show --json` and the server's `GET /v1/runs/{id}` print.

use std::path::Path;

use serde_json::{json, Value};

use crate::agent::log::events::{Event, Record};
use crate::agent::log::runs::{load_run, RunState};
use crate::Result;

/// A run as one JSON object: outcome, answer, current plan, steps, usage, timings.
pub fn run_summary(id: &str, dir: &Path) -> Result<Value> {
    let contents = load_run(dir)?;
    let state = RunState::replay(&contents.records);
    let steps: Vec<Value> = contents.records.iter().filter_map(step_json).collect();
    let mends: Vec<Value> = contents.records.iter().flat_map(mends_json).collect();
    let (stop, detail) = match &state.finished {
        Some((stop, detail)) => (json!(stop), json!(detail)),
        None => (json!("interrupted"), Value::Null),
    };
    Ok(json!({
        "run_id": id,
        "run_dir": dir,
        "goal": state.goal,
        "stop": stop,
        "detail": detail,
        "answer": state.answer,
        "outputs": state.outputs,
        "plan": state.plan,
        "steps": steps,
        "mends": mends,
        "replans": state.replans,
        "planner": state.planner,
        "executor": state.executor,
        "wall_ms": state.last_ms.saturating_sub(state.started_ms),
        "settings": state.settings,
    }))
}

/// What the plan mends changed in each plan the planner wrote, with the plan's version.
fn mends_json(record: &Record) -> Vec<Value> {
    match &record.event {
        Event::PlanWritten { version, mends, .. } => mends
            .iter()
            .map(|mend| {
                let mut value = json!(mend);
                value["plan_version"] = json!(version);
                value
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn step_json(record: &Record) -> Option<Value> {
    match &record.event {
        Event::StepFinished { version, step, tool, args, output, error, ms, via } => Some(json!({
            "plan_version": version, "id": step, "tool": tool, "args": args, "output": output, "error": error,
            "ms": ms, "via": via
        })),
        _ => None,
    }
}
