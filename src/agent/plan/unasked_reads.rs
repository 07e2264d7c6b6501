//! A plan that reads the workspace for a goal that names no file or folder.
//!
//! Rule `workspace-unasked`, profile `general` (a check, not a mend: the plan is sent back, not rewritten): a plan
//! the planner wrote (one given with `--plan` or edited at approval runs as given) that calls `read_file` or
//! `list_dir` where the goal names no file, folder or path (no `name.ext`, no `/`, none of the words file, folder,
//! directory, workspace, document, here; a web address names none) is sent back, saying so, and a replan that does it again is written again
//! by sampling (`replans-resampled`); at most two revisions are sent back for it. The planner prompt says the same
//! ("Read files or list directories only when the goal names a file or a directory"); this makes it hold.
//!
//! Why: with a memory server's tools beside the built-ins, the 1.5B answered "Remember that Carol's phone number is
//! 555-0199." by reading `phone_numbers.txt`, and "Which of the people I know like jazz?" by listing `people`
//! (tasks-mcp `mem-remember-phone`, `mem-jazz`): both spent every replan on files that do not exist.

use crate::agent::plan::mend::words;
use crate::agent::plan::Plan;
use crate::tools::list_dir::ListDir;
use crate::tools::read_file::ReadFile;

/// The words that open the feedback; a revision whose feedback holds them was sent back by this rule.
pub const MARKER: &str = "The goal names no file or folder";

/// Whether `goal` names a file, folder or path, or points at the workspace.
pub fn names_workspace(goal: &str) -> bool {
    const WORDS: &[&str] = &[
        "file",
        "files",
        "folder",
        "folders",
        "directory",
        "directories",
        "dir",
        "workspace",
        "document",
        "documents",
        "here",
    ];
    // A web address names a page, not the workspace: "the shop at http://…/shop.html" had the 1.5B listing
    // `shop.html` in the workspace (tasks-mcp `web-notebooks`).
    let is_address = |token: &&str| token.contains("://") || token.starts_with("www.");
    let lower: String = goal.to_lowercase().split_whitespace().filter(|t| !is_address(t)).collect::<Vec<_>>().join(" ");
    let words: Vec<&str> = words(&lower).collect();
    // `name.ext`: a dot between letters or digits with a short extension after it ("notes.txt", not "3.5").
    let file_name = lower.split_whitespace().any(|token| {
        let token = token.trim_end_matches(|c: char| !c.is_alphanumeric());
        token.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty()
                && (1..=5).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && !ext.chars().all(|c| c.is_ascii_digit())
        })
    });
    file_name || lower.contains('/') || words.iter().any(|w| WORDS.contains(w))
}

/// Whether `tool` is a built-in that reads the workspace (`read_file`, `list_dir`).
pub fn reads_workspace(tool: &str) -> bool {
    tool == ReadFile::NAME || tool == ListDir::NAME
}

/// The feedback that sends `plan` back, where it reads the workspace and its goal names nothing there.
pub fn unasked_reads(plan: &Plan) -> Option<String> {
    if names_workspace(&plan.goal) {
        return None;
    }
    let reads: Vec<String> =
        plan.steps.iter().filter(|s| reads_workspace(&s.tool)).map(|s| format!("{} calls {}", s.id, s.tool)).collect();
    (!reads.is_empty()).then(|| {
        format!(
            "{MARKER}, so it asks nothing of the workspace's files ({}). Write a plan that does what the goal asks \
             with the other tools.",
            reads.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_goal_names_the_workspace_by_a_file_a_path_or_a_word() {
        assert!(names_workspace("Give the title of report.md."));
        assert!(names_workspace("How many text files are in the docs folder?"));
        assert!(names_workspace("What did I commit in the repository here?"));
        assert!(names_workspace("Read notes/todo"));
        assert!(!names_workspace("Remember that Carol's phone number is 555-0199."));
        assert!(!names_workspace("Which of the people I know like jazz?"));
        assert!(!names_workspace("What is 3.5 times 2?"), "a decimal is no file name");
        let shop = "I need 6 notebooks from the shop at http://127.0.0.1:8471/shop.html. How much will they cost?";
        assert!(!names_workspace(shop), "a web address names a page, not the workspace");
        assert!(!names_workspace("What does www.example.org/menu.html say?"));
        assert!(names_workspace("Save the page at https://example.org/a.html as page.html."), "beside it, a file");
    }

    #[test]
    fn only_a_plan_that_reads_for_a_goal_naming_nothing_there_is_sent_back() {
        let plan = |goal: &str, tool: &str| {
            let mut plan =
                Plan::from_json(&format!(r#"{{"steps":[{{"id":"s1","tool":"{tool}","args":{{"path":"."}}}}]}}"#))
                    .unwrap();
            plan.goal = goal.into();
            plan
        };
        let feedback = unasked_reads(&plan("Which of the people I know like jazz?", "list_dir")).unwrap();
        assert!(feedback.starts_with(MARKER) && feedback.contains("s1 calls list_dir"), "{feedback}");
        assert!(unasked_reads(&plan("List the files here.", "list_dir")).is_none());
        assert!(unasked_reads(&plan("Which of the people I know like jazz?", "search_nodes")).is_none());
    }
}
