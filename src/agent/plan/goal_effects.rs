//! What a goal asks a plan to do to the world, against what the plan's tools say they do: read only, or change.
//!
//! Rule `questions-only-read`, profile `general` (a check, not a mend: the plan is sent back, not rewritten): where
//! every sentence of the goal asks (a question, or a request to tell, show, list, find, look or check), a plan the
//! planner wrote may not call a tool that says it changes things (an MCP server's `readOnlyHint: false`, the
//! built-in `write_file`). Such a plan is sent back saying which steps change what, and a replan that does it again
//! is written again by sampling (`replans-resampled`). A tool that says nothing of its effects is not judged; a
//! question put as a request ("Can you …?", "Could you …?") asks for work and is not a question here.
//!
//! Why: asked "How many commits are there so far in the repository in the current folder?", a replan of the 1.5B
//! called `git_commit` (tasks-mcp `git-commit-count`); only a clean work tree stopped it from committing.
//!
//! Rule `deletions-asked`, profile `general` (a check, every time): a step calling a tool whose name says it
//! deletes (its first word is delete, remove, drop, clear, purge, destroy, erase, wipe or forget:
//! `delete_observations`, `removeItem`), where the goal says none of those words (nor "get rid"), is sent back
//! naming the step; replans that do it again are written again by sampling. Nothing the user did not ask to lose
//! is deleted.
//!
//! Why: told "Note that Bob moved to Lisbon.", the 1.5B planned `delete_observations` on a made-up entity (tasks-mcp
//! `mem-moved`); on a real one it would have erased what the user had stored.
//!
//! Rule `tools-the-goal-allows`, profile `general`: the tools the two rules above refuse whatever the plan are not
//! shown to the planner for that goal ([`planning_catalogue`]); the run log lists them with why.
//!
//! Rules `contents-not-made-up` and `edits-not-rewrites` (what a plan writes into files) are in
//! [`crate::agent::plan::file_writes`]; [`goal_effects`] asks them with these.
//!
//! Rule `changes-asked`, profile `general` (a check): where a sentence of the goal asks for a change (it opens
//! with a verb of change such as fix, change, move, rename, delete, add, write, save, or with "please" or "can you"
//! and one), and every step of the plan calls a tool that says it only reads, while tools that say they change
//! things are offered, the plan is sent back once, naming the sentence and those tools; the plan written then runs
//! whatever it does. A step whose tool says nothing of its effects counts as a change.
//!
//! Why: told "In invite.txt, the party moved from Tuesday to Thursday. Please fix the day.", the 1.5B read the
//! file, asked the executor for the day and sent `… = 'Thursday'` to the calculator; the file was never changed and
//! the joiner reported it fixed (tasks-mcp `fs-edit`).
//!
use std::path::Path;

use crate::agent::plan::file_writes::{
    changes_things, changing_tools, file_names, made_up_contents, model_rewrites, CONTENT_MARKER, REWRITE_MARKER,
};
use crate::agent::plan::mend::{split_name, words};
use crate::agent::plan::unasked_reads::unasked_reads;
use crate::agent::plan::Plan;
use crate::settings::Mend;
use crate::tools::retrieval::planning_selection;
use crate::tools::{ToolRegistry, ToolResult};

/// The words that open the feedback; a revision whose feedback holds them was sent back by this rule.
pub const MARKER: &str = "The goal only asks";

/// The words that open `deletions-asked`'s feedback.
pub const DELETE_MARKER: &str = "The goal asks to delete nothing";
/// Words that say a tool deletes (as a name's first word) or that a goal asks to (anywhere in it).
const DELETE_WORDS: &[&str] =
    &["delete", "remove", "drop", "clear", "purge", "destroy", "erase", "wipe", "forget", "rm", "del", "unlink"];

/// The words that open `changes-asked`'s feedback.
pub const CHANGE_MARKER: &str = "The goal asks for a change";

/// Verbs that open a sentence asking for a change.
const CHANGE_VERBS: &[&str] = &[
    "fix", "change", "edit", "update", "replace", "correct", "rename", "move", "put", "delete", "remove", "add",
    "append", "write", "save", "create", "make", "commit", "stage", "copy", "set", "store", "record", "remember",
    "note", "keep",
];
/// Words before the verb of a request ("please fix", "now add", "can you move").
const LEAD_WORDS: &[&str] = &["please", "now", "then", "also", "and", "can", "could", "would", "will", "you", "kindly"];

/// Words that open a sentence asking for work, though it ends with a question mark.
const REQUEST_OPENINGS: &[&[&str]] =
    &[&["can", "you"], &["could", "you"], &["would", "you"], &["will", "you"], &["can", "u"], &["please"]];

/// Verbs that open a sentence asking only to be told something.
const TELLING_VERBS: &[&str] = &["tell", "show", "list", "find", "look", "check", "explain", "say", "name"];

/// Whether every sentence of `goal` asks rather than requests a change.
fn only_asks(goal: &str) -> bool {
    let sentences = sentences(goal);
    !sentences.is_empty() && sentences.iter().all(|s| asks(s))
}

/// The goal's sentences, each with its closing mark (`.`, `!`, `?`, or none at the end).
fn sentences(goal: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = goal.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        current.push(c);
        // A mark ends a sentence where a space or the end follows it ("3.5" and "app.py" stay whole).
        let ends = matches!(c, '.' | '!' | '?') && chars.get(i + 1).is_none_or(|n| n.is_whitespace());
        if ends {
            if !current.trim().is_empty() {
                out.push(current.trim().to_string());
            }
            current.clear();
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out
}

/// Whether one sentence asks: a question that is not a request for work, or a request to be told something.
fn asks(sentence: &str) -> bool {
    let lower = sentence.to_lowercase();
    let words: Vec<&str> = words(&lower).collect();
    let opens = |opening: &[&str]| words.len() >= opening.len() && words[..opening.len()] == *opening;
    if REQUEST_OPENINGS.iter().any(|o| opens(o)) {
        return false;
    }
    if sentence.ends_with('?') {
        return true;
    }
    words.first().is_some_and(|w| TELLING_VERBS.contains(w))
}

/// The first word of a tool's name, lowercase: `delete_observations`, `deleteItem`, `files.remove` → delete, delete,
/// remove (a server's prefix before a dot is not its verb).
fn name_verb(name: &str) -> String {
    let name = name.rsplit('.').next().unwrap_or(name);
    words(&split_name(name)).next().unwrap_or_default().to_string()
}

/// The feedback that sends `plan` back, where a step calls a tool named for deleting and the goal asks for no
/// deletion.
fn unasked_deletions(plan: &Plan, registry: &ToolRegistry) -> Option<String> {
    if deletion_asked(&plan.goal) {
        return None;
    }
    let deleting: Vec<String> = plan
        .steps
        .iter()
        .filter(|s| named_for_deleting(&s.tool))
        .map(|s| format!("{} calls {}", s.id, s.tool))
        .collect();
    (!deleting.is_empty()).then(|| {
        // The tools that change things without deleting, by name: told only "tools that add, change or read", the
        // planner wrote the same deleting plan three times ("Note that Bob moved to Lisbon.").
        let adding: Vec<String> =
            changing_tools(registry).into_iter().filter(|name| !named_for_deleting(name)).collect();
        let offered = match adding.as_slice() {
            [] => String::new(),
            names => format!(" ({})", names.join(", ")),
        };
        format!(
            "{DELETE_MARKER}, and these steps delete ({}). Keep what is stored: do what the goal asks with tools that \
             add or change{offered}, or that read.",
            deleting.join(", ")
        )
    })
}

/// Whether a tool's name says it deletes: its verb ([`name_verb`]) is one of [`DELETE_WORDS`].
fn named_for_deleting(name: &str) -> bool {
    DELETE_WORDS.contains(&name_verb(name).as_str())
}

/// Whether the goal says a word of deleting (delete, removes, forgetting, "get rid").
fn deletion_asked(goal: &str) -> bool {
    let goal = goal.to_lowercase();
    goal.contains("get rid")
        || words(&goal).any(|w| DELETE_WORDS.iter().any(|d| w.starts_with(d) && w.len() <= d.len() + 3))
}

/// Rule `tools-the-goal-allows` (general): the tools that `questions-only-read` and `deletions-asked`, which send
/// back every plan that calls them, would refuse for `goal`, each with why; the planner is not shown them. Why:
/// shown them, the 1.5B planned them anyway, and its replans wrote the same refused plan again, three times
/// ("Note that Bob moved to Lisbon." with `delete_observations`); a tool the goal cannot use is a distraction in
/// the prompt and a wasted revision after it.
pub fn refused_tools(goal: &str, registry: &ToolRegistry) -> Vec<(String, &'static str)> {
    let asks = only_asks(goal);
    let deletes = deletion_asked(goal);
    registry
        .specs()
        .filter_map(|spec| {
            let why = if asks && spec.changes_things == Some(true) {
                "the goal only asks, and it changes things"
            } else if !deletes && named_for_deleting(&spec.name) {
                "the goal asks to delete nothing, and it deletes"
            } else {
                return None;
            };
            Some((spec.name.clone(), why))
        })
        .collect()
}

/// The tools the planner is shown for a goal, where they are not all of the run's: those [`refused_tools`] leaves
/// out (in the profiles that mend), then those tool retrieval picks (`--tools-top-k`).
pub struct Catalogue {
    /// The tools shown.
    pub registry: ToolRegistry,
    /// The tools retrieval picked, best match first, where it picked.
    pub selected: Option<Vec<String>>,
    /// The tools left out for the goal, each as `name (why)`.
    pub left_out: Vec<String>,
}

/// What the planner sees of `registry` for `goal`; `None` where it sees every tool. Validation and execution
/// still know every tool.
pub fn planning_catalogue(
    goal: &str,
    registry: &ToolRegistry,
    top_k: usize,
    mend: Mend,
) -> ToolResult<Option<Catalogue>> {
    let refused = if mend == Mend::Off { Vec::new() } else { refused_tools(goal, registry) };
    let allowed = (!refused.is_empty()).then(|| registry.subset(|name| !refused.iter().any(|(r, _)| r == name)));
    let left_out = refused.iter().map(|(name, why)| format!("{name} ({why})")).collect();
    let selection = planning_selection(goal, allowed.as_ref().unwrap_or(registry), top_k)?;
    Ok(match (selection, allowed) {
        (Some(selection), _) => {
            Some(Catalogue { registry: selection.registry, selected: Some(selection.tools), left_out })
        }
        (None, Some(allowed)) => Some(Catalogue { registry: allowed, selected: None, left_out }),
        (None, None) => None,
    })
}

/// Whether `goal` asks for a change and nothing to be told: no question, and no verb of telling anywhere in it
/// ("… and tell me what it said"; a noun like "the guest list" counts too, which only errs toward asking).
pub(crate) fn only_changes(goal: &str) -> bool {
    let lower = goal.to_lowercase();
    change_asked(goal).is_some() && !goal.contains('?') && !words(&lower).any(|w| TELLING_VERBS.contains(&w))
}

/// The goal's first sentence that asks for a change, where one does.
fn change_asked(goal: &str) -> Option<String> {
    sentences(goal).into_iter().find(|sentence| {
        let lower = sentence.to_lowercase();
        let mut verb = words(&lower).skip_while(|w| LEAD_WORDS.contains(w));
        verb.next().is_some_and(|w| CHANGE_VERBS.contains(&w))
    })
}

/// The feedback that sends `plan` back, where its goal asks for a change and every step only reads, while tools
/// that change things are offered.
fn missing_changes(plan: &Plan, registry: &ToolRegistry) -> Option<String> {
    let sentence = change_asked(&plan.goal)?;
    let reads_only =
        plan.steps.iter().all(|s| registry.spec(&s.tool).is_some_and(|spec| spec.changes_things == Some(false)));
    if !reads_only {
        return None;
    }
    // Deleting tools only where the goal asks to delete: `deletions-asked` would send their plan back.
    let deletes = deletion_asked(&plan.goal);
    let changing: Vec<String> =
        changing_tools(registry).into_iter().filter(|name| deletes || !named_for_deleting(name)).collect();
    (!changing.is_empty()).then(|| {
        format!(
            "{CHANGE_MARKER} (\"{sentence}\"), but every step of that plan only reads or computes, so nothing would \
             change. Tools that make changes: {}. Write a plan that makes the change with one of them.",
            changing.join(", ")
        )
    })
}

/// The feedback of this module's checks and `file_writes`' on `plan`, in the order a run asks them:
/// `questions-only-read` and `deletions-asked` always, `changes-asked`, `contents-not-made-up` and
/// `edits-not-rewrites` unless `asked_before` says their marker ([`CHANGE_MARKER`], [`CONTENT_MARKER`],
/// [`REWRITE_MARKER`]) is in an earlier revision's feedback (they send a plan back once). The workspace
/// (`workspace`) is walked only where a step writes made-up text beside a file name.
pub fn goal_effects(
    plan: &Plan,
    registry: &ToolRegistry,
    workspace: &Path,
    asked_before: impl Fn(&str) -> bool,
) -> Vec<String> {
    let once = |marker: &str| !asked_before(marker);
    [
        unasked_changes(plan, registry),
        unasked_deletions(plan, registry),
        missing_changes(plan, registry).filter(|_| once(CHANGE_MARKER)),
        made_up_contents(plan, registry, || file_names(workspace)).filter(|_| once(CONTENT_MARKER)),
        model_rewrites(plan, registry).filter(|_| once(REWRITE_MARKER)),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// What the run-time checks of a planner-written plan would say of `plan` as a first plan (`workspace-unasked`,
/// then [`goal_effects`]), for `tandem plan`, which runs nothing.
pub fn first_plan_checks(plan: &Plan, registry: &ToolRegistry, workspace: &Path) -> Vec<String> {
    unasked_reads(plan).into_iter().chain(goal_effects(plan, registry, workspace, |_| false)).collect()
}

/// The feedback that sends `plan` back, where its goal only asks and a step calls a tool that changes things.
fn unasked_changes(plan: &Plan, registry: &ToolRegistry) -> Option<String> {
    if !only_asks(&plan.goal) {
        return None;
    }
    let changing: Vec<String> = plan
        .steps
        .iter()
        .filter(|s| changes_things(registry, &s.tool))
        .map(|s| format!("{} calls {}", s.id, s.tool))
        .collect();
    (!changing.is_empty()).then(|| {
        format!(
            "{MARKER} questions, and these steps call tools that change things ({}). Answer it with tools that read, \
             and leave everything as it is.",
            changing.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_and_requests_to_be_told_only_ask() {
        assert!(only_asks("How many commits are there so far in the repository in the current folder?"));
        assert!(only_asks("What word did I change in app.py since the last commit? Tell me the new word."));
        assert!(only_asks("Which of my files are Markdown files? Look in the subfolders too."));
        assert!(only_asks("Is version 3.5 in notes.txt?"));
    }

    #[test]
    fn requests_for_work_do_not_only_ask() {
        assert!(!only_asks("Make a folder called archive and put old.txt in it."));
        assert!(!only_asks("In invite.txt, the party moved from Tuesday to Thursday. Please fix the day."));
        assert!(!only_asks("Can you commit my changes?"));
        assert!(!only_asks("What changed? Commit it with the message 'wip'."));
        assert!(!only_asks("Note that Bob moved to Lisbon"));
        assert!(!only_asks(""));
    }

    #[test]
    fn a_change_is_asked_by_a_verb_of_change_opening_a_sentence() {
        let fix = "In invite.txt, the party moved from Tuesday to Thursday. Please fix the day.";
        assert_eq!(change_asked(fix).as_deref(), Some("Please fix the day."));
        assert!(change_asked("Make a folder called archive and put old.txt in it.").is_some());
        assert!(change_asked("Can you rename notes.txt to todo.txt?").is_some());
        // Asking to keep something in mind asks for a change to what is stored.
        assert!(change_asked("Remember that Carol's phone number is 555-0199.").is_some());
        assert!(change_asked("Note that Bob moved to Lisbon.").is_some());
        assert_eq!(change_asked("My flight lands in Dubai at 7:15 PM. What time is it in Singapore then?"), None);
        assert_eq!(change_asked("What word did I change in app.py? Tell me the new word."), None);
        // Only a change: no question, no verb of telling anywhere.
        assert!(only_changes(fix));
        assert!(!only_changes("Can you rename notes.txt to todo.txt?"));
        assert!(!only_changes("Fix the day in invite.txt and show me the file."));
        assert!(!only_changes("The party is on Thursday."));
    }

    #[test]
    fn a_deletion_needs_a_goal_that_asks_for_one() {
        let steps = serde_json::json!([{"id": "s1", "tool": "delete_observations", "args": {}},
                                       {"id": "s2", "tool": "add_observations", "args": {}}]);
        let note = Plan::for_goal("Note that Bob moved to Lisbon.", steps.clone());
        let registry = files_registry();
        let feedback = unasked_deletions(&note, &registry).unwrap();
        assert!(feedback.contains("s1 calls delete_observations"), "{feedback}");
        // The tools that change things without deleting are named (the built-ins': write_file).
        assert!(feedback.contains("tools that add or change (write_file)"), "{feedback}");
        for asked in [
            "Bob moved: delete the old address.",
            "Remove Bob's tennis note",
            "Forget that Bob plays tennis",
            "Get rid of it",
        ] {
            assert_eq!(unasked_deletions(&Plan::for_goal(asked, steps.clone()), &registry), None, "{asked}");
        }
        assert_eq!(name_verb("deleteItem"), "delete");
        assert_eq!(name_verb("files.remove_file"), "remove");
        assert_eq!(name_verb("dropdown_options"), "dropdown");
    }

    #[test]
    fn a_first_plan_hears_every_check_that_applies() {
        let registry = files_registry();
        let steps = serde_json::json!([{"id": "s1", "tool": "list_dir", "args": {"path": "."}},
                                       {"id": "s2", "tool": "delete_observations", "args": {}}]);
        let checks = first_plan_checks(
            &Plan::for_goal("Note that Bob moved to Lisbon.", steps),
            &registry,
            &std::env::temp_dir(),
        );
        assert_eq!(checks.len(), 2, "{checks:?}");
        assert!(
            checks[0].starts_with(crate::agent::plan::unasked_reads::MARKER) && checks[1].starts_with(DELETE_MARKER)
        );
        let asked = serde_json::json!([{"id": "s1", "tool": "calculator", "args": {"expression": "2+2"}}]);
        assert!(first_plan_checks(&Plan::for_goal("What is 2+2?", asked), &registry, &std::env::temp_dir()).is_empty());
    }

    #[test]
    fn the_planner_is_not_shown_tools_the_goal_cannot_use() {
        let mut registry = files_registry();
        let declared = |name: &str| crate::tools::DeclaredTool {
            name: name.into(),
            description: "A memory tool.".into(),
            args_schema: serde_json::json!({"type": "object", "properties": {}}),
            output_schema: None,
        };
        registry.register(declared("delete_observations")).unwrap();
        registry.register(declared("add_observations")).unwrap();
        let names = |goal: &str, mend: Mend| -> Option<Vec<String>> {
            let catalogue = planning_catalogue(goal, &registry, 0, mend).unwrap()?;
            Some(catalogue.registry.names().iter().map(|n| n.to_string()).collect())
        };
        // A note asks no deletion: the deleting tool is left out, writing stays.
        let note = names("Note that Bob moved to Lisbon.", Mend::General).unwrap();
        assert!(!note.contains(&"delete_observations".into()) && note.contains(&"write_file".into()), "{note:?}");
        assert!(note.contains(&"add_observations".into()), "{note:?}");
        // A question changes nothing: write_file (which says it changes things) goes too.
        let question = names("Which of the people I know like jazz?", Mend::General).unwrap();
        assert!(!question.contains(&"write_file".into()) && question.contains(&"read_file".into()), "{question:?}");
        // Asked to delete: every tool is shown. Off: every tool is shown, whatever the goal.
        assert_eq!(names("Forget that Bob plays tennis, and save a note of it in notes.txt.", Mend::General), None);
        assert_eq!(names("Note that Bob moved to Lisbon.", Mend::Off), None);
        let why = planning_catalogue("Note that Bob moved.", &registry, 0, Mend::General).unwrap().unwrap().left_out;
        assert_eq!(why, ["delete_observations (the goal asks to delete nothing, and it deletes)"]);
    }

    fn files_registry() -> ToolRegistry {
        let workspace = crate::tools::workspace::Workspace::new(std::env::temp_dir()).unwrap();
        ToolRegistry::builtins(&crate::tools::ToolContext::new(workspace).with_write(true))
    }
}
