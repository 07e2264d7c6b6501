//! The tools agent runs over HTTP may have: the server's tool policy (as `tandem run`'s flags) plus the user tool
//! files and MCP configs it was started with under names (`--tool-set NAME=FILE`, `--mcp-set NAME=FILE`). A
//! request names a set, never a path; a run resumed here must not use more than the server allows.

use std::path::{Path, PathBuf};

use crate::agent::RunSettings;
use crate::serve::plumbing::error::ApiError;
use crate::settings::ToolSettings;
use crate::tools::toolbox;
use crate::{Error, Result};

/// The server's tool policy and named sets.
#[derive(Debug, Clone)]
pub struct ToolSets {
    /// The policy of every run (workspace, write, shell, and the default `--tools` / `--mcp`).
    pub base: ToolSettings,
    /// The workspace as runs record it (absolute).
    workspace: PathBuf,
    tools: Vec<(String, PathBuf)>,
    mcp: Vec<(String, PathBuf)>,
}

impl ToolSets {
    /// Checks every file now (a bad tool file or MCP config fails at start, not per run): the base policy, then
    /// each named set on top of it.
    pub fn new(base: ToolSettings, tools: &[(String, PathBuf)], mcp: &[(String, PathBuf)]) -> Result<Self> {
        let workspace = toolbox::context(&base)?.workspace.root().to_path_buf();
        drop(toolbox::build_tools(&base)?);
        let mut sets = Self { base, workspace, tools: Vec::new(), mcp: Vec::new() };
        for (kind, named) in [("--tool-set", tools), ("--mcp-set", mcp)] {
            for (name, file) in named {
                let absolute = std::path::absolute(file).unwrap_or_else(|_| file.clone());
                let list = if kind == "--tool-set" { &mut sets.tools } else { &mut sets.mcp };
                if list.iter().any(|(n, _)| n == name) {
                    return Err(Error::Usage(format!("{kind} {name} is given twice")));
                }
                list.push((name.clone(), absolute));
            }
        }
        for name in sets.tools.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>() {
            drop(toolbox::build_tools(&sets.with(Some(&name), None).map_err(|e| Error::Usage(e.message))?)?);
        }
        for name in sets.mcp.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>() {
            drop(toolbox::build_tools(&sets.with(None, Some(&name)).map_err(|e| Error::Usage(e.message))?)?);
        }
        Ok(sets)
    }

    /// The tool settings of a run that names these sets (400 naming the field for a name not offered).
    pub fn with(&self, tools: Option<&str>, mcp: Option<&str>) -> Result<ToolSettings, ApiError> {
        let mut settings = self.base.clone();
        if let Some(name) = tools {
            settings.tools_file = Some(find(&self.tools, name, "tools", "--tool-set")?);
        }
        if let Some(name) = mcp {
            settings.mcp_config = Some(find(&self.mcp, name, "mcp", "--mcp-set")?);
        }
        Ok(settings)
    }

    /// The names of the user tool sets and MCP sets a request may pick.
    pub fn names(&self) -> (Vec<&str>, Vec<&str>) {
        fn names(sets: &[(String, PathBuf)]) -> Vec<&str> {
            sets.iter().map(|(n, _)| n.as_str()).collect()
        }
        (names(&self.tools), names(&self.mcp))
    }

    /// Whether this server allows every tool a logged run was started with (resuming it here runs them); the
    /// first one it does not allow, in words, otherwise.
    pub fn permits(&self, run: &RunSettings) -> std::result::Result<(), String> {
        if run.workspace != self.workspace {
            return Err(format!(
                "its workspace {} is not this server's ({})",
                run.workspace.display(),
                self.workspace.display()
            ));
        }
        if run.allow_write && !self.base.allow_write {
            return Err("it may write files, and this server was started without --allow-write".into());
        }
        if let Some(program) = run.allow_shell.iter().find(|p| !self.base.allow_shell.contains(p)) {
            return Err(format!("it may run {program}, which this server's --allow-shell does not list"));
        }
        let known = |file: &Path, default: &Option<PathBuf>, named: &[(String, PathBuf)]| {
            default.as_ref().is_some_and(|d| std::path::absolute(d).unwrap_or_else(|_| d.clone()) == file)
                || named.iter().any(|(_, f)| f == file)
        };
        if let Some(file) = run.tools_file.as_deref().filter(|f| !known(f, &self.base.tools_file, &self.tools)) {
            return Err(format!("its tool file {} is not one of this server's (--tools, --tool-set)", file.display()));
        }
        if let Some(file) = run.mcp_config.as_deref().filter(|f| !known(f, &self.base.mcp_config, &self.mcp)) {
            return Err(format!("its MCP config {} is not one of this server's (--mcp, --mcp-set)", file.display()));
        }
        Ok(())
    }
}

fn find(sets: &[(String, PathBuf)], name: &str, param: &str, flag: &str) -> Result<PathBuf, ApiError> {
    sets.iter().find(|(n, _)| n == name).map(|(_, file)| file.clone()).ok_or_else(|| {
        let offered: Vec<&str> = sets.iter().map(|(n, _)| n.as_str()).collect();
        let offered = if offered.is_empty() {
            format!("none (the server was started without {flag} NAME=FILE)")
        } else {
            offered.join(", ")
        };
        ApiError::invalid(
            param,
            format!("{param} names a set this server does not offer ({name:?}); it offers: {offered}"),
        )
    })
}
