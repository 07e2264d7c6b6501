//! What each subcommand does: the glue between parsed arguments (`cli`) and the library.

pub mod batch;
pub mod bench;
pub mod config;
pub mod generate;
pub mod mcp;
pub mod model_info;
pub mod models;
pub mod plan;
pub mod reporter;
pub mod rules;
pub mod run;
pub mod run_view;
pub mod runs;
pub mod serve;
pub mod tools;

use crate::cli::{Cli, Command};
use crate::Result;

/// How a command that did not fail ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It did what was asked. Exit code 0.
    Done,
    /// A run (or a goal of a batch) stopped before finishing: a budget was spent, a human rejected its plan, a
    /// stop condition held. The text says which and where the record is. Exit code 3.
    Stopped(String),
}

impl Outcome {
    /// The exit code of a command that ended this way (errors exit 1 or 2: `Error::exit_code`).
    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::Done => 0,
            Outcome::Stopped(_) => 3,
        }
    }
}

/// Runs one parsed command line.
pub fn run(cli: Cli) -> Result<Outcome> {
    let reporter = reporter::TerminalReporter::new(cli.quiet);
    let done = |result: Result<()>| result.map(|()| Outcome::Done);
    match cli.command {
        Command::Generate(args) => done(generate::run(args, &reporter)),
        Command::Run(args) => run::run(args, &reporter, cli.quiet),
        Command::Resume(args) => run::resume(args, &reporter, cli.quiet),
        Command::Batch(args) => batch::run(args, &reporter),
        Command::Runs(cmd) => done(runs::run(cmd)),
        Command::Plan(args) => done(plan::run(args, &reporter)),
        Command::Models(cmd) => done(models::run(cmd, &reporter)),
        Command::Tools(cmd) => done(tools::run(cmd)),
        Command::Rules(args) => done(rules::run(args)),
        Command::Serve(args) => done(serve::run(args, &reporter)),
        Command::Mcp(args) => done(mcp::run(args, &reporter)),
        Command::Bench(cmd) => done(bench::run(cmd, &reporter)),
        Command::Config(cmd) => done(config::run(cmd)),
    }
}
