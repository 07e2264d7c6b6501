//! The `mcpServers` JSON file that other MCP clients keep: `{"mcpServers": {"name": {"command": "...", "args":
//! [...], "env": {...}}}}`, read into one [`ServerConfig`] per stdio server.
//!
//! Keys other clients add (`type`, `disabled`, `autoApprove`, …) are accepted; a server marked `"disabled": true`
//! is left out, and one given by `url` (HTTP) rather than `command` is left out with a note, as only stdio servers
//! are started.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::tools::error::{ToolError, ToolResult};

/// One stdio MCP server: the command that starts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The server's name (its key under `mcpServers`).
    pub name: String,
    /// The program. A relative path with a `/` (`./server.py`) is taken from the config file's directory.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set for it (on top of ours).
    pub env: BTreeMap<String, String>,
    /// Directory it runs in, when the config gives one (`cwd`); else ours.
    pub cwd: Option<PathBuf>,
}

/// The servers of a config file (in the order serde_json keeps its keys), and what was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpConfig {
    /// Servers to start.
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
    disabled: bool,
}

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
            .map_err(|e| fail(file, format!("server '{name}': {e} (expected command, args, env)")))?;
        if entry.disabled {
            config.notes.push(format!("MCP server '{name}' is disabled in {}; left out", file.display()));
            continue;
        }
        let Some(mut command) = entry.command.filter(|c| !c.trim().is_empty()) else {
            if let Some(url) = entry.url {
                config.notes.push(format!(
                    "MCP server '{name}' is an HTTP server ({url}); only stdio servers (\"command\") are started, so it \
                     is left out"
                ));
                continue;
            }
            return Err(fail(file, format!("server '{name}' has no \"command\" (the program that starts it)")));
        };
        if command.contains('/') && Path::new(&command).is_relative() {
            command = base.join(&command).to_string_lossy().into_owned();
        }
        let mut env = BTreeMap::new();
        for (key, value) in entry.env {
            let value = match value {
                Value::String(s) => s,
                Value::Number(_) | Value::Bool(_) => value.to_string(),
                _ => return Err(fail(file, format!("server '{name}': env.{key} must be a string"))),
            };
            env.insert(key, value);
        }
        let cwd = entry.cwd.map(|dir| if dir.is_relative() { base.join(dir) } else { dir });
        config.servers.push(ServerConfig { name, command, args: entry.args, env, cwd });
    }
    Ok(config)
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
