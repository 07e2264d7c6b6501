//! Each model family's tool-call format both ways: text written in the format is what the grammar built for that
//! format accepts (token by token, through llguidance over a byte-level vocabulary holding the family's markers,
//! as control tokens or as plain text), and what the streaming splitter and `CallFormat::parse` read back from it
//! is the same calls. Text in another family's format is refused.

use std::collections::HashMap;
use std::sync::Arc;

use candle_core::quantized::gguf_file::Value as GgufValue;
use serde_json::{json, Value};

use crate::decode::constraint::GrammarEngine;
use crate::llm::chat::{CallFormat, CallSyntax};
use crate::llm::tokenizer::{gpt2_byte_to_char, GgufTokenizer};
use crate::serve::openai::grammar::{call_openings, constraint, ToolCall};
use crate::serve::openai::output::{OutputSplitter, Piece};
use crate::serve::openai::request::{parse, ChatRequest};

/// Every family's markers and end-of-turn tokens.
const MARKERS: [&str; 6] =
    ["<tool_call>", "</tool_call>", "<|python_tag|>", "[TOOL_CALLS]", "<|tool_call|>", "<|/tool_call|>"];

/// The 256 byte tokens (id = byte), then the markers (control tokens when `control`, else user-defined as
/// Qwen's `<tool_call>` is), then `<|eot_id|>` as end of sequence.
fn tokenizer(control: bool) -> Arc<GgufTokenizer> {
    let mut tokens: Vec<String> = gpt2_byte_to_char().iter().map(|c| c.to_string()).collect();
    let mut types = vec![1i32; tokens.len()];
    for marker in MARKERS {
        tokens.push(marker.to_string());
        types.push(if control { 3 } else { 4 });
    }
    tokens.push("<|eot_id|>".to_string());
    types.push(3);
    let eos = tokens.len() as u32 - 1;
    let strings = |items: &[String]| GgufValue::Array(items.iter().map(|s| GgufValue::String(s.clone())).collect());
    let md = HashMap::from([
        ("tokenizer.ggml.model".to_string(), GgufValue::String("gpt2".into())),
        ("tokenizer.ggml.pre".to_string(), GgufValue::String("llama-bpe".into())),
        ("tokenizer.ggml.tokens".to_string(), strings(&tokens)),
        ("tokenizer.ggml.token_type".to_string(), GgufValue::Array(types.into_iter().map(GgufValue::I32).collect())),
        ("tokenizer.ggml.merges".to_string(), strings(&[])),
        ("tokenizer.ggml.eos_token_id".to_string(), GgufValue::U32(eos)),
    ]);
    Arc::new(GgufTokenizer::from_gguf(&md).unwrap())
}

fn request(tool_choice: Value, parallel: bool) -> ChatRequest {
    let tools = json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}
    ]);
    parse(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools,
        "tool_choice": tool_choice, "parallel_tool_calls": parallel}))
    .unwrap()
}

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall { name: name.into(), arguments: arguments.into() }
}

/// Whether the grammar for `request` in `syntax` takes `ids` whole (each token, then an accepting end).
fn accepts(tok: &Arc<GgufTokenizer>, syntax: &CallSyntax, request: &ChatRequest, ids: &[u32]) -> bool {
    let spec = constraint(request, syntax).expect("tools make a grammar");
    let engine = GrammarEngine::new(tok.clone(), tok.vocab_size()).unwrap();
    let mut matcher = engine.matcher(&spec).unwrap();
    ids.iter().all(|&id| matcher.commit(id).is_ok()) && matcher.is_accepting()
}

/// The calls the splitter sends for `text` streamed in pieces of `size` characters; also checks that the parts
/// of each call add up to it.
fn streamed(request: &ChatRequest, syntax: &CallSyntax, text: &str, size: usize) -> Vec<ToolCall> {
    let mut splitter = OutputSplitter::new(Vec::new(), call_openings(request, syntax));
    let chars: Vec<char> = text.chars().collect();
    let mut pieces: Vec<Piece> =
        chars.chunks(size).flat_map(|c| splitter.push(&c.iter().collect::<String>())).collect();
    pieces.extend(splitter.finish());
    assert!(splitter.is_calls(), "{text:?} is calls");
    let mut assembled: Vec<ToolCall> = Vec::new();
    let mut ended = Vec::new();
    for piece in pieces {
        match piece {
            Piece::CallBegin(name) => assembled.push(call(&name, "")),
            Piece::CallArguments(part) => assembled.last_mut().unwrap().arguments.push_str(&part),
            Piece::CallEnd(call) => ended.push(call),
            Piece::Text(text) => panic!("text {text:?} in calls"),
        }
    }
    assert_eq!(assembled, ended, "the streamed parts add up to the calls");
    ended
}

/// The text each family writes for a weather call and an addition, in one turn.
fn written(format: CallFormat) -> &'static str {
    match format {
        CallFormat::Hermes => {
            "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>\n\
             <tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":2,\"b\":3}}\n</tool_call>"
        }
        CallFormat::Llama3 => "<|python_tag|>{\"name\":\"get_weather\",\"parameters\":{\"city\":\"Paris\"}}",
        CallFormat::Mistral => {
            "[TOOL_CALLS][{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}, \
             {\"name\":\"add\",\"arguments\":{\"a\":2,\"b\":3}}]"
        }
        CallFormat::Phi4 => {
            "<|tool_call|>[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}, \
             {\"name\":\"add\",\"arguments\":{\"a\":2,\"b\":3}}]<|/tool_call|>"
        }
    }
}

const FORMATS: [CallFormat; 4] = [CallFormat::Hermes, CallFormat::Llama3, CallFormat::Mistral, CallFormat::Phi4];

#[test]
fn each_format_is_written_under_its_grammar_and_read_back_as_the_same_calls() {
    for control in [true, false] {
        let tok = tokenizer(control);
        for format in FORMATS {
            let syntax = CallSyntax::new(format, &tok);
            assert_eq!(syntax.open.token.is_some(), control, "{format:?}: the marker's token is found");
            let text = written(format);
            let expected = if format == CallFormat::Llama3 {
                vec![call("get_weather", r#"{"city":"Paris"}"#)]
            } else {
                vec![call("get_weather", r#"{"city":"Paris"}"#), call("add", r#"{"a":2,"b":3}"#)]
            };
            let ids = tok.encode(text, false).unwrap();
            assert_eq!(ids.iter().any(|&id| tok.is_control(id)), control, "{format:?}: markers as tokens or text");
            for choice in [json!("required"), json!("auto")] {
                let req = request(choice.clone(), true);
                assert!(accepts(&tok, &syntax, &req, &ids), "{format:?} (control {control}, {choice}) takes {text:?}");
                for size in [1, 3, 7] {
                    assert_eq!(streamed(&req, &syntax, text, size), expected, "{format:?} in pieces of {size}");
                }
            }
            assert_eq!(format.parse(text), (String::new(), expected.clone()), "{format:?} parses its own text");
            // Any other family's text is refused by this family's grammar.
            for other in FORMATS.into_iter().filter(|&o| o != format) {
                let ids = tok.encode(written(other), false).unwrap();
                let req = request(json!("required"), true);
                assert!(!accepts(&tok, &syntax, &req, &ids), "{format:?}'s grammar refuses {other:?}'s text");
            }
        }
    }
}

#[test]
fn bare_calls_use_each_formats_arguments_key() {
    let tok = tokenizer(true);
    let req = request(json!("required"), false);
    let llama = CallSyntax::new(CallFormat::Llama3, &tok);
    let text = "{\"name\":\"add\",\"parameters\":{\"a\":1,\"b\":2}}";
    assert!(accepts(&tok, &llama, &req, &tok.encode(text, false).unwrap()), "Llama 3's bare JSON call");
    assert_eq!(streamed(&req, &llama, text, 2), [call("add", r#"{"a":1,"b":2}"#)]);
    assert_eq!(CallFormat::Llama3.parse(text).1, [call("add", r#"{"a":1,"b":2}"#)]);
    let hermes = CallSyntax::new(CallFormat::Hermes, &tok);
    assert!(!accepts(&tok, &hermes, &req, &tok.encode(text, false).unwrap()), "Hermes calls take `arguments`");
    // Not parallel: one call only.
    let two = format!("{text}\n{text}");
    assert!(!accepts(&tok, &llama, &req, &tok.encode(&two, false).unwrap()));
}

#[test]
fn plain_text_never_forges_a_control_marker_and_text_answers_never_hold_a_text_one() {
    let req = request(json!("auto"), true);
    let required = request(json!("required"), true);
    let control = tokenizer(true);
    for format in [CallFormat::Llama3, CallFormat::Mistral, CallFormat::Phi4] {
        let syntax = CallSyntax::new(format, &control);
        // The marker spelled out in byte tokens is text, not the marker: where a call must be written, refused.
        let spelled: Vec<u32> = written(format).bytes().map(u32::from).collect();
        assert!(!accepts(&control, &syntax, &required, &spelled), "{format:?}: the marker's bytes are not its token");
        // A text answer is still text, and may even mention the marker's text.
        let mention: Vec<u32> = format!("I will use {} next.", format.open()).bytes().map(u32::from).collect();
        assert!(accepts(&control, &syntax, &req, &mention), "{format:?}: text naming the marker");
    }
    let text = tokenizer(false);
    let syntax = CallSyntax::new(CallFormat::Mistral, &text);
    let mention = text.encode("I will use [TOOL_CALLS] next.", false).unwrap();
    assert!(!accepts(&text, &syntax, &req, &mention), "a text marker inside an answer would read as calls");
}

/// `n` weather calls as `format` writes them in one turn (Llama 3 bare, one a line: its marker holds one call).
fn weather_calls(format: CallFormat, n: usize) -> String {
    let cities = ["Paris", "Oslo", "Rome", "Lima"];
    let key = format.arguments_key();
    let bodies: Vec<String> =
        cities[..n].iter().map(|c| format!("{{\"name\":\"get_weather\",\"{key}\":{{\"city\":\"{c}\"}}}}")).collect();
    match format {
        CallFormat::Hermes => {
            bodies.iter().map(|b| format!("<tool_call>\n{b}\n</tool_call>")).collect::<Vec<_>>().join("\n")
        }
        CallFormat::Llama3 => bodies.join("\n"),
        CallFormat::Mistral => format!("[TOOL_CALLS][{}]", bodies.join(", ")),
        CallFormat::Phi4 => format!("<|tool_call|>[{}]<|/tool_call|>", bodies.join(", ")),
    }
}

#[test]
fn a_listed_count_makes_each_format_take_exactly_that_many_calls() {
    for control in [true, false] {
        let tok = tokenizer(control);
        for format in FORMATS {
            let syntax = CallSyntax::new(format, &tok);
            for choice in [json!("required"), json!("auto")] {
                let mut req = request(choice.clone(), true);
                // As listed: any number of calls is taken.
                for n in 1..=3 {
                    let ids = tok.encode(&weather_calls(format, n), false).unwrap();
                    assert!(accepts(&tok, &syntax, &req, &ids), "{format:?} {choice}: {n} calls with no count");
                }
                for exact in [2, 3] {
                    req.exact_calls = Some(exact);
                    for n in 1..=4 {
                        let text = weather_calls(format, n);
                        let ids = tok.encode(&text, false).unwrap();
                        let taken = accepts(&tok, &syntax, &req, &ids);
                        assert_eq!(
                            taken,
                            n == exact,
                            "{format:?} (control {control}, {choice}, exactly {exact}): {text:?}"
                        );
                        if taken {
                            assert_eq!(streamed(&req, &syntax, &text, 3).len(), exact, "{format:?}: read back");
                        }
                    }
                    // Bare JSON, one call a line, is held to the count too.
                    let key = format.arguments_key();
                    let bare =
                        |n: usize| vec![format!("{{\"name\":\"add\",\"{key}\":{{\"a\":1,\"b\":2}}}}"); n].join("\n");
                    assert!(accepts(&tok, &syntax, &req, &tok.encode(&bare(exact), false).unwrap()), "{format:?}");
                    assert!(!accepts(&tok, &syntax, &req, &tok.encode(&bare(1), false).unwrap()), "{format:?}");
                }
                // A count of one is today's grammar: any number.
                req.exact_calls = Some(1);
                let ids = tok.encode(&weather_calls(format, 2), false).unwrap();
                assert!(accepts(&tok, &syntax, &req, &ids), "{format:?}: a count of one fixes nothing");
            }
            // Under `auto` a text answer is still an answer.
            let mut req = request(json!("auto"), true);
            req.exact_calls = Some(2);
            let ids = tok.encode("It is sunny in both.", false).unwrap();
            assert!(accepts(&tok, &syntax, &req, &ids), "{format:?}: text under auto with a count");
        }
    }
}
