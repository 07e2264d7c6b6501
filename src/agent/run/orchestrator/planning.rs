//! Plan-ahead mode: the whole plan first (validated and approved), run, and a new revision after a failure.

use std::time::Instant;

use super::judging::Conclusion;
use super::repair::{plan_checks, repeated_failures};
use super::{Agent, Execution, PlanDecision, PlanWriting, Stop};
use crate::agent::log::events::{Event, PlanOrigin, StopReason};
use crate::agent::plan::planner::PlanOutcome;
use crate::agent::plan::Plan;
use crate::agent::rules::{rule_named, ReplansResampled, WRITTEN_BEFORE_SEEN};
use crate::agent::usage::ModelUsage;
use crate::Result;

impl Agent<'_> {
    pub(super) fn plan_ahead(&mut self, given_plan: Option<Plan>) -> Result<Stop> {
        if self.state.plan.is_none() {
            match given_plan {
                Some(plan) => self.record_plan(plan, PlanOrigin::Given, "given with --plan", PlanWriting::default())?,
                None => {
                    if let Some(stop) = self.write_plan(PlanOrigin::Initial, "first plan")? {
                        return Ok(stop);
                    }
                }
            }
        }
        loop {
            let plan = self.state.plan.clone().expect("a plan was recorded above");
            // The rule book's checks judge plans the planner wrote; a given or edited plan runs as given.
            let planner_written = !matches!(self.state.plan_origin, Some(PlanOrigin::Given | PlanOrigin::Edited));
            let issues = plan.validate(self.registry);
            if !issues.is_empty() {
                let list: Vec<String> = issues.iter().map(|i| format!("- {i}")).collect();
                let mut feedback = format!("That plan cannot run:\n{}\nWrite a corrected plan.", list.join("\n"));
                // A plan that also breaks a check hears both at once: told only of its references, the 1.5B mended
                // them and broke the check again.
                if let Some(checked) = self.checks_refuse(&plan, planner_written) {
                    feedback = format!("{feedback}\n{checked}");
                }
                if let Some(stop) = self.replan(feedback)? {
                    return Ok(stop);
                }
                continue;
            }
            let sent_back = self.repeated_failures(&plan).or_else(|| self.checks_refuse(&plan, planner_written));
            if let Some(feedback) = sent_back {
                if let Some(stop) = self.replan(feedback)? {
                    return Ok(stop);
                }
                continue;
            }
            if !self.state.plan_approved {
                match self.approver.review_plan(&plan)? {
                    PlanDecision::Approve => self.record_approval(plan.version, "approved")?,
                    PlanDecision::Edit(edited) => {
                        self.record_plan(edited, PlanOrigin::Edited, "edited at approval", PlanWriting::default())?;
                        let version = self.state.version();
                        self.record_approval(version, "edited")?;
                        continue;
                    }
                    PlanDecision::Reject => {
                        self.record_approval(plan.version, "rejected")?;
                        return Ok(Stop::new(StopReason::Rejected, "the plan was rejected; nothing ran"));
                    }
                }
            }
            match self.execute(&plan)? {
                Execution::Complete => {
                    if let Some(doubts) = self.evaluate_steps(&plan)? {
                        if let Some(stop) = self.replan(doubts)? {
                            return Ok(stop);
                        }
                        continue;
                    }
                    match self.conclude(&plan)? {
                        Conclusion::Answered => {}
                        Conclusion::Replan(missing) => {
                            let feedback = format!(
                                "Every step ran, but the results do not answer the goal: {missing}\n\
                                 Write a plan that answers every part of the goal."
                            );
                            if let Some(stop) = self.replan(feedback)? {
                                return Ok(stop);
                            }
                            continue;
                        }
                        Conclusion::NoAnswer(why) => {
                            let replans = self.settings.budgets.max_replans;
                            return Ok(Stop::new(
                                StopReason::Budget,
                                format!("replan budget spent ({replans} replans, --max-replans): no answer: {why}"),
                            ));
                        }
                    }
                    return Ok(Stop::new(
                        StopReason::Done,
                        format!("{} step(s) of plan v{} done", plan.steps.len(), plan.version),
                    ));
                }
                Execution::Failed(record) => {
                    // The failed step alone first; the whole goal only when that cannot be done.
                    if self.repair(&plan)? {
                        continue;
                    }
                    if let Some(stop) = self.replan(record)? {
                        return Ok(stop);
                    }
                }
                Execution::Rewrite(feedback) => {
                    if let Some(stop) = self.replan(feedback)? {
                        return Ok(stop);
                    }
                }
                Execution::Stopped(stop) => return Ok(stop),
            }
        }
    }

    /// Logs a plan as the next revision, with what its writing adds (nothing for a given or edited plan).
    pub(super) fn record_plan(
        &mut self,
        plan: Plan,
        origin: PlanOrigin,
        reason: &str,
        written: PlanWriting,
    ) -> Result<()> {
        let mut plan = plan.with_explicit_dependencies();
        plan.version = self.state.version() + 1;
        plan.goal = self.state.goal.clone();
        let issues = plan.validate(self.registry).iter().map(ToString::to_string).collect();
        let PlanWriting { usage, search, mends, thinking } = written;
        self.emit(Event::PlanWritten {
            version: plan.version,
            origin,
            reason: reason.into(),
            plan,
            issues,
            usage,
            search,
            mends,
            thinking,
        })
    }

    /// Has the planner write a plan (with the revision history); a planner failure stops the run.
    fn write_plan(&mut self, origin: PlanOrigin, reason: &str) -> Result<Option<Stop>> {
        let goal = self.state.goal.clone();
        let history = self.state.revisions.clone();
        let tokens = self.settings.budgets.plan_tokens;
        // The planner sees the tools retrieval chose, if it chose; validation and execution know every tool.
        let pipeline = &self.pipeline;
        // The plan grammar compiles beside the planner's load; a grammar that cannot be built is reported by
        // planning itself, as a planner failure.
        let grammars: Vec<_> = pipeline.grammar().into_iter().collect();
        let rules = pipeline.rules();
        let model = self.models.planner_for(&grammars)?;
        let started = Instant::now();
        let mut written = pipeline.write(model, &goal, &history, tokens, self.settings.pair.plans);
        let mut resampled = false;
        // A planner that wrote no plan (a greedy loop that ran into the token limit: "The prices are in the
        // format … The prices are in the format …") is asked again by sampling before the run stops on it.
        if written.is_err() {
            if let Ok(Some(outcome)) = pipeline.resample(model, &goal, &history, tokens, |_| true) {
                tracing::info!("the greedy plan could not be written; a sampled one was");
                written = Ok(outcome);
                resampled = true;
            }
        } else if let Ok(outcome) = &written {
            // Rule `replans-resampled`: a replan whose greedy plan cannot run (validation), is the plan that just
            // failed, step for step (its tools answer as they did), or repeats a failed call
            // is written again by sampling, and the first candidate that validates and does none of these is kept;
            // only where none does is the greedy plan recorded (and then sent back, or run and failed as before).
            // The same calls, whatever the steps' descriptions and written dependencies: a sampled copy of the
            // refused plan without its `depends_on` had passed for a new plan and run.
            let calls = |plan: &Plan| plan.steps.iter().map(|s| (s.tool.clone(), s.args.clone())).collect::<Vec<_>>();
            let failed_calls = self.state.plan.as_ref().map(calls).unwrap_or_default();
            // After `dependencies` had a plan written again, the same calls are no refused plan: the plan was not
            // refused, only written again with results in view, and the same plan may be the right one.
            let rewrite = history.last().is_some_and(|r| r.feedback.starts_with(WRITTEN_BEFORE_SEEN));
            let repeats = |plan: &Plan| {
                (!rewrite && calls(plan) == failed_calls)
                    || repeated_failures(&self.state, self.registry, plan).is_some()
                    || plan_checks(&self.state, self.registry, self.context.workspace.root(), rules, plan).is_some()
            };
            let rejected = !outcome.issues.is_empty() || repeats(&outcome.plan);
            if origin == PlanOrigin::Replan && rules.on(&ReplansResampled) && rejected {
                let sampled = pipeline.resample(model, &goal, &history, tokens, |plan| !repeats(plan));
                if let Ok(Some(outcome)) = sampled {
                    written = Ok(outcome);
                    resampled = true;
                    self.note_rule(&ReplansResampled, "", "the greedy replan was refused: a sampled one is kept");
                }
            }
        }
        self.log_model_loads()?;
        match written {
            Ok(PlanOutcome { plan, timings, search, mended, mends, thought, .. }) => {
                let usage = ModelUsage {
                    tokens_in: timings.prompt_tokens,
                    tokens_out: timings.generated_tokens,
                    ms: started.elapsed().as_millis() as u64,
                };
                // What was mended goes into the revision's reason, so the log shows the plan as run and why.
                let reason = match resampled {
                    true => format!(
                        "{reason} (the greedy plan could not be written, could not run or repeated a failed call; a \
                         sampled one is kept)"
                    ),
                    false => reason.to_string(),
                };
                let reason = match mended.as_slice() {
                    [] => reason,
                    mends => format!("{reason} (mended: {})", mends.join("; ")),
                };
                self.record_plan(
                    plan,
                    origin,
                    &reason,
                    PlanWriting { usage: Some(usage), search, mends, thinking: thought },
                )?;
                Ok(None)
            }
            Err(e) => Ok(Some(Stop::new(StopReason::Error, format!("the planner could not write a plan: {e}")))),
        }
    }

    /// Asks for a revision, unless a budget forbids it.
    /// The rule book's checks on a plan the planner wrote (a given or edited plan runs as given): the feedback of
    /// the first that sends it back, noted in the run's log.
    fn checks_refuse(&self, plan: &Plan, planner_written: bool) -> Option<String> {
        if !planner_written {
            return None;
        }
        let refusal = plan_checks(&self.state, self.registry, self.context.workspace.root(), self.rules(), plan)?;
        if let Some(rule) = rule_named(&refusal.rule) {
            self.note_rule(rule, "", &refusal.feedback);
        }
        Some(refusal.feedback)
    }

    fn replan(&mut self, feedback: String) -> Result<Option<Stop>> {
        if self.state.replans >= self.settings.budgets.max_replans {
            return Ok(Some(Stop::new(
                StopReason::Budget,
                format!(
                    "replan budget spent ({} replans, --max-replans); last problem: {feedback}",
                    self.settings.budgets.max_replans
                ),
            )));
        }
        if let Some(stop) = self.spent_budget(0) {
            return Ok(Some(stop));
        }
        self.emit(Event::Replan { from_version: self.state.version(), reason: feedback.clone() })?;
        self.write_plan(PlanOrigin::Replan, &feedback)
    }
}
