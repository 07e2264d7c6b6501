//! Tokenizers built from the real models' GGUF metadata: known ids, exact round trips, token bytes, streaming.

mod common;

use std::collections::HashMap;

use candle_core::quantized::gguf_file::{self, Value};
use rstest::rstest;
use tandem::llm::tokenizer::{GgufTokenizer, TokenStream, TokenizerKind};
use tandem::llm::ChatTemplate;

fn metadata(id: &str) -> HashMap<String, Value> {
    let mut file = std::fs::File::open(common::real_model(id)).unwrap();
    gguf_file::Content::read(&mut file).unwrap().metadata
}

fn qwen() -> GgufTokenizer {
    GgufTokenizer::from_gguf(&metadata("qwen2.5-coder-0.5b-instruct-q4_k_m")).unwrap()
}

fn gemma() -> GgufTokenizer {
    GgufTokenizer::from_gguf(&metadata("gemma-3-270m-q4_k_m")).unwrap()
}

const SAMPLES: &[&str] = &[
    "Hello world",
    "  two leading spaces and trailing  ",
    "tabs\tand\nnewlines\n\n\nand\r\nCRLF",
    "unicode: café naïve façade — “quotes” ÅÄÖ",
    "CJK: 你好，世界。日本語のテキスト",
    "emoji: 👍🏽 🇫🇷 👨‍👩‍👧 🦀",
    "code: fn main() { println!(\"{}\", 1 + 2); } // done",
    "json: {\"steps\": [{\"id\": \"s1\", \"args\": {\"x\": -1.5e3}}]}",
    "<|im_start|>user\nhi<|im_end|>\n",
    "",
];

#[rstest]
#[case::qwen(qwen())]
#[case::gemma(gemma())]
fn round_trips_are_exact(#[case] tok: GgufTokenizer) {
    for text in SAMPLES {
        let ids = tok.encode(text, false).unwrap();
        assert_eq!(tok.decode(&ids).unwrap(), *text, "ids {ids:?}");
        let bytes: Vec<u8> = ids.iter().flat_map(|&id| tok.token_bytes(id).unwrap()).collect();
        assert_eq!(bytes, text.as_bytes());
    }
}

#[test]
fn qwen_ids_match_the_reference_tokenizer() {
    let tok = qwen();
    assert_eq!(tok.kind(), TokenizerKind::Bpe);
    assert_eq!(tok.vocab_size(), 151_936);
    assert_eq!(tok.encode("Hello world", false).unwrap(), [9707, 1879]);
    assert_eq!(tok.encode("<|im_start|>", false).unwrap(), [151644]);
    assert_eq!(tok.encode("<|im_start|>user", false).unwrap(), [151644, 872]);
    assert_eq!(tok.eos_token(), Some(151645));
    assert!(tok.stop_tokens().contains(&151645) && tok.stop_tokens().contains(&151643));
    assert!(tok.is_unused(151_700), "[PAD] rows are unused");
    assert!(!tok.add_bos_by_default());
}

#[test]
fn qwen_never_produces_pad_rows() {
    let tok = qwen();
    let ids = tok.encode("[PAD151700] text", false).unwrap();
    assert!(ids.iter().all(|&id| !tok.is_unused(id)), "{ids:?}");
}

#[test]
fn gemma_uses_sentencepiece_with_bos() {
    let tok = gemma();
    assert_eq!(tok.kind(), TokenizerKind::SentencePiece);
    assert!(tok.add_bos_by_default());
    let ids = tok.encode("The Eiffel Tower", true).unwrap();
    assert_eq!(ids[0], 2, "bos first");
    assert!(ids.len() <= 6, "merges should give few tokens: {ids:?}");
    assert_eq!(tok.decode(&ids[1..]).unwrap(), "The Eiffel Tower");
    let turn = tok.encode("<start_of_turn>", false).unwrap();
    assert_eq!(turn.len(), 1);
    assert!(tok.stop_tokens().contains(&tok.token_to_id("<end_of_turn>").unwrap()));
}

#[rstest]
#[case::qwen(qwen())]
#[case::gemma(gemma())]
fn streaming_holds_back_split_characters(#[case] tok: GgufTokenizer) {
    let text = "emoji 👨‍👩‍👧 and 日本語 end";
    let ids = tok.encode(text, false).unwrap();
    let mut stream = TokenStream::new(&tok);
    let mut out = String::new();
    for &id in &ids {
        if let Some(piece) = stream.push(id).unwrap() {
            assert!(!piece.contains('\u{FFFD}'), "emitted a partial character: {piece:?}");
            out.push_str(&piece);
        }
    }
    out.push_str(&stream.finish().unwrap().unwrap_or_default());
    assert_eq!(out, text);
}

#[test]
fn qwen_chat_template_renders_the_reference_layout() {
    let md = metadata("qwen2.5-coder-0.5b-instruct-q4_k_m");
    let template = ChatTemplate::from_gguf(&md, "qwen2").unwrap().unwrap();
    use tandem::llm::ChatMessage;
    let out = template.render(&[ChatMessage::system("SYS"), ChatMessage::user("Hi")], None, true).unwrap();
    assert_eq!(out, "<|im_start|>system\nSYS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    let default = template.render(&[ChatMessage::user("Hi")], None, true).unwrap();
    assert!(default.starts_with("<|im_start|>system\nYou are Qwen"), "{default}");
    let tools = serde_json::json!([{"type": "function", "function": {"name": "calculator", "description": "math",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}]);
    let with_tools = template.render(&[ChatMessage::user("Hi")], Some(&tools), true).unwrap();
    assert!(with_tools.contains("<tools>") && with_tools.contains("\"calculator\""), "{with_tools}");
}
