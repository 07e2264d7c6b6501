//! The `mcpServers` JSON file that other MCP clients keep, read into one [`ServerConfig`] per server: a stdio server
//! started by `{"command": "...", "args": [...], "env": {...}}`, or a Streamable HTTP server reached at
//! `{"url": "http://...", "headers": {...}}`.
//!
//! Keys other clients add (`disabled`, `autoApprove`, …) are accepted; a server marked `"disabled": true` is left out
//! with a note. `type` may say `stdio`, `http` or `streamable-http` (it must match `command` or `url`); the legacy
//! `sse` transport is refused with an error, as is an entry with both `command` and `url`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::tools::error::{ToolError, ToolResult};

/// One MCP server of the file: its name and how it is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The server's name (its key under `mcpServers`).
    pub name: String,
    /// How it is started or reached.
    pub transport: Transport,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process spoken to over its stdin and stdout.
    Stdio(StdioServer),
    /// A server at a Streamable HTTP endpoint.
    Http(HttpServer),
}

/// A stdio MCP server: the command that starts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioServer {
    /// The program. A relative path with a `/` (`./server.py`) is taken from the config file's directory.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set for it (on top of ours).
    pub env: BTreeMap<String, String>,
    /// Directory it runs in, when the config gives one (`cwd`); else ours.
    pub cwd: Option<PathBuf>,
}

/// A Streamable HTTP MCP server: its endpoint and the headers sent with every request.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpServer {
    /// The endpoint (`http://` or `https://`), as the file gives it.
    pub url: String,
    /// Headers sent with every request (`Authorization`, …): checked names and values.
    pub headers: BTreeMap<String, String>,
}

impl std::fmt::Debug for HttpServer {
    // Header values are often secrets: only their names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer").field("url", &self.url).field("headers", &self.headers.keys()).finish()
    }
}

/// The servers of a config file (in the order serde_json keeps its keys), and what was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpConfig {
    /// Servers to start or reach.
    pub servers: Vec<ServerConfig>,
    /// Servers left out and why, one sentence each.
    pub notes: Vec<String>,
}

#[derive(Deserialize)]
struct File {
    #[serde(rename = "mcpServers", alias = "servers")]
    servers: Option<serde_json::Map<String, Value>>,
}

#[derive(Deserialize)]
struct Entry {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, Value>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, Value>,
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    disabled: bool,
}

/// Headers the HTTP transport sets itself: a file may not give them.
const RESERVED_HEADERS: [&str; 4] = ["accept", "mcp-session-id", "mcp-protocol-version", "last-event-id"];

fn fail(file: &Path, message: String) -> ToolError {
    ToolError::ToolFile { file: file.to_path_buf(), line: None, message }
}

/// Parses a config file's text; `file` is named in errors and anchors relative paths.
pub fn parse_config(text: &str, file: &Path) -> ToolResult<McpConfig> {
    let parsed: File = serde_json::from_str(text).map_err(|e| ToolError::ToolFile {
        file: file.to_path_buf(),
        line: Some(e.line()),
        message: format!(
            "not an MCP servers file ({e}); expected {{\"mcpServers\": {{\"name\": {{\"command\": ...}}}}}}"
        ),
    })?;
    let servers = parsed.servers.ok_or_else(|| {
        fail(file, "has no \"mcpServers\" object; expected {\"mcpServers\": {\"name\": {\"command\": ...}}}".into())
    })?;
    let base = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let base = std::fs::canonicalize(base).unwrap_or_else(|_| base.to_path_buf());
    let mut config = McpConfig::default();
    for (name, value) in servers {
        let entry: Entry = serde_json::from_value(value)
            .map_err(|e| fail(file, format!("server '{name}': {e} (expected command, args, env; or url, headers)")))?;
        if entry.disabled {
            config.notes.push(format!("MCP server '{name}' is disabled in {}; left out", file.display()));
            continue;
        }
        let transport = transport_of(&name, entry, &base).map_err(|message| fail(file, message))?;
        config.servers.push(ServerConfig { name, transport });
    }
    Ok(config)
}

/// A string-valued map of the file (`env`, `headers`): numbers and booleans are taken as their text.
fn strings(server: &str, field: &str, map: BTreeMap<String, Value>) -> Result<BTreeMap<String, String>, String> {
    let mut strings = BTreeMap::new();
    for (key, value) in map {
        let value = match value {
            Value::String(s) => s,
            Value::Number(_) | Value::Bool(_) => value.to_string(),
            _ => return Err(format!("server '{server}': {field}.{key} must be a string")),
        };
        strings.insert(key, value);
    }
    Ok(strings)
}

/// How the entry of server `name` is reached, or what is wrong with it.
fn transport_of(name: &str, entry: Entry, base: &Path) -> Result<Transport, String> {
    let command = entry.command.filter(|c| !c.trim().is_empty());
    let url = entry.url.filter(|u| !u.trim().is_empty());
    let kind = entry.kind.as_deref().map(str::to_ascii_lowercase);
    match kind.as_deref() {
        None | Some("stdio" | "http" | "streamable-http" | "streamable_http" | "streamablehttp") => {}
        Some("sse") => {
            return Err(format!(
                "server '{name}' uses the legacy SSE transport (\"type\": \"sse\"), which is not supported; give the \
                 server's Streamable HTTP endpoint as \"url\" with \"type\": \"http\" (or no \"type\")"
            ))
        }
        Some(other) => {
            return Err(format!(
                "server '{name}' has \"type\": \"{other}\"; expected \"stdio\" (with \"command\") or \"http\" / \
                 \"streamable-http\" (with \"url\")"
            ))
        }
    }
    match (command, url) {
        (Some(_), Some(_)) => Err(format!(
            "server '{name}' has both \"command\" and \"url\"; give one: \"command\" starts a stdio server, \"url\" \
             names a Streamable HTTP server"
        )),
        (None, None) => Err(format!(
            "server '{name}' has no \"command\" (the program that starts it) and no \"url\" (the endpoint of an HTTP \
             server)"
        )),
        (Some(mut command), None) => {
            if let Some(kind) = kind.as_deref().filter(|k| *k != "stdio") {
                return Err(format!(
                    "server '{name}' is of \"type\": \"{kind}\" but gives a \"command\", not a \"url\""
                ));
            }
            if !entry.headers.is_empty() {
                return Err(format!("server '{name}': \"headers\" are for HTTP servers (\"url\"), not \"command\""));
            }
            if command.contains('/') && Path::new(&command).is_relative() {
                command = base.join(&command).to_string_lossy().into_owned();
            }
            let env = strings(name, "env", entry.env)?;
            let cwd = entry.cwd.map(|dir| if dir.is_relative() { base.join(dir) } else { dir });
            Ok(Transport::Stdio(StdioServer { command, args: entry.args, env, cwd }))
        }
        (None, Some(url)) => {
            if kind.as_deref() == Some("stdio") {
                return Err(format!(
                    "server '{name}' is of \"type\": \"stdio\" but gives a \"url\", not a \"command\""
                ));
            }
            let url = url.trim().to_string();
            let lower = url.to_ascii_lowercase();
            let rest = lower.strip_prefix("http://").or_else(|| lower.strip_prefix("https://"));
            if rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) || url.chars().any(char::is_whitespace) {
                return Err(format!(
                    "server '{name}': \"url\" must be an http:// or https:// address with a host, like \
                     http://127.0.0.1:8000/mcp (got '{url}')"
                ));
            }
            if !entry.args.is_empty() || !entry.env.is_empty() || entry.cwd.is_some() {
                return Err(format!(
                    "server '{name}': \"args\", \"env\" and \"cwd\" are for stdio servers (\"command\"), not \"url\""
                ));
            }
            let headers = strings(name, "headers", entry.headers)?;
            for (key, value) in &headers {
                if http::HeaderName::from_bytes(key.as_bytes()).is_err() {
                    return Err(format!("server '{name}': \"{key}\" is not a valid HTTP header name"));
                }
                if RESERVED_HEADERS.contains(&key.to_ascii_lowercase().as_str()) {
                    return Err(format!(
                        "server '{name}': the header \"{key}\" is set by the MCP client itself; leave it out of \
                         \"headers\""
                    ));
                }
                if http::HeaderValue::from_str(value).is_err() {
                    // The value is not shown: it may be a secret.
                    return Err(format!(
                        "server '{name}': the value of header \"{key}\" is not a valid HTTP header value (visible \
                         ASCII only, no line breaks)"
                    ));
                }
            }
            Ok(Transport::Http(HttpServer { url, headers }))
        }
    }
}

/// Reads and parses a config file.
pub fn load_config(path: &Path) -> ToolResult<McpConfig> {
    let text =
        std::fs::read_to_string(path).map_err(|e| fail(path, format!("cannot read the MCP servers file: {e}")))?;
    parse_config(&text, path)
}

/// The config file read when none is given (no `--mcp`, no `$TANDEM_MCP`): `$XDG_CONFIG_HOME/tandem/mcp.json`,
/// else `~/.config/tandem/mcp.json`, where the file exists; `None` otherwise, so a machine without one starts no
/// servers.
pub fn default_config_path() -> Option<PathBuf> {
    let base = crate::settings::env::config_home()?;
    Some(base.join("tandem").join("mcp.json")).filter(|path| path.is_file())
}
