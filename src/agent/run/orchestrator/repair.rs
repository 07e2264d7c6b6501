//! Learning from a failed step: the step is repaired on its own first (the planner rewrites only its arguments,
//! the rest of the plan is kept), and a call that already failed with the same arguments is never made again —
//! a plan that repeats one is sent back, and a step whose resolved arguments repeat one fails without the call.

use std::path::Path;

use serde_json::Value;

use super::{Agent, PlanWriting};
use crate::agent::log::events::{Event, PlanOrigin};
use crate::agent::log::runs::RunState;
use crate::agent::plan::search::samplings;
use crate::agent::plan::Plan;
use crate::agent::rules::{check_plan, mend_plan, Refusal, RuleSet};
use crate::agent::run::repair::{failed_step_text, repair_arguments, RepairRequest};
use crate::decode::Sampling;
use crate::tools::{Calculator, ToolRegistry};
use crate::Result;

/// Repairs a run may make in all (each is one planner call, and its retries another).
const MAX_REPAIRS: u32 = 3;
/// Sampled repairs written side by side when the greedy one repeats a call that failed.
const REPAIR_RETRIES: usize = 3;

impl Agent<'_> {
    /// After a step of `plan` failed: has the planner rewrite that step's arguments and records the plan with them
    /// as the next revision (origin `repair`). Returns `false` where no repair was made (the step's plan was
    /// itself a repair, the tool is a model or the calculator, a budget is spent, the planner failed, or it wrote
    /// a call that already failed): then the whole goal is replanned.
    pub(super) fn repair(&mut self, plan: &Plan) -> Result<bool> {
        let Some(failed) = self.state.last_failure.clone() else { return Ok(false) };
        // A process that failed is no question of arguments: the replan may call it again as it was.
        if failed.version != plan.version
            || failed.unchanged_may_pass
            || self.state.plan_origin == Some(PlanOrigin::Repair)
            || self.state.repairs >= MAX_REPAIRS
            || self.spent_budget(1).is_some()
        {
            return Ok(false);
        }
        let Some(index) = plan.steps.iter().position(|s| s.id == failed.step) else { return Ok(false) };
        let step = plan.steps[index].clone();
        let Some(spec) = self.registry.spec(&step.tool).cloned() else { return Ok(false) };
        if spec.needs_model || step.tool == Calculator::NAME || step.tool != failed.tool {
            return Ok(false);
        }
        let failed_before: Vec<_> = self
            .state
            .failed_calls
            .iter()
            .filter(|(tool, args, _)| *tool == step.tool && *args != failed.args)
            .map(|(_, args, _)| args.clone())
            .collect();
        let results: Vec<String> = plan
            .steps
            .iter()
            .filter_map(|s| self.state.outputs.get(&s.id).map(|o| format!("- {} ({}): {o}", s.id, s.tool)))
            .collect();
        let goal = self.state.goal.clone();
        let request = RepairRequest {
            goal: &goal,
            step: &step,
            spec: &spec,
            args: &failed.args,
            error: &failed.error,
            failed_before: &failed_before,
            results: &results,
        };
        let tokens = self.settings.budgets.executor_tokens.max(256);
        // The greedy repair first; where it (as written or as mended) repeats a call that failed, sampled ones: a
        // greedy model that wrote a rejected value once writes it again ("America/Bogotá", refused by a time
        // server), and the retries are this rule's way of not repeating a failed call.
        let all = samplings(1 + REPAIR_RETRIES);
        let rounds: [&[(Sampling, u64)]; 2] = [&all[..1], &all[1..]];
        let mut accepted = None;
        for round in rounds {
            let model = self.models.planner()?;
            let repaired = repair_arguments(model, &request, tokens, round);
            self.log_model_loads()?;
            let (calls, usage) = match repaired {
                Ok(repaired) => repaired,
                Err(e) => {
                    tracing::info!(step = %step.id, "no repair: {e}");
                    return Ok(false);
                }
            };
            self.emit(Event::ExecutorCall {
                version: plan.version,
                step: step.id.clone(),
                purpose: if round.len() == 1 { "repair".into() } else { "repair retries".into() },
                role: Some("planner".into()),
                usage,
            })?;
            accepted = calls.into_iter().find_map(|call| self.repaired_plan(plan, index, call.args));
            if accepted.is_some() || self.spent_budget(1).is_some() {
                break;
            }
        }
        let Some((repaired_plan, mended, call_args)) = accepted else {
            tracing::info!(step = %step.id, "every repair repeats a call that failed; replanning");
            return Ok(false);
        };
        // The error first: `runs show` clips the reason, and the arguments are in the plan printed under it.
        let reason = format!(
            "repaired step {}'s arguments after the tool's error: {} (was {}, now {})",
            step.id,
            failed.error,
            Value::Object(failed.args.clone()),
            Value::Object(call_args)
        );
        self.record_plan(
            repaired_plan,
            PlanOrigin::Repair,
            &reason,
            PlanWriting { mends: mended.changes, ..PlanWriting::default() },
        )?;
        Ok(true)
    }

    /// `plan` with step `index` called with `args`, mended as the run mends plans, with its mends and the call's
    /// arguments; `None` where the call, as written or as mended, repeats one that failed (each candidate repair
    /// goes through here).
    fn repaired_plan(
        &self,
        plan: &Plan,
        index: usize,
        args: serde_json::Map<String, Value>,
    ) -> Option<(Plan, crate::agent::rules::Mended, serde_json::Map<String, Value>)> {
        let step = &plan.steps[index];
        if let Some(error) = self.state.failed_call(&step.tool, &args) {
            tracing::info!(step = %step.id, "the repair repeats a call that failed ({error})");
            return None;
        }
        let mut repaired_plan = plan.clone();
        repaired_plan.steps[index].args = args;
        // The repaired arguments go through the run's mends too (a time in the form its parameter asks for).
        // What the repair's writer was shown: the results so far (a folder a listing showed is a known one).
        let seen = self.state.outputs.values().map(Value::to_string).collect::<Vec<_>>().join("\n");
        let mended = mend_plan(&mut repaired_plan, self.registry, self.rules(), &seen);
        let call_args = repaired_plan.steps[index].args.clone();
        if let Some(error) = self.state.failed_call(&step.tool, &call_args) {
            tracing::info!(step = %step.id, "the mended repair repeats a call that failed ({error})");
            return None;
        }
        Some((repaired_plan, mended, call_args))
    }

    /// The steps of `plan` whose arguments (as written, no references) repeat a call that already failed, each
    /// with that call's error and the tool's parameters: the feedback that sends such a plan back.
    pub(super) fn repeated_failures(&self, plan: &Plan) -> Option<String> {
        repeated_failures(&self.state, self.registry, plan)
    }
}

/// [`Agent::repeated_failures`] on a run's state and its tools.
pub(super) fn repeated_failures(state: &RunState, registry: &ToolRegistry, plan: &Plan) -> Option<String> {
    let repeats: Vec<String> = plan
        .steps
        .iter()
        .filter(|s| s.references().is_empty())
        .filter_map(|s| {
            let error = state.failed_call(&s.tool, &s.args)?;
            let spec = registry.spec(&s.tool)?;
            Some(failed_step_text(&s.id, spec, &s.args, error))
        })
        .collect();
    (!repeats.is_empty()).then(|| {
        format!(
            "That plan repeats calls that already failed with the same arguments; they are not made again:\n{}\n\
             Write a corrected plan that gives these steps arguments the tool accepts.",
            repeats.join("\n")
        )
    })
}

/// The rule book's checks (`agent::rules::check_plan`) on a plan the planner wrote: the first refusal that sends
/// it back, where one does. A check sends a plan back once: a check whose marker is in an earlier revision's
/// feedback is not asked again, so the plan written then runs.
pub(super) fn plan_checks(
    state: &RunState,
    registry: &ToolRegistry,
    workspace: &Path,
    rules: RuleSet,
    plan: &Plan,
) -> Option<Refusal> {
    let sent_back = |marker: &str| state.revisions.iter().any(|r| r.feedback.contains(marker));
    check_plan(plan, registry, workspace, rules, sent_back).into_iter().next()
}
