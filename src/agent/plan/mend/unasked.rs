//! Drops a read of the workspace that the goal does not ask for and that no step reads.
//!
//! Rule `unasked-reads-dropped`, profile `general`: where the goal names no file, folder or path
//! ([`names_workspace`]), a `read_file` or `list_dir` step whose result no other step references is dropped (and
//! taken out of the others' `depends_on`: it changes nothing they could wait for). A read whose result a later step
//! uses is left to the `workspace-unasked` check, which sends the plan back.
//!
//! Why: asked "Which of the people I know like jazz?" with a memory server's tools, the 1.5B planned `list_dir
//! people` and then, reading nothing of it, `search_nodes` and `open_nodes` — the right calls. Sent back for the
//! listing, its replan lost them and asked the executor instead (tasks-mcp `mem-jazz`). A step nothing reads adds
//! nothing to the answer, so leaving it out keeps the rest of the plan as written.

use crate::agent::plan::unasked_reads::{names_workspace, reads_workspace};
use crate::agent::plan::Plan;

/// Drops the unasked workspace reads nothing reads; one line per step dropped.
pub fn drop_unasked_reads(plan: &mut Plan) -> Vec<String> {
    if names_workspace(&plan.goal) {
        return Vec::new();
    }
    let unread: Vec<String> = plan
        .steps
        .iter()
        .filter(|s| reads_workspace(&s.tool))
        // Only a reference reads a result: a read changes nothing a `depends_on` could wait for.
        .filter(|s| !plan.is_referenced(&s.id))
        .map(|s| s.id.clone())
        .collect();
    // A plan of nothing but such reads stays whole: the check sends it back with its reason.
    if unread.is_empty() || unread.len() == plan.steps.len() {
        return Vec::new();
    }
    plan.steps.retain(|s| !unread.contains(&s.id));
    for step in &mut plan.steps {
        step.depends_on.retain(|d| !unread.contains(d));
    }
    unread
        .iter()
        .map(|id| format!("{id}: dropped (reads the workspace, which the goal does not name, and no step reads it)"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unasked_listing_nothing_reads_is_dropped() {
        let steps = serde_json::json!([
            {"id": "s1", "tool": "list_dir", "args": {"path": "people"}},
            {"id": "s2", "tool": "search_nodes", "args": {"query": "jazz"}, "depends_on": ["s1"]}
        ]);
        let mut unasked = Plan::for_goal("Which of the people I know like jazz?", steps.clone());
        assert_eq!(drop_unasked_reads(&mut unasked).len(), 1);
        assert_eq!(unasked.steps.len(), 1);
        assert!(unasked.steps[0].depends_on.is_empty());
        // The goal names a folder: the listing stays.
        let mut asked = Plan::for_goal("Which files are in the people folder?", steps);
        assert!(drop_unasked_reads(&mut asked).is_empty());
        // A listing a later step reads stays (the check sends that plan back).
        let read = serde_json::json!([
            {"id": "s1", "tool": "list_dir", "args": {"path": "."}},
            {"id": "s2", "tool": "llm", "args": {"prompt": "Who likes jazz? $s1.entries$"}}
        ]);
        let mut kept = Plan::for_goal("Which of the people I know like jazz?", read);
        assert!(drop_unasked_reads(&mut kept).is_empty());
    }
}
