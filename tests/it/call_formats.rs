//! Each family's tool-call format end to end through `tandem serve`: the real SmolLM2-135M file, re-written with
//! another family's chat template (Llama 3.2, Mistral Nemo, Phi-4-mini, from tests/fixtures/chat_templates), is
//! served; the server tells the format from the template at load, constrains the model's call to that format, and
//! reads it back into OpenAI's `tool_calls`. The generated tokens (through `logprobs`) show the format the model
//! wrote in.

use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{self, Value as GgufValue};
use candle_core::quantized::QTensor;
use candle_core::Device;
use serde_json::{json, Value};

use crate::common::real_model;
use crate::serve::{call, Server};

const SMOLLM2: &str = "smollm2-135m-instruct-q4_1";

/// SmolLM2's file with `template` (a fixture's name) as its chat template, written into `dir`.
fn with_template(dir: &Path, template: &str) -> PathBuf {
    let source = real_model(SMOLLM2);
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat_templates").join(template);
    let template = std::fs::read_to_string(&fixture).unwrap();
    let mut reader = std::fs::File::open(&source).unwrap();
    let content = gguf_file::Content::read(&mut reader).unwrap();
    let mut metadata: Vec<(String, GgufValue)> = content
        .metadata
        .iter()
        .filter(|(k, _)| k.as_str() != "tokenizer.chat_template")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    metadata.push(("tokenizer.chat_template".into(), GgufValue::String(template)));
    let tensors: Vec<(String, QTensor)> = content
        .tensor_infos
        .keys()
        .map(|name| (name.clone(), content.tensor(&mut reader, name, &Device::Cpu).unwrap()))
        .collect();
    let path = dir.join(format!("smollm2-{}.gguf", fixture.file_stem().unwrap().to_string_lossy()));
    let metadata: Vec<(&str, &GgufValue)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut std::fs::File::create(&path).unwrap(), &metadata, &tensors).unwrap();
    path
}

#[rstest::rstest]
#[case("llama-3.2.jinja", "{\"name\"", "\"parameters\"")]
#[case("mistral-nemo.jinja", "[TOOL_CALLS][{", "\"arguments\"")]
#[case("phi-4-mini.jinja", "<|tool_call|>[{", "\"arguments\"")]
fn a_family_template_gets_calls_in_its_own_format_back_as_openai_tool_calls(
    #[case] template: &str,
    #[case] opening: &str,
    #[case] arguments_key: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let model = with_template(dir.path(), template);
    let server = Server::start_model(model.to_str().unwrap(), &[]);
    let body = json!({
        "model": model.file_stem().unwrap().to_str().unwrap(),
        "messages": [{"role": "user", "content": "What is the weather in Paris? Call the tool."}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
            // A closed object: the call ends after `city`, so the test reads the format, not whether this small
            // model chooses to stop adding keys of its own.
            "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                "required": ["city"], "additionalProperties": false}}}],
        "tool_choice": "required",
        "parallel_tool_calls": false,
        "max_tokens": 60,
        "temperature": 0,
        "logprobs": true
    });
    let (status, answer) = call("POST", &server.url("/v1/chat/completions"), None, Some(&body.to_string()));
    assert_eq!(status, 200, "{answer}\n{}", server.log.lock().unwrap());
    let choice = &answer["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{answer}");
    let calls = choice["message"]["tool_calls"].as_array().unwrap_or_else(|| panic!("no tool_calls: {answer}"));
    assert_eq!(calls.len(), 1, "{answer}");
    assert_eq!(calls[0]["type"], "function");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    let arguments: Value = serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert!(arguments["city"].is_string(), "{arguments}");
    // What the model wrote, token by token: the family's own format.
    let written: String = choice["logprobs"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["token"].as_str().unwrap().to_string())
        .collect();
    assert!(written.starts_with(opening), "{template}: {written:?}");
    assert!(written.contains(arguments_key), "{template}: {written:?}");
}
