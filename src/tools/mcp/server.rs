//! One connected MCP server: the rmcp client session (over a child's stdio, or Streamable HTTP), what stands behind
//! it (the child process, or the endpoint), the freshness of its tool list, and its shutdown.
//!
//! rmcp is async; our tools are not. Every server of a config shares one tokio runtime (one worker thread) that
//! the [`Servers`] owns; a call blocks its own thread on the runtime (`block_on`), so calls may come from several
//! threads at once, and each is bounded by the timeout. Dropping the last handle to a server closes its session:
//! a stdio server's stdin is closed, it gets a moment to exit, then its whole process group is killed and reaped;
//! an HTTP server's session is ended. No child outlives the registry.
//!
//! The tools are listed once, at the start. The list is listed again before a call only when it is known to be
//! stale: the server said `notifications/tools/list_changed`, or the `ttlMs` its last `tools/list` gave (protocol
//! 2026-07-28) has passed. A tool the new list no longer has is then an error; tools that appear mid-run are not
//! registered (the plan was made from the first list).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
    Tool as McpToolInfo,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, NotificationContext, Peer, RunningService,
    ServiceError,
};
use rmcp::transport::Transport;
use rmcp::{ClientHandler, RoleClient};
use tokio::runtime::Runtime;

use super::config::{ServerConfig, Transport as Link};
use super::http;
use super::stdio::{kill_group, Process, EXIT_GRACE};
use crate::tools::error::{ToolError, ToolResult};

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

/// What stands behind a session.
enum Backend {
    /// A child process over stdio.
    Stdio(Process),
    /// A Streamable HTTP endpoint.
    Http { url: String },
}

impl Backend {
    /// What to add to an error: how a child ended and its stderr, or which endpoint was called.
    fn note(&self) -> String {
        match self {
            Backend::Stdio(process) => process.exit_note(),
            Backend::Http { url } => format!(" (at {url})"),
        }
    }
}

/// Our side of the session: who we are, and a flag the server's `notifications/tools/list_changed` sets.
#[derive(Clone)]
struct Client {
    info: ClientConfig,
    tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::SeqCst);
    }
}

/// The names of the tools a server offers, and until when that list is fresh.
struct ToolList {
    names: HashSet<String>,
    /// `None`: fresh until the server says otherwise.
    fresh_until: Option<Instant>,
}

impl ToolList {
    fn new(tools: &[McpToolInfo], ttl_ms: Option<u64>) -> Self {
        let fresh_until = ttl_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        Self { names: tools.iter().map(|t| t.name.to_string()).collect(), fresh_until }
    }
}

/// A connected MCP server and its session.
pub(crate) struct Server {
    /// Its name in the config.
    pub name: String,
    servers: Arc<Servers>,
    peer: Peer<RoleClient>,
    session: Mutex<Option<RunningService<RoleClient, Client>>>,
    backend: Backend,
    tools_changed: Arc<AtomicBool>,
    tools: Mutex<ToolList>,
    /// Limit of one call (and of the start).
    pub timeout: Duration,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("name", &self.name).finish()
    }
}

fn server_error(server: &str, message: impl Into<String>) -> ToolError {
    ToolError::McpServer { server: server.to_string(), message: message.into() }
}

/// A session and the server's tools (with the list's `ttlMs`, where it gave one).
type Opened = (RunningService<RoleClient, Client>, Vec<McpToolInfo>, Option<u64>);

/// Runs the handshake over `transport` and lists the tools, each step within `timeout`.
async fn open<T>(
    client: Client,
    transport: T,
    lifecycle: ClientLifecycleMode,
    timeout: Duration,
) -> Result<Opened, String>
where
    T: Transport<RoleClient> + 'static,
{
    let seconds = timeout.as_secs_f64();
    let handshake = match lifecycle {
        ClientLifecycleMode::Initialize => "`initialize`",
        _ => "`server/discover` or `initialize`",
    };
    let session = tokio::time::timeout(timeout, client.serve_with_lifecycle(transport, lifecycle))
        .await
        .map_err(|_| {
            format!("did not answer {handshake} within {seconds:.1} s (raise --mcp-timeout if it starts slowly)")
        })?
        .map_err(|e| format!("the {handshake} handshake failed: {}", describe_start(&e)))?;
    let listed = tokio::time::timeout(timeout, session.peer().list_all_tools_with_cache_hint())
        .await
        .map_err(|_| format!("did not answer `tools/list` within {seconds:.1} s"))?
        .map_err(|e| format!("`tools/list` failed: {}", error_chain(&e)))?;
    Ok((session, listed.items, listed.ttl_ms))
}

impl Server {
    /// Starts or reaches the server, runs the handshake and lists its tools, each within `timeout`.
    pub fn start(
        servers: &Arc<Servers>,
        config: &ServerConfig,
        timeout: Duration,
    ) -> ToolResult<(Arc<Server>, Vec<McpToolInfo>)> {
        let name = config.name.as_str();
        let tools_changed = Arc::new(AtomicBool::new(false));
        let client = Client {
            info: ClientConfig::new(
                ClientCapabilities::default(),
                Implementation::new("tandem", env!("CARGO_PKG_VERSION")),
            ),
            tools_changed: Arc::clone(&tools_changed),
        };
        let runtime = &servers.runtime;
        let (backend, opened) = match &config.transport {
            Link::Stdio(stdio) => {
                let (process, transport) = Process::spawn(runtime, name, stdio).map_err(|m| server_error(name, m))?;
                // Stdio servers keep the `initialize` handshake every version of them knows.
                let opened = runtime.block_on(open(client, transport, ClientLifecycleMode::Initialize, timeout));
                (Backend::Stdio(process), opened)
            }
            Link::Http(endpoint) => {
                // `server/discover` first (the stateless protocol, 2026-07-28), `initialize` where the server is
                // older.
                let lifecycle = ClientLifecycleMode::Auto {
                    preferred_versions: vec![ProtocolVersion::LATEST],
                    legacy_version: None,
                };
                let opened = runtime.block_on(async {
                    let transport = http::transport(endpoint)?;
                    open(client, transport, lifecycle, timeout).await
                });
                (Backend::Http { url: endpoint.url.clone() }, opened)
            }
        };
        match opened {
            Ok((session, tools, ttl_ms)) => {
                let server = Server {
                    name: name.to_string(),
                    servers: Arc::clone(servers),
                    peer: session.peer().clone(),
                    session: Mutex::new(Some(session)),
                    backend,
                    tools_changed,
                    tools: Mutex::new(ToolList::new(&tools, ttl_ms)),
                    timeout,
                };
                Ok((Arc::new(server), tools))
            }
            Err(message) => {
                let message = format!("{message}{}", backend.note());
                if let Backend::Stdio(process) = &backend {
                    runtime.block_on(process.stop());
                }
                Err(server_error(name, message))
            }
        }
    }

    /// Lists the tools again where the list is stale; an error where `tool` is no longer offered.
    async fn check_offered(&self, tool: &str) -> Result<(), String> {
        let stale = {
            let list = self.tools.lock().unwrap_or_else(|p| p.into_inner());
            self.tools_changed.load(Ordering::SeqCst) || list.fresh_until.is_some_and(|t| Instant::now() >= t)
        };
        if !stale {
            return Ok(());
        }
        self.tools_changed.store(false, Ordering::SeqCst);
        let listed = self
            .peer
            .list_all_tools_with_cache_hint()
            .await
            .map_err(|e| format!("listing its tools again (the list was stale): {}", self.describe(&e)))?;
        let list = ToolList::new(&listed.items, listed.ttl_ms);
        let offered = list.names.contains(tool);
        *self.tools.lock().unwrap_or_else(|p| p.into_inner()) = list;
        tracing::debug!(server = %self.name, tools = listed.items.len(), "MCP tools listed again");
        if offered {
            Ok(())
        } else {
            Err(format!(
                "tool '{tool}' is no longer offered (its tool list changed during the run; tools are registered at \
                 the start of a run)"
            ))
        }
    }

    /// Calls a tool of this server by its own name, within the timeout (which covers listing the tools again).
    pub fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> ToolResult<CallToolResult> {
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let timeout = self.timeout;
        // The timer is made inside the runtime (a tokio timer needs its context).
        let answer = self.servers.runtime.block_on(async {
            tokio::time::timeout(timeout, async {
                self.check_offered(tool).await?;
                self.peer
                    .call_tool(params)
                    .await
                    .map_err(|error| format!("calling tool '{tool}': {}", self.describe(&error)))
            })
            .await
        });
        match answer {
            Err(_) => Err(server_error(
                &self.name,
                format!(
                    "tool '{tool}' did not answer within {:.1} s; the call was cancelled (raise --mcp-timeout if it \
                     needs longer){}",
                    timeout.as_secs_f64(),
                    self.backend.note()
                ),
            )),
            Ok(Err(message)) => Err(server_error(&self.name, message)),
            Ok(Ok(result)) => Ok(result),
        }
    }

    fn describe(&self, error: &ServiceError) -> String {
        match error {
            ServiceError::TransportClosed => format!("the connection to the server closed{}", self.backend.note()),
            ServiceError::TransportSend(_) => match &self.backend {
                Backend::Stdio(_) => format!("the connection to the server closed{}", self.backend.note()),
                Backend::Http { url } => {
                    let cause = match error {
                        ServiceError::TransportSend(sent) => error_chain(sent.error.as_ref()),
                        other => error_chain(other),
                    };
                    format!("the request to {url} failed: {cause}")
                }
            },
            ServiceError::McpError(data) => format!("the server answered with an error: {}", data.message),
            ServiceError::UnexpectedResponse => "the server answered something that is not a tool result".into(),
            other => error_chain(other),
        }
    }
}

/// Why a handshake failed: a transport's failure by its cause, without the transport's type name.
fn describe_start(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::TransportError { error, context } => {
            format!("the connection failed ({context}): {}", error_chain(error.error.as_ref()))
        }
        other => error_chain(other),
    }
}

/// An error and its sources, on one line (a transport error's cause, such as a refused connection, is in a source).
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current = Some(error);
    while let Some(error) = current {
        let text = error.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        current = http::client_cause(error).or_else(|| error.source());
    }
    parts.join(": ")
}

impl Drop for Server {
    fn drop(&mut self) {
        let session = self.session.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        // block_on panics inside an async context; there (never in this crate) the process group is only killed.
        if tokio::runtime::Handle::try_current().is_ok() {
            if let Backend::Stdio(process) = &self.backend {
                kill_group(process.pid);
            }
            return;
        }
        self.servers.runtime.block_on(async {
            if let Some(session) = session {
                // Closing the session closes a stdio server's stdin, which asks it to exit, or ends an HTTP
                // session.
                let _ = tokio::time::timeout(EXIT_GRACE, session.cancel()).await;
            }
            if let Backend::Stdio(process) = &self.backend {
                process.stop().await;
            }
        });
    }
}
