//! A stdio MCP server's side of a connection: the child process (in its own process group), the rmcp transport over
//! its stdin and stdout, the end of its standard error (for error messages), and its stop.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::RoleClient;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::runtime::Runtime;

use super::config::StdioServer;
use super::MAX_MESSAGE_BYTES;
use crate::tools::process::describe_status;

/// Lines of a server's standard error kept for error messages.
const STDERR_LINES: usize = 20;
/// How long a server gets to exit by itself once its stdin is closed, before its process group is killed.
pub(crate) const EXIT_GRACE: Duration = Duration::from_millis(300);

/// The rmcp transport over a child's stdout (read) and stdin (written).
pub(crate) type StdioTransport = AsyncRwTransport<RoleClient, ChildStdout, ChildStdin>;

/// The child process of a server and the end of its standard error.
pub(crate) struct Process {
    runtime: tokio::runtime::Handle,
    child: Mutex<Option<tokio::process::Child>>,
    pub(crate) pid: Option<u32>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Process {
    /// Starts the server's program on `runtime` and connects the transport to its stdio; an error says what to
    /// check.
    pub fn spawn(runtime: &Runtime, server: &str, config: &StdioServer) -> Result<(Process, StdioTransport), String> {
        let mut command = tokio::process::Command::new(&config.command);
        command
            .args(&config.args)
            .envs(&config.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = &config.cwd {
            command.current_dir(dir);
        }
        #[cfg(unix)]
        command.process_group(0);
        let spawned = {
            // Spawning registers the child with the runtime's process driver: it must happen inside it.
            let _entered = runtime.enter();
            command.spawn()
        };
        let mut child = spawned.map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                "; check the \"command\" in the MCP servers file (a program on PATH, or a path) and that it is \
                 installed"
            } else {
                ""
            };
            format!("cannot start '{}': {e}{hint}", config.command)
        })?;
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(pipe) = child.stderr.take() {
            let keep = Arc::clone(&stderr);
            let server = server.to_string();
            runtime.spawn(async move {
                let mut lines = BufReader::new(pipe).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(server = %server, "stderr: {line}");
                    let mut kept = keep.lock().unwrap_or_else(|p| p.into_inner());
                    if kept.len() == STDERR_LINES {
                        kept.pop_front();
                    }
                    kept.push_back(line);
                }
            });
        }
        let pipes = (child.stdout.take(), child.stdin.take());
        let process =
            Process { runtime: runtime.handle().clone(), pid: child.id(), child: Mutex::new(Some(child)), stderr };
        let (Some(stdout), Some(stdin)) = pipes else {
            runtime.block_on(process.stop());
            return Err("its stdin and stdout could not be connected".into());
        };
        let transport =
            AsyncRwTransport::<RoleClient, _, _>::new(stdout, stdin).with_max_line_length(MAX_MESSAGE_BYTES);
        Ok((process, transport))
    }

    /// "; the server exited (exit code 3); its stderr ends: …": how the process ended, if it did, and what it last
    /// wrote to stderr.
    pub fn exit_note(&self) -> String {
        // Give the stderr reader a moment to take the last lines of a process that just died.
        std::thread::sleep(Duration::from_millis(50));
        let mut note = String::new();
        if let Some(child) = self.child.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            let _entered = self.runtime.enter();
            if let Ok(Some(status)) = child.try_wait() {
                note.push_str(&format!("; the server exited ({})", describe_status(&status)));
            }
        }
        let kept = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
        if !kept.is_empty() {
            let tail = kept.iter().map(String::as_str).collect::<Vec<_>>().join(" | ");
            let chars = tail.chars().count();
            let tail =
                if chars > 1000 { format!("…{}", tail.chars().skip(chars - 1000).collect::<String>()) } else { tail };
            note.push_str(&format!("; its stderr ends: {tail}"));
        }
        note
    }

    /// Waits a moment for the process to exit by itself, then kills its process group, and reaps it.
    pub async fn stop(&self) {
        let child = self.child.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut child) = child {
            let exited = tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_ok();
            // Whether or not the leader exited, whatever it started in its group goes too.
            kill_group(self.pid);
            if !exited {
                let _ = child.start_kill();
                let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
            }
        }
    }
}

/// Kills the process group a server leads, where it still runs.
pub(crate) fn kill_group(pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()).filter(|&p| p > 0) {
        // SAFETY: kill(2) with a negative pid signals the process group this server leads (`process_group(0)` at
        // spawn made its pid the group id); it touches no memory.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    #[cfg(not(unix))]
    let _ = pid;
}
