//! The tools a command offers: workspace, policy flags and user tool files turned into a context and registry.

use std::path::Path;
use std::time::Duration;

use crate::cli::ToolArgs;
use crate::tools::{ToolContext, ToolRegistry, Workspace};
use crate::Result;

/// The context and registry for these flags.
pub fn build_tools(args: &ToolArgs) -> Result<(ToolContext, ToolRegistry)> {
    build(&args.workspace, args.allow_write, &args.allow_shell, args.shell_timeout, args.tools.as_deref())
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
