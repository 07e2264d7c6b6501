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
    /// List the models in the manifest and those added to the cache, whether each is there, and for files on disk
    /// their architecture, quantization and context length (read from the GGUF header).
    List,
    /// Download models into the cache (default: all defaults) and verify them.
    ///
    /// Example: tandem models pull hf:Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf
    #[command(verbatim_doc_comment)]
    Pull {
        /// Model ids, or hub names hf:OWNER/REPO/FILE.gguf (any part of a split model pulls every part); none
        /// pulls every model in the manifest.
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
        /// Model id (or hf:OWNER/REPO/FILE.gguf).
        id: String,
    },
    /// Keep a .gguf file in the model cache under an id, usable as `--planner ID` / `--executor ID` afterwards
    /// (the file is copied and hashed; the original is not touched).
    ///
    /// Example: tandem models add ./Llama-3.2-1B-Instruct-Q4_K_M.gguf --id llama-3.2-1b
    #[command(verbatim_doc_comment)]
    Add {
        /// The .gguf file (any part of a split model brings every part).
        path: std::path::PathBuf,
        /// The id to keep it under (default: the file name without .gguf, and without a split model's
        /// -00001-of-0000N, lower-cased).
        #[arg(long)]
        id: Option<String>,
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
