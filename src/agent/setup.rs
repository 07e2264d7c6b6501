//! What a run starts from: the settings a command was given, turned into the run's recorded settings, its runs
//! directory and its lazily loaded models.

use std::path::PathBuf;

use crate::agent::log::events::RunSettings;
use crate::agent::log::runs::{default_runs_dir, RunsDir};
use crate::agent::models::LazyModels;
use crate::engine::Engine;
use crate::progress::Reporter;
use crate::settings::{AgentSettings, Approval, RunnerSettings};
use crate::tools::ToolContext;
use crate::Result;

/// The settings a run starts with: models, mode, tool policy and budgets from the agent's settings, the workspace
/// and shell allowlist as the tool context resolved them.
pub fn run_settings(agent: &AgentSettings, context: &ToolContext, approve: Approval) -> RunSettings {
    RunSettings {
        pair: agent.pair.clone(),
        workspace: context.workspace.root().to_path_buf(),
        allow_write: context.allow_write,
        allow_shell: context.shell_allowlist.clone(),
        shell_timeout_s: agent.tools.shell_timeout_s,
        tools_file: agent.tools.tools_file.as_ref().map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())),
        mcp_config: agent.tools.mcp_config.as_ref().map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())),
        mcp_timeout_s: agent.tools.mcp_timeout_s,
        tools_top_k: agent.tools.tools_top_k,
        budgets: agent.budgets,
        seed: 0,
        approve,
    }
}

/// The run's models as the runner settings ask (threads, device, drafting, prefix store), loaded on first use.
pub fn runner_models<'r>(
    settings: &RunSettings,
    runner: &RunnerSettings,
    reporter: &'r dyn Reporter,
) -> Result<LazyModels<'r>> {
    Ok(Engine::for_runner(runner)?.models(&settings.pair.planner, &settings.pair.executor, reporter))
}

/// The runs directory the settings name (`--runs-dir` or `TANDEM_RUNS_DIR`), else the default.
pub fn open_runs_dir(runs_dir: Option<&PathBuf>) -> RunsDir {
    RunsDir::new(runs_dir.cloned().unwrap_or_else(default_runs_dir))
}
