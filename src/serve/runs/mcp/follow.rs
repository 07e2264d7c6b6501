//! Following a run for an MCP request: each plan and step of its log as a progress notification (when the client
//! asked for progress), until the run finishes, waits for approval or stops; a cancelled request interrupts the
//! run at its next event, leaving it resumable.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::ProgressNotificationParam;
use rmcp::service::RequestContext;
use rmcp::RoleServer;

use crate::agent::{Event, Record};
use crate::serve::plumbing::error::ApiError;
use crate::serve::runs::routes::{off_runtime, read_from, run_dir};
use crate::serve::AppState;

/// How often the log is read for new lines.
const POLL: Duration = Duration::from_millis(200);

/// How a followed run came to rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rest {
    /// It finished, waits for approval, or stopped on its own.
    Settled,
    /// The request was cancelled: the run was interrupted (resumable).
    Cancelled,
}

/// Where a request is in following its run: a run followed again after an approval goes on from there, so
/// the client sees each event once.
pub struct Place {
    reader: LogReader,
    progress: f64,
    /// Notes not sent yet: the run's id first, so a client that cancels the request resumes the run by it.
    notes: Vec<String>,
}

impl Place {
    /// The start of run `id`'s log.
    pub async fn open(state: &Arc<AppState>, id: &str) -> Result<Self, ApiError> {
        let dir = {
            let (state, id) = (state.clone(), id.to_string());
            off_runtime(move || run_dir(&state, &id)).await?
        };
        Ok(Self { reader: LogReader::new(&dir), progress: 0.0, notes: vec![format!("run {id}")] })
    }
}

/// Follows run `id` until it is no longer queued or running here.
pub async fn until_settled(
    state: &Arc<AppState>,
    id: &str,
    context: &RequestContext<RoleServer>,
    place: &mut Place,
) -> Result<Rest, ApiError> {
    let token = context.meta.get_progress_token();
    let Place { reader, progress, notes } = place;
    loop {
        // Looked at before reading: a run that ends between the two has its last lines read this time.
        let active = state.active.get(id).is_some();
        notes.extend(reader.new_events().await?.iter().filter_map(describe));
        for message in notes.drain(..) {
            *progress += 1.0;
            if let Some(token) = &token {
                let mut note = ProgressNotificationParam::new(token.clone(), *progress);
                note.message = Some(message);
                // A client that stopped listening for progress still gets its answer.
                let _ = context.peer.notify_progress(note).await;
            }
        }
        if !active {
            return Ok(Rest::Settled);
        }
        tokio::select! {
            () = context.ct.cancelled() => {
                if let Some(handle) = state.active.get(id) {
                    handle.interrupt();
                }
                return Ok(Rest::Cancelled);
            }
            () = tokio::time::sleep(POLL) => {}
        }
    }
}

/// A run's events in one line each, from its log: the timeline `get_run` returns.
pub async fn timeline(dir: &Path) -> Result<Vec<String>, ApiError> {
    let events = LogReader::new(dir).new_events().await?;
    Ok(events.iter().filter_map(describe).collect())
}

/// One event in a line a person reads, for the events worth a progress notification.
fn describe(event: &Event) -> Option<String> {
    Some(match event {
        Event::PlanWritten { version, plan, issues, .. } if issues.is_empty() => {
            let steps: Vec<String> = plan.steps.iter().map(|s| format!("{} ({})", s.id, s.tool)).collect();
            format!("plan v{version}: {}", steps.join(", "))
        }
        Event::PlanWritten { version, issues, .. } => format!("plan v{version} sent back: {}", issues.join("; ")),
        Event::PlanApproval { version, decision, by } => format!("plan v{version} {decision} by {by}"),
        Event::StepFinished { step, tool, error: None, ms, .. } => format!("step {step} ({tool}) done in {ms} ms"),
        Event::StepFinished { step, tool, error: Some(error), .. } => format!("step {step} ({tool}) failed: {error}"),
        Event::Replan { from_version, reason } => format!("replanning after plan v{from_version}: {reason}"),
        Event::Answer { .. } => "answer written".to_string(),
        Event::RunFinished { stop, detail } => format!("run finished ({stop}): {detail}"),
        _ => return None,
    })
}

/// Reads a run's log from where it last stopped, whole lines only (the line being written waits).
struct LogReader {
    path: PathBuf,
    offset: u64,
    pending: Vec<u8>,
}

impl LogReader {
    fn new(dir: &Path) -> Self {
        Self { path: dir.join(crate::agent::EventLog::FILE), offset: 0, pending: Vec::new() }
    }

    /// The events written since the last call (an unreadable line is skipped: the log's own reader says so).
    async fn new_events(&mut self) -> Result<Vec<Event>, ApiError> {
        let bytes = read_from(&self.path, self.offset)
            .await
            .map_err(|e| ApiError::internal(format!("reading the run's log {}: {e}", self.path.display())))?;
        self.offset += bytes.len() as u64;
        self.pending.extend_from_slice(&bytes);
        let mut events = Vec::new();
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            if let Ok(record) = serde_json::from_slice::<Record>(&line) {
                events.push(record.event);
            }
        }
        Ok(events)
    }
}
