//! The tool registry: tools by name, in registration order, with their argument schemas compiled once.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::error::{ToolError, ToolResult};
use super::schema_fit::fit;
use super::{Calculator, ListDir, Llm, ReadFile, Shell, Tool, ToolContext, ToolSpec, WriteFile};

/// One way arguments miss a tool's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError {
    /// JSON pointer to the offending value inside the arguments (`""` for the arguments object itself).
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "at {}: {}", self.pointer, self.message)
        }
    }
}

struct Entry {
    tool: Arc<dyn Tool>,
    spec: ToolSpec,
    validator: jsonschema::Validator,
    output_validator: Option<jsonschema::Validator>,
}

/// Tools by name. Iteration follows registration order, so prompts and grammars built from it are stable.
#[derive(Default)]
pub struct ToolRegistry {
    entries: Vec<Entry>,
    index: HashMap<String, usize>,
    /// What was changed or dropped to make tools' schemas usable (see [`ToolRegistry::warnings`]).
    warnings: Vec<String>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry").field("tools", &self.names()).finish()
    }
}

/// Tool names are taken as their sources give them: MCP servers, OpenAPI operation ids and benchmark data use
/// dots, slashes and spaces (`Hotels.SearchHouse`, `WeatherAPI.com_forecast`). Plans and grammars hold a name only
/// as a JSON string, so any text works there; a name must still read as one name in a prompt and a log line.
const NAME_RULE: &str = "tool names are 1-256 characters, with no control characters and no spaces at either end";

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.chars().count() <= 256 && !name.chars().any(char::is_control) && name.trim() == name
}

/// The names of the built-in tools: general ones (arithmetic, files, the executor model) that serve any goal
/// rather than one part of it.
pub const BUILTIN_TOOLS: &[&str] = &["calculator", "read_file", "list_dir", "write_file", "shell", "llm"];

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in tools that `ctx` allows: `calculator`, `read_file`, `list_dir`, `llm`, plus `write_file`
    /// when writes are allowed and `shell` when its allowlist is not empty. (The tools check the policy again
    /// when called; leaving disabled tools out keeps the planner from proposing them.)
    pub fn builtins(ctx: &ToolContext) -> Self {
        let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Calculator), Arc::new(ReadFile), Arc::new(ListDir)];
        if ctx.allow_write {
            tools.push(Arc::new(WriteFile));
        }
        if !ctx.shell_allowlist.is_empty() {
            tools.push(Arc::new(Shell));
        }
        tools.push(Arc::new(Llm));
        let mut registry = Self::new();
        for tool in tools {
            // Built-in names are distinct and their schemas are fixed: registration cannot fail.
            let _ = registry.register_arc(tool);
        }
        registry
    }

    /// Adds a tool. Fails on a bad name, a duplicate name, or a schema that does not compile.
    pub fn register(&mut self, tool: impl Tool + 'static) -> ToolResult<()> {
        self.register_arc(Arc::new(tool))
    }

    /// Adds a shared tool (see [`ToolRegistry::register`]).
    ///
    /// Schemas are taken as real tools ship them: what other dialects spell differently, and what admits no value
    /// at all, is loosened (`schema_fit`); an argument schema that still does not compile is replaced by "any
    /// object", an output schema that does not compile is not checked. Each change is a warning
    /// ([`ToolRegistry::warnings`]), never an error: one odd tool must not stop a run.
    pub fn register_arc(&mut self, tool: Arc<dyn Tool>) -> ToolResult<()> {
        let mut spec = ToolSpec::of(tool.as_ref());
        if !valid_name(&spec.name) {
            return Err(ToolError::BadSchema { tool: spec.name.clone(), which: "name", message: NAME_RULE.into() });
        }
        if self.index.contains_key(&spec.name) {
            return Err(ToolError::DuplicateTool { name: spec.name });
        }
        let mut warnings = Vec::new();
        let (args_schema, notes) = fit(&spec.args_schema);
        warnings.extend(notes.into_iter().map(|n| format!("argument schema {n}")));
        spec.args_schema = args_schema;
        let validator = match compile(&spec.name, "argument", &spec.args_schema) {
            Ok(validator) => validator,
            Err(e) => {
                warnings.push(format!("{e}; any arguments object is admitted"));
                spec.args_schema = serde_json::json!({"type": "object"});
                compile(&spec.name, "argument", &spec.args_schema)?
            }
        };
        let mut output_validator = None;
        if let Some(output) = spec.output_schema.take() {
            let (output, notes) = fit(&output);
            warnings.extend(notes.into_iter().map(|n| format!("output schema {n}")));
            match compile(&spec.name, "output", &output) {
                Ok(validator) => {
                    output_validator = Some(validator);
                    spec.output_schema = Some(output);
                }
                Err(e) => warnings.push(format!("{e}; its outputs are not checked")),
            }
        }
        for warning in warnings {
            let warning =
                if warning.starts_with("tool '") { warning } else { format!("tool '{}': {warning}", spec.name) };
            tracing::warn!("{warning}");
            self.warnings.push(warning);
        }
        self.index.insert(spec.name.clone(), self.entries.len());
        self.entries.push(Entry { tool, spec, validator, output_validator });
        Ok(())
    }

    /// Loads user command tools from a TOML file and registers them; returns how many.
    pub fn load_file(&mut self, path: &Path) -> ToolResult<usize> {
        let tools = super::command::load_tool_file(path)?;
        let count = tools.len();
        for tool in tools {
            self.register(tool)?;
        }
        Ok(count)
    }

    /// The tool of that name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.index.get(name).map(|&i| &self.entries[i].tool)
    }

    /// The planning view of the tool of that name.
    pub fn spec(&self, name: &str) -> Option<&ToolSpec> {
        self.index.get(name).map(|&i| &self.entries[i].spec)
    }

    /// Whether a tool of that name is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// Tool names in registration order.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|e| e.spec.name.as_str()).collect()
    }

    /// Planning views of all tools, in registration order.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.entries.iter().map(|e| &e.spec)
    }

    /// The tools' specs with the user's own (a tool file's, the MCP servers') before the built-ins, each group in
    /// registration order: the order the planner is shown them in. Why: listed after the built-ins, a connected
    /// database's tools lost to `list_dir` and `read_file` (the 1.5B planner listed a folder `customers` for "Which
    /// of our customers live in Leeds?" in all four revisions); listed first, it looked the tables up.
    pub fn specs_users_first(&self) -> impl Iterator<Item = &ToolSpec> {
        let builtin = |spec: &&ToolSpec| BUILTIN_TOOLS.contains(&spec.name.as_str());
        self.specs().filter(move |spec| !builtin(spec)).chain(self.specs().filter(builtin))
    }

    /// All tools, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.entries.iter().map(|e| &e.tool)
    }

    /// The tools whose names `keep` accepts, in the same order, with this registry's warnings.
    pub fn subset(&self, keep: impl Fn(&str) -> bool) -> Self {
        let mut kept = Self::new();
        for entry in self.entries.iter().filter(|e| keep(&e.spec.name)) {
            // These registered once already: their names are distinct and their schemas compile as fitted.
            let _ = kept.register_arc(entry.tool.clone());
        }
        kept.warnings = self.warnings.clone();
        kept
    }

    /// The same tools but those named in `left_out`, with a warning for each saying `why` (the planner leaves out
    /// tools whose steps the grammar engine cannot express).
    pub fn without(&self, left_out: &[String], why: &str) -> Self {
        let mut kept = self.subset(|name| !left_out.iter().any(|l| l == name));
        for name in left_out {
            let warning = format!("tool '{name}': {why}");
            tracing::warn!("{warning}");
            kept.warnings.push(warning);
        }
        kept
    }

    /// What registration changed to make tools' schemas usable, one sentence each naming the tool (empty when every
    /// schema was taken as given).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn entry(&self, name: &str) -> ToolResult<&Entry> {
        self.index
            .get(name)
            .map(|&i| &self.entries[i])
            .ok_or_else(|| ToolError::UnknownTool { name: name.to_string(), known: self.names().join(", ") })
    }

    /// Every way the arguments miss the tool's (closed) schema, each with its location.
    pub fn arg_errors(&self, name: &str, args: &Value) -> ToolResult<Vec<ArgError>> {
        let entry = self.entry(name)?;
        Ok(entry
            .validator
            .iter_errors(args)
            .map(|e| ArgError { pointer: e.instance_path.as_str().to_string(), message: e.to_string() })
            .collect())
    }

    /// Checks arguments against the tool's (closed) schema; the error lists every problem.
    pub fn check_args(&self, name: &str, args: &Value) -> ToolResult<()> {
        let problems = self.arg_errors(name, args)?;
        if problems.is_empty() {
            Ok(())
        } else {
            let message = problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
            Err(ToolError::InvalidArgs { tool: name.to_string(), message })
        }
    }

    /// Every way an output misses the tool's declared output schema (none when it declares none).
    pub fn output_errors(&self, name: &str, output: &Value) -> ToolResult<Vec<String>> {
        let entry = self.entry(name)?;
        Ok(match &entry.output_validator {
            Some(validator) => validator.iter_errors(output).map(|e| e.to_string()).collect(),
            None => Vec::new(),
        })
    }

    /// Whether this call may be repeated safely (see [`Tool::repeat_safe`]); unknown tools are not.
    pub fn repeat_safe(&self, name: &str, args: &Value) -> bool {
        self.index.get(name).is_some_and(|&i| self.entries[i].tool.repeat_safe(args))
    }

    /// Checks the arguments, then calls the tool. Model tools (`llm`) are refused: the executor runs them.
    pub fn call(&self, name: &str, args: &Value, ctx: &ToolContext) -> ToolResult<Value> {
        let entry = self.entry(name)?;
        if entry.spec.needs_model {
            return Err(ToolError::NeedsModel { tool: name.to_string() });
        }
        self.check_args(name, args)?;
        let _span = tracing::debug_span!("tool", name).entered();
        entry.tool.call(args, ctx)
    }
}

fn compile(tool: &str, which: &'static str, schema: &Value) -> ToolResult<jsonschema::Validator> {
    if !schema.is_object() {
        return Err(ToolError::BadSchema {
            tool: tool.to_string(),
            which,
            message: "a schema must be a JSON object".into(),
        });
    }
    jsonschema::validator_for(schema).map_err(|e| ToolError::BadSchema {
        tool: tool.to_string(),
        which,
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{DeclaredTool, Workspace};

    #[test]
    fn the_planner_is_shown_the_users_tools_before_the_built_ins() {
        let dir = tempfile::tempdir().unwrap();
        let context = ToolContext::new(Workspace::new(dir.path()).unwrap());
        let mut registry = ToolRegistry::builtins(&context);
        for name in ["list_tables", "read_query"] {
            let args_schema = serde_json::json!({"type": "object", "properties": {}});
            let tool = DeclaredTool { name: name.into(), description: name.into(), args_schema, output_schema: None };
            registry.register(tool).unwrap();
        }
        let shown: Vec<&str> = registry.specs_users_first().map(|s| s.name.as_str()).collect();
        assert_eq!(shown, ["list_tables", "read_query", "calculator", "read_file", "list_dir", "llm"]);
        assert_eq!(registry.names()[0], "calculator", "registration order is kept elsewhere");
    }
}
