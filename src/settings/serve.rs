//! The settings of the servers: `tandem serve` (HTTP: what it listens on and how much it takes) and `tandem mcp`
//! (MCP over stdio, on the same machinery).

use std::path::PathBuf;

use super::{
    AgentSettings, Approval, Mend, PairSettings, RunnerSettings, ServeAsks, ToolSettings, DEFAULT_EXECUTOR,
    DEFAULT_PLANNER,
};

/// What `tandem serve` listens on and how much it takes (the library's side of the serve flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeSettings {
    /// The address to bind (127.0.0.1 by default: only this machine).
    pub host: String,
    /// The port; 0 takes a free one (the address bound is printed).
    pub port: u16,
    /// When set, every `/v1` request must carry `Authorization: Bearer <key>`.
    pub api_key: Option<String>,
    /// The planner model (served under its id).
    pub planner: String,
    /// The executor model (served under its id; the same as the planner serves one model).
    pub executor: String,
    /// Device, threads, drafting and prefix store of the models, and the runs directory of agent runs.
    pub runner: RunnerSettings,
    /// The tools agent runs over HTTP may use, and their policy (as `tandem run`'s tool flags).
    pub tools: ToolSettings,
    /// Which plan mends agent runs over HTTP run (never `nestful`).
    pub mend: Mend,
    /// Rules of the profile turned off one by one for agent runs over HTTP.
    pub rules_off: Vec<String>,
    /// Largest request body, in bytes (larger: 413).
    pub max_body_bytes: usize,
    /// Requests waiting for a free generation slot; more are refused with 503.
    pub queue: usize,
    /// Generations in flight at once; they share each model's forward passes.
    pub parallel: usize,
    /// Most new tokens of one completion (also the default when a request gives none).
    pub max_tokens: usize,
    /// Tool-calling turns that may write several calls list the request's actions first (`serve::openai::asks`).
    pub asks: ServeAsks,
    /// User tool files an agent run may name (`"tools": NAME`), by name; a request never gives a path.
    pub tool_sets: Vec<(String, PathBuf)>,
    /// MCP server files an agent run may name (`"mcp": NAME`), by name.
    pub mcp_sets: Vec<(String, PathBuf)>,
    /// After Ctrl-C or SIGTERM, how long generations in flight may run on before they are halted, in seconds.
    pub shutdown_grace_s: u64,
    /// Browser origins allowed besides loopback ones (`http://localhost:3000`); other `Origin`s get 403.
    pub allow_origins: Vec<String>,
    /// `Host` names allowed besides loopback ones (and the bound address); `*` allows any. Others get 403.
    pub allow_hosts: Vec<String>,
    /// Serve a non-loopback address without an API key (refused unless set).
    pub no_auth: bool,
    /// Offer agent runs (`/v1/runs`): they run the server's tools. Off unless set.
    pub allow_runs: bool,
    /// Largest JSON size of a request's `tools` and `response_format` together, in bytes.
    pub max_schema_bytes: usize,
    /// Longest a request's grammar may take to compile, in milliseconds.
    pub max_compile_ms: u64,
    /// Most prompt tokens of one completion.
    pub max_prompt_tokens: usize,
    /// Most run-event streams (`GET /v1/runs/{id}/events`) open at once.
    pub max_event_streams: usize,
    /// Keep prompt-prefix snapshots on disk (off: in this process's memory only; clients' prompts never reach the
    /// disk).
    pub persist_prefixes: bool,
    /// MiB of earlier prompts' keys and values (with their answers) kept in memory for prompts sent again (0: off).
    pub prompt_cache_mib: usize,
    /// A `tandem bench` output directory whose runs the web page shows (read-only), if any.
    pub bench_results: Option<PathBuf>,
}

/// Settings of `tandem mcp`: Tandem as an MCP server over stdio, on the machinery of `tandem serve` (one slot, no
/// HTTP), its runs planned and budgeted as `tandem run`'s.
#[derive(Debug, Clone)]
pub struct McpSettings {
    /// The models, tools, compute and runs directory (the HTTP fields are unused).
    pub serve: ServeSettings,
    /// What runs plan and execute with, and their budgets: a client may lower them, never raise them.
    pub agent: AgentSettings,
    /// Plans wait for approval (`approve_plan`) when `Plan`; a client may ask for that, never skip it.
    pub approve: Approval,
}

impl ServeSettings {
    /// What agent runs on this server plan and execute with: the served models, the tool policy and rules, and
    /// the default budgets.
    pub fn runs_agent(&self) -> AgentSettings {
        AgentSettings {
            pair: PairSettings {
                mend: self.mend,
                rules_off: self.rules_off.clone(),
                ..PairSettings::new(&self.planner, &self.executor)
            },
            tools: self.tools.clone(),
            ..AgentSettings::default()
        }
    }

    /// Default of [`ServeSettings::port`].
    pub const PORT: u16 = 8080;
    /// Default of [`ServeSettings::max_body_bytes`]: 4 MiB.
    pub const MAX_BODY_BYTES: usize = 4 << 20;
    /// Default of [`ServeSettings::queue`].
    pub const QUEUE: usize = 64;
    /// Default of [`ServeSettings::parallel`].
    pub const PARALLEL: usize = 4;
    /// Default of [`ServeSettings::max_tokens`].
    pub const MAX_TOKENS: usize = 1024;
    /// Default of [`ServeSettings::shutdown_grace_s`].
    pub const SHUTDOWN_GRACE_S: u64 = 10;
    /// Default of [`ServeSettings::max_schema_bytes`]: 64 KiB.
    pub const MAX_SCHEMA_BYTES: usize = 64 << 10;
    /// Default of [`ServeSettings::max_compile_ms`].
    pub const MAX_COMPILE_MS: u64 = 5000;
    /// Default of [`ServeSettings::max_prompt_tokens`].
    pub const MAX_PROMPT_TOKENS: usize = 8192;
    /// Default of [`ServeSettings::max_event_streams`].
    pub const MAX_EVENT_STREAMS: usize = 16;
    /// Default of [`ServeSettings::prompt_cache_mib`].
    pub const PROMPT_CACHE_MIB: usize = 1024;
}

impl Default for ServeSettings {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: Self::PORT,
            api_key: None,
            planner: DEFAULT_PLANNER.into(),
            executor: DEFAULT_EXECUTOR.into(),
            runner: RunnerSettings::default(),
            tools: ToolSettings::default(),
            mend: Mend::default(),
            rules_off: Vec::new(),
            max_body_bytes: Self::MAX_BODY_BYTES,
            queue: Self::QUEUE,
            parallel: Self::PARALLEL,
            max_tokens: Self::MAX_TOKENS,
            asks: ServeAsks::default(),
            tool_sets: Vec::new(),
            mcp_sets: Vec::new(),
            shutdown_grace_s: Self::SHUTDOWN_GRACE_S,
            allow_origins: Vec::new(),
            allow_hosts: Vec::new(),
            no_auth: false,
            allow_runs: false,
            max_schema_bytes: Self::MAX_SCHEMA_BYTES,
            max_compile_ms: Self::MAX_COMPILE_MS,
            max_prompt_tokens: Self::MAX_PROMPT_TOKENS,
            max_event_streams: Self::MAX_EVENT_STREAMS,
            persist_prefixes: false,
            prompt_cache_mib: Self::PROMPT_CACHE_MIB,
            bench_results: None,
        }
    }
}
