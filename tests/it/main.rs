//! The integration tests, one module per area, built as one test binary (`cargo test --release --test it`)
//! so the crate and its dependencies are linked once rather than once per file. All modules run in one process
//! on parallel threads: a test must not change process-wide state (environment variables, the current
//! directory, global thread pools); settings go to the code under test explicitly, or to a child process.

mod common;

mod agent_models;
mod agent_run;
mod batch;
mod batching;
mod bench_scoring;
mod bench_serve;
mod bench_suites;
mod bfcl_categories;
mod call_formats;
mod candidates;
mod catalogue;
mod chat_template;
mod cli_docs;
mod concurrency;
mod config;
mod confinement;
mod crashes;
mod equations;
mod evaluation;
mod families;
mod generate;
mod grammar;
mod hostile;
mod hostile_tools;
mod hub;
mod joiner;
mod kernels;
mod kv_slots;
mod layers;
mod llamacpp_baseline;
mod llamacpp_tokenize;
mod loader;
mod mcp;
mod mcp_agent;
mod mcp_http;
mod mcp_server;
mod mends;
mod plan;
mod planner;
mod plans_hold;
mod prefix_store;
mod properties;
mod readings;
mod real_models;
mod retrieval;
mod rule_book;
mod serve;
mod serve_api;
mod serve_asks;
mod serve_prompt_cache;
mod serve_reads;
mod serve_runs;
mod serve_safety;
mod shard;
mod store;
mod thinking;
mod tokenizer;
mod tools;
mod user_data;
mod web;
