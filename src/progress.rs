//! Progress reporting without printing: the library calls a `Reporter`, the binary draws bars (indicatif).

/// Something that can show the progress of long work (downloads, assembly, benchmarks).
pub trait Reporter: Send + Sync {
    /// Starts a task; `total` is in `unit`s (bytes for downloads) when known.
    fn start(&self, task: &str, total: Option<u64>, unit: ProgressUnit) -> Box<dyn Progress>;
    /// A one-line status message (e.g. "verifying checksum").
    fn message(&self, text: &str);
}

/// What a progress count measures, so the binary can format it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressUnit {
    Bytes,
    Items,
}

/// One running task started by a [`Reporter`].
pub trait Progress: Send {
    /// Advances by `n` units.
    fn inc(&self, n: u64);
    /// Sets the absolute position.
    fn set_position(&self, pos: u64);
    /// Ends the task (the bar is cleared or left as done).
    fn finish(&self);
}

/// A reporter that shows nothing: for tests, `--quiet` and library users.
#[derive(Debug, Default, Clone, Copy)]
pub struct SilentReporter;

struct SilentProgress;

impl Progress for SilentProgress {
    fn inc(&self, _n: u64) {}
    fn set_position(&self, _pos: u64) {}
    fn finish(&self) {}
}

impl Reporter for SilentReporter {
    fn start(&self, _task: &str, _total: Option<u64>, _unit: ProgressUnit) -> Box<dyn Progress> {
        Box::new(SilentProgress)
    }
    fn message(&self, _text: &str) {}
}

/// Shortens text to `max` characters on one line.
pub fn clip(text: &str, max: usize) -> String {
    let flat = text.replace('\n', " ");
    if flat.chars().count() <= max {
        flat
    } else {
        format!("{}…", flat.chars().take(max.saturating_sub(1)).collect::<String>())
    }
}
