//! One running MCP server: the child process (in its own process group), the rmcp client session over its stdio,
//! the end of its standard error (for error messages), and its shutdown.
//!
//! rmcp is async; our tools are not. Every server of a config shares one tokio runtime (one worker thread) that
//! the [`Servers`] owns; a call blocks its own thread on the runtime (`block_on`), so calls may come from several
//! threads at once, and each is bounded by the timeout. Dropping the last handle to a server closes its stdin,
//! gives it a moment to exit, then kills its whole process group and reaps it: no server outlives the registry.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation, Tool as McpToolInfo,
};
use rmcp::service::{Peer, RunningService, ServiceError};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::runtime::Runtime;

use super::config::ServerConfig;
use crate::tools::error::{ToolError, ToolResult};
use crate::tools::process::describe_status;

/// Lines of a server's standard error kept for error messages.
const STDERR_LINES: usize = 20;
/// The longest incoming message read (longer ones are dropped by the transport, so the call then times out).
const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// How long a server gets to exit by itself once its stdin is closed, before its process group is killed.
const EXIT_GRACE: Duration = Duration::from_millis(300);

/// The tokio runtime the servers of one config share.
pub(crate) struct Servers {
    runtime: Runtime,
}

impl Servers {
    /// A runtime with one worker thread, which drives every server's session.
    pub fn new() -> ToolResult<Arc<Self>> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("tandem-mcp")
            .enable_all()
            .build()
            .map_err(|e| ToolError::McpServer {
                server: "(all)".into(),
                message: format!("cannot start the async runtime for MCP clients: {e}"),
            })?;
        Ok(Arc::new(Self { runtime }))
    }
}

/// The child process of a server and the end of its standard error.
struct Process {
    runtime: tokio::runtime::Handle,
    child: Mutex<Option<tokio::process::Child>>,
    pid: Option<u32>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Process {
    /// "; the server exited (exit code 3); its stderr ends: …": how the process ended, if it did, and what it last
    /// wrote to stderr.
    fn exit_note(&self) -> String {
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
    async fn stop(&self) {
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

/// A started MCP server and its session.
pub(crate) struct Server {
    /// Its name in the config.
    pub name: String,
    servers: Arc<Servers>,
    peer: Peer<RoleClient>,
    session: Mutex<Option<RunningService<RoleClient, ClientConfig>>>,
    process: Process,
    /// Limit of one call (and of the start).
    pub timeout: Duration,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("name", &self.name).field("pid", &self.process.pid).finish()
    }
}

fn server_error(server: &str, message: impl Into<String>) -> ToolError {
    ToolError::McpServer { server: server.to_string(), message: message.into() }
}

impl Server {
    /// Starts the server, runs the `initialize` handshake and lists its tools, all within `timeout`.
    pub fn start(
        servers: &Arc<Servers>,
        config: &ServerConfig,
        timeout: Duration,
    ) -> ToolResult<(Arc<Server>, Vec<McpToolInfo>)> {
        let name = config.name.as_str();
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
            let _entered = servers.runtime.enter();
            command.spawn()
        };
        let mut child = spawned.map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                "; check the \"command\" in the MCP servers file (a program on PATH, or a path) and that it is \
                 installed"
            } else {
                ""
            };
            server_error(name, format!("cannot start '{}': {e}{hint}", config.command))
        })?;
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(pipe) = child.stderr.take() {
            let (keep, server) = (Arc::clone(&stderr), name.to_string());
            servers.runtime.spawn(async move {
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
        let process = Process {
            runtime: servers.runtime.handle().clone(),
            pid: child.id(),
            child: Mutex::new(Some(child)),
            stderr,
        };
        let (Some(stdout), Some(stdin)) = pipes else {
            servers.runtime.block_on(process.stop());
            return Err(server_error(name, "its stdin and stdout could not be connected"));
        };
        let transport =
            AsyncRwTransport::<RoleClient, _, _>::new(stdout, stdin).with_max_line_length(MAX_MESSAGE_BYTES);
        let info =
            ClientConfig::new(ClientCapabilities::default(), Implementation::new("tandem", env!("CARGO_PKG_VERSION")));
        let seconds = timeout.as_secs_f64();
        let started = servers.runtime.block_on(async {
            let session = tokio::time::timeout(timeout, info.serve(transport))
                .await
                .map_err(|_| {
                    format!(
                        "did not answer `initialize` within {seconds:.1} s (raise --mcp-timeout if it starts slowly)"
                    )
                })?
                .map_err(|e| format!("the `initialize` handshake failed: {e}"))?;
            let tools = tokio::time::timeout(timeout, session.peer().list_all_tools())
                .await
                .map_err(|_| format!("did not answer `tools/list` within {seconds:.1} s"))?
                .map_err(|e| format!("`tools/list` failed: {e}"))?;
            Ok::<_, String>((session, tools))
        });
        match started {
            Ok((session, tools)) => {
                let server = Server {
                    name: name.to_string(),
                    servers: Arc::clone(servers),
                    peer: session.peer().clone(),
                    session: Mutex::new(Some(session)),
                    process,
                    timeout,
                };
                Ok((Arc::new(server), tools))
            }
            Err(message) => {
                let message = format!("{message}{}", process.exit_note());
                servers.runtime.block_on(process.stop());
                Err(server_error(name, message))
            }
        }
    }

    /// Calls a tool of this server by its own name, within the timeout.
    pub fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> ToolResult<CallToolResult> {
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let timeout = self.timeout;
        // The timer is made inside the runtime (a tokio timer needs its context).
        let answer =
            self.servers.runtime.block_on(async { tokio::time::timeout(timeout, self.peer.call_tool(params)).await });
        match answer {
            Err(_) => Err(server_error(
                &self.name,
                format!(
                    "tool '{tool}' did not answer within {:.1} s; the call was cancelled (raise --mcp-timeout if it \
                     needs longer){}",
                    timeout.as_secs_f64(),
                    self.process.exit_note()
                ),
            )),
            Ok(Err(error)) => {
                Err(server_error(&self.name, format!("calling tool '{tool}': {}", self.describe(&error))))
            }
            Ok(Ok(result)) => Ok(result),
        }
    }

    fn describe(&self, error: &ServiceError) -> String {
        match error {
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                format!("the connection to the server closed{}", self.process.exit_note())
            }
            ServiceError::McpError(data) => format!("the server answered with an error: {}", data.message),
            ServiceError::UnexpectedResponse => "the server answered something that is not a tool result".into(),
            other => other.to_string(),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let session = self.session.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        // block_on panics inside an async context; there (never in this crate) the process group is only killed.
        if tokio::runtime::Handle::try_current().is_ok() {
            kill_group(self.process.pid);
            return;
        }
        self.servers.runtime.block_on(async {
            if let Some(session) = session {
                // Closing the session closes the server's stdin, which asks a stdio server to exit.
                let _ = tokio::time::timeout(EXIT_GRACE, session.cancel()).await;
            }
            self.process.stop().await;
        });
    }
}

fn kill_group(pid: Option<u32>) {
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
