//! `tandem mcp`: Tandem as an MCP server on stdin and stdout, for other agents to hand goals to.

use crate::cli::McpArgs;
use crate::progress::Reporter;
use crate::Result;

/// Runs `tandem mcp` until the client closes the connection (or Ctrl-C).
pub fn run(args: McpArgs, reporter: &dyn Reporter) -> Result<()> {
    let settings = args.settings();
    // Everything but MCP goes to stderr: stdout is the protocol's.
    reporter.message("tandem mcp: loading the models; MCP on stdin and stdout once they are loaded");
    crate::serve::serve_mcp_stdio(&settings, reporter)
}
