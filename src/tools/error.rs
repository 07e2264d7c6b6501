//! What can go wrong when loading or calling a tool; every variant names the tool or file involved.

use std::path::PathBuf;
use std::time::Duration;

/// An error from a tool call, the registry, or a tool file.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the tool (missing, wrong type, unparsable).
    #[error("tool '{tool}': invalid arguments: {message}")]
    InvalidArgs {
        /// The tool called.
        tool: String,
        /// What is wrong, in a sentence.
        message: String,
    },
    /// Policy refused the call (writes off, command not allowlisted, …).
    #[error("tool '{tool}' refused: {reason}")]
    Refused {
        /// The tool called.
        tool: String,
        /// Why, and which flag would allow it where one would.
        reason: String,
    },
    /// A path leaves the workspace (`..`, an absolute path, or a symlink pointing outside).
    #[error("path '{path}' is outside the workspace: {reason}")]
    OutsideWorkspace {
        /// The path as given.
        path: String,
        /// Which rule it broke.
        reason: String,
    },
    /// A path that should exist does not.
    #[error("tool '{tool}': '{path}' does not exist in the workspace; {hint}")]
    Missing {
        /// The tool called.
        tool: String,
        /// The path as given.
        path: String,
        /// Where a file of that name is, or how to find out.
        hint: String,
    },
    /// A file-system operation failed.
    #[error("tool '{tool}': {action} '{path}': {source}")]
    Io {
        /// The tool called.
        tool: String,
        /// What was being done ("reading", "listing", …).
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The calculator could not evaluate the expression.
    #[error("cannot evaluate '{expression}': {message}")]
    Calculation {
        /// The expression given.
        expression: String,
        /// What went wrong (syntax, overflow, division by zero, …).
        message: String,
    },
    /// A command could not be started.
    #[error("tool '{tool}': cannot start '{program}': {source}")]
    Spawn {
        /// The tool called.
        tool: String,
        /// The program.
        program: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A command ran past its time limit and was killed.
    #[error("tool '{tool}' timed out after {:.1} s and was killed", limit.as_secs_f64())]
    Timeout {
        /// The tool called.
        tool: String,
        /// The limit it ran past.
        limit: Duration,
    },
    /// A command exited unsuccessfully.
    #[error("tool '{tool}' failed ({status}); stderr ends: {stderr_tail}")]
    Failed {
        /// The tool called.
        tool: String,
        /// Exit status as text ("exit code 3", "killed by signal 9").
        status: String,
        /// The last part of its standard error.
        stderr_tail: String,
    },
    /// A command wrote more than its output cap and was stopped.
    #[error("tool '{tool}' wrote more than {limit} bytes of output and was stopped")]
    OutputTooLarge {
        /// The tool called.
        tool: String,
        /// The cap in bytes.
        limit: usize,
    },
    /// The tool answered something unusable.
    #[error("tool '{tool}' gave unusable output: {message}")]
    BadOutput {
        /// The tool called.
        tool: String,
        /// What is wrong with it.
        message: String,
    },
    /// The tool runs on the language model and must go through the executor.
    #[error("tool '{tool}' needs the language model: the executor runs it, not a direct call")]
    NeedsModel {
        /// The tool called.
        tool: String,
    },
    /// No tool of that name is registered.
    #[error("no tool named '{name}' (tools: {known})")]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// The registered names, comma-separated.
        known: String,
    },
    /// Two tools with one name.
    #[error("a tool named '{name}' is already registered")]
    DuplicateTool {
        /// The name.
        name: String,
    },
    /// A tool's JSON Schema is not a usable schema.
    #[error("tool '{tool}': invalid {which} schema: {message}")]
    BadSchema {
        /// The tool.
        tool: String,
        /// "argument" or "output".
        which: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A user tool file could not be read or parsed.
    #[error("{}{}: {message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    ToolFile {
        /// The file.
        file: PathBuf,
        /// 1-based line of the problem, when known.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// An MCP server could not be started, broke the protocol, closed the connection, or did not answer in time.
    #[error("MCP server '{server}': {message}")]
    McpServer {
        /// The server's name in the MCP servers file.
        server: String,
        /// What failed, and what to do.
        message: String,
    },
    /// The tool ran and reported a failure itself (an MCP result with `isError`); an answer about the call, which
    /// the same call would get again (see [`may_pass_unchanged`]).
    #[error("tool '{tool}' reported an error: {message}")]
    Reported {
        /// The tool called.
        tool: String,
        /// What the tool said.
        message: String,
    },
    /// The workspace directory itself is unusable.
    #[error("workspace '{path}': {source}")]
    Workspace {
        /// The directory given.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Result of tool operations.
pub type ToolResult<T> = std::result::Result<T, ToolError>;

/// Whether a tool error, in the words [`ToolError`] writes it, is a failure of the tool's process or server rather
/// than the tool's answer about the call: a command that exited unsuccessfully or ran past its time limit, an MCP
/// server that broke off. Such a call may pass when it is made again unchanged (a service that was down); a call
/// the tool answered with an error (an MCP `isError`, arguments that do not fit) would get the same answer.
pub fn may_pass_unchanged(error: &str) -> bool {
    let process = error.starts_with("tool '") && (error.contains("' failed (") || error.contains("' timed out after "));
    process || error.starts_with("MCP server '")
}
