//! A file the goal names reaches the tool at the path the goal writes, not in a folder the planner made up.
//!
//! Rule `paths-as-written`, profile `general`: a path argument (the parameter's name says path, file, source,
//! destination or target, or its description says path) whose file name the goal writes (`list.txt`) but whose
//! folder appears neither in the goal nor in anything the planner was shown (earlier results) becomes the path as
//! the goal writes it: `shopping_list/list.txt` → `list.txt` for "Save a shopping list … to list.txt". A folder
//! the goal names ("put old.txt in archive") or an earlier result showed (a listing with `docs/intro.md`) is kept.
//!
//! Why: the 1.5B planner put files the user named into folders of its own making (tasks-mcp `fs-write`: the list
//! was written to `shopping_list/list.txt`, and `list.txt`, which the user asked for, was never written).

use serde_json::Value;

use super::parameter_description;
use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// Words in a parameter's name that make it a path.
const PATH_NAMES: &[&str] = &["path", "file", "source", "destination", "target"];

/// Rewrites each invented folder away (see the module's documentation); `seen` is what the planner was shown
/// beside the goal. Returns one line per rewrite (`s2: path "shopping_list/list.txt" → "list.txt" (…)`).
pub fn mend_paths_as_written(plan: &mut Plan, registry: &ToolRegistry, seen: &str) -> Vec<String> {
    let goal = plan.goal.clone();
    let shown = format!("{goal}\n{seen}").to_lowercase();
    let mut lines = Vec::new();
    for step in &mut plan.steps {
        let Some(spec) = registry.spec(&step.tool) else { continue };
        for (name, value) in step.args.iter_mut() {
            let Value::String(path) = value else { continue };
            let lower_name = name.to_lowercase();
            let is_path = PATH_NAMES.iter().any(|w| lower_name.contains(w))
                || parameter_description(spec, name).to_lowercase().contains("path");
            if !is_path {
                continue;
            }
            let Some(written) = path_as_written(path, &goal, &shown) else { continue };
            lines.push(format!(
                "{}: {name} {path:?} → {written:?} (the goal writes {written}; the folder is not in the goal or any \
                 result)",
                step.id
            ));
            *value = Value::String(written);
        }
    }
    lines
}

/// The goal's way of writing `path`, where `path` puts a file the goal names into a folder that `shown` (the goal
/// and the results, in lowercase) never mentions.
fn path_as_written(path: &str, goal: &str, shown: &str) -> Option<String> {
    if path.contains("://") || path.contains('$') || path.starts_with('/') || path.starts_with('~') {
        return None;
    }
    let (folder, file) = path.rsplit_once('/')?;
    if file.is_empty() || !file.contains('.') || shown.contains(&path.to_lowercase()) {
        return None;
    }
    let invented = folder
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .any(|part| !shown.contains(&part.to_lowercase()));
    if !invented {
        return None;
    }
    // The goal's own writings of the file: words (quotes and sentence marks trimmed) that are the file or end in it.
    let mut writings: Vec<String> = goal
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | ',' | ';' | ':' | '(' | ')' | '?' | '!')))
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| *w == file || w.ends_with(&format!("/{file}")))
        .map(str::to_string)
        .collect();
    writings.dedup();
    match writings.as_slice() {
        [one] if one != path => Some(one.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invented_folder_goes_and_a_named_or_shown_one_stays() {
        let goal = "Save a shopping list with milk, eggs and bread to list.txt.";
        let shown = goal.to_lowercase();
        assert_eq!(path_as_written("shopping_list/list.txt", goal, &shown).as_deref(), Some("list.txt"));
        // The goal names the folder.
        let goal = "Make a folder called archive and put old.txt in it.";
        assert_eq!(path_as_written("archive/old.txt", goal, &goal.to_lowercase()), None);
        // An earlier result showed it.
        let goal = "What is the first line of intro.md?";
        let shown = format!("{goal}\n{{\"entries\":[{{\"name\":\"docs/intro.md\"}}]}}").to_lowercase();
        assert_eq!(path_as_written("docs/intro.md", goal, &shown), None);
        // The goal's own folder is how it is written.
        let goal = "Append a line to notes/todo.md";
        assert_eq!(path_as_written("my_notes/todo.md", goal, &goal.to_lowercase()).as_deref(), Some("notes/todo.md"));
        // Not a file the goal names, a reference, a URL or an absolute path: left alone.
        for path in ["tmp/out.txt", "$s1.path$/list.txt", "http://x/list.txt", "/srv/list.txt"] {
            let goal = "Save it to list.txt";
            assert_eq!(path_as_written(path, goal, &goal.to_lowercase()), None, "{path}");
        }
    }
}
