//! Property tests (proptest) of the parsers that take outside input: plan JSON and its validator, references,
//! the calculator's equations, the tools file (TOML) and the GGUF header and tensor index. Arbitrary input never panics; where a round trip
//! exists it holds. Case counts stay modest so the suite runs them in seconds; `PROPTEST_CASES=N` runs more.

use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

use proptest::collection::vec;
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use tandem::agent::plan::refs::{references_in, resolve_value};
use tandem::agent::{parse_reference, Plan, Reference, Step};
use tandem::llm::gguf::GgufFile;
use tandem::tools::equation::solve;
use tandem::tools::{parse_tool_file, ToolContext, ToolRegistry, Workspace};

use crate::common::tiny::{write_tiny_qwen2, TinyQwen2};

fn config(cases: u32) -> ProptestConfig {
    // PROPTEST_CASES in the environment overrides `cases` (longer runs by hand).
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(cases);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

fn registry() -> &'static ToolRegistry {
    static REGISTRY: OnceLock<ToolRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| ToolRegistry::builtins(&ToolContext::new(Workspace::new(std::env::temp_dir()).unwrap())))
}

const NAME: &str = "[A-Za-z0-9_-]{1,6}";

/// Argument values: strings that may hold references, numbers, booleans, small nested values.
fn arg_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        "[a-z $.0-9]{0,12}".prop_map(Value::from),
        (NAME, proptest::option::of(NAME)).prop_map(|(step, field)| Value::from(match field {
            Some(field) => format!("${step}.{field}$"),
            None => format!("${step}$"),
        })),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::from),
            vec(("[a-z]{1,4}", inner), 0..4).prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

fn arb_step() -> impl Strategy<Value = Step> {
    (
        NAME,
        "[a-z ]{0,12}",
        prop_oneof![Just("calculator".to_string()), Just("read_file".to_string()), "[a-z_.]{1,10}"],
        vec(("[a-z]{1,6}", arg_value()), 0..4),
        vec(NAME, 0..3),
    )
        .prop_map(|(id, description, tool, args, depends_on)| Step {
            id,
            description,
            tool,
            args: args.into_iter().collect::<Map<String, Value>>(),
            depends_on,
        })
}

fn arb_plan() -> impl Strategy<Value = Plan> {
    ("[a-z ]{0,20}", 1u32..5, vec(arb_step(), 0..8)).prop_map(|(goal, version, steps)| Plan { goal, version, steps })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn any_text_as_a_plan_is_parsed_or_refused(text in any::<String>()) {
        let _ = Plan::from_json(&text);
    }

    #[test]
    fn json_shaped_text_as_a_plan_is_parsed_or_refused(text in r#"[\[\]{}":,0-9a-z$. ]{0,300}"#) {
        let _ = Plan::from_json(&text);
        let _ = Plan::from_json(&format!(r#"{{"steps": [{text}]}}"#));
    }

    #[test]
    fn plans_round_trip_through_json_and_validate_without_panicking(plan in arb_plan()) {
        let text = serde_json::to_string(&plan).unwrap();
        prop_assert_eq!(Plan::from_json(&text).unwrap(), plan.clone());
        let issues = plan.validate(registry());
        // Every problem is reported in words.
        prop_assert!(issues.iter().all(|issue| !issue.to_string().is_empty()));
        let _ = plan.with_explicit_dependencies().validate(registry());
    }

    #[test]
    fn any_text_is_a_reference_or_not(text in any::<String>()) {
        let _ = parse_reference(&text);
        let _ = references_in(&Value::from(text.clone()));
        let _ = resolve_value("s9", &Value::from(text), &HashMap::new());
    }

    #[test]
    fn references_round_trip_through_their_text(
        step in NAME,
        field in proptest::option::of("[A-Za-z0-9_-]{1,6}(\\.[A-Za-z0-9_-]{1,6}){0,2}"),
    ) {
        let reference = Reference { step, field };
        prop_assert_eq!(parse_reference(&reference.to_string()), Some(reference.clone()));
        prop_assert_eq!(references_in(&json!({"a": [format!("x {reference} y")]})), vec![reference]);
    }

    #[test]
    fn an_embedded_reference_is_replaced_and_the_text_around_it_kept(
        before in "[^$]{0,20}",
        after in "[^$]{0,20}",
        value in "[^$]{0,20}",
    ) {
        let outputs = HashMap::from([("s1".to_string(), json!({"text": value.clone()}))]);
        let resolved = resolve_value("s2", &Value::from(format!("{before}$s1.text${after}")), &outputs).unwrap();
        prop_assert_eq!(resolved, Value::from(format!("{before}{value}{after}")));
    }

    #[test]
    fn equation_shaped_text_is_solved_or_refused_in_words(text in r"[0-9xy+*/()=. ^-]{0,40}") {
        // The calculator takes an expression with `=` as an equation; whatever it holds, a value or a sentence.
        match solve(&text) {
            Ok((name, value)) => prop_assert!(!name.is_empty() && !value.to_string().is_empty()),
            Err(message) => prop_assert!(!message.is_empty()),
        }
    }

    #[test]
    fn any_text_as_a_tools_file_is_loaded_or_refused(text in any::<String>()) {
        let _ = parse_tool_file(&text, Path::new("tools.toml"));
    }

    #[test]
    fn toml_shaped_tools_files_are_loaded_or_refused_with_a_line(
        lines in vec(prop_oneof![
            Just("[[tool]]".to_string()),
            "name = \"[a-z.]{0,6}\"",
            Just("description = \"d\"".to_string()),
            Just("command = [\"echo\"]".to_string()),
            Just("command = []".to_string()),
            Just("args_schema = { type = \"object\" }".to_string()),
            Just("args_schema = '{\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"nope\"}}}'".to_string()),
            "timeout_secs = -?[0-9]{1,6}(\\.[0-9])?",
            "max_output_bytes = [0-9]{1,4}",
            "idempotent = (true|false|1)",
            "output_fields = (\\[\"a\"\\]|\\[\\]|\\{ a = \"number\" \\}|3)",
            "[a-z_]{1,8} = [0-9\"\\[{]{1,3}",
        ], 0..14),
    ) {
        let text = lines.join("\n");
        if let Err(tandem::tools::ToolError::ToolFile { line: Some(line), .. }) =
            parse_tool_file(&text, Path::new("tools.toml"))
        {
            prop_assert!(line >= 1 && line <= lines.len().max(1), "line {} of {}", line, lines.len());
        }
    }

    #[test]
    fn declared_tools_read_back_as_written(
        name in "[a-z][a-z0-9_]{0,10}",
        description in "[a-zA-Z ,]{1,30}",
        timeout in 1u32..86_400,
        max_output in 1usize..1_000_000,
        idempotent in any::<bool>(),
        program in "[a-z]{1,8}",
    ) {
        let text = format!(
            "[[tool]]\nname = \"{name}\"\ndescription = \"{description}\"\ncommand = [\"{program}\", \"--flag\"]\n\
             timeout_secs = {timeout}\nmax_output_bytes = {max_output}\nidempotent = {idempotent}\n\
             args_schema = {{ type = \"object\" }}\n"
        );
        let tools = parse_tool_file(&text, Path::new("tools.toml")).unwrap();
        prop_assert_eq!(tools.len(), 1);
        let tool = &tools[0];
        prop_assert_eq!(&tool.name, &name);
        prop_assert_eq!(&tool.description, &description);
        prop_assert_eq!(&tool.command, &vec![program, "--flag".to_string()]);
        prop_assert_eq!(tool.timeout.as_secs(), u64::from(timeout));
        prop_assert_eq!(tool.max_output_bytes, max_output);
        prop_assert_eq!(tool.idempotent, idempotent);
    }
}

/// A tiny valid GGUF model's bytes (written once).
fn tiny_gguf() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        write_tiny_qwen2(&path, &TinyQwen2 { n_layer: 1, ..TinyQwen2::default() });
        std::fs::read(path).unwrap()
    })
}

/// Opens `bytes` as a GGUF file and reads its metadata and every tensor it lists: errors are fine, panics not.
fn open_and_read(bytes: &[u8]) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.gguf");
    std::fs::write(&path, bytes).unwrap();
    let file = GgufFile::open(&path).map_err(|e| e.to_string())?;
    let _ = file.architecture();
    let names: Vec<String> = file.content.tensor_infos.keys().cloned().collect();
    for name in names {
        let _ = file.tensor(&name, &candle_core::Device::Cpu);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn gguf_files_with_bytes_changed_in_the_header_open_or_fail_cleanly(
        changes in vec((0usize..1536, any::<u8>()), 1..4),
        cut in proptest::option::of(0usize..4096),
    ) {
        let mut bytes = tiny_gguf().to_vec();
        for (at, byte) in changes {
            let at = at % bytes.len();
            bytes[at] = byte;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut);
        }
        if let Err(message) = open_and_read(&bytes) {
            prop_assert!(message.contains("m.gguf"), "the error names the file: {}", message);
        }
    }

    #[test]
    fn arbitrary_bytes_after_a_gguf_magic_open_or_fail_cleanly(
        version in prop_oneof![Just(2u32), Just(3u32), any::<u32>()],
        body in vec(any::<u8>(), 0..512),
    ) {
        let mut bytes = b"GGUF".to_vec();
        bytes.extend_from_slice(&version.to_le_bytes());
        bytes.extend_from_slice(&body);
        let _ = open_and_read(&bytes);
    }
}
