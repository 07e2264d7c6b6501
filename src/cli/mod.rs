//! Command-line types (clap derive) and nothing else: parsing lives here, behaviour in `commands`. Each group of
//! subcommands has its own file: `run` (run, resume, batch), `plan` (generate, plan), `serve`, `bench`, `inspect`
//! (runs, models, tools), and `common` the argument groups they share.

mod bench;
mod common;
mod config;
mod inspect;
mod mcp;
mod plan;
mod run;
mod serve;

use clap::{Parser, Subcommand};

pub use bench::{
    BenchCommand, BfclArgs, DraftsArgs, GrammarBenchArgs, NestfulArgs, PairsArgs, ServeBenchArgs, SpeedArgs, SuiteName,
    TasksArgs,
};
pub use common::{ComputeArgs, MendArg, ModelArgs, PlanSearchArg, RunsDirArg, SpeculateArg, ToolArgs};
pub use config::{config_path, parse, parse_from, ConfigCommand, ConfigShowArgs, Resolved, Source};
pub use inspect::{ModelsCommand, RunsCommand, ToolsCommand, ToolsListArgs};
pub use mcp::{McpApprove, McpArgs};
pub use plan::{GenerateArgs, PlanArgs};
pub use run::{parse_shard, AgentArgs, BatchArgs, BatchCommand, BatchMergeArgs, ResumeArgs, RunArgs, RunnerArgs};
pub use serve::ServeArgs;

/// Tandem: a planner–executor agent that runs entirely on local models.
///
/// Models are GGUF files run on candle. The default models are pulled on first use
/// into the cache (`$XDG_CACHE_HOME/tandem/models`, or `~/.cache/tandem/models`).
#[derive(Debug, Parser)]
#[command(name = "tandem", version, propagate_version = true, max_term_width = 110)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Hide progress bars and status lines.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// More log output (-v: debug, -vv: trace). `RUST_LOG` overrides.
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Read settings from this TOML file instead of $XDG_CONFIG_HOME/tandem/config.toml (or
    /// ~/.config/tandem/config.toml); flags and environment variables beat the file (`tandem config show`).
    #[arg(long, global = true, value_name = "FILE", env = "TANDEM_CONFIG")]
    pub config: Option<std::path::PathBuf>,
}

impl Cli {
    /// The `--threads` the command was given, where it takes one.
    pub fn threads(&self) -> Option<usize> {
        match &self.command {
            Command::Generate(args) => args.model.compute.threads,
            Command::Run(args) => args.runner.compute.threads,
            Command::Resume(args) => args.runner.compute.threads,
            Command::Batch(args) => args.runner.compute.threads,
            Command::Plan(args) => args.compute.threads,
            Command::Serve(args) => args.compute.threads,
            Command::Mcp(args) => args.compute.threads,
            Command::Bench(bench) => bench.threads(),
            Command::Runs(_) | Command::Models(_) | Command::Tools(_) | Command::Rules(_) | Command::Config(_) => None,
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate text with one model, streaming it to stdout.
    ///
    /// Example: tandem generate --chat "What is 12*4+5? Answer with the number only."
    Generate(GenerateArgs),
    /// Run the agent on a goal: the planner plans, tools and the executor carry it out, the answer prints last.
    ///
    /// Every run is logged under the runs directory (`tandem runs list`) and can be resumed after a crash
    /// (`tandem resume ID`).
    ///
    /// Examples:
    ///   tandem run "What is 12*4+5?"
    ///   tandem run --workspace notes --allow-write "Count the lines of todo.txt and write the count to count.txt"
    ///   tandem run --approve plan "Summarise README.md in one sentence"
    Run(RunArgs),
    /// Continue an interrupted or crashed run; completed steps are not run again.
    ///
    /// Example: tandem resume latest
    Resume(ResumeArgs),
    /// Run many goals in one process: models load once, their prompt cache stays warm across goals.
    ///
    /// Each goal is a normal run (its own run directory and audit log, `tandem runs show ID`),
    /// with no approval prompts. Each result is appended to the --out file as the goal finishes;
    /// running the same command again skips the goals already recorded, so an interrupted batch
    /// continues where it stopped, and resumes the run of a goal it was in the middle of (finished
    /// steps are not run again). A goal that fails, and a line that cannot be read, is recorded
    /// with its error and the batch goes on; the exit status is non-zero when a goal of this
    /// invocation did not finish `done`.
    ///
    /// Example goals.jsonl:
    ///   "What is 12*4+5?"
    ///   {"id": "eggs", "goal": "Tom buys 7 boxes of 12 eggs and breaks 5. How many are left?"}
    ///   # a comment
    ///   {"id": "notes", "goal": "Count the lines of notes.txt", "workspace": "ws/notes"}
    ///
    /// Examples:
    ///   tandem batch goals.jsonl --out results.jsonl
    ///   tandem batch goals.jsonl --out results.jsonl --retry-failed --json
    ///   tandem batch goals.jsonl --out results.jsonl --parallel 4   # 4 goals share each pass
    ///   tandem batch goals.jsonl --out results.jsonl --shard auto   # in a Slurm array or Indexed Job
    ///   tandem batch merge results.shard-*.jsonl --out results.jsonl
    ///   jq -r '[.id // .line, .stop, .answer] | @tsv' results.jsonl
    #[command(verbatim_doc_comment)]
    Batch(BatchArgs),
    /// List past runs or show one as a timeline.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Write a plan for a goal with the planner model (a dry run: nothing is executed).
    ///
    /// Example: tandem plan "What is 12*4+5, and what is that times 3?"
    Plan(PlanArgs),
    /// List, pull, verify and locate models.
    #[command(subcommand)]
    Models(ModelsCommand),
    /// Show the tools a run would offer the planner (built-ins, --tools, MCP servers).
    #[command(subcommand)]
    Tools(ToolsCommand),
    /// List the rule book: every rule that mends, checks or steers a written plan, with its stage, the profiles
    /// that run it (`--mend`), what it keys on and where docs/rules.md explains it. Any one turns off with
    /// `--rules-off NAME`; `tandem plan --from FILE GOAL` shows what they do to a plan.
    ///
    /// Examples:
    ///   tandem rules
    ///   tandem rules --json | jq -r '.[] | select(.profiles | index("general")) | .name'
    #[command(verbatim_doc_comment)]
    Rules(RulesArgs),
    /// Serve the models over HTTP with OpenAI's chat-completions API (tool calls and json_schema answers
    /// grammar-constrained, so always valid). See docs/serve.md.
    ///
    /// Examples:
    ///   tandem serve --port 8080
    ///   TANDEM_API_KEY=secret tandem serve --host 0.0.0.0 --parallel 8
    #[command(verbatim_doc_comment)]
    Serve(ServeArgs),
    /// Serve Tandem as an MCP server on stdin and stdout: other agents (Claude Desktop, Cursor, VS Code, any MCP
    /// client) hand it goals with run_goal, plan_goal, get_run, resume_run and approve_plan. The tools, MCP
    /// servers, workspace and budgets of its runs are fixed here; runs are logged as `tandem run`'s. See
    /// docs/mcp-server.md (`tandem serve --allow-runs` offers the same at /mcp over HTTP).
    ///
    /// Examples:
    ///   tandem mcp
    ///   tandem mcp --mcp servers.json --workspace ~/notes --approve plan
    #[command(verbatim_doc_comment)]
    Mcp(McpArgs),
    /// Benchmarks (`tandem bench speed --model ID`).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// The settings: where each comes from (flag, environment, configuration file, default), and which
    /// configuration file is read. docs/cli.md (Configuration file) lists the keys.
    #[command(subcommand)]
    Config(ConfigCommand),
}

/// `tandem rules`.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct RulesArgs {
    /// One JSON array, a rule an object: `name`, `stage`, `profiles`, `keys_on`, `docs`.
    #[arg(long)]
    pub json: bool,
}
