//! Chat templates from the real models' GGUF metadata, checked against what Hugging Face's renderer produces.
//!
//! The expected strings with tools were rendered by Python's jinja2 set up as `transformers` sets it up
//! (`trim_blocks`, `lstrip_blocks`, `loopcontrols`, `tojson` = `json.dumps(ensure_ascii=False)`) from the same
//! template text, so they pin the exact bytes the model was trained to read.

use std::collections::HashMap;
use std::sync::OnceLock;

use candle_core::quantized::gguf_file::{self, Value};
use tandem::llm::chat::{ChatMessage, ChatTemplate, TemplateError, GEMMA3_TEMPLATE};
use tandem::llm::tokenizer::GgufTokenizer;

fn metadata(id: &str) -> &'static HashMap<String, Value> {
    static QWEN: OnceLock<HashMap<String, Value>> = OnceLock::new();
    static GEMMA: OnceLock<HashMap<String, Value>> = OnceLock::new();
    let cell = match id {
        "qwen2.5-coder-0.5b-instruct-q4_k_m" => &QWEN,
        "gemma-3-270m-q4_k_m" => &GEMMA,
        other => panic!("no metadata cache for {other}"),
    };
    cell.get_or_init(|| {
        let mut file = std::fs::File::open(crate::common::real_model(id)).unwrap();
        gguf_file::Content::read(&mut file).unwrap().metadata
    })
}

fn qwen_template() -> ChatTemplate {
    ChatTemplate::from_gguf(metadata("qwen2.5-coder-0.5b-instruct-q4_k_m"), "qwen2")
        .unwrap()
        .expect("Qwen ships a template")
}

fn calculator_tools() -> serde_json::Value {
    serde_json::json!([{"type": "function", "function": {"name": "calculator",
        "description": "Evaluate an arithmetic expression like '2 * (3 + 4)' & return <the> number",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string", "description": "the expression"}},
                       "required": ["expression"]}}}])
}

const QWEN_TOOLS_PREAMBLE: &str = "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n\
{\"type\": \"function\", \"function\": {\"name\": \"calculator\", \"description\": \"Evaluate an arithmetic expression \
like '2 * (3 + 4)' & return <the> number\", \"parameters\": {\"type\": \"object\", \"properties\": {\"expression\": \
{\"type\": \"string\", \"description\": \"the expression\"}}, \"required\": [\"expression\"]}}}\n</tools>\n\n\
For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n\
<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

const QWEN_DEFAULT_SYSTEM: &str = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

#[test]
fn qwen_renders_system_and_user_exactly() {
    let t = qwen_template();
    assert_eq!((t.bos_token(), t.eos_token()), ("<|endoftext|>", "<|im_end|>"));
    let out = t.render(&[ChatMessage::system("You plan."), ChatMessage::user("Goal: list files")], None, true).unwrap();
    assert_eq!(
        out,
        "<|im_start|>system\nYou plan.<|im_end|>\n<|im_start|>user\nGoal: list files<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn qwen_supplies_its_default_system_text() {
    let out = qwen_template().render(&[ChatMessage::user("Hi")], None, true).unwrap();
    assert_eq!(
        out,
        format!("<|im_start|>system\n{QWEN_DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    );
}

#[test]
fn qwen_multi_turn_without_generation_prompt() {
    let messages = [ChatMessage::user("Hi"), ChatMessage::assistant("Hello!"), ChatMessage::user("Bye")];
    let out = qwen_template().render(&messages, None, false).unwrap();
    assert_eq!(
        out,
        format!(
            "<|im_start|>system\n{QWEN_DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n\
             <|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
        )
    );
}

#[test]
fn qwen_tools_section_matches_hugging_face() {
    let out = qwen_template().render(&[ChatMessage::user("What is 2+2?")], Some(&calculator_tools()), true).unwrap();
    assert_eq!(
        out,
        format!(
            "<|im_start|>system\n{QWEN_DEFAULT_SYSTEM}{QWEN_TOOLS_PREAMBLE}\
             <|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
        )
    );
}

#[test]
fn qwen_tool_results_are_grouped_in_one_user_turn() {
    let messages = [
        ChatMessage::system("Use tools."),
        ChatMessage::user("What is 2+2?"),
        ChatMessage::assistant(
            "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2+2\"}}\n</tool_call>",
        ),
        ChatMessage::new("tool", "4"),
        ChatMessage::new("tool", "four"),
    ];
    let out = qwen_template().render(&messages, Some(&calculator_tools()), true).unwrap();
    assert_eq!(
        out,
        format!(
            "<|im_start|>system\nUse tools.{QWEN_TOOLS_PREAMBLE}<|im_start|>user\nWhat is 2+2?<|im_end|>\n\
             <|im_start|>assistant\n<tool_call>\n{{\"name\": \"calculator\", \"arguments\": {{\"expression\": \"2+2\"}}}}\n\
             </tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n4\n</tool_response>\n<tool_response>\nfour\n\
             </tool_response><|im_end|>\n<|im_start|>assistant\n"
        )
    );
}

#[test]
fn qwen_rendered_prompt_tokenizes_with_single_special_tokens() {
    let md = metadata("qwen2.5-coder-0.5b-instruct-q4_k_m");
    let tok = GgufTokenizer::from_gguf(md).unwrap();
    let prompt = qwen_template().render(&[ChatMessage::system("S"), ChatMessage::user("Hi")], None, true).unwrap();
    let ids = tok.encode(&prompt, tok.add_bos_by_default()).unwrap();
    assert_eq!(ids[0], 151_644, "<|im_start|> first, no BOS for Qwen");
    assert_eq!(ids.iter().filter(|&&id| id == 151_644).count(), 3);
    assert_eq!(ids.iter().filter(|&&id| id == 151_645).count(), 2);
    assert_eq!(tok.decode(&ids).unwrap(), prompt);
}

#[test]
fn gemma_without_a_template_gets_the_gemma_turn_format() {
    let md = metadata("gemma-3-270m-q4_k_m");
    assert!(!md.contains_key("tokenizer.chat_template"), "the base model ships none");
    let t = ChatTemplate::from_gguf(md, "gemma3").unwrap().expect("built-in Gemma format");
    assert_eq!(t.source(), GEMMA3_TEMPLATE);
    let messages = [
        ChatMessage::system("You plan."),
        ChatMessage::user("Goal: x"),
        ChatMessage::assistant(" ok "),
        ChatMessage::user("next"),
    ];
    let out = t.render(&messages, None, true).unwrap();
    assert_eq!(
        out,
        "<bos><start_of_turn>user\nYou plan.\n\nGoal: x<end_of_turn>\n<start_of_turn>model\nok<end_of_turn>\n\
         <start_of_turn>user\nnext<end_of_turn>\n<start_of_turn>model\n"
    );
    // The template writes <bos>; encoding with the model's default BOS must not add a second one.
    let tok = GgufTokenizer::from_gguf(md).unwrap();
    let ids = tok.encode(&out, tok.add_bos_by_default()).unwrap();
    assert_eq!(&ids[..3], [2, 105, 2364], "<bos> <start_of_turn> user");
    assert_eq!(ids.iter().filter(|&&id| id == 2).count(), 1);
    assert_eq!(ids.last(), Some(&107), "ends with the newline after <start_of_turn>model");
}

#[test]
fn gemma_rejects_non_alternating_turns() {
    let t = ChatTemplate::from_gguf(metadata("gemma-3-270m-q4_k_m"), "gemma3").unwrap().unwrap();
    let err = t.render(&[ChatMessage::user("a"), ChatMessage::user("b")], None, true).unwrap_err();
    assert!(matches!(&err, TemplateError::Raised(m) if m.contains("alternate")), "{err}");
}

#[test]
fn no_template_and_no_known_format_is_none() {
    let mut md = metadata("qwen2.5-coder-0.5b-instruct-q4_k_m").clone();
    md.remove("tokenizer.chat_template");
    assert!(ChatTemplate::from_gguf(&md, "qwen2").unwrap().is_none());
    md.insert("tokenizer.chat_template".into(), Value::U32(7));
    assert!(matches!(ChatTemplate::from_gguf(&md, "qwen2"), Err(TemplateError::WrongType { .. })));
}

#[test]
fn malformed_templates_fail_at_compile_time() {
    for source in ["{% for m in messages %}{{ m.content }}", "{{ messages[0] ", "{% if %}x{% endif %}", "{% endfor %}"]
    {
        let err = ChatTemplate::new(source, "", "").unwrap_err();
        assert!(matches!(err, TemplateError::Syntax { .. }), "{source:?} gave {err:?}");
    }
    let err = ChatTemplate::new("ok\n{% for %}", "", "").unwrap_err();
    assert!(err.to_string().contains("line 2"), "{err}");
}

#[test]
fn tools_that_are_not_an_array_are_rejected() {
    let err =
        qwen_template().render(&[ChatMessage::user("Hi")], Some(&serde_json::json!({"name": "f"})), true).unwrap_err();
    assert!(matches!(err, TemplateError::ToolsNotAnArray(_)), "{err}");
}

/// The chat templates of the families we run (Llama 3.1/3.2, Qwen3, SmolLM2/3, Phi-3.5/4-mini, Mistral Nemo, and
/// the built-in Gemma 3 one), each rendered for a plain turn, a system prompt with tools, a tool call and its
/// result, Phi-4's tools-in-the-system-message form, and a request's tools placed where the template shows them
/// (tandem serve's rendering: as `tools`, Phi-4-mini's system field, or the documented system text), must give
/// exactly what Python's jinja2 gives in Hugging Face's setup, and each template's tools must be told to show where
/// the reference's own probe found them. The expected texts
/// come from `tests/fixtures/chat_templates/render.py`, which renders with a fixed date; today's date is put back
/// to that one here.
#[test]
fn family_templates_render_as_hugging_face_renders_them() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat_templates");
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let date = reference["date"].as_str().unwrap();
    let today = ChatTemplate::new("{{ strftime_now('%d %b %Y') }}", "", "").unwrap().render(&[], None, false).unwrap();
    let expected = reference["expected"].as_object().unwrap();
    assert!(expected.len() >= 9, "every family's template has a reference: {:?}", expected.keys());
    // The Gemma 3 fixture is the built-in template Tandem gives Gemma files without one.
    assert_eq!(std::fs::read_to_string(dir.join("gemma3.jinja")).unwrap(), GEMMA3_TEMPLATE);
    let mut checked = 0;
    for (name, results) in expected {
        let source = std::fs::read_to_string(dir.join(format!("{name}.jinja"))).unwrap();
        let (bos, eos) = if name.starts_with("llama") { ("<|begin_of_text|>", "<|eot_id|>") } else { ("<s>", "</s>") };
        let template = ChatTemplate::new(&source, bos, eos).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (case, want) in results.as_object().unwrap() {
            if case == "tools_shown" {
                // Where the template shows tools, as the reference's own probe found it.
                assert_eq!(template.tools_shown().name(), want, "{name}");
                continue;
            }
            let spec = &reference["cases"][case];
            let messages = spec["messages"].as_array().unwrap();
            let tools = spec["tools"].as_array().map(|_| &spec["tools"]);
            let kwargs = spec["kwargs"].as_object().cloned().unwrap_or_default();
            // "placed": the request's tools where the template shows them, as tandem serve renders a request.
            let got = if spec["placed"] == true {
                template.render_request(messages, tools, true, &kwargs)
            } else {
                template.render_json(messages, tools, true, &kwargs)
            };
            match want {
                serde_json::Value::String(want) => {
                    let got = got.unwrap_or_else(|e| panic!("{name}/{case}: {e}")).replace(&today, date);
                    assert_eq!(&got, want, "{name}/{case}");
                }
                other => assert!(got.is_err(), "{name}/{case}: jinja2 refused it ({other}), we rendered {got:?}"),
            }
            checked += 1;
        }
    }
    assert!(checked >= 32, "{checked}");
}
