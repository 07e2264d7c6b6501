//! The configuration file: `$XDG_CONFIG_HOME/tandem/config.toml` (else `~/.config/tandem/config.toml`), or the
//! file `--config` or `$TANDEM_CONFIG` names. Its keys are flags' names with `_` for `-`, so a user writes once
//! what would be repeated on every command; a flag or its environment variable beats the file, the file beats the
//! default. The file is typed and closed: an unknown key or a value of the wrong type is an error naming the key
//! and the file. docs/cli.md (Configuration file) lists the keys.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{DeviceKind, Evaluator, Joiner, Mode};

/// The keys of the file, outside any table. Each applies to every command that has the flag of that name (with
/// `-` for `_`), except `tools_file`, the flag `--tools`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// `--planner`: the planner model (run, batch, plan, serve, bench suites).
    pub planner: Option<String>,
    /// `--executor`: the executor model (run, batch, serve, bench suites).
    pub executor: Option<String>,
    /// `--model`: the one model of `generate` and the single-model benchmarks.
    pub model: Option<String>,
    /// `--threads`: compute threads.
    pub threads: Option<usize>,
    /// `--device`: cpu, cuda or metal.
    pub device: Option<DeviceKind>,
    /// `--workspace`: the directory the file tools and commands are confined to.
    pub workspace: Option<PathBuf>,
    /// `--tools`: a TOML file of user tools.
    pub tools_file: Option<PathBuf>,
    /// `--mcp`: an MCP servers file.
    pub mcp: Option<PathBuf>,
    /// `--mcp-timeout`: seconds.
    pub mcp_timeout: Option<u64>,
    /// `--shell-timeout`: seconds.
    pub shell_timeout: Option<u64>,
    /// `--tools-top-k`: tool retrieval's K (0: every tool).
    pub tools_top_k: Option<usize>,
    /// `--mode`: plan-ahead or step.
    pub mode: Option<Mode>,
    /// `--joiner`: planner, executor or off.
    pub joiner: Option<Joiner>,
    /// `--evaluate`: off, executor or planner.
    pub evaluate: Option<Evaluator>,
    /// `--plans`: candidate plans per planning call.
    pub plans: Option<usize>,
    /// `--max-replans`.
    pub max_replans: Option<u32>,
    /// `--max-steps`.
    pub max_steps: Option<usize>,
    /// `--max-run-tokens`.
    pub max_run_tokens: Option<usize>,
    /// `--max-time`: seconds.
    pub max_time: Option<u64>,
    /// `--plan-tokens`: the token budget of one plan (run, batch, plan).
    pub plan_tokens: Option<usize>,
    /// `--executor-tokens`.
    pub executor_tokens: Option<usize>,
    /// `--runs-dir`: the directory of run logs.
    pub runs_dir: Option<PathBuf>,
    /// `tandem serve`'s own flags.
    pub serve: Option<ServeFile>,
}

/// The `[serve]` table: flags of `tandem serve` only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeFile {
    /// `--host`.
    pub host: Option<String>,
    /// `--port`.
    pub port: Option<u16>,
    /// `--parallel`.
    pub parallel: Option<u16>,
    /// `--queue`.
    pub queue: Option<usize>,
    /// `--max-body`: bytes.
    pub max_body: Option<usize>,
    /// `--max-completion-tokens`.
    pub max_completion_tokens: Option<usize>,
    /// `--shutdown-grace`: seconds.
    pub shutdown_grace: Option<u64>,
}

/// The subcommand a table's keys are limited to.
pub const SERVE_TABLE: &str = "serve";

/// A key of the file that holds a value: its name as written (`serve.port` for a table's), the flag's argument id,
/// the subcommand it is limited to (`None`: every command with that flag), and the value as the flag would be
/// given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `planner`, `serve.port`, …
    pub key: String,
    /// The argument's id in the command line (the flag's name with `_` for `-`).
    pub arg: String,
    /// The one top-level subcommand the key applies to (`serve` for the `[serve]` table), else `None`.
    pub scope: Option<&'static str>,
    /// The value as command-line text.
    pub value: String,
}

/// A configuration file that was read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its contents.
    pub file: ConfigFile,
}

/// Where the configuration file is looked for, and why there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// Given by `--config` (must exist).
    Flag(PathBuf),
    /// Given by `$TANDEM_CONFIG` (must exist).
    Env(PathBuf),
    /// The default location (read when it exists).
    Default(PathBuf),
    /// No default location: neither `$XDG_CONFIG_HOME` nor `$HOME` is set.
    None,
}

impl Location {
    /// `--config` if given, else `$TANDEM_CONFIG`, else the default location.
    pub fn find(flag: Option<PathBuf>) -> Self {
        if let Some(path) = flag {
            return Location::Flag(path);
        }
        if let Some(path) = super::env::config_file() {
            return Location::Env(path);
        }
        match super::env::config_home() {
            Some(home) => Location::Default(home.join("tandem").join("config.toml")),
            None => Location::None,
        }
    }

    /// The file's path, if there is one to look at.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Location::Flag(path) | Location::Env(path) | Location::Default(path) => Some(path),
            Location::None => None,
        }
    }

    /// Reads the file: `Ok(None)` when the default one does not exist; an error, naming the file, when a named
    /// one does not, or when it does not parse.
    pub fn load(&self) -> Result<Option<Loaded>, String> {
        let (path, named_by) = match self {
            Location::Flag(path) => (path, Some("--config")),
            Location::Env(path) => (path, Some("TANDEM_CONFIG")),
            Location::Default(path) => (path, None),
            Location::None => return Ok(None),
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && named_by.is_none() => return Ok(None),
            Err(e) => {
                let by = named_by.map_or(String::new(), |by| format!(" (given by {by})"));
                return Err(format!("cannot read the config file {}{by}: {e}", path.display()));
            }
        };
        let file = parse(&text).map_err(|e| format!("config file {}: {e}", path.display()))?;
        Ok(Some(Loaded { path: path.clone(), file }))
    }
}

/// Parses a configuration file's text; an error names the key (`serve.port`) and its line.
pub fn parse(text: &str) -> Result<ConfigFile, String> {
    toml::from_str(text).map_err(|e| {
        let message = e.message().trim_end();
        match e.span().and_then(|span| key_at(text, span.start)) {
            Some((key, line)) => format!("key `{key}` (line {line}): {message}"),
            None => message.to_string(),
        }
    })
}

/// The dotted key of the `key = value` line holding byte `at`, with its line number (from 1).
fn key_at(text: &str, at: usize) -> Option<(String, usize)> {
    let before = text.get(..at.min(text.len()))?;
    let number = before.matches('\n').count() + 1;
    let line = text.lines().nth(number - 1)?;
    let key = line.split('=').next()?.trim().trim_matches('"');
    if key.is_empty() || key.starts_with('[') {
        return None;
    }
    let table = before
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('[') && l.ends_with(']'))
        .map(|l| l.trim_matches(['[', ']']).trim().to_string());
    Some((table.map_or_else(|| key.to_string(), |t| format!("{t}.{key}")), number))
}

impl ConfigFile {
    /// The keys that hold a value, each with the flag it stands for.
    pub fn entries(&self) -> Vec<Entry> {
        let mut entries = Vec::new();
        let table = match toml::Value::try_from(self) {
            Ok(toml::Value::Table(table)) => table,
            _ => toml::Table::new(),
        };
        for (key, value) in &table {
            if key == SERVE_TABLE {
                for (inner, value) in value.as_table().into_iter().flatten() {
                    entries.push(Entry {
                        key: format!("{SERVE_TABLE}.{inner}"),
                        arg: inner.clone(),
                        scope: Some(SERVE_TABLE),
                        value: text_of(value),
                    });
                }
                continue;
            }
            let arg = if key == "tools_file" { "tools".to_string() } else { key.clone() };
            entries.push(Entry { key: key.clone(), arg, scope: None, value: text_of(value) });
        }
        entries
    }
}

/// Every key the file takes, sorted (`serve.…` for the table's).
pub fn keys() -> Vec<String> {
    let every = ConfigFile {
        planner: Some(String::new()),
        executor: Some(String::new()),
        model: Some(String::new()),
        threads: Some(0),
        device: Some(DeviceKind::Cpu),
        workspace: Some(PathBuf::new()),
        tools_file: Some(PathBuf::new()),
        mcp: Some(PathBuf::new()),
        mcp_timeout: Some(0),
        shell_timeout: Some(0),
        tools_top_k: Some(0),
        mode: Some(Mode::PlanAhead),
        joiner: Some(Joiner::Planner),
        evaluate: Some(Evaluator::Off),
        plans: Some(0),
        max_replans: Some(0),
        max_steps: Some(0),
        max_run_tokens: Some(0),
        max_time: Some(0),
        plan_tokens: Some(0),
        executor_tokens: Some(0),
        runs_dir: Some(PathBuf::new()),
        serve: Some(ServeFile {
            host: Some(String::new()),
            port: Some(0),
            parallel: Some(0),
            queue: Some(0),
            max_body: Some(0),
            max_completion_tokens: Some(0),
            shutdown_grace: Some(0),
        }),
    };
    every.entries().into_iter().map(|e| e.key).collect()
}

/// A TOML value as a flag's text: strings as they are, numbers and booleans as written.
fn text_of(value: &toml::Value) -> String {
    match value {
        toml::Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_gives_entries_named_as_the_flags() {
        let file =
            parse("planner = \"p\"\nthreads = 3\ndevice = \"cuda\"\ntools_file = \"t.toml\"\n[serve]\nport = 9000\n")
                .unwrap();
        let entries = file.entries();
        let find = |key: &str| entries.iter().find(|e| e.key == key).unwrap().clone();
        assert_eq!(find("planner").value, "p");
        assert_eq!(find("threads").value, "3");
        assert_eq!(find("device").value, "cuda");
        assert_eq!(find("tools_file").arg, "tools");
        let port = find("serve.port");
        assert_eq!((port.arg.as_str(), port.scope, port.value.as_str()), ("port", Some("serve"), "9000"));
        assert_eq!(entries.len(), 5);
    }

    #[test]
    fn an_unknown_key_or_a_wrong_type_is_named() {
        let unknown = parse("planner = \"p\"\nplannr = \"q\"\n").unwrap_err();
        assert!(unknown.contains("`plannr`") && unknown.contains("line 2"), "{unknown}");
        let wrong = parse("threads = \"four\"\n").unwrap_err();
        assert!(wrong.contains("`threads`") && wrong.contains("line 1"), "{wrong}");
        let nested = parse("[serve]\nport = \"x\"\n").unwrap_err();
        assert!(nested.contains("`serve.port`"), "{nested}");
        let mode = parse("mode = \"sideways\"\n").unwrap_err();
        assert!(mode.contains("`mode`") && mode.contains("plan-ahead"), "{mode}");
    }

    #[test]
    fn every_key_is_listed() {
        let keys = keys();
        assert!(keys.contains(&"planner".to_string()) && keys.contains(&"serve.max_completion_tokens".to_string()));
        assert_eq!(keys.len(), 22 + 7);
    }
}
