//! The web page at `/` (`web`, its files under `web/`) and the benchmark results it shows (`bench_results`).

pub(crate) mod bench_results;
pub(crate) mod web;
