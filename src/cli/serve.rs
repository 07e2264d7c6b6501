//! `tandem serve`'s arguments.

use std::path::PathBuf;

use clap::Args;

use super::{ComputeArgs, MendArg, SpeculateArg, ToolArgs};
use crate::settings::{self, RunnerSettings, ServeAsks, ServeSettings};

/// `tandem serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on. The default answers this machine only; another address exposes the models to the
    /// network and needs --api-key (or an explicit --no-auth).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 takes a free one; the address is printed).
    #[arg(long, default_value_t = ServeSettings::PORT)]
    pub port: u16,
    /// Require `Authorization: Bearer KEY` on every /v1 request (an empty KEY is an error, not "no key").
    #[arg(long, env = "TANDEM_API_KEY", value_name = "KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// The planner model, served under its id: a model id or a .gguf path.
    #[arg(long, default_value = settings::DEFAULT_PLANNER)]
    pub planner: String,
    /// The executor model, served under its id: a model id or a .gguf path. The same as --planner serves one model.
    #[arg(long, default_value = settings::DEFAULT_EXECUTOR)]
    pub executor: String,
    #[command(flatten)]
    pub compute: ComputeArgs,
    #[command(flatten)]
    pub speculate: SpeculateArg,
    /// Don't keep prompt-prefix KV snapshots on disk (<model cache>/prefixes).
    #[arg(long)]
    pub no_prefix_store: bool,
    /// Generations in flight at once; they share each model's forward passes.
    #[arg(long, value_name = "N", default_value_t = ServeSettings::PARALLEL as u16,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub parallel: u16,
    /// Requests that may wait for a free generation; more are refused with 503.
    #[arg(long, value_name = "N", default_value_t = ServeSettings::QUEUE)]
    pub queue: usize,
    /// Largest request body, in bytes (larger: 413).
    #[arg(long, value_name = "BYTES", default_value_t = ServeSettings::MAX_BODY_BYTES)]
    pub max_body: usize,
    /// Most new tokens of one completion; also the default when a request gives no max_tokens.
    #[arg(long, value_name = "N", default_value_t = ServeSettings::MAX_TOKENS)]
    pub max_completion_tokens: usize,
    /// Tools of agent runs (`POST /v1/runs`), with the same policy as `tandem run`.
    #[command(flatten)]
    pub tools: ToolArgs,
    /// A user tool file (TOML, as --tools) that an agent run may ask for by NAME (`"tools": "NAME"`); repeat the
    /// flag for more. Requests name a set, never a path.
    #[arg(long, value_name = "NAME=FILE", value_parser = named_file)]
    pub tool_set: Vec<(String, PathBuf)>,
    /// An MCP servers file (as --mcp) that an agent run may ask for by NAME (`"mcp": "NAME"`); repeat for more.
    #[arg(long, value_name = "NAME=FILE", value_parser = named_file)]
    pub mcp_set: Vec<(String, PathBuf)>,
    /// After Ctrl-C or SIGTERM, how long chat generations in flight may go on before they are cut off (agent runs
    /// stop at their next event at once and can be resumed).
    #[arg(long, value_name = "SECONDS", default_value_t = ServeSettings::SHUTDOWN_GRACE_S)]
    pub shutdown_grace: u64,
    #[command(flatten)]
    pub mend: MendArg,
    /// Directory of the server's agent run logs (default: $XDG_DATA_HOME/tandem/serve-runs or
    /// ~/.local/share/tandem/serve-runs; not the CLI's runs unless named here).
    #[arg(long, value_name = "DIR")]
    pub runs_dir: Option<PathBuf>,
    /// Offer agent runs (POST /v1/runs and the run routes): they run the server's tools for any client with the
    /// key. Off by default.
    #[arg(long)]
    pub allow_runs: bool,
    /// Serve a non-loopback --host without --api-key (anyone who can reach it can use it). Refused otherwise.
    #[arg(long)]
    pub no_auth: bool,
    /// A browser origin allowed to call the server besides loopback ones (e.g. http://localhost:3000 is already
    /// allowed; https://app.example.com is not); repeat for more. Other origins get 403.
    #[arg(long, value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// A Host name allowed besides localhost, 127.0.0.1, [::1] and the bound address (`*`: any); repeat for more.
    /// Other Host headers get 403 (DNS rebinding).
    #[arg(long, value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Largest JSON size of a request's tools and response_format together (larger: 400).
    #[arg(long, value_name = "BYTES", default_value_t = ServeSettings::MAX_SCHEMA_BYTES)]
    pub max_schema_bytes: usize,
    /// Longest a request's grammar (tools, response_format) may take to compile (longer: 400).
    #[arg(long, value_name = "MS", default_value_t = ServeSettings::MAX_COMPILE_MS)]
    pub max_compile_ms: u64,
    /// Most prompt tokens of one completion (more: 400).
    #[arg(long, value_name = "N", default_value_t = ServeSettings::MAX_PROMPT_TOKENS)]
    pub max_prompt_tokens: usize,
    /// Most run-event streams (GET /v1/runs/{id}/events) open at once (more: 429).
    #[arg(long, value_name = "N", default_value_t = ServeSettings::MAX_EVENT_STREAMS)]
    pub max_event_streams: usize,
    /// Keep prompt-prefix snapshots on disk, as `tandem run` does. Off: they are kept in memory only, and clients'
    /// prompts never reach the disk.
    #[arg(long)]
    pub persist_prefixes: bool,
    /// MiB of memory for earlier prompts' KV caches (with their answers), so a prompt sent again is read back, not
    /// computed; least recently used out. 0 turns it off. Never written to disk.
    #[arg(long, value_name = "MIB", default_value_t = ServeSettings::PROMPT_CACHE_MIB)]
    pub prompt_cache_mib: usize,
    /// Tool-calling requests that may write several calls: list the actions the request asks for first, then
    /// write exactly one call for each (list), or write the calls directly (off). A request's "asks": false turns
    /// it off for that request.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = ServeAsks::List)]
    pub asks: ServeAsks,
    /// A `tandem bench` output directory (e.g. bench-results) whose runs the web page shows, read-only.
    #[arg(long, value_name = "DIR")]
    pub bench_results: Option<PathBuf>,
}

/// `NAME=FILE`, NAME of letters, digits, `_` and `-`.
fn named_file(text: &str) -> std::result::Result<(String, PathBuf), String> {
    let (name, file) = text.split_once('=').ok_or_else(|| format!("expected NAME=FILE, got {text:?}"))?;
    let plain = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !plain {
        return Err(format!("the name {name:?} must be letters, digits, '_' or '-'"));
    }
    if file.is_empty() {
        return Err(format!("no file after {name}="));
    }
    Ok((name.to_string(), PathBuf::from(file)))
}

impl ServeArgs {
    /// The settings these flags give.
    pub fn settings(&self) -> ServeSettings {
        ServeSettings {
            host: self.host.clone(),
            port: self.port,
            api_key: self.api_key.clone(),
            planner: self.planner.clone(),
            executor: self.executor.clone(),
            runner: RunnerSettings {
                compute: self.compute.settings(),
                runs_dir: self.runs_dir.clone(),
                drafting: self.speculate.drafting(),
                prefix_store: !self.no_prefix_store,
            },
            tools: self.tools.settings(),
            mend: self.mend.mend,
            rules_off: self.mend.rules_off.clone(),
            max_body_bytes: self.max_body,
            queue: self.queue,
            parallel: usize::from(self.parallel),
            max_tokens: self.max_completion_tokens,
            asks: self.asks,
            tool_sets: self.tool_set.clone(),
            mcp_sets: self.mcp_set.clone(),
            shutdown_grace_s: self.shutdown_grace,
            allow_origins: self.allow_origin.clone(),
            allow_hosts: self.allow_host.clone(),
            no_auth: self.no_auth,
            allow_runs: self.allow_runs,
            max_schema_bytes: self.max_schema_bytes,
            max_compile_ms: self.max_compile_ms,
            max_prompt_tokens: self.max_prompt_tokens,
            max_event_streams: self.max_event_streams,
            persist_prefixes: self.persist_prefixes,
            prompt_cache_mib: self.prompt_cache_mib,
            bench_results: self.bench_results.clone(),
        }
    }
}
