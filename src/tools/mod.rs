//! Tools the agent calls: the [`Tool`] trait, the per-run [`ToolContext`] (workspace and policy), the
//! [`ToolRegistry`], the built-in tools (one file each), user command tools loaded from TOML and tools of MCP
//! servers (`mcp`).
//!
//! Calls are synchronous: the orchestrator runs them on blocking threads. Commands are confined by a timeout
//! (the process group is killed), an output cap and, on Linux, Landlock (`confine`).

pub mod arithmetic;
pub mod calculator;
pub mod command;
pub mod confine;
pub mod declared;
pub mod equation;
pub mod error;
pub mod linear_system;
pub mod list_dir;
pub mod llm;
pub mod mcp;
mod process;
pub mod read_file;
pub mod registry;
pub mod retrieval;
pub mod schema_fit;
pub mod shell;
pub mod toolbox;
pub mod workspace;
pub mod write_file;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use calculator::Calculator;
pub use command::{load_tool_file, parse_tool_file, CommandTool};
pub use declared::DeclaredTool;
pub use error::{ToolError, ToolResult};
pub use list_dir::ListDir;
pub use llm::Llm;
pub use read_file::ReadFile;
pub use registry::{ArgError, ToolRegistry, BUILTIN_TOOLS};
pub use shell::Shell;
pub use workspace::Workspace;
pub use write_file::WriteFile;

/// Something the agent can call.
pub trait Tool: Send + Sync {
    /// The name plans use, as its source spells it (any text of 1-256 characters without control characters or
    /// surrounding spaces: dots, slashes and spaces included; see `registry`).
    fn name(&self) -> &str;
    /// One line for the planner's prompt.
    fn description(&self) -> &str;
    /// JSON Schema of the arguments: an object schema. Plans are held to it with `additionalProperties: false`.
    fn args_schema(&self) -> Value;
    /// JSON Schema of the output object, when the tool declares its fields; later steps may then reference only
    /// those fields, and the plan grammar enforces it.
    fn output_schema(&self) -> Option<Value> {
        None
    }
    /// True for tools that run on the language model (the executor runs them; [`Tool::call`] refuses).
    fn needs_model(&self) -> bool {
        false
    }
    /// Whether a call changes anything (a file, a repository, a store): `Some(true)` where the tool says so (an
    /// MCP server's `readOnlyHint: false`, or a built-in that writes), `Some(false)` where it only reads or
    /// computes, `None` where nothing says (a server without annotations, a user's command).
    fn changes_things(&self) -> Option<bool> {
        None
    }
    /// Whether a call may destroy or overwrite what is there, as the tool declares it: an MCP server's
    /// `destructiveHint` (which MCP takes as true for a tool whose annotations say it changes things and say
    /// nothing of destruction). `tandem run` asks before such a call unless `--yes`. Built-ins say false: their
    /// writes and commands are off unless the user turns them on (`--allow-write`, `--allow-shell`).
    fn destructive(&self) -> bool {
        false
    }
    /// Whether running this call twice leaves the same result as running it once (reading, computing, writing
    /// the same content again). A run resumed after a crash between a call and its logged result repeats only
    /// such calls on its own; others need the user's word (`tandem resume --rerun-in-doubt`).
    fn repeat_safe(&self, _args: &Value) -> bool {
        false
    }
    /// Runs the tool. `args` has already been checked against [`Tool::args_schema`] by the registry.
    fn call(&self, args: &Value, ctx: &ToolContext) -> ToolResult<Value>;
}

/// Per-run settings every tool call sees: where files live and what policy allows.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Directory that file tools and commands are confined to (commands run in it).
    pub workspace: Workspace,
    /// Whether `write_file` may write (`--allow-write`).
    pub allow_write: bool,
    /// Program names `shell` may run (`--allow-shell CMD,...`); empty means the shell is off.
    pub shell_allowlist: Vec<String>,
    /// Time limit for one `shell` command.
    pub shell_timeout: Duration,
    /// Cap on the standard output `shell` keeps, in bytes.
    pub shell_max_output_bytes: usize,
    /// Cap on what `read_file` returns, in bytes.
    pub max_read_bytes: usize,
}

impl ToolContext {
    /// Defaults: writes off, shell off, 10 s shell timeout, 64 KiB shell output, 256 KiB reads.
    pub fn new(workspace: Workspace) -> Self {
        Self {
            workspace,
            allow_write: false,
            shell_allowlist: Vec::new(),
            shell_timeout: Duration::from_secs(10),
            shell_max_output_bytes: 64 * 1024,
            max_read_bytes: 256 * 1024,
        }
    }

    /// Allows or forbids `write_file`.
    pub fn with_write(mut self, allow: bool) -> Self {
        self.allow_write = allow;
        self
    }

    /// Sets the programs `shell` may run.
    pub fn with_shell<I, S>(mut self, allowlist: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.shell_allowlist = allowlist.into_iter().map(Into::into).collect();
        self
    }
}

/// A field of a tool's declared output, as plans may reference it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputField {
    /// Field name.
    pub name: String,
    /// Its JSON type (`"number"`, `"string"`, …) when the schema gives one.
    pub json_type: Option<String>,
}

/// What planning needs to know of a tool, without the tool: a serialisable snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Name used in plans.
    pub name: String,
    /// One line for prompts.
    pub description: String,
    /// Argument schema as the plan holds it: an object schema with `additionalProperties: false`.
    pub args_schema: Value,
    /// Declared output schema, if any.
    pub output_schema: Option<Value>,
    /// Whether the executor (the model) runs it.
    pub needs_model: bool,
    /// Whether a call changes anything, where the tool says ([`Tool::changes_things`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes_things: Option<bool>,
}

impl ToolSpec {
    /// Snapshot of a tool (its argument schema closed with `additionalProperties: false`).
    pub fn of(tool: &dyn Tool) -> Self {
        Self {
            name: tool.name().to_string(),
            description: tool.description().to_string(),
            args_schema: closed_object_schema(&tool.args_schema()),
            output_schema: tool.output_schema(),
            needs_model: tool.needs_model(),
            changes_things: tool.changes_things(),
        }
    }

    /// The declared output fields in schema order, or `None` when the tool declares none.
    pub fn output_fields(&self) -> Option<Vec<OutputField>> {
        let properties = self.output_schema.as_ref()?.get("properties")?.as_object()?;
        Some(
            properties
                .iter()
                .map(|(name, schema)| OutputField {
                    name: name.clone(),
                    json_type: schema.get("type").and_then(Value::as_str).map(str::to_string),
                })
                .collect(),
        )
    }
}

/// The schema as an object schema that admits no properties beyond those it names.
pub fn closed_object_schema(schema: &Value) -> Value {
    let mut object = schema.as_object().cloned().unwrap_or_default();
    object.insert("type".into(), Value::from("object"));
    object.insert("additionalProperties".into(), Value::Bool(false));
    object.entry("properties").or_insert_with(|| Value::Object(Default::default()));
    Value::Object(object)
}
