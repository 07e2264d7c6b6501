//! The layers run one way: every `crate::…` path in a module of `src/` names a module of a lower layer (or a
//! shared one), never one above it. See docs/architecture.md for the picture.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The layers, ground first. A module may use modules of lower layers; modules of one layer don't use each other.
const LAYERS: &[&[&str]] = &[
    &["kernels", "store", "tools"],
    &["llm"],
    &["decode"],
    &["agent"],
    &["serve"],
    &["bench"],
    &["cli"],
    &["commands"],
];

/// Modules any layer may use: they import no layer themselves.
const SHARED: &[&str] = &["settings", "progress", "memory", "children"];

/// `error` gathers every layer's error type into the crate's one `Error` (that is its job), so it names them all;
/// every layer converts into it, so it is exempt both ways.
const EXEMPT: &[&str] = &["error"];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The top-level crate modules a source text names through `crate::`, comments left out.
fn named_modules(source: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in source.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            if let Some(group) = after.strip_prefix('{') {
                // `use crate::{a, b::c}`: each item's first segment (a group on one line, as rustfmt writes short ones).
                let inner = group.split('}').next().unwrap_or("");
                for item in inner.split(',') {
                    let first: String =
                        item.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    if !first.is_empty() {
                        names.insert(first);
                    }
                }
            } else {
                let first: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if !first.is_empty() {
                    names.insert(first);
                }
            }
            rest = after;
        }
    }
    // `crate::Error` and `crate::Result` are the crate root's re-exports of `error`.
    names.remove("Error");
    names.remove("Result");
    names
}

/// The imports of `module`'s source that break the layering, as `module -> other` lines.
fn violations(module: &str, source: &str) -> Vec<String> {
    if EXEMPT.contains(&module) {
        return Vec::new();
    }
    let own = layer_of(module);
    let mut found = Vec::new();
    for other in named_modules(source) {
        if other == module || EXEMPT.contains(&other.as_str()) {
            continue;
        }
        let allowed = if SHARED.contains(&other.as_str()) {
            true
        } else if SHARED.contains(&module) {
            // Shared modules stay importable by all only while they import no layer.
            false
        } else {
            match (own, layer_of(&other)) {
                (Some(a), Some(b)) => b < a,
                _ => false,
            }
        };
        if !allowed {
            found.push(format!("{module} -> {other}"));
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_module_imports_a_layer_above_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut broken = Vec::new();
    let mut unplaced = BTreeSet::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let first = relative.components().next().unwrap().as_os_str().to_str().unwrap();
        let module = first.trim_end_matches(".rs");
        if module == "lib" || module == "main" {
            continue;
        }
        if layer_of(module).is_none() && !SHARED.contains(&module) && !EXEMPT.contains(&module) {
            unplaced.insert(module.to_string());
            continue;
        }
        let source = std::fs::read_to_string(file).unwrap();
        for v in violations(module, &source) {
            broken.push(format!("{}: {v}", relative.display()));
        }
    }
    assert!(unplaced.is_empty(), "modules in no layer (add them to LAYERS or SHARED): {unplaced:?}");
    assert!(broken.is_empty(), "imports that run back up the layers:\n{}", broken.join("\n"));
}

#[test]
fn the_check_catches_imports_up_and_across_and_passes_down() {
    assert_eq!(violations("llm", "use crate::decode::constraint::GrammarEngine;"), ["llm -> decode"]);
    assert_eq!(violations("kernels", "    use crate::llm::kv_cache::KvCache;"), ["kernels -> llm"]);
    assert_eq!(violations("bench", "use crate::{cli::SuiteArgs, tools::ToolRegistry};"), ["bench -> cli"]);
    assert_eq!(violations("store", "let x = crate::tools::ToolContext::new(w);"), ["store -> tools"]);
    assert_eq!(violations("settings", "use crate::llm::LoadOptions;"), ["settings -> llm"]);
    assert!(violations("decode", "use crate::llm::Model;\nuse crate::{Error, Result};").is_empty());
    assert!(violations("commands", "use crate::cli::Cli; use crate::settings::Mode;").is_empty());
    assert!(violations("llm", "// see crate::decode::generate for the loop").is_empty(), "comments are not imports");
}

/// Modules that may read the process environment: the settings layer (`settings::env` names every variable), the
/// command line (flags' stand-in variables) and `main` (`RUST_LOG`).
const READS_ENVIRONMENT: &[&str] = &["settings", "cli", "main"];

/// The lines of a source text that read the environment (`env::var`, `env::vars`, `var_os`), comments left out.
fn environment_reads(source: &str) -> Vec<String> {
    source
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .filter(|code| code.contains("env::var") || code.contains("var_os("))
        .map(|code| code.trim().to_string())
        .collect()
}

#[test]
fn only_settings_cli_and_main_read_the_environment() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let first = relative.components().next().unwrap().as_os_str().to_str().unwrap();
        if READS_ENVIRONMENT.contains(&first.trim_end_matches(".rs")) {
            continue;
        }
        for read in environment_reads(&std::fs::read_to_string(file).unwrap()) {
            found.push(format!("{}: {read}", relative.display()));
        }
    }
    assert!(
        found.is_empty(),
        "environment reads outside settings, cli and main (add a function to src/settings/env.rs):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_environment_check_catches_reads_and_skips_comments() {
    assert_eq!(environment_reads("let x = std::env::var(\"TANDEM_X\").ok();").len(), 1);
    assert_eq!(environment_reads("if std::env::var_os(\"HOME\").is_some() {}").len(), 1);
    assert_eq!(environment_reads("for (k, v) in std::env::vars() {}").len(), 1);
    assert!(environment_reads("// std::env::var(\"X\") in a comment\nlet d = std::env::temp_dir();").is_empty());
}
