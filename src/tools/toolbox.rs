//! The tools a run offers: the workspace, the tool policy and user tool files turned into a context and registry.

use std::path::Path;
use std::time::Duration;

use super::{ToolContext, ToolRegistry, Workspace};
use crate::settings::ToolSettings;
use crate::Result;

/// The context and registry for these settings.
pub fn build_tools(tools: &ToolSettings) -> Result<(ToolContext, ToolRegistry)> {
    build(&tools.workspace, tools.allow_write, &tools.allow_shell, tools.shell_timeout_s, tools.tools_file.as_deref())
}

/// The context and registry for a workspace and policy: built-ins the policy allows, then the user's tools.
pub fn build(
    workspace: &Path,
    allow_write: bool,
    allow_shell: &[String],
    shell_timeout_s: u64,
    tools_file: Option<&Path>,
) -> Result<(ToolContext, ToolRegistry)> {
    let mut context = ToolContext::new(Workspace::new(workspace)?)
        .with_write(allow_write)
        .with_shell(allow_shell.iter().filter(|c| !c.trim().is_empty()).cloned());
    context.shell_timeout = Duration::from_secs(shell_timeout_s.max(1));
    let mut registry = ToolRegistry::builtins(&context);
    if let Some(file) = tools_file {
        registry.load_file(file)?;
    }
    Ok((context, registry))
}
