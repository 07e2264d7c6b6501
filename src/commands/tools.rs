//! `tandem tools list`: the tools a run with the same flags would offer, as the planner sees them.

use serde_json::{json, Value};

use crate::cli::{ToolsCommand, ToolsListArgs};
use crate::tools::toolbox::build_with_notes;
use crate::tools::ToolSpec;
use crate::{Error, Result};

/// Runs `tandem tools …`.
pub fn run(command: ToolsCommand) -> Result<()> {
    match command {
        ToolsCommand::List(args) => list(&args),
    }
}

fn list(args: &ToolsListArgs) -> Result<()> {
    let settings = args.tools.settings();
    let (_context, registry, notes) = build_with_notes(&settings.workspace, &settings)?;
    let specs: Vec<&ToolSpec> = registry.specs().collect();
    // What registration loosened or left out, then what MCP registration noted.
    let warnings: Vec<String> = registry.warnings().iter().cloned().chain(notes).collect();
    if args.json {
        let tools: Vec<Value> = specs
            .iter()
            .map(|spec| {
                json!({
                    "name": spec.name,
                    "description": spec.description,
                    "args_schema": spec.args_schema,
                    "output_schema": spec.output_schema,
                    "needs_model": spec.needs_model,
                })
            })
            .collect();
        let out = json!({"tools": tools, "warnings": warnings});
        let text = serde_json::to_string_pretty(&out).map_err(Error::encode("the tool list"))?;
        println!("{text}");
        return Ok(());
    }
    println!("{} tools", specs.len());
    for spec in &specs {
        println!();
        let runs_on = if spec.needs_model { "  (run by the executor model)" } else { "" };
        println!("{}{runs_on}", spec.name);
        println!("  {}", spec.description);
        println!("  arguments: {}", compact(&spec.args_schema));
        if let Some(output) = &spec.output_schema {
            println!("  output:    {}", compact(output));
        }
    }
    if !warnings.is_empty() {
        println!();
        println!("warnings:");
        for warning in &warnings {
            println!("  - {warning}");
        }
    }
    Ok(())
}

fn compact(schema: &Value) -> String {
    serde_json::to_string(schema).unwrap_or_else(|_| schema.to_string())
}
