//! Crash injection for the fault sweep: `TANDEM_FAULT_KILL` makes the process kill itself with SIGKILL at a
//! chosen point, so tests can crash a run at every event boundary and in the window between a tool's effect and
//! its logged result. Unset (always, outside those tests) it costs one cached lookup per point.
//!
//! Values: `event:N` (right after event number N is on disk), `tool:STEP` (right after the tool of step STEP
//! returned, before its result is logged) or `torn:N` (in the middle of the Nth line this process appends to a
//! batch results file, records and journal lines alike, or to a benchmark records file: half the line is written
//! and synced, then the kill).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Where to crash, read once from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
enum KillPoint {
    AfterEvent(u64),
    AfterTool(String),
    TornRecord(u64),
}

fn kill_point() -> Option<&'static KillPoint> {
    static POINT: OnceLock<Option<KillPoint>> = OnceLock::new();
    POINT
        .get_or_init(|| {
            let value = crate::settings::env::fault_kill()?;
            match value.split_once(':')? {
                ("event", n) => n.parse().ok().map(KillPoint::AfterEvent),
                ("tool", step) => Some(KillPoint::AfterTool(step.to_string())),
                ("torn", n) => n.parse().ok().map(KillPoint::TornRecord),
                _ => None,
            }
        })
        .as_ref()
}

/// Called after event `seq` is synced to disk.
pub(crate) fn after_event(seq: u64) {
    if kill_point() == Some(&KillPoint::AfterEvent(seq)) {
        die();
    }
}

/// Called after the tool of `step` returned, before its result is logged.
pub(crate) fn after_tool(step: &str) {
    if matches!(kill_point(), Some(KillPoint::AfterTool(s)) if s == step) {
        die();
    }
}

/// Called before a record line is appended to a results or records file: at the chosen record, writes the first
/// half of the line, syncs it, and dies, as a crash in the middle of the write would leave the file.
pub(crate) fn before_record(file: &mut std::fs::File, line: &[u8]) {
    static RECORDS: AtomicU64 = AtomicU64::new(0);
    let Some(KillPoint::TornRecord(n)) = kill_point() else { return };
    if RECORDS.fetch_add(1, Ordering::SeqCst) + 1 == *n {
        let _ = file.write_all(&line[..line.len() / 2]);
        let _ = file.sync_data();
        die();
    }
}

fn die() {
    #[cfg(unix)]
    // SAFETY: kill(2) on our own pid sends a signal; it touches no memory.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    std::process::abort();
}
