//! `tandem mcp`'s arguments.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::{AgentArgs, ComputeArgs, SpeculateArg};
use crate::settings::{Approval, McpSettings, RunnerSettings, ServeSettings};

/// Whether an MCP client's runs wait for approval of their plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum McpApprove {
    /// Plans run as written (a client may still ask to approve them: `approve: "plan"`).
    None,
    /// Every run stops at its plan; the client's `approve_plan` runs it.
    Plan,
}

/// `tandem mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The models, tools, rules and budgets of the runs clients ask for (a client may lower the budgets, never
    /// raise them, and cannot add tools).
    #[command(flatten)]
    pub agent: AgentArgs,
    /// Whether runs stop at their plan for the client's approve_plan.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = McpApprove::None)]
    pub approve: McpApprove,
    #[command(flatten)]
    pub compute: ComputeArgs,
    #[command(flatten)]
    pub speculate: SpeculateArg,
    /// Don't keep prompt-prefix KV snapshots on disk (<model cache>/prefixes). With them, as with `tandem run`, a
    /// goal computes only its own part of the planner's prompt.
    #[arg(long)]
    pub no_prefix_store: bool,
    /// Directory of the runs' logs (default: the CLI's, $XDG_DATA_HOME/tandem/runs or
    /// ~/.local/share/tandem/runs, so `tandem runs list` and `tandem resume` see them).
    #[arg(long, env = "TANDEM_RUNS_DIR", value_name = "DIR")]
    pub runs_dir: Option<PathBuf>,
}

impl McpArgs {
    /// The settings these flags give: one generation slot (one client's goals run one after another).
    pub fn settings(&self) -> McpSettings {
        let agent = self.agent.settings();
        let serve = ServeSettings {
            planner: agent.pair.planner.clone(),
            executor: agent.pair.executor.clone(),
            runner: RunnerSettings {
                compute: self.compute.settings(),
                runs_dir: self.runs_dir.clone(),
                drafting: self.speculate.drafting(),
                prefix_store: !self.no_prefix_store,
            },
            tools: agent.tools.clone(),
            mend: agent.pair.mend,
            rules_off: agent.pair.rules_off.clone(),
            parallel: 1,
            // The user's own runs, as `tandem run`'s: the planner's long opening is kept on disk, so a goal after
            // a restart computes only itself (serve keeps clients' prompts in memory only).
            persist_prefixes: !self.no_prefix_store,
            ..ServeSettings::default()
        };
        let approve = match self.approve {
            McpApprove::None => Approval::None,
            McpApprove::Plan => Approval::Plan,
        };
        McpSettings { serve, agent, approve }
    }
}
