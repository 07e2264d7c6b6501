//! The tools a run offers: the workspace, the tool policy, user tool files and MCP servers turned into a context
//! and registry.

use std::path::Path;
use std::time::Duration;

use super::mcp::{register_servers, McpLimits};
use super::{ToolContext, ToolRegistry, Workspace};
use crate::settings::ToolSettings;
use crate::Result;

/// The context and registry for these settings.
pub fn build_tools(tools: &ToolSettings) -> Result<(ToolContext, ToolRegistry)> {
    build(&tools.workspace, tools)
}

/// The context and registry for these settings with another workspace (a batch goal's own).
pub fn build(workspace: &Path, tools: &ToolSettings) -> Result<(ToolContext, ToolRegistry)> {
    let (context, registry, _notes) = build_with_notes(workspace, tools)?;
    Ok((context, registry))
}

/// The workspace and policy alone (no registry: no tool file read, no MCP server started).
pub fn context(tools: &ToolSettings) -> Result<ToolContext> {
    context_in(&tools.workspace, tools)
}

fn context_in(workspace: &Path, tools: &ToolSettings) -> Result<ToolContext> {
    let mut context = ToolContext::new(Workspace::new(workspace)?)
        .with_write(tools.allow_write)
        .with_shell(tools.allow_shell.iter().filter(|c| !c.trim().is_empty()).cloned());
    context.shell_timeout = Duration::from_secs(tools.shell_timeout_s.max(1));
    Ok(context)
}

/// [`build`], also returning the notes of MCP registration (servers left out, names namespaced; each is logged as
/// a warning too).
///
/// The registry holds the built-ins the policy allows, then the user's `--tools`, then the MCP servers' tools; the
/// servers run until the registry is dropped.
pub fn build_with_notes(workspace: &Path, tools: &ToolSettings) -> Result<(ToolContext, ToolRegistry, Vec<String>)> {
    let context = context_in(workspace, tools)?;
    let mut registry = ToolRegistry::builtins(&context);
    if let Some(file) = &tools.tools_file {
        registry.load_file(file)?;
    }
    let mut notes = Vec::new();
    if let Some(file) = &tools.mcp_config {
        let limits = McpLimits::with_timeout(Duration::from_secs(tools.mcp_timeout_s.max(1)));
        notes = register_servers(&mut registry, file, limits)?;
    }
    Ok((context, registry, notes))
}
