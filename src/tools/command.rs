//! User tools: external commands declared in a TOML file.
//!
//! ```toml
//! [[tool]]
//! name = "word_count"
//! description = "Count the words in a text."
//! command = ["python3", "{dir}/wc.py"]     # {dir}: this file's directory; a relative program path
//!                                          # ("./wc.py") is relative to it too
//! timeout_secs = 5                         # default 30
//! max_output_bytes = 65536                 # default 65536
//! output_fields = { words = "integer" }    # or ["words"]; optional
//! idempotent = true                        # safe to run twice (default false): see resuming below
//! [tool.args_schema]                       # or args_schema = '{"type": "object", ...}' (JSON text)
//! type = "object"
//! properties = { text = { type = "string" } }
//! required = ["text"]
//! ```
//!
//! The command gets the arguments as one JSON object on stdin and answers on stdout: a JSON object (used as is)
//! or anything else, taken as text (answered as `{"text": ...}`). It runs in the workspace directory, without a
//! shell, in its own process group (killed whole on timeout). A non-zero exit is an error with the end of stderr;
//! output past `max_output_bytes` stops the command and is an error.
//!
//! A run killed after a command ran but before its result was logged cannot know whether it took effect;
//! `tandem resume` runs such a call again only when the tool is declared `idempotent`, or when the user says so.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::error::{ToolError, ToolResult};
use super::process::{describe_status, run};
use super::{Tool, ToolContext};

const DEFAULT_TIMEOUT_SECS: f64 = 30.0;
const DEFAULT_MAX_OUTPUT: usize = 64 * 1024;

/// A tool that runs an external command.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandTool {
    /// Name used in plans.
    pub name: String,
    /// One line for the planner.
    pub description: String,
    /// JSON Schema of the arguments.
    pub args_schema: Value,
    /// JSON Schema of the output object, when fields are declared.
    pub output_schema: Option<Value>,
    /// Program and fixed arguments.
    pub command: Vec<String>,
    /// Time limit per call.
    pub timeout: Duration,
    /// Cap on standard output, in bytes.
    pub max_output_bytes: usize,
    /// Declared safe to run twice with the same arguments (`idempotent = true`): a resumed run repeats a call
    /// that a crash left without a result.
    pub idempotent: bool,
}

impl Tool for CommandTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn args_schema(&self) -> Value {
        self.args_schema.clone()
    }

    fn output_schema(&self) -> Option<Value> {
        self.output_schema.clone()
    }

    fn repeat_safe(&self, _args: &Value) -> bool {
        self.idempotent
    }

    fn call(&self, args: &Value, ctx: &ToolContext) -> ToolResult<Value> {
        let input = serde_json::to_vec(args)
            .map_err(|e| ToolError::InvalidArgs { tool: self.name.clone(), message: e.to_string() })?;
        let captured =
            run(&self.name, &self.command, ctx.workspace.root(), Some(input), self.timeout, self.max_output_bytes)?;
        if captured.overflowed {
            return Err(ToolError::OutputTooLarge { tool: self.name.clone(), limit: self.max_output_bytes });
        }
        if let Some(status) = captured.status.filter(|s| !s.success()) {
            return Err(ToolError::Failed {
                tool: self.name.clone(),
                status: describe_status(&status),
                stderr_tail: captured.stderr_text(),
            });
        }
        let text = String::from_utf8_lossy(&captured.stdout);
        // A JSON object is the output; anything else (text, a bare number) is text, so outputs always have fields.
        let output = match serde_json::from_str::<Value>(text.trim()) {
            Ok(value @ Value::Object(_)) => value,
            _ => json!({"text": text.trim_end()}),
        };
        if let Some(schema) = &self.output_schema {
            let bad = |message: String| ToolError::BadOutput { tool: self.name.clone(), message };
            let validator = jsonschema::validator_for(schema).map_err(|e| bad(e.to_string()))?;
            let problems: Vec<String> = validator.iter_errors(&output).map(|e| e.to_string()).collect();
            if !problems.is_empty() {
                return Err(bad(format!("it does not match the declared output fields: {}", problems.join("; "))));
            }
        }
        Ok(output)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolFile {
    #[serde(default)]
    tool: Vec<ToolEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolEntry {
    name: toml::Spanned<String>,
    description: String,
    args_schema: Value,
    #[serde(default)]
    output_fields: Option<Value>,
    command: Vec<String>,
    #[serde(default)]
    timeout_secs: Option<f64>,
    #[serde(default)]
    max_output_bytes: Option<usize>,
    #[serde(default)]
    idempotent: bool,
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Turns `["a", "b"]` or `{a = "number", b = {type = "string"}}` into an output object schema.
fn output_schema(fields: &Value) -> Result<Value, String> {
    let mut properties = Map::new();
    match fields {
        Value::Array(names) => {
            for name in names {
                let name = name.as_str().ok_or("output_fields lists names, which are strings")?;
                properties.insert(name.to_string(), json!({}));
            }
        }
        Value::Object(typed) => {
            for (name, kind) in typed {
                let schema = match kind {
                    Value::String(t) => json!({"type": t}),
                    Value::Object(_) => kind.clone(),
                    _ => return Err(format!("output field '{name}' must be a type name or a schema table")),
                };
                properties.insert(name.clone(), schema);
            }
        }
        _ => return Err("output_fields must be a list of names or a table of name = type".into()),
    }
    if properties.is_empty() {
        return Err("output_fields is empty".into());
    }
    Ok(json!({"type": "object", "properties": properties}))
}

/// Parses tool declarations; `file` is named in errors and relative program paths are resolved against its
/// directory.
pub fn parse_tool_file(text: &str, file: &Path) -> ToolResult<Vec<CommandTool>> {
    let parsed: ToolFile = toml::from_str(text).map_err(|e| ToolError::ToolFile {
        file: file.to_path_buf(),
        line: e.span().map(|span| line_of(text, span.start)),
        message: e.message().trim().to_string(),
    })?;
    // Commands run in the workspace, so the file's directory must be absolute to be found from there.
    let base = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let base = std::fs::canonicalize(base).unwrap_or_else(|_| base.to_path_buf());
    parsed
        .tool
        .into_iter()
        .map(|entry| {
            let line = line_of(text, entry.name.span().start);
            let name = entry.name.into_inner();
            let fail = |message: String| ToolError::ToolFile {
                file: file.to_path_buf(),
                line: Some(line),
                message: format!("tool '{name}': {message}"),
            };
            let args_schema = match entry.args_schema {
                Value::String(json_text) => serde_json::from_str::<Value>(&json_text)
                    .map_err(|e| fail(format!("args_schema is not valid JSON: {e}")))?,
                table => table,
            };
            if !args_schema.is_object() || args_schema.get("type").is_some_and(|t| t != "object") {
                return Err(fail("args_schema must be an object schema (type = \"object\")".into()));
            }
            jsonschema::validator_for(&args_schema)
                .map_err(|e| fail(format!("args_schema is not a valid JSON Schema: {e}")))?;
            let output_schema = entry.output_fields.as_ref().map(output_schema).transpose().map_err(fail)?;
            if let Some(schema) = &output_schema {
                jsonschema::validator_for(schema).map_err(|e| fail(format!("output_fields: {e}")))?;
            }
            let mut command = entry.command;
            let Some(program) = command.first_mut() else {
                return Err(fail("command is empty; give [\"program\", \"arg\", ...]".into()));
            };
            if program.contains('/') && Path::new(program.as_str()).is_relative() {
                *program = base.join(program.as_str()).to_string_lossy().into_owned();
            }
            let dir = base.to_string_lossy();
            for part in &mut command {
                if part.contains("{dir}") {
                    *part = part.replace("{dir}", &dir);
                }
            }
            let timeout_secs = entry.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS);
            if !(timeout_secs > 0.0 && timeout_secs <= 86_400.0) {
                return Err(fail(format!("timeout_secs must be between 0 and 86400, not {timeout_secs}")));
            }
            let max_output_bytes = entry.max_output_bytes.unwrap_or(DEFAULT_MAX_OUTPUT);
            if max_output_bytes == 0 {
                return Err(fail("max_output_bytes must be positive".into()));
            }
            Ok(CommandTool {
                name,
                description: entry.description,
                args_schema,
                output_schema,
                command,
                timeout: Duration::from_secs_f64(timeout_secs),
                max_output_bytes,
                idempotent: entry.idempotent,
            })
        })
        .collect()
}

/// Reads and parses a tool file (see the module docs for the format).
pub fn load_tool_file(path: &Path) -> ToolResult<Vec<CommandTool>> {
    let text = std::fs::read_to_string(path).map_err(|e| ToolError::ToolFile {
        file: path.to_path_buf(),
        line: None,
        message: format!("cannot read: {e}"),
    })?;
    parse_tool_file(&text, path)
}
