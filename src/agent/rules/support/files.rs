//! What the checks of file writes share: which tools say they change things, and a path's file name.

use crate::tools::ToolRegistry;

/// The names of the tools that say they change things.
pub(crate) fn changing_tools(registry: &ToolRegistry) -> Vec<String> {
    registry.specs().filter(|spec| spec.changes_things == Some(true)).map(|spec| spec.name.clone()).collect()
}

/// Whether `tool` says it changes things.
pub(crate) fn changes_things(registry: &ToolRegistry, tool: &str) -> bool {
    registry.spec(tool).is_some_and(|spec| spec.changes_things == Some(true))
}

/// The last part of a relative path with a file name (`name.ext`), as in `archive/old.txt` → `old.txt`.
pub(crate) fn file_name(text: &str) -> Option<&str> {
    if text.contains(char::is_whitespace) {
        return None;
    }
    let name = text.rsplit('/').next()?;
    let (stem, ext) = name.rsplit_once('.')?;
    let extension = (1..=5).contains(&ext.len()) && ext.chars().all(|c| c.is_ascii_alphanumeric());
    (!stem.is_empty() && extension && !ext.chars().all(|c| c.is_ascii_digit())).then_some(name)
}

/// Lowercase, with runs of white space as one space: text compared as written, not as spaced.
pub(crate) fn squeeze(text: &str) -> String {
    text.to_lowercase().split_whitespace().collect::<Vec<_>>().join(" ")
}
