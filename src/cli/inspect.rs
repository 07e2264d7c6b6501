//! The arguments of the commands that inspect rather than run: `tandem runs`, `tandem models`, `tandem tools`.

use clap::{Args, Subcommand};

use super::{RunsDirArg, ToolArgs};

/// `tandem runs …`.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// One line per run: id, status, steps, goal.
    List {
        #[command(flatten)]
        runs: RunsDirArg,
    },
    /// A run as a readable timeline (plans, steps, tool calls, approvals, answer).
    Show {
        /// The run id (a unique prefix is enough), or `latest`.
        id: String,
        #[command(flatten)]
        runs: RunsDirArg,
        /// Print the run's summary as JSON instead.
        #[arg(long)]
        json: bool,
    },
}

/// `tandem models …`.
#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// List the models in the manifest and whether each is in the cache.
    List,
    /// Download models into the cache (default: all defaults) and verify them.
    Pull {
        /// Model ids; none pulls every model in the manifest.
        ids: Vec<String>,
        /// Download again even if a verified copy is cached.
        #[arg(long)]
        force: bool,
    },
    /// Check size and SHA-256 of cached models (default: all cached).
    Verify {
        /// Model ids; none verifies every cached model.
        ids: Vec<String>,
    },
    /// Print the path of a model's file, pulling it first if needed.
    Path {
        /// Model id.
        id: String,
    },
}

/// `tandem tools …`.
#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Show exactly what the planner will see: each tool's name, description, argument schema (after loosening)
    /// and output schema, then what registration changed or left out. Starts the --mcp servers to list theirs.
    ///
    /// Example: tandem tools list --mcp mcp.json --allow-write
    List(ToolsListArgs),
}

/// `tandem tools list`.
#[derive(Debug, Args)]
pub struct ToolsListArgs {
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Print one JSON object: {"tools": [{name, description, args_schema, output_schema, needs_model}], "warnings":
    /// [...]}.
    #[arg(long)]
    pub json: bool,
}
