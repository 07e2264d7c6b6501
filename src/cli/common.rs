//! Argument groups shared by several commands: compute, model, drafting, tools, plan search, runs directory.

use std::path::PathBuf;

use clap::Args;

use crate::agent::rules::RuleSet;
use crate::settings::{self, Compute, DeviceKind, Drafting, Mend, ToolSettings};

/// Where a command computes: `--threads` and `--device`, declared once and flattened into every command that
/// loads a model.
#[derive(Debug, Clone, Copy, Args)]
pub struct ComputeArgs {
    /// Compute threads (default: all cores).
    #[arg(long, short)]
    pub threads: Option<usize>,
    /// Device to run on.
    #[arg(long, value_enum, default_value_t = DeviceKind::Cpu)]
    pub device: DeviceKind,
}

impl ComputeArgs {
    /// The settings these flags give.
    pub fn settings(&self) -> Compute {
        Compute { threads: self.threads, device: self.device }
    }
}

/// Options shared by every command that loads a model.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// A model id from `tandem models list`, or a path to a .gguf file.
    #[arg(long, short, default_value = settings::DEFAULT_MODEL)]
    pub model: String,
    #[command(flatten)]
    pub compute: ComputeArgs,
    /// Keep tensor types as stored: Q5_0 weights skip our kernels (five-bit panels on AVX-512 VNNI CPUs, widened to
    /// int8 on others) and candle's Q8_0 conversion, and run on candle's slow Q5_0 path.
    #[arg(long)]
    pub keep_tensor_types: bool,
    #[command(flatten)]
    pub speculate: SpeculateArg,
}

/// The `--speculate` flag.
#[derive(Debug, Clone, Copy, Args)]
pub struct SpeculateArg {
    /// Speculative decoding everywhere. By default it runs where it is exact: prompt lookup guesses the next
    /// token from an n-gram of the prompt and output, and one pass checks it with the token before it; on the
    /// CPU with our kernels a batched pass gives each token the logits a one-token pass gives, so the output is
    /// plain decoding's bit for bit, and plans come faster (docs/performance.md). This flag drafts elsewhere too
    /// (GPU, candle's kernels), where batched rounding can tip a near-tie.
    #[arg(long, conflicts_with = "no_speculate")]
    pub speculate: bool,
    /// No speculative decoding, not even where it is exact.
    #[arg(long)]
    pub no_speculate: bool,
}

impl SpeculateArg {
    /// Drafting as the flags ask.
    pub fn drafting(&self) -> Drafting {
        if self.speculate {
            Drafting::Always
        } else if self.no_speculate {
            Drafting::Never
        } else {
            Drafting::WhereExact
        }
    }
}

/// Which tools a run offers, and the policy they run under.
#[derive(Debug, Clone, Args)]
pub struct ToolArgs {
    /// Directory the file tools and commands are confined to.
    #[arg(long, default_value = ".")]
    pub workspace: PathBuf,
    /// Offer the write_file tool (writes stay inside the workspace).
    #[arg(long)]
    pub allow_write: bool,
    /// Offer the shell tool, allowed to run only these programs (comma-separated, e.g. `wc,grep,sort`).
    #[arg(long, value_name = "CMD,...", value_delimiter = ',')]
    pub allow_shell: Vec<String>,
    /// Time limit of one shell command, in seconds.
    #[arg(long, default_value_t = settings::SHELL_TIMEOUT_S)]
    pub shell_timeout: u64,
    /// Add user tools from this TOML file (name, description, args schema, command; see docs/tools.md).
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    /// Add the tools of the MCP servers in this file, in the mcpServers JSON format other MCP clients keep them in
    /// ({"mcpServers": {"name": {"command": "...", "args": [...], "env": {...}}}}; stdio servers; see
    /// docs/tools.md). `tandem tools list --mcp FILE` shows what they offer. Without --mcp or $TANDEM_MCP:
    /// $XDG_CONFIG_HOME/tandem/mcp.json, else ~/.config/tandem/mcp.json, when that file exists.
    #[arg(long, value_name = "FILE", env = "TANDEM_MCP")]
    pub mcp: Option<PathBuf>,
    /// Time limit of an MCP server's start and of one MCP tool call, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = settings::MCP_TIMEOUT_S)]
    pub mcp_timeout: u64,
    /// Show the planner only the K tools that best match the goal (BM25 tool retrieval; `llm` is always kept);
    /// 0 shows every tool. For large catalogues (docs/benchmarks.md, tool retrieval).
    #[arg(long, value_name = "K", default_value_t = settings::TOOLS_TOP_K)]
    pub tools_top_k: usize,
}

/// Plan search, for every command that plans.
#[derive(Debug, Clone, Copy, Args)]
pub struct PlanSearchArg {
    /// Plan search: the planner writes N candidate plans side by side from one prompt (the first greedy, the
    /// others sampled) and keeps the valid plan that shares the most calls with the other valid candidates. It costs decoding time, not another
    /// prompt; 1 writes one greedy plan. docs/benchmarks.md (plan search) says what it buys and costs.
    #[arg(long, value_name = "N", env = "TANDEM_PLANS", default_value_t = settings::PLANS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=16))]
    pub plans: usize,
}

/// Where runs are logged.
#[derive(Debug, Clone, Args)]
pub struct RunsDirArg {
    /// Directory of run logs (default: $XDG_DATA_HOME/tandem/runs or ~/.local/share/tandem/runs).
    #[arg(long, env = "TANDEM_RUNS_DIR", value_name = "DIR")]
    pub runs_dir: Option<PathBuf>,
}

impl ToolArgs {
    /// The settings these flags give.
    pub fn settings(&self) -> ToolSettings {
        ToolSettings {
            workspace: self.workspace.clone(),
            allow_write: self.allow_write,
            allow_shell: self.allow_shell.clone(),
            shell_timeout_s: self.shell_timeout,
            tools_file: self.tools.clone(),
            mcp_config: self.mcp.clone().or_else(crate::tools::mcp::default_config_path),
            mcp_timeout_s: self.mcp_timeout,
            tools_top_k: self.tools_top_k,
        }
    }
}

/// Which rules of the rule book run, for the commands that write plans to run or print (`run`, `plan`, `batch`,
/// `serve`); `bench` has its own `--mend`, which also offers NESTFUL's profile.
#[derive(Debug, Clone, Args)]
pub struct MendArg {
    /// The rule book's profile [possible values: off, general]: `general` runs the rules stated on what tools
    /// declare, what the plan holds and what the goal writes (a reference to a field the tool lacks, a date in the
    /// form its schema declares, a value a tool refused not passed again, …) and shows each change and each plan
    /// sent back; `off` runs the plan as the planner wrote it. The `nestful` profile matches one benchmark's
    /// conventions and only `tandem bench` offers it. `tandem rules` lists the rules; docs/rules.md explains each.
    #[arg(long, value_name = "PROFILE", default_value = "general", value_parser = run_mend)]
    pub mend: Mend,
    /// Turn these rules of the profile off, one by one (comma-separated names from `tandem rules`), e.g.
    /// `--rules-off duplicates,time-zones`.
    #[arg(long, value_name = "RULE,...", value_delimiter = ',', value_parser = rule_name)]
    pub rules_off: Vec<String>,
}

impl MendArg {
    /// The rules these flags turn on.
    pub fn rules(&self) -> RuleSet {
        RuleSet::new(self.mend, &self.rules_off).expect("the names were checked when parsed")
    }
}

/// A rule's name from `tandem rules`; another is refused with the list.
pub(crate) fn rule_name(text: &str) -> std::result::Result<String, String> {
    RuleSet::new(Mend::General, &[text.to_string()]).map(|_| text.trim().to_string())
}

/// `off` or `general`; `nestful` is refused with what to do instead.
fn run_mend(text: &str) -> std::result::Result<Mend, String> {
    match text {
        "off" => Ok(Mend::Off),
        "general" => Ok(Mend::General),
        "nestful" => Err("the nestful profile matches one benchmark's gold conventions, not a rule about tools, so \
                          only `tandem bench` offers it; use off or general"
            .into()),
        other => Err(format!("unknown mend profile {other:?}; use off or general")),
    }
}
