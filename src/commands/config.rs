//! `tandem config show` and `tandem config path`: the resolved settings and where each comes from.

use crate::cli::{ConfigCommand, ConfigShowArgs, Source};
use crate::{Error, Result};

/// Runs a `config` subcommand.
pub fn run(cmd: ConfigCommand) -> Result<()> {
    match cmd {
        ConfigCommand::Show(args) => show(&args),
        ConfigCommand::Path => {
            match crate::cli::config_path() {
                Some(path) => {
                    println!("{}", path.display());
                    if !path.is_file() {
                        eprintln!("(no file there: every setting takes its flag, environment variable or default)");
                    }
                }
                None => eprintln!("no configuration file: neither $XDG_CONFIG_HOME nor $HOME is set (use --config)"),
            }
            Ok(())
        }
    }
}

fn show(args: &ConfigShowArgs) -> Result<()> {
    if args.json {
        let json = serde_json::json!({"config_file": args.file, "settings": args.resolved});
        println!("{}", serde_json::to_string_pretty(&json).map_err(Error::encode("the settings"))?);
        return Ok(());
    }
    match (&args.file, &args.location) {
        (Some(file), _) => println!("# configuration file: {}", file.display()),
        (None, Some(location)) => println!("# configuration file: none ({} does not exist)", location.display()),
        (None, None) => println!("# configuration file: none"),
    }
    let width = args.resolved.iter().map(|r| r.key.len() + 3 + r.value.as_deref().map_or(0, str::len)).max();
    for setting in &args.resolved {
        let line = match &setting.value {
            Some(value) => format!("{} = {value}", setting.key),
            None => format!("{} (not set)", setting.key),
        };
        let source = match setting.source {
            Source::Flag => format!("flag {}", setting.origin),
            Source::Env => format!("env {}", setting.origin),
            Source::Config => format!("config file {}", setting.origin),
            Source::Default => "default".to_string(),
        };
        println!("{line:<width$}  # {source}", width = width.unwrap_or(0));
    }
    Ok(())
}
