//! `tandem serve`: the flags into settings, the server started, its address printed once it listens.

use crate::cli::ServeArgs;
use crate::progress::Reporter;
use crate::Result;

/// Runs `tandem serve` until Ctrl-C.
pub fn run(args: ServeArgs, reporter: &dyn Reporter) -> Result<()> {
    let settings = args.settings();
    crate::serve::serve(&settings, reporter, &|address| {
        // Printed even with --quiet: scripts and tests read the address (with --port 0 it is chosen here).
        eprintln!("tandem serve: listening on http://{address} (OpenAI API under /v1; Ctrl-C stops)");
    })
}
