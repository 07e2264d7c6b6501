//! Settings resolved once, from flags, the environment and the configuration file: the file's values become the
//! flags' defaults before the command line is parsed, so clap's own order gives flag > environment > file >
//! default, and the parsed matches say where each value came from (`tandem config show`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Subcommand};

use super::{Cli, Command};
use crate::settings::file::{self, Entry, Loaded, Location};
use crate::{Error, Result};

/// `tandem config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print every setting the configuration file can hold, its value and where the value comes from (a flag, an
    /// environment variable, the configuration file, or the default). After `--`, a command line: the settings
    /// that command would run with.
    ///
    /// Examples:
    ///   tandem config show
    ///   tandem config show -- run --threads 2 "What is 12*4+5?"
    #[command(verbatim_doc_comment)]
    Show(ConfigShowArgs),
    /// Print the path of the configuration file that is read (it need not exist).
    Path,
}

/// `tandem config show`.
#[derive(Debug, Args)]
pub struct ConfigShowArgs {
    /// Print one JSON object: {"config_file": PATH or null, "settings": [{key, value, source, origin}]}.
    #[arg(long)]
    pub json: bool,
    /// A tandem command line (after `--`), e.g. `run --threads 2 GOAL`: show the settings it would run with.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// The settings, filled in when the command line is parsed.
    #[arg(skip)]
    pub resolved: Vec<Resolved>,
    /// The configuration file read, if any.
    #[arg(skip)]
    pub file: Option<PathBuf>,
    /// Where the configuration file is looked for (even when there is none).
    #[arg(skip)]
    pub location: Option<PathBuf>,
}

/// Where a setting's value comes from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// A flag on the command line.
    Flag,
    /// An environment variable.
    Env,
    /// The configuration file.
    Config,
    /// The built-in default.
    Default,
}

/// One setting: its configuration key, value and source.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Resolved {
    /// The key in the configuration file (`planner`, `serve.port`).
    pub key: String,
    /// The value as command-line text; `None` when unset (e.g. `threads`: every core).
    pub value: Option<String>,
    /// Where it comes from.
    pub source: Source,
    /// The flag (`--threads`), the variable (`TANDEM_PLANS`) or the file's path; empty for a default.
    pub origin: String,
}

/// Parses the process's command line with the configuration file applied. A bad configuration file is a usage
/// error naming the file and key; a bad command line prints clap's message and exits 2, as `--help` prints and
/// exits 0.
pub fn parse() -> Result<Cli> {
    parse_from(std::env::args_os().collect())
}

/// [`parse`] over `args` (the program name first).
pub fn parse_from(args: Vec<OsString>) -> Result<Cli> {
    let location = Location::find(config_flag(&args));
    let loaded = location.load().map_err(Error::Usage)?;
    let entries = loaded.as_ref().map(|l| l.file.entries()).unwrap_or_default();
    let command = with_file_defaults(Cli::command(), &entries, loaded.as_ref())?;
    let matches = command.clone().try_get_matches_from(&args).unwrap_or_else(|e| e.exit());
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut Cli::command()).exit());
    if let Command::Config(ConfigCommand::Show(show)) = &mut cli.command {
        show.file = loaded.as_ref().map(|l| l.path.clone());
        show.location = location.path().map(Path::to_path_buf);
        show.resolved = if show.command.is_empty() {
            defaults_report(&entries, loaded.as_ref())
        } else {
            let mut line = vec![OsString::from("tandem")];
            line.extend(show.command.iter().map(OsString::from));
            let matches = command.clone().try_get_matches_from(line).unwrap_or_else(|e| e.exit());
            command_report(&command, &matches, &entries, loaded.as_ref())
        };
    }
    Ok(cli)
}

/// The path of the file `tandem` reads, for `tandem config path`.
pub fn config_path() -> Option<PathBuf> {
    let args: Vec<OsString> = std::env::args_os().collect();
    Location::find(config_flag(&args)).path().map(Path::to_path_buf)
}

/// The value of `--config FILE` or `--config=FILE` before any `--`: the file must be known before the command
/// line is parsed, since its values become the flags' defaults.
fn config_flag(args: &[OsString]) -> Option<PathBuf> {
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        let text = arg.to_string_lossy();
        if text == "--" {
            break;
        }
        if text == "--config" {
            return rest.next().map(PathBuf::from);
        }
        if let Some(path) = text.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    None
}

/// `command` with each entry's value as the default of its flag, in every subcommand that has the flag (in the
/// entry's scope). A value the flag would refuse is an error naming the key and the file.
fn with_file_defaults(mut command: clap::Command, entries: &[Entry], loaded: Option<&Loaded>) -> Result<clap::Command> {
    let path = loaded.map_or_else(String::new, |l| l.path.display().to_string());
    for entry in entries {
        let mut problem = None;
        let mut found = false;
        command = set_default(command, entry, true, &mut found, &mut problem);
        if let Some(problem) = problem {
            return Err(Error::Usage(format!("config file {path}: key `{}`: {problem}", entry.key)));
        }
        if !found {
            return Err(Error::Usage(format!("config file {path}: key `{}` is not a flag of any command", entry.key)));
        }
    }
    Ok(command)
}

fn set_default(
    mut command: clap::Command,
    entry: &Entry,
    top: bool,
    found: &mut bool,
    problem: &mut Option<String>,
) -> clap::Command {
    let applies = !top || entry.scope.is_none();
    if applies && problem.is_none() {
        let checked =
            command.get_arguments().find(|a| a.get_id() == entry.arg.as_str()).map(|a| check(a, &entry.value));
        if let Some(checked) = checked {
            *found = true;
            if let Err(why) = checked {
                *problem = Some(why);
            }
            let value: &'static str = Box::leak(entry.value.clone().into_boxed_str());
            command = command.mut_arg(entry.arg.as_str(), |a| a.default_value(value));
        }
    }
    let names: Vec<String> = command.get_subcommands().map(|s| s.get_name().to_string()).collect();
    for name in names {
        if top && entry.scope.is_some_and(|scope| scope != name) {
            continue;
        }
        command = command.mut_subcommand(&name, |sub| set_default(sub, entry, false, found, problem));
    }
    command
}

/// Whether `arg`'s parser takes `value`, or why not.
fn check(arg: &clap::Arg, value: &str) -> std::result::Result<(), String> {
    let probe = clap::Arg::new("value").long("value").value_parser(arg.get_value_parser().clone());
    let line = ["--value", value];
    match clap::Command::new("config").no_binary_name(true).arg(probe).try_get_matches_from(line) {
        Ok(_) => Ok(()),
        Err(e) => {
            let detail = std::error::Error::source(&e).map_or_else(|| e.kind().to_string(), |s| s.to_string());
            let flag = arg.get_long().unwrap_or(arg.get_id().as_str());
            Err(format!("{value:?} is not a valid --{flag}: {detail}"))
        }
    }
}

/// Every key of the file, resolved as for a command that has its flag: environment, file, default.
fn defaults_report(entries: &[Entry], loaded: Option<&Loaded>) -> Vec<Resolved> {
    let command = Cli::command();
    let mut report = Vec::new();
    for key in file::keys() {
        let (scope, arg_id) = key_arg(&key);
        let Some(arg) = find_arg(&command, scope, &arg_id) else { continue };
        let from_env = arg.get_env().and_then(|var| {
            let var = var.to_string_lossy().into_owned();
            crate::settings::env::stand_in(&var).map(|value| (var, value))
        });
        let from_file = entries.iter().find(|e| e.key == key);
        let resolved = if let Some((var, value)) = from_env {
            Resolved { key, value: Some(value), source: Source::Env, origin: var }
        } else if let (Some(entry), Some(loaded)) = (from_file, loaded) {
            let origin = loaded.path.display().to_string();
            Resolved { key, value: Some(entry.value.clone()), source: Source::Config, origin }
        } else {
            let value = joined(arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()));
            Resolved { key, value, source: Source::Default, origin: String::new() }
        };
        report.push(resolved);
    }
    report
}

/// The first argument with this id in the command tree (in the subcommand `scope` when given).
fn find_arg<'a>(command: &'a clap::Command, scope: Option<&str>, id: &str) -> Option<&'a clap::Arg> {
    if let Some(scope) = scope {
        return command.find_subcommand(scope)?.get_arguments().find(|a| a.get_id() == id);
    }
    if let Some(arg) = command.get_arguments().find(|a| a.get_id() == id) {
        return Some(arg);
    }
    command.get_subcommands().find_map(|sub| find_arg(sub, None, id))
}

/// The keys of the file whose flags the parsed command line's subcommand has, with their values and sources.
fn command_report(
    command: &clap::Command,
    matches: &ArgMatches,
    entries: &[Entry],
    loaded: Option<&Loaded>,
) -> Vec<Resolved> {
    let mut path = Vec::new();
    let (mut command, mut matches) = (command, matches);
    while let Some((name, sub_matches)) = matches.subcommand() {
        path.push(name.to_string());
        match command.find_subcommand(name) {
            Some(sub) => command = sub,
            None => break,
        }
        matches = sub_matches;
    }
    let top = path.first().map(String::as_str);
    let mut report = Vec::new();
    for key in file::keys() {
        let (scope, arg_id) = key_arg(&key);
        if scope.is_some() && (scope != top || path.len() != 1) {
            continue;
        }
        let Some(arg) = command.get_arguments().find(|a| a.get_id() == arg_id.as_str()) else { continue };
        let value = matches
            .get_raw(&arg_id)
            .map(|values| values.map(|v| v.to_string_lossy().into_owned()).collect::<Vec<_>>().join(","));
        let (source, origin) = match matches.value_source(&arg_id) {
            Some(ValueSource::CommandLine) => (Source::Flag, format!("--{}", arg.get_long().unwrap_or(&arg_id))),
            Some(ValueSource::EnvVariable) => {
                (Source::Env, arg.get_env().map_or_else(String::new, |v| v.to_string_lossy().into_owned()))
            }
            _ => match (entries.iter().any(|e| e.key == key), loaded) {
                (true, Some(loaded)) => (Source::Config, loaded.path.display().to_string()),
                _ => (Source::Default, String::new()),
            },
        };
        report.push(Resolved { key, value, source, origin });
    }
    report
}

/// Values joined with commas; `None` for none.
fn joined(values: impl Iterator<Item = String>) -> Option<String> {
    let values: Vec<String> = values.collect();
    (!values.is_empty()).then(|| values.join(","))
}

/// A file key's table (`serve` in `serve.port`) and the id of the flag it stands for (`tools_file` is `--tools`).
fn key_arg(key: &str) -> (Option<&str>, String) {
    match key.split_once('.') {
        Some((table, inner)) => (Some(table), inner.to_string()),
        None if key == "tools_file" => (None, "tools".to_string()),
        None => (None, key.to_string()),
    }
}
