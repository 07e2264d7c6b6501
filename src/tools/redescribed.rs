//! A tool shown with other parameter descriptions: what a planner reads changes, what the tool takes and does not.

use std::sync::Arc;

use serde_json::Value;

use super::{Tool, ToolContext, ToolResult};

/// `inner` with the argument schema `schema` (the same schema, its descriptions rewritten).
pub struct Redescribed {
    inner: Arc<dyn Tool>,
    schema: Value,
}

impl Redescribed {
    /// `tool` with each parameter's description replaced where `describe(parameter, description)` gives a new one;
    /// `None` where it gives none (the tool is then shown as it is).
    pub fn new(tool: &Arc<dyn Tool>, schema: &Value, describe: impl Fn(&str, &str) -> Option<String>) -> Option<Self> {
        let mut schema = schema.clone();
        let mut changed = false;
        if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            for (name, parameter) in properties.iter_mut() {
                let Some(description) = parameter.get("description").and_then(Value::as_str) else { continue };
                if let Some(new) = describe(name, description) {
                    parameter["description"] = Value::String(new);
                    changed = true;
                }
            }
        }
        changed.then(|| Self { inner: tool.clone(), schema })
    }
}

impl Tool for Redescribed {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn args_schema(&self) -> Value {
        self.schema.clone()
    }
    fn output_schema(&self) -> Option<Value> {
        self.inner.output_schema()
    }
    fn needs_model(&self) -> bool {
        self.inner.needs_model()
    }
    fn changes_things(&self) -> Option<bool> {
        self.inner.changes_things()
    }
    fn repeat_safe(&self, args: &Value) -> bool {
        self.inner.repeat_safe(args)
    }
    fn call(&self, args: &Value, ctx: &ToolContext) -> ToolResult<Value> {
        self.inner.call(args, ctx)
    }
}
