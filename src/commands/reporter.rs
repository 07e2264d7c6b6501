//! The terminal's `Reporter`: indicatif bars on stderr, hidden by `--quiet` or when stderr is not a terminal.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::progress::{Progress, ProgressUnit, Reporter};

/// Draws progress on stderr.
pub struct TerminalReporter {
    quiet: bool,
    interactive: bool,
    /// Every visible bar, so messages can print above them instead of through them.
    bars: MultiProgress,
}

impl TerminalReporter {
    /// `quiet` hides everything; without a terminal, bars are skipped but messages still print.
    pub fn new(quiet: bool) -> Self {
        Self { quiet, interactive: std::io::stderr().is_terminal(), bars: MultiProgress::new() }
    }
}

struct Bar(ProgressBar);

impl Progress for Bar {
    fn inc(&self, n: u64) {
        self.0.inc(n);
    }
    fn set_position(&self, pos: u64) {
        self.0.set_position(pos);
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

impl Reporter for TerminalReporter {
    fn start(&self, task: &str, total: Option<u64>, unit: ProgressUnit) -> Box<dyn Progress> {
        if self.quiet || !self.interactive {
            return Box::new(Bar(ProgressBar::hidden()));
        }
        let bar = match total {
            Some(n) => ProgressBar::new(n),
            None => ProgressBar::new_spinner(),
        };
        let bar = self.bars.add(bar);
        let template = match (total, unit) {
            (Some(_), ProgressUnit::Bytes) => "{msg:24} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            (Some(_), ProgressUnit::Items) => "{msg:24} [{bar:30}] {pos}/{len} eta {eta}",
            (None, ProgressUnit::Bytes) => "{spinner} {msg} {bytes}",
            (None, ProgressUnit::Items) => "{spinner} {msg} {pos}",
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(task.to_string());
        bar.enable_steady_tick(Duration::from_millis(120));
        Box::new(Bar(bar))
    }

    fn message(&self, text: &str) {
        if self.quiet {
            return;
        }
        // With bars on screen, hide them while the line prints, then redraw them below it.
        self.bars.suspend(|| eprintln!("{text}"));
    }
}
