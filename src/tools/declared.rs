//! A tool known only by its declaration (name, description, schemas): what benchmark catalogues such as
//! NESTFUL's describe. Plans may name it; calling it is refused, because there is nothing to run.

use serde_json::Value;

use super::error::{ToolError, ToolResult};
use super::{Tool, ToolContext};

/// A declared, non-executable tool.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredTool {
    /// Name used in plans.
    pub name: String,
    /// One line for the planner.
    pub description: String,
    /// JSON Schema of the arguments.
    pub args_schema: Value,
    /// JSON Schema of the output, when declared.
    pub output_schema: Option<Value>,
}

impl Tool for DeclaredTool {
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
    fn call(&self, _args: &Value, _ctx: &ToolContext) -> ToolResult<Value> {
        Err(ToolError::Refused {
            tool: self.name.clone(),
            reason: "it is only declared (a benchmark catalogue entry)".into(),
        })
    }
}
