//! Tools from MCP servers: the servers of an `mcpServers` JSON file are started as child processes over stdio, or
//! reached over Streamable HTTP (the official Rust SDK, `rmcp`, on a tokio runtime of their own), their tools are
//! listed, and each is registered as a [`Tool`](crate::tools::Tool) with the server's `inputSchema` and
//! `outputSchema`.
//!
//! A tool keeps the server's name for it, unless another server or an earlier tool (a built-in, a `--tools` tool)
//! has that name: then each MCP tool of that name is registered as `server.tool`, with a note saying so. Calls are
//! bounded by the timeout and the output cap; `isError` results, a server that exits, hangs, cannot be reached or
//! answers nonsense become [`ToolError`]s that name the tool or server and say what happened. The servers stop
//! (stdio servers' process groups killed, HTTP sessions ended) when the last of their tools is dropped, with the
//! registry.

mod config;
mod http;
mod server;
mod stdio;
mod tool;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use config::{
    default_config_path, load_config, parse_config, HttpServer, McpConfig, ServerConfig, StdioServer, Transport,
};
pub use tool::{output_of, McpTool};

use self::server::{Server, Servers};
use self::tool::one_line;
use super::error::ToolResult;
use super::ToolRegistry;

/// The longest incoming message read: a longer line (stdio) or HTTP body or event is refused by the transport.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Cap on the output of one MCP tool call (the output object as JSON), in bytes.
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// How MCP servers are started and called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpLimits {
    /// Limit of a server's start (the handshake, then `tools/list`; each) and of one tool call, over stdio or HTTP.
    pub timeout: Duration,
    /// Cap on one call's output object, as JSON, in bytes.
    pub max_output_bytes: usize,
}

impl McpLimits {
    /// The timeout given, and the default output cap.
    pub fn with_timeout(timeout: Duration) -> Self {
        Self { timeout, max_output_bytes: MAX_OUTPUT_BYTES }
    }
}

/// Starts the servers of a config file and registers their tools after those `registry` already holds. Returns
/// notes: servers left out, names namespaced, tools that could not be registered (each also logged as a warning).
/// A server that cannot be started or reached, or does not answer its handshake or `tools/list`, is an error naming
/// it.
pub fn register_servers(registry: &mut ToolRegistry, file: &Path, limits: McpLimits) -> ToolResult<Vec<String>> {
    let config = load_config(file)?;
    register_config(registry, &config, limits)
}

/// [`register_servers`] for a config already read.
pub fn register_config(registry: &mut ToolRegistry, config: &McpConfig, limits: McpLimits) -> ToolResult<Vec<String>> {
    let mut notes = config.notes.clone();
    if config.servers.is_empty() {
        return Ok(notes);
    }
    let servers = Servers::new()?;
    let mut started = Vec::new();
    for server_config in &config.servers {
        let (server, tools) = Server::start(&servers, server_config, limits.timeout)?;
        tracing::debug!(server = %server.name, tools = tools.len(), "MCP server started");
        started.push((server, tools));
    }
    // How many servers offer each name: a name offered twice, or taken already, is namespaced by server.
    let mut offered: HashMap<String, Vec<String>> = HashMap::new();
    for (server, tools) in &started {
        for tool in tools {
            offered.entry(tool.name.to_string()).or_default().push(server.name.clone());
        }
    }
    for (server, tools) in started {
        for info in tools {
            let remote = info.name.to_string();
            let owners = &offered[&remote];
            let name = if owners.len() > 1 {
                let qualified = format!("{}.{remote}", server.name);
                if owners.first() == Some(&server.name) {
                    notes.push(format!(
                        "MCP servers {} all offer a tool '{remote}': each is registered as '<server>.{remote}'",
                        owners.iter().map(|o| format!("'{o}'")).collect::<Vec<_>>().join(", ")
                    ));
                }
                qualified
            } else if registry.contains(&remote) {
                let qualified = format!("{}.{remote}", server.name);
                notes.push(format!(
                    "MCP server '{}' offers a tool '{remote}', a name already taken: it is registered as '{qualified}'",
                    server.name
                ));
                qualified
            } else {
                remote.clone()
            };
            if registry.contains(&name) {
                notes.push(format!("MCP tool '{name}' (server '{}'): the name is taken twice; left out", server.name));
                continue;
            }
            let description = info
                .description
                .as_deref()
                .map(one_line)
                .filter(|d| !d.is_empty())
                .or_else(|| info.title.as_deref().map(one_line))
                .unwrap_or_else(|| format!("Tool '{remote}' of MCP server '{}'.", server.name));
            let tool = McpTool {
                name: name.clone(),
                remote_name: remote,
                description,
                args_schema: serde_json::Value::Object((*info.input_schema).clone()),
                output_schema: info.output_schema.as_ref().map(|s| serde_json::Value::Object((**s).clone())),
                // MCP's default for a tool with annotations is `readOnlyHint: false`; a tool without any says
                // nothing.
                changes_things: info.annotations.as_ref().map(|a| !a.read_only_hint.unwrap_or(false)),
                destructive: destructive(info.annotations.as_ref()),
                repeat_safe: info
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.read_only_hint == Some(true) || a.idempotent_hint == Some(true)),
                max_output_bytes: limits.max_output_bytes,
                server: Arc::clone(&server),
            };
            if let Err(e) = registry.register_arc(Arc::new(tool)) {
                notes.push(format!("MCP tool '{name}' (server '{}') is left out: {e}", server.name));
            }
        }
    }
    for note in &notes {
        tracing::warn!("{note}");
    }
    Ok(notes)
}

/// Whether a tool's annotations say a call may destroy or overwrite: `destructiveHint`, whose MCP default is true,
/// meaningful only where the tool does not only read (`readOnlyHint`, default false). A tool without annotations
/// says nothing, and is not taken as destructive.
fn destructive(annotations: Option<&rmcp::model::ToolAnnotations>) -> bool {
    annotations.is_some_and(|a| a.read_only_hint != Some(true) && a.destructive_hint.unwrap_or(true))
}

#[cfg(test)]
mod tests {
    use rmcp::model::ToolAnnotations;

    use super::destructive;

    #[test]
    fn destructive_follows_the_annotations_and_mcps_defaults() {
        let with = |read_only: Option<bool>, destroys: Option<bool>| {
            let mut a = ToolAnnotations::default();
            a.read_only_hint = read_only;
            a.destructive_hint = destroys;
            destructive(Some(&a))
        };
        assert!(!destructive(None), "no annotations say nothing");
        assert!(with(None, None), "annotations without hints: MCP's defaults, a tool that changes and destroys");
        assert!(with(Some(false), Some(true)));
        assert!(!with(Some(false), Some(false)), "an additive tool");
        assert!(!with(Some(true), None), "a tool that only reads");
        assert!(!with(Some(true), Some(true)), "destructiveHint means nothing for a tool that only reads");
    }
}
