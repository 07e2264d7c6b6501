//! The `tandem` binary: parse the command line, set up logging, run, map errors to an exit code.

use std::process::ExitCode;

use clap::Parser;
use tandem::cli::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_level = match cli.verbose {
        0 => "warn",
        1 => "tandem=debug,info",
        _ => "tandem=trace,debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    match tandem::commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // Every error's message already names its cause and what to do.
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
