//! Step mode: the planner proposes one step at a time after seeing the observations so far, or answers.

use std::time::Instant;

use serde_json::Value;

use super::judging::{final_answer, output_text};
use super::{Agent, Execution, PlanWriting, Stop};
use crate::agent::log::events::{Event, PlanOrigin, StopReason};
use crate::agent::log::runs::call_key;
use crate::agent::plan::planner::{next_move, NextMove};
use crate::agent::plan::resolve_args;
use crate::agent::plan::{Plan, Step};
use crate::agent::usage::ModelUsage;
use crate::Result;

impl Agent<'_> {
    pub(super) fn step_mode(&mut self, given_plan: Option<Plan>) -> Result<Stop> {
        if self.state.plan.is_none() {
            let start =
                given_plan.unwrap_or_else(|| Plan { goal: self.state.goal.clone(), version: 1, steps: Vec::new() });
            if start.steps.is_empty() {
                // Nothing to validate yet: the planner adds steps one at a time.
                let plan = Plan { version: 1, ..start };
                self.emit(Event::PlanWritten {
                    version: 1,
                    origin: PlanOrigin::NextStep,
                    reason: "step mode".into(),
                    plan,
                    issues: Vec::new(),
                    usage: None,
                    search: None,
                    mends: Vec::new(),
                    thinking: None,
                })?;
            } else {
                self.record_plan(start, PlanOrigin::Given, "step mode", PlanWriting::default())?;
            }
        }
        let mut rejected_proposals = 0u32;
        loop {
            let plan = self.state.plan.clone().expect("recorded above");
            // Given steps (or a resumed run's) run first.
            if plan.steps.iter().any(|s| !self.state.outputs.contains_key(&s.id)) {
                match self.execute(&plan)? {
                    Execution::Complete => {}
                    Execution::Failed(record) => {
                        // The failed step leaves the plan; the planner sees the failure in the record.
                        rejected_proposals += 1;
                        if rejected_proposals > self.settings.budgets.max_replans {
                            return Ok(Stop::new(
                                StopReason::Budget,
                                format!("too many failed steps (--max-replans); last: {record}"),
                            ));
                        }
                        self.emit(Event::Replan { from_version: plan.version, reason: record })?;
                        let mut trimmed = plan.clone();
                        trimmed.steps.retain(|s| self.state.outputs.contains_key(&s.id));
                        trimmed.version = plan.version;
                        self.emit(Event::PlanWritten {
                            version: plan.version,
                            origin: PlanOrigin::NextStep,
                            reason: "failed step removed".into(),
                            plan: trimmed,
                            issues: Vec::new(),
                            usage: None,
                            search: None,
                            mends: Vec::new(),
                            thinking: None,
                        })?;
                        continue;
                    }
                    // Plan-ahead only: step mode writes each step after seeing the results so far.
                    Execution::Rewrite(_) => {}
                    Execution::Stopped(stop) => return Ok(stop),
                }
            }
            if let Some(stop) = self.spent_budget(1) {
                return Ok(stop);
            }
            let record = self.step_record(&plan);
            let goal = self.state.goal.clone();
            let tokens = self.settings.budgets.plan_tokens;
            let tools = self.pipeline.shown();
            let model = self.models.planner()?;
            let started = Instant::now();
            let proposed = next_move(model, &goal, tools, &record, tokens);
            self.log_model_loads()?;
            let (next, _text, timings) = match proposed {
                Ok(proposed) => proposed,
                Err(e) => {
                    return Ok(Stop::new(StopReason::Error, format!("the planner could not propose a step: {e}")))
                }
            };
            let usage = ModelUsage {
                tokens_in: timings.prompt_tokens,
                tokens_out: timings.generated_tokens,
                ms: started.elapsed().as_millis() as u64,
            };
            let mut grown = plan.clone();
            let answer = match next {
                NextMove::Answer(answer) => Some(answer),
                NextMove::Step(mut step) => {
                    step.id = format!("s{}", plan.steps.len() + 1);
                    // A call that already ran can teach nothing new: small planners repeat the last call when
                    // they should answer, so its result is taken as the answer.
                    let repeated = self.repeated_call(&step);
                    grown.steps.push(step);
                    repeated
                }
            };
            let issues: Vec<String> = grown.validate(self.registry).iter().map(ToString::to_string).collect();
            let reason = if answer.is_some() { "answer" } else { "next step" };
            let logged = if issues.is_empty() && answer.is_none() { grown } else { plan.clone() };
            self.emit(Event::PlanWritten {
                version: plan.version,
                origin: PlanOrigin::NextStep,
                reason: reason.into(),
                plan: logged,
                issues: issues.clone(),
                usage: Some(usage),
                search: None,
                mends: Vec::new(),
                thinking: None,
            })?;
            if let Some(answer) = answer {
                // An answer with no letter or digit in it says nothing: the results speak instead.
                let says_something = answer.chars().any(char::is_alphanumeric);
                let text =
                    if says_something || plan.steps.is_empty() { answer } else { final_answer(&plan, &self.state) };
                self.emit(Event::Answer { text })?;
                return Ok(Stop::new(StopReason::Done, format!("{} step(s) run in step mode", plan.steps.len())));
            }
            if !issues.is_empty() {
                rejected_proposals += 1;
                if rejected_proposals > self.settings.budgets.max_replans {
                    return Ok(Stop::new(
                        StopReason::Budget,
                        format!("too many invalid proposals; last: {}", issues.join("; ")),
                    ));
                }
            }
        }
    }

    /// The output of an earlier identical call, as text, if the step repeats one.
    fn repeated_call(&self, step: &Step) -> Option<String> {
        let resolved = resolve_args(step, &self.state.outputs).ok()?;
        self.state.call_cache.get(&call_key(&step.tool, &resolved)).map(output_text)
    }

    /// Step mode's view of the run so far, for the planner.
    fn step_record(&self, plan: &Plan) -> String {
        let mut lines: Vec<String> = plan
            .steps
            .iter()
            .filter_map(|s| {
                let output = self.state.outputs.get(&s.id)?;
                Some(format!("{} {} {} -> {}", s.id, s.tool, Value::Object(s.args.clone()), output_text(output)))
            })
            .collect();
        lines.extend(self.state.failures.iter().map(|f| format!("(failed, not in the plan) {f}")));
        lines.join("\n")
    }
}
