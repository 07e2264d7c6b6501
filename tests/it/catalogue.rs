//! A stable tool catalogue across goals (`benches/catalogue/`): the planner's compact tool listing names every
//! tool and argument for fewer tokens than the JSON listing, and a second `tandem plan` process against the same
//! catalogue computes only its goal, the catalogue's positions coming from the prefix store on disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use candle_core::quantized::gguf_file::{self, Value};
use tandem::agent::plan::planner::system_prompt_with;
use tandem::agent::plan::tool_lines::ToolListing;
use tandem::llm::chat::{ChatMessage, ChatTemplate};
use tandem::llm::tokenizer::GgufTokenizer;
use tandem::tools::{ToolContext, ToolRegistry, Workspace};

use crate::common::runs::Scratch;

/// The planner `tandem plan` uses by default; the 0.5B shares its tokenizer and chat template.
const PLANNER: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m";
/// The quicker model the two-process test plans with (prefill ~3× the 1.5B's).
const QUICK: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m";

fn catalogue(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/catalogue").join(name)
}

/// The built-in tools `tandem plan` offers, then the catalogue's.
fn registry(dir: &Path, file: Option<&Path>) -> ToolRegistry {
    let mut registry = ToolRegistry::builtins(&ToolContext::new(Workspace::new(dir).unwrap()));
    if let Some(file) = file {
        registry.load_file(file).unwrap();
    }
    registry
}

fn metadata() -> &'static HashMap<String, Value> {
    static METADATA: OnceLock<HashMap<String, Value>> = OnceLock::new();
    METADATA.get_or_init(|| {
        let mut file = std::fs::File::open(crate::common::real_model(PLANNER)).unwrap();
        gguf_file::Content::read(&mut file).unwrap().metadata
    })
}

/// Tokens of the planner's system message for these tools, rendered and tokenized as the planner does.
fn system_tokens(registry: &ToolRegistry, listing: ToolListing) -> usize {
    let template = ChatTemplate::from_gguf(metadata(), "qwen2").unwrap().expect("Qwen ships a template");
    let tokenizer = GgufTokenizer::from_gguf(metadata()).unwrap();
    let text = template.render(&[ChatMessage::system(system_prompt_with(registry, listing).unwrap())], None, false);
    tokenizer.encode(&text.unwrap(), false).unwrap().len()
}

#[test]
fn the_compact_listing_names_every_tool_and_every_required_argument() {
    let dir = tempfile::tempdir().unwrap();
    let file = catalogue("tools-30.toml");
    let registry = registry(dir.path(), Some(&file));
    assert_eq!(registry.len(), 34, "30 catalogue tools and calculator, read_file, list_dir, llm");
    let prompt = system_prompt_with(&registry, ToolListing::Compact).unwrap();
    for spec in registry.specs() {
        let prefix = format!("- {}(", spec.name);
        let line = prompt.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{prefix} in\n{prompt}"));
        let properties = spec.args_schema["properties"].as_object().unwrap();
        let required: Vec<&str> = spec.args_schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(|n| n.as_str()).collect())
            .unwrap_or_default();
        for name in properties.keys() {
            let marked = if required.contains(&name.as_str()) { format!("{name}: ") } else { format!("{name}?: ") };
            assert!(line.contains(&marked), "{} lacks `{marked}`: {line}", spec.name);
        }
        for field in spec.output_fields().unwrap_or_default() {
            assert!(line.split(" -> ").nth(1).is_some_and(|o| o.contains(&field.name)), "{line}");
        }
    }
    assert!(prompt.contains(r#"units?: "celsius"|"fahrenheit""#), "enum values are kept");
    assert!(!prompt.contains("arguments: {"), "no JSON listing in the compact prompt");
    let json = system_prompt_with(&registry, ToolListing::Json).unwrap();
    assert!(json.contains("arguments: {") && json.contains("output fields: "), "{json}");
}

/// Tokens a tool costs in the planner's prompt, each listing: the built-ins alone (over an empty registry's
/// prompt) and the 30 catalogue tools (over the built-ins'). Prints the figures for docs/performance.md.
#[test]
fn the_compact_listing_costs_fewer_tokens_per_tool_than_the_json_listing() {
    let dir = tempfile::tempdir().unwrap();
    let empty = ToolRegistry::new();
    let builtins = registry(dir.path(), None);
    let thirty = registry(dir.path(), Some(&catalogue("tools-30.toml")));
    for listing in [ToolListing::Json, ToolListing::Compact] {
        let (none, four, all) =
            (system_tokens(&empty, listing), system_tokens(&builtins, listing), system_tokens(&thirty, listing));
        eprintln!(
            "{listing:?}: system message {none} tokens without tools, {four} with the {} built-ins ({:.1} a tool), \
             {all} with 30 catalogue tools more ({:.1} a tool)",
            builtins.len(),
            (four - none) as f64 / builtins.len() as f64,
            (all - four) as f64 / 30.0
        );
    }
    let per_tool = |listing| (system_tokens(&thirty, listing) - system_tokens(&builtins, listing)) as f64 / 30.0;
    let (json, compact) = (per_tool(ToolListing::Json), per_tool(ToolListing::Compact));
    assert!(compact < 0.8 * json, "compact {compact:.1} tokens a tool against JSON's {json:.1}");
}

/// The `prompt N tokens (M reused ...)` figures `tandem plan` reports on stderr.
fn reported(output: &std::process::Output) -> (usize, usize) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stderr.lines().find(|l| l.contains("reused from the prefix cache")).unwrap_or_else(|| {
        panic!("no prompt figures in stderr:\n{stderr}\nstdout: {}", String::from_utf8_lossy(&output.stdout))
    });
    let numbers: Vec<usize> =
        line.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty()).map(|w| w.parse().unwrap()).collect();
    (numbers[0], numbers[1])
}

fn snapshots(cache: &Path) -> usize {
    let files = walk(&cache.join("prefixes"));
    files.iter().filter(|p| p.extension().is_some_and(|x| x == "safetensors")).count()
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .filter_map(|e| e.ok())
        .flat_map(|e| if e.path().is_dir() { walk(&e.path()) } else { vec![e.path()] })
        .collect()
}

/// Fresh `tandem plan` processes sharing one prefix store: the second goal against a catalogue reuses the whole
/// system message (instructions and tools) and computes only the goal; a catalogue with one tool added reuses
/// what it shares with the old one and saves its own opening, which the goal after it then reuses whole.
#[test]
fn a_second_plan_process_against_the_same_catalogue_computes_only_its_goal() {
    let scratch = Scratch::new();
    let cache = scratch.path("cache");
    let model = crate::common::real_model(QUICK);
    let seven = catalogue("tools-7.toml");
    // The catalogue edited: one tool added at its end.
    let eight = scratch.write(
        "tools-8.toml",
        &format!(
            "{}\n{}",
            std::fs::read_to_string(&seven).unwrap(),
            r#"
[[tool]]
name = "get_time"
description = "Current local date and time in a time zone."
command = ["sh", "-c", "cat >/dev/null; echo '{\"time\": \"16:42\"}'"]
output_fields = { time = "string" }
args_schema = '{"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}'
"#
        ),
    );
    let plan = |tools: &Path, goal: &str| {
        let (tools, model, workspace) = (tools.to_str().unwrap(), model.to_str().unwrap(), scratch.workspace());
        let args = ["plan", "--planner", model, "--threads", "2", "--tools", tools, "--workspace"];
        let mut command = scratch.command(&args);
        command.arg(&workspace).arg(goal).env("TANDEM_CACHE_DIR", &cache).env_remove(ToolListing::ENV);
        reported(&command.output().expect("run tandem plan"))
    };
    let goal_tokens = |goal: &str| GgufTokenizer::from_gguf(metadata()).unwrap().encode(goal, false).unwrap().len();
    // What follows the system message besides the goal: `<|im_start|>user\n`, `<|im_end|>\n<|im_start|>assistant\n`
    // and a token or two merged across the goal's edges.
    let around_goal = 10;
    let first = "What is the weather in Lyon?";
    let second = "How much is 250 euros in dollars? Email the amount to Ann.";

    let (prompt, reused) = plan(&seven, first);
    assert_eq!(reused, 0, "an empty store");
    assert!(prompt > goal_tokens(first) + 500, "prompt of {prompt} tokens");
    assert_eq!(snapshots(&cache), 1, "the first goal saves the system message");

    let (prompt, reused) = plan(&seven, second);
    assert!(
        reused + goal_tokens(second) + around_goal >= prompt && reused < prompt,
        "{reused} of {prompt} tokens reused: the whole system message should be"
    );
    assert_eq!(snapshots(&cache), 1, "nothing new to save");

    let (prompt, reused) = plan(&eight, second);
    assert!(reused > 200 && reused + 50 < prompt, "{reused} of {prompt}: only the old tools are shared");
    assert_eq!(snapshots(&cache), 2, "the edited catalogue's opening is saved too");

    let (prompt, reused) = plan(&eight, first);
    assert!(reused + goal_tokens(first) + around_goal >= prompt, "{reused} of {prompt} tokens reused");
}
