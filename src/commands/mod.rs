//! What each subcommand does: the glue between parsed arguments (`cli`) and the library.

pub mod batch;
pub mod bench;
pub mod generate;
pub mod models;
pub mod plan;
pub mod reporter;
pub mod run;
pub mod run_view;
pub mod runs;
pub mod toolbox;

use crate::cli::{Cli, Command};
use crate::Result;

/// Runs one parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    let reporter = reporter::TerminalReporter::new(cli.quiet);
    match cli.command {
        Command::Generate(args) => generate::run(args, &reporter),
        Command::Run(args) => run::run(args, &reporter, cli.quiet),
        Command::Resume(args) => run::resume(args, &reporter, cli.quiet),
        Command::Batch(args) => batch::run(args, &reporter),
        Command::Runs(cmd) => runs::run(cmd),
        Command::Plan(args) => plan::run(args, &reporter),
        Command::Models(cmd) => models::run(cmd, &reporter),
        Command::Bench(cmd) => bench::run(cmd, &reporter),
    }
}
