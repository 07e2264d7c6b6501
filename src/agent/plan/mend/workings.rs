//! Drops the workings a goal that only asks for a change never uses.
//!
//! Rule `unused-workings`, profile `general`: where the goal asks for a change and asks to be told nothing (no
//! question, no request to tell, show, list …), an `llm` or `calculator` step whose result no step references,
//! worked from an earlier step's result, is dropped, and so on back (a working only a dropped one read goes too).
//! Its result would reach nobody: the run answers with what was changed, and nothing the goal asks is a reading of
//! it. A working from nothing (a number the goal gives to work out) is kept, and so is every step of a tool.
//!
//! Why: told "In invite.txt, the party moved from Tuesday to Thursday. Please fix the day.", the 1.5B planned the
//! right edit (`edit_file` Tuesday → Thursday) after reading the file, asking the executor for the day, and sending
//! `$s2.text$` to the calculator, which nothing read; the calculator failed on the sentence, and both replans kept
//! the steps, so the edit never ran (tasks-mcp `fs-edit`).

use crate::agent::plan::goal_effects::only_changes;
use crate::agent::plan::Plan;
use crate::tools::calculator::Calculator;
use crate::tools::llm::Llm;

/// Drops unused workings (see the module's documentation); one line per step dropped.
pub fn drop_unused_workings(plan: &mut Plan) -> Vec<String> {
    if !only_changes(&plan.goal) {
        return Vec::new();
    }
    let mut lines = Vec::new();
    loop {
        let unused = plan.steps.iter().position(|s| {
            (s.tool == Llm::NAME || s.tool == Calculator::NAME)
                && !s.references().is_empty()
                && !plan.is_referenced(&s.id)
        });
        // A plan of nothing but workings is left whole: it changes nothing, which the run's checks answer.
        let Some(at) = unused.filter(|_| plan.steps.len() > 1) else { break };
        let step = plan.steps.remove(at);
        for other in &mut plan.steps {
            other.depends_on.retain(|d| *d != step.id);
        }
        lines.push(format!(
            "{}: dropped (a {} working from earlier results that no step uses, where the goal only asks for a change)",
            step.id, step.tool
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ids(plan: &Plan) -> Vec<&str> {
        plan.steps.iter().map(|s| s.id.as_str()).collect()
    }

    #[test]
    fn workings_nothing_uses_go_where_the_goal_only_asks_for_a_change() {
        let steps = json!([
            {"id": "s1", "tool": "read_file", "args": {"path": "invite.txt"}},
            {"id": "s2", "tool": "llm", "args": {"prompt": "What day is the party? $s1.content$"}},
            {"id": "s3", "tool": "calculator", "args": {"expression": "$s2.text$ = 'Thursday'"}},
            {"id": "s4", "tool": "edit_file", "args": {"path": "invite.txt", "edits": [{"oldText": "Tuesday", "newText": "Thursday"}]}, "depends_on": ["s3"]}
        ]);
        let mut fix = Plan::for_goal(
            "In invite.txt, the party moved from Tuesday to Thursday. Please fix the day.",
            steps.clone(),
        );
        let lines = drop_unused_workings(&mut fix);
        assert_eq!(ids(&fix), ["s1", "s4"], "{lines:?}");
        assert!(fix.steps[1].depends_on.is_empty());
        // A goal that also asks to be told keeps them: a working may be what it asks.
        let mut told = Plan::for_goal("Fix the day in invite.txt and tell me what the party is.", steps.clone());
        assert!(drop_unused_workings(&mut told).is_empty());
        let mut question = Plan::for_goal("Can you fix the day in invite.txt? What day was it?", steps);
        assert!(drop_unused_workings(&mut question).is_empty());
    }

    #[test]
    fn a_used_working_or_one_from_nothing_is_kept() {
        let mut p = Plan::for_goal(
            "Work out 15% of 80, and save the total of 3 and 4 to sum.txt.",
            json!([
                {"id": "s1", "tool": "calculator", "args": {"expression": "0.15 * 80"}},
                {"id": "s2", "tool": "calculator", "args": {"expression": "3 + 4"}},
                {"id": "s3", "tool": "write_file", "args": {"path": "sum.txt", "content": "$s2.result$"}}
            ]),
        );
        assert!(drop_unused_workings(&mut p).is_empty());
        assert_eq!(p.steps.len(), 3);
    }
}
