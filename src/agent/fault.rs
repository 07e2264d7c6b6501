//! Crash injection for the fault sweep: `TANDEM_FAULT_KILL` makes the process kill itself with SIGKILL at a
//! chosen point, so tests can crash a run at every event boundary and in the window between a tool's effect and
//! its logged result. Unset (always, outside those tests) it costs one cached lookup per point.
//!
//! Values: `event:N` (right after event number N is on disk) or `tool:STEP` (right after the tool of step STEP
//! returned, before its result is logged).

use std::sync::OnceLock;

/// Where to crash, read once from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
enum KillPoint {
    AfterEvent(u64),
    AfterTool(String),
}

fn kill_point() -> Option<&'static KillPoint> {
    static POINT: OnceLock<Option<KillPoint>> = OnceLock::new();
    POINT
        .get_or_init(|| {
            let value = std::env::var("TANDEM_FAULT_KILL").ok()?;
            match value.split_once(':')? {
                ("event", n) => n.parse().ok().map(KillPoint::AfterEvent),
                ("tool", step) => Some(KillPoint::AfterTool(step.to_string())),
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

fn die() {
    #[cfg(unix)]
    // SAFETY: kill(2) on our own pid sends a signal; it touches no memory.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    std::process::abort();
}
