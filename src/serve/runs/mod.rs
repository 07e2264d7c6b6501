//! Agent runs: created, listed and streamed over HTTP (`routes`), decided on, resumed and cancelled
//! (`run_control`), executed on the generation slots (`run_jobs`) with the tools the server allows (`tool_sets`),
//! and the same runs offered to MCP clients (`mcp`: `tandem mcp` and `/mcp`).

pub(crate) mod mcp;
pub(crate) mod routes;
pub(crate) mod run_control;
pub(crate) mod run_jobs;
pub(crate) mod tool_sets;
