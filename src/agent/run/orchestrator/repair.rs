//! Learning from a failed step: the step is repaired on its own first (the planner rewrites only its arguments,
//! the rest of the plan is kept), and a call that already failed with the same arguments is never made again —
//! a plan that repeats one is sent back, and a step whose resolved arguments repeat one fails without the call.

use serde_json::Value;

use super::Agent;
use crate::agent::log::events::{Event, PlanOrigin};
use crate::agent::plan::mend::mend_plan;
use crate::agent::plan::Plan;
use crate::agent::run::repair::{failed_step_text, repair_arguments, RepairRequest};
use crate::tools::Calculator;
use crate::Result;

/// Repairs a run may make in all (each is one planner call).
const MAX_REPAIRS: u32 = 3;

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
        let model = self.models.planner()?;
        let repaired = repair_arguments(model, &request, tokens);
        self.log_model_loads()?;
        let (call, usage) = match repaired {
            Ok(repaired) => repaired,
            Err(e) => {
                tracing::info!(step = %step.id, "no repair: {e}");
                return Ok(false);
            }
        };
        let version = plan.version;
        self.emit(Event::ExecutorCall {
            version,
            step: step.id.clone(),
            purpose: "repair".into(),
            role: Some("planner".into()),
            usage,
        })?;
        if let Some(error) = self.state.failed_call(&step.tool, &call.args) {
            tracing::info!(step = %step.id, "the repair repeats a call that failed ({error}); replanning");
            return Ok(false);
        }
        let mut repaired_plan = plan.clone();
        repaired_plan.steps[index].args = call.args.clone();
        // The repaired arguments go through the run's mends too (a time in the form its parameter asks for).
        let mended = mend_plan(&mut repaired_plan, self.registry, self.settings.mend);
        let call_args = repaired_plan.steps.iter().find(|s| s.id == step.id).map(|s| s.args.clone());
        if let Some(error) = call_args.as_ref().and_then(|args| self.state.failed_call(&step.tool, args)) {
            tracing::info!(step = %step.id, "the mended repair repeats a call that failed ({error}); replanning");
            return Ok(false);
        }
        // The error first: `runs show` clips the reason, and the arguments are in the plan printed under it.
        let reason = format!(
            "repaired step {}'s arguments after the tool's error: {} (was {}, now {})",
            step.id,
            failed.error,
            Value::Object(failed.args.clone()),
            Value::Object(call_args.unwrap_or(call.args))
        );
        self.record_plan(repaired_plan, PlanOrigin::Repair, &reason, None, None, mended.changes)?;
        Ok(true)
    }

    /// The steps of `plan` whose arguments (as written, no references) repeat a call that already failed, each
    /// with that call's error and the tool's parameters: the feedback that sends such a plan back.
    pub(super) fn repeated_failures(&self, plan: &Plan) -> Option<String> {
        let repeats: Vec<String> = plan
            .steps
            .iter()
            .filter(|s| s.references().is_empty())
            .filter_map(|s| {
                let error = self.state.failed_call(&s.tool, &s.args)?;
                let spec = self.registry.spec(&s.tool)?;
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
}
