//! Drops a step that repeats an earlier step's call (the same tool with the same arguments): its result is the
//! earlier step's, so references to it are pointed there.
//!
//! Rule `duplicates`, profile `general`: it follows from the plan alone (the same tool and arguments give the same
//! result).
//!
//! Why: the 1.5B planner sometimes writes a call twice, once for a goal's part and again "for the total" (a
//! sales tax computed twice, then a tip; a barcode of the second copy). Running a repeated call adds nothing: the
//! orchestrator already answers a call that succeeded earlier in the run from that result, so the plan says
//! what will happen, and the steps after it read as the goal does.

use crate::agent::plan::refs::{rewrite_references, Reference};
use crate::agent::plan::{Plan, Step};
use crate::tools::ToolRegistry;

/// Removes each step whose tool and arguments equal an earlier kept step's, rewriting references to it and
/// dependencies on it to that step. Returns one line per step dropped (`s2: dropped, the same call as s1`).
pub fn drop_repeated_calls(plan: &mut Plan) -> Vec<String> {
    let mut dropped = Vec::new();
    // (dropped id, the id of the step it repeats)
    let mut same_as: Vec<(String, String)> = Vec::new();
    let mut kept: Vec<Step> = Vec::with_capacity(plan.steps.len());
    for mut step in std::mem::take(&mut plan.steps) {
        let mut redirect = |reference: &Reference, _whole: bool| {
            let (_, to) = same_as.iter().find(|(from, _)| *from == reference.step)?;
            Some(Reference { step: to.clone(), field: reference.field.clone() })
        };
        for value in step.args.values_mut() {
            rewrite_references(value, &mut redirect);
        }
        for dependency in &mut step.depends_on {
            if let Some((_, to)) = same_as.iter().find(|(from, _)| from == dependency) {
                *dependency = to.clone();
            }
        }
        let mut seen = Vec::with_capacity(step.depends_on.len());
        step.depends_on.retain(|d| {
            !seen.contains(d) && {
                seen.push(d.clone());
                true
            }
        });
        match kept.iter().find(|k| k.tool == step.tool && k.args == step.args) {
            Some(first) => {
                dropped.push(format!("{}: dropped, the same call as {}", step.id, first.id));
                same_as.push((step.id, first.id.clone()));
            }
            None => kept.push(step),
        }
    }
    plan.steps = kept;
    dropped
}

/// Rule `duplicates` (mend, general).
pub struct Duplicates;

impl super::Rule for Duplicates {
    fn about(&self) -> super::About {
        super::About {
            name: "duplicates",
            stage: super::Stage::Mend,
            profile: super::Profile::General,
            keys_on: "a step with the same tool and arguments as an earlier one: dropped, its readers pointed at the earlier step",
        }
    }

    fn mend(&self, plan: &mut Plan, _tools: &ToolRegistry, _seen: &str) -> Vec<String> {
        drop_repeated_calls(plan)
    }
}
