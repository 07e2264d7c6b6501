//! The layers run one way: every `crate::…` path in a module of `src/` names a module of a lower layer (or a
//! shared one), never one above it. See docs/architecture.md for the picture.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The layers, ground first. A module may use modules of lower layers; modules of one layer don't use each other.
const LAYERS: &[&[&str]] = &[
    &["kernels", "store", "tools"],
    &["llm"],
    &["decode"],
    &["engine"],
    &["agent"],
    &["serve"],
    &["bench"],
    &["cli"],
    &["commands"],
];

/// Modules any layer may use: they import no layer themselves.
const SHARED: &[&str] = &["settings", "progress", "memory", "children", "panics"];

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

/// A source file's module path under `src/` (`agent/plan/mod.rs` → `agent::plan`, `lib.rs` → the root).
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> =
        relative.with_extension("").components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The paths a `use` tree or an inline path spells from `text` on (after `crate::`, `super::` or `self::`),
/// with groups `{a, b::{c, d}}` spread out: each as its segments.
fn spread_paths(text: &str) -> Vec<Vec<String>> {
    fn tree(chars: &[char], at: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut path = prefix;
        loop {
            while *at < chars.len() && chars[*at].is_whitespace() {
                *at += 1;
            }
            if *at < chars.len() && chars[*at] == '{' {
                *at += 1;
                loop {
                    tree(chars, at, path.clone(), out);
                    while *at < chars.len() && chars[*at].is_whitespace() {
                        *at += 1;
                    }
                    match chars.get(*at) {
                        Some(',') => *at += 1,
                        Some('}') => {
                            *at += 1;
                            return;
                        }
                        _ => return,
                    }
                    while *at < chars.len() && chars[*at].is_whitespace() {
                        *at += 1;
                    }
                    if chars.get(*at) == Some(&'}') {
                        *at += 1;
                        return;
                    }
                }
            }
            let start = *at;
            while *at < chars.len() && (chars[*at].is_ascii_alphanumeric() || chars[*at] == '_') {
                *at += 1;
            }
            if *at == start {
                out.push(path);
                return;
            }
            path.push(chars[start..*at].iter().collect());
            if chars.get(*at) == Some(&':') && chars.get(*at + 1) == Some(&':') {
                *at += 2;
            } else {
                out.push(path);
                return;
            }
        }
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    tree(&chars, &mut 0, Vec::new(), &mut out);
    out
}

/// The file graph of a source tree: for each file, the files whose items it names through `crate::`, `super::`
/// and `self::` paths (a room's re-exports followed to the file that defines the item), test modules left out. A directory's `mod.rs` is
/// its room's door: what it names inside its own room is declaring and re-exporting, not depending, so those
/// edges are left out; every other edge counts.
struct FileGraph {
    names: Vec<String>,
    modules: Vec<Vec<String>>,
    sources: Vec<String>,
}

impl FileGraph {
    fn new(src: &Path) -> Self {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        files.retain(|f| !f.ends_with("main.rs"));
        files.sort();
        let relative: Vec<&Path> = files.iter().map(|f| f.strip_prefix(src).unwrap()).collect();
        let sources = files
            .iter()
            .map(|f| {
                let mut text = std::fs::read_to_string(f).unwrap();
                // A file's own test module (at its end, by the crate's convention) is the file's, and its
                // `super::` names the file itself: left out.
                if let Some(at) = text.find("#[cfg(test)]\nmod ") {
                    text.truncate(at);
                }
                text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
            })
            .collect();
        Self {
            names: relative.iter().map(|r| r.display().to_string()).collect(),
            modules: relative.iter().map(|r| module_path(r)).collect(),
            sources,
        }
    }

    fn is_door(&self, file: usize) -> bool {
        self.names[file].ends_with("mod.rs") || self.names[file] == "lib.rs"
    }

    /// The file an item path lands in: the longest prefix that is a module, then, in a door, the re-export that
    /// names the item.
    fn resolve(&self, path: &[String], depth: usize) -> Option<usize> {
        let (length, file) = (0..=path.len())
            .rev()
            .find_map(|n| self.modules.iter().position(|m| m[..] == path[..n]).map(|f| (n, f)))?;
        if depth < 8 && self.is_door(file) {
            if let Some(item) = path.get(length) {
                if let Some(target) = self.reexport(file, item, depth) {
                    return Some(target);
                }
            }
        }
        Some(file)
    }

    /// Where a door's `pub use …` sends `item`.
    fn reexport(&self, door: usize, item: &str, depth: usize) -> Option<usize> {
        let module = &self.modules[door];
        for statement in self.sources[door].split(';') {
            let Some(at) = statement.find("pub use ") else { continue };
            for path in spread_paths(&statement[at + "pub use ".len()..]) {
                if path.last().map(String::as_str) != Some(item) {
                    continue;
                }
                let target = match path.first().map(String::as_str) {
                    Some("crate") => path[1..].to_vec(),
                    Some("self") => [&module[..], &path[1..]].concat(),
                    Some("super") => [&module[..module.len().saturating_sub(1)], &path[1..]].concat(),
                    _ => [&module[..], &path[..]].concat(),
                };
                return self.resolve(&target, depth + 1);
            }
        }
        None
    }

    /// The files `file` depends on.
    fn edges(&self, file: usize) -> BTreeSet<usize> {
        let module = &self.modules[file];
        let source = &self.sources[file];
        let mut found = BTreeSet::new();
        for (at, _) in
            source.match_indices("crate::").chain(source.match_indices("super::")).chain(source.match_indices("self::"))
        {
            let before = source[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            for path in spread_paths(&source[at..]) {
                let mut base: Vec<String> = module.clone();
                let mut rest = &path[..];
                match rest.first().map(String::as_str) {
                    Some("crate") => {
                        base.clear();
                        rest = &rest[1..];
                    }
                    Some("self") => rest = &rest[1..],
                    _ => {
                        while rest.first().map(String::as_str) == Some("super") {
                            base.pop();
                            rest = &rest[1..];
                        }
                    }
                }
                let target = [&base[..], rest].concat();
                if let Some(to) = self.resolve(&target, 0) {
                    let inside_own_room = self.is_door(file) && self.modules[to].starts_with(module);
                    if to != file && !inside_own_room {
                        found.insert(to);
                    }
                }
            }
        }
        found
    }

    /// The circles of files (strongly connected groups of two or more), each as sorted file names.
    fn circles(&self) -> Vec<Vec<String>> {
        let edges: Vec<BTreeSet<usize>> = (0..self.names.len()).map(|f| self.edges(f)).collect();
        // Tarjan's algorithm, iterative over an explicit stack of (file, next edge).
        let n = self.names.len();
        let (mut index, mut low, mut on_stack) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
        let (mut stack, mut counter, mut circles) = (Vec::new(), 0, Vec::new());
        for start in 0..n {
            if index[start] != usize::MAX {
                continue;
            }
            let mut work = vec![(start, 0usize)];
            while let Some(&mut (v, ref mut next)) = work.last_mut() {
                if *next == 0 && index[v] == usize::MAX {
                    index[v] = counter;
                    low[v] = counter;
                    counter += 1;
                    stack.push(v);
                    on_stack[v] = true;
                }
                let targets: Vec<usize> = edges[v].iter().copied().collect();
                if let Some(&w) = targets.get(*next) {
                    *next += 1;
                    if index[w] == usize::MAX {
                        work.push((w, 0));
                    } else if on_stack[w] {
                        low[v] = low[v].min(index[w]);
                    }
                    continue;
                }
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut group = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        group.push(self.names[w].clone());
                        if w == v {
                            break;
                        }
                    }
                    if group.len() > 1 {
                        group.sort();
                        circles.push(group);
                    }
                }
            }
        }
        circles
    }
}

#[test]
fn no_circle_of_files_outside_kernels() {
    let graph = FileGraph::new(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    // The SIMD kernels share tile helpers across instruction-set files by design (docs/architecture.md).
    let circles: Vec<_> =
        graph.circles().into_iter().filter(|group| !group.iter().all(|f| f.starts_with("kernels/"))).collect();
    assert!(circles.is_empty(), "files that depend on each other in a circle: {circles:#?}");
}

#[test]
fn the_circle_check_finds_circles_through_rooms_and_doors() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "pub mod a;\npub mod b;\npub use a::Thing;\n");
    write("a/mod.rs", "pub mod x;\npub mod y;\npub mod z;\npub use x::{Thing, Other};\nuse y::Why;\n");
    write("a/x.rs", "use super::y::Why;\npub struct Thing;\npub struct Other;\n");
    write("a/z.rs", "use crate::b::Bee;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::Thing;\n}\n");
    write("a/y.rs", "use crate::{b::{Bee, Ok}};\npub struct Why;\nfn f() { let _ = self::Why; }\n");
    write("b.rs", "// use crate::a::x::Thing; is only a comment\npub struct Bee;\npub struct Ok;\n");
    let graph = FileGraph::new(dir.path());
    assert!(graph.circles().is_empty(), "a door naming its own room is no circle: {:?}", graph.circles());
    // b names x through the crate root's re-export: x → y → b → x.
    write("b.rs", "use crate::Thing;\npub struct Bee;\npub struct Ok;\n");
    let graph = FileGraph::new(dir.path());
    assert_eq!(graph.circles(), [vec!["a/x.rs".to_string(), "a/y.rs".into(), "b.rs".into()]]);
}

#[test]
fn no_source_file_is_over_700_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).unwrap().lines().count();
            (lines > 700).then(|| format!("{} ({lines} lines)", f.strip_prefix(&src).unwrap().display()))
        })
        .collect();
    assert!(long.is_empty(), "split these into modules with one job each: {long:?}");
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
