//! What several rules share: a step's arguments, the forms of dates and times, the goal's words (for NESTFUL's
//! rules), and file names in paths.

pub mod arguments;
pub mod files;
pub mod forms;
pub mod goal_words;

/// `text` with its letters' accents taken off (`São` → `Sao`): the names tools key on (time zones, codes, ids) are
/// mostly written in plain ASCII, and people write them with their accents.
pub fn accents_off(text: &str) -> String {
    use unicode_normalization::char::is_combining_mark;
    use unicode_normalization::UnicodeNormalization;
    text.nfd().filter(|c| !is_combining_mark(*c)).collect()
}
