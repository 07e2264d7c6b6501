//! Tokenizers built from the real models' GGUF metadata: ids checked against independent implementations,
//! exact round trips, token bytes, special tokens, streaming.
//!
//! The expected ids came from implementations that share no code with ours: Qwen's from `tiktoken` given the
//! GGUF's ranks and the Qwen2 split regex, Gemma's from Google's `sentencepiece` given a model proto rebuilt
//! from the GGUF's pieces, scores and types (control tokens split out first, as llama.cpp does). Qwen's
//! "Hello world" → [9707, 1879] is also what Hugging Face's Qwen2.5 tokenizer gives.

use std::collections::HashMap;
use std::sync::OnceLock;

use candle_core::quantized::gguf_file::{self, Value};
use rstest::rstest;
use tandem::llm::tokenizer::{GgufTokenizer, TokenStream, TokenizerError, TokenizerKind};

const QWEN: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m";
const GEMMA: &str = "gemma-3-270m-q4_k_m";

fn metadata(id: &str) -> HashMap<String, Value> {
    let mut file = std::fs::File::open(crate::common::real_model(id)).unwrap();
    gguf_file::Content::read(&mut file).unwrap().metadata
}

/// Built once per test process: reading 262k strings of metadata and building the tokenizer take ~1 s each.
fn qwen() -> &'static GgufTokenizer {
    static TOKENIZER: OnceLock<GgufTokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| GgufTokenizer::from_gguf(&metadata(QWEN)).unwrap())
}

fn gemma() -> &'static GgufTokenizer {
    static TOKENIZER: OnceLock<GgufTokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| GgufTokenizer::from_gguf(&metadata(GEMMA)).unwrap())
}

fn by_name(name: &str) -> &'static GgufTokenizer {
    match name {
        "qwen" => qwen(),
        "gemma" => gemma(),
        other => panic!("no tokenizer {other}"),
    }
}

#[rstest]
#[case::qwen_hello("qwen", "Hello world", &[9707, 1879])]
#[case::qwen_eiffel("qwen", "The Eiffel Tower", &[785, 468, 3092, 301, 21938])]
#[case::qwen_whitespace("qwen", "  two  spaces\tand tabs\n\n\nand\r\nCRLF ", &[220, 1378, 220, 12621, 52477, 22398, 1406, 437, 319, 34, 80658, 220])]
#[case::qwen_cjk("qwen", "CJK: 你好，世界。", &[89349, 25, 220, 108386, 3837, 99489, 1773])]
#[case::qwen_emoji("qwen", "emoji: 👍🏽 🦀", &[37523, 25, 61804, 235, 145375, 11162, 99, 222])]
#[case::qwen_contractions("qwen", "I'm sure they'll say it's DONE'S", &[40, 2776, 2704, 807, 3278, 1977, 432, 594, 54685, 13272])]
#[case::qwen_digits_one_by_one("qwen", "12345 3.14", &[16, 17, 18, 19, 20, 220, 18, 13, 16, 19])]
#[case::qwen_code("qwen", "def f(x):\n    return x ** 2\n", &[750, 282, 2075, 982, 262, 470, 856, 3070, 220, 17, 198])]
#[case::qwen_chat_markup("qwen", "<|im_start|>user\nhi<|im_end|>\n", &[151644, 872, 198, 6023, 151645, 198])]
#[case::qwen_im_start("qwen", "<|im_start|>", &[151644])]
#[case::qwen_tool_call("qwen", "<tool_call>\n</tool_call>", &[151657, 198, 151658])]
#[case::gemma_hello("gemma", "Hello world", &[9259, 1902])]
#[case::gemma_eiffel("gemma", "The Eiffel Tower", &[818, 94648, 25822])]
#[case::gemma_whitespace("gemma", "  two  spaces\tand tabs\n\n\nand\r\nCRLF ", &[138, 13498, 138, 35220, 255968, 624, 42364, 109, 624, 251, 107, 6459, 43102, 236743])]
#[case::gemma_cjk("gemma", "CJK: 你好，世界。", &[44248, 236787, 43758, 237389, 236900, 12811, 236924])]
#[case::gemma_emoji("gemma", "emoji: 👍🏽 🦀", &[67906, 236787, 103712, 242713, 236743, 248714])]
#[case::gemma_contractions("gemma", "I'm sure they'll say it's DONE'S", &[236777, 236789, 236757, 2889, 901, 236789, 859, 1879, 625, 236789, 236751, 130215, 236789, 236773])]
#[case::gemma_digits("gemma", "12345 3.14", &[236770, 236778, 236800, 236812, 236810, 236743, 236800, 236761, 236770, 236812])]
#[case::gemma_code("gemma", "def f(x):\n    return x ** 2\n", &[2063, 517, 236769, 236781, 1473, 107, 140, 2060, 1123, 5213, 236743, 236778, 107])]
#[case::gemma_turns("gemma", "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", &[105, 2364, 107, 2202, 106, 107, 105, 4368, 107])]
#[case::gemma_html_tags("gemma", "<table><tr>", &[168, 173])]
fn ids_match_independent_implementations(#[case] model: &str, #[case] text: &str, #[case] expected: &[u32]) {
    let tok = by_name(model);
    assert_eq!(tok.encode(text, false).unwrap(), expected, "{text:?}");
}

const SAMPLES: &[&str] = &[
    "Hello world",
    "  two leading spaces and trailing  ",
    "multiple   spaces    between     words",
    "tabs\tand\nnewlines\n\n\nand\r\nCRLF",
    "\n\n\t leading and trailing whitespace \t\n\n",
    "unicode: café naïve façade — “quotes” ÅÄÖ, decomposed e\u{301}",
    "CJK: 你好，世界。日本語のテキスト 한국어",
    "emoji: 👍🏽 🇫🇷 👨‍👩‍👧 🦀",
    "code: fn main() { println!(\"{}\", 1 + 2); } // done",
    "json: {\"steps\": [{\"id\": \"s1\", \"args\": {\"x\": -1.5e3}}]}",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<start_of_turn>user\nhi<end_of_turn>\n",
    "control chars \u{1}\u{7f} and nbsp\u{a0}here",
    " ",
    "",
];

#[rstest]
fn round_trips_are_exact(#[values("qwen", "gemma")] model: &str) {
    let tok = by_name(model);
    for text in SAMPLES {
        let ids = tok.encode(text, false).unwrap();
        assert_eq!(tok.decode(&ids).unwrap(), *text, "ids {ids:?}");
        let bytes: Vec<u8> = ids.iter().flat_map(|&id| tok.token_bytes(id).unwrap().iter().copied()).collect();
        assert_eq!(bytes, text.as_bytes(), "token bytes of {text:?}");
        assert_eq!(tok.decode_bytes(&ids).unwrap(), text.as_bytes());
    }
}

#[test]
fn qwen_metadata_and_special_tokens() {
    let tok = qwen();
    assert_eq!(tok.kind(), TokenizerKind::Bpe);
    assert_eq!(tok.vocab_size(), 151_936);
    assert_eq!(tok.eos_token(), Some(151_645));
    assert_eq!(tok.bos_token(), Some(151_643));
    assert!(!tok.add_bos_by_default());
    assert_eq!(tok.stop_tokens(), [151_645, 151_643]);
    assert_eq!(tok.token_to_id("<|im_start|>"), Some(151_644));
    assert!(tok.is_special(151_644) && tok.is_control(151_644));
    assert!(tok.is_special(151_657) && !tok.is_control(151_657), "<tool_call> is user-defined");
    assert!(!tok.is_special(9707));
    assert!(tok.is_unused(151_700), "[PAD] rows are unused");
    assert_eq!(tok.token_bytes(151_644).unwrap(), b"<|im_start|>");
    assert_eq!(tok.token_bytes(1879).unwrap(), b" world", "Ġworld is a space and 'world'");
    assert_eq!(tok.token_text(1879), Some("Ġworld"));
    // Asked for explicitly, BOS is prepended even though Qwen does not want it by default.
    assert_eq!(tok.encode("Hello world", true).unwrap(), [151_643, 9707, 1879]);
}

#[test]
fn qwen_never_produces_pad_rows() {
    let tok = qwen();
    assert_eq!(tok.token_to_id("[PAD151700]"), None);
    let ids = tok.encode("[PAD151700] text [PAD151665]", false).unwrap();
    assert!(ids.iter().all(|&id| !tok.is_unused(id)), "{ids:?}");
    assert_eq!(tok.decode(&ids).unwrap(), "[PAD151700] text [PAD151665]");
}

#[test]
fn gemma_metadata_and_special_tokens() {
    let tok = gemma();
    assert_eq!(tok.kind(), TokenizerKind::SentencePiece);
    assert_eq!(tok.vocab_size(), 262_144);
    assert!(tok.add_bos_by_default());
    assert_eq!((tok.bos_token(), tok.eos_token()), (Some(2), Some(1)));
    assert_eq!(tok.stop_tokens(), [1, 106], "<eos> then <end_of_turn>");
    let ids = tok.encode("The Eiffel Tower", true).unwrap();
    assert_eq!(ids, [2, 818, 94648, 25822], "bos first");
    assert_eq!(tok.decode(&ids).unwrap(), "<bos>The Eiffel Tower");
    assert_eq!(tok.decode(&ids[1..]).unwrap(), "The Eiffel Tower");
    // A prompt rendered by Gemma's chat template already starts with <bos>: not doubled.
    assert_eq!(tok.encode("<bos>Hi", true).unwrap(), tok.encode("<bos>Hi", false).unwrap());
    assert_eq!(tok.encode("<bos>Hi", false).unwrap()[0], 2);
    assert_eq!(tok.encode("<start_of_turn>", false).unwrap(), [105]);
    assert!(tok.is_control(105) && tok.is_control(106));
    assert_eq!(tok.token_bytes(94648).unwrap(), b" Eiffel", "▁ is a space");
    assert_eq!(tok.token_bytes(tok.token_to_id("<0xF0>").unwrap()).unwrap(), [0xF0], "byte tokens are their byte");
    assert!(tok.is_special(107) && !tok.is_control(107), "Gemma's newline is a user-defined token");
    assert_eq!(tok.token_bytes(107).unwrap(), b"\n");
}

#[test]
fn gemma_falls_back_to_bytes_for_characters_outside_the_vocabulary() {
    let tok = gemma();
    // U+10FFFD (private use plane 16) is surely not a piece: four byte tokens.
    let ids = tok.encode("\u{10FFFD}", false).unwrap();
    let expected: Vec<u32> = "\u{10FFFD}".bytes().map(|b| tok.token_to_id(&format!("<0x{b:02X}>")).unwrap()).collect();
    assert_eq!(ids, expected);
    assert_eq!(tok.decode(&ids).unwrap(), "\u{10FFFD}");
}

#[rstest]
fn streaming_yields_what_decode_yields(#[values("qwen", "gemma")] model: &str) {
    let tok = by_name(model);
    let text = "emoji 👨‍👩‍👧 🦀 and 日本語 end\u{10FFFD}";
    let ids = tok.encode(text, false).unwrap();
    let mut stream = TokenStream::new(tok);
    let mut out = String::new();
    for &id in &ids {
        if let Some(piece) = stream.push(id).unwrap() {
            assert!(!piece.contains('\u{FFFD}'), "emitted a partial character: {piece:?}");
            out.push_str(&piece);
        }
    }
    out.push_str(&stream.finish().unwrap().unwrap_or_default());
    assert_eq!(out, tok.decode(&ids).unwrap());
    assert_eq!(out, text);
}

#[test]
fn streaming_holds_back_a_crab_split_over_byte_tokens() {
    let tok = qwen();
    // Alone the crab is one token; after a space it takes three: " \xF0\x9F", "\xA6", "\x80".
    assert_eq!(tok.encode("🦀", false).unwrap().len(), 1);
    let ids = tok.encode(" 🦀", false).unwrap();
    assert_eq!(ids, [11162, 99, 222]);
    assert_eq!(tok.token_bytes(ids[0]).unwrap(), b" \xF0\x9F");
    let mut stream = TokenStream::new(tok);
    assert_eq!(stream.push(ids[0]).unwrap().as_deref(), Some(" "), "the space is complete, the crab is not");
    assert_eq!(stream.push(ids[1]).unwrap(), None);
    assert_eq!(stream.push(ids[2]).unwrap().as_deref(), Some("🦀"));
    assert_eq!(stream.finish().unwrap(), None);
    // Cut short, the remainder comes out as a replacement character rather than vanishing.
    let mut stream = TokenStream::new(tok);
    assert_eq!(stream.push(ids[0]).unwrap().as_deref(), Some(" "));
    assert_eq!(stream.finish().unwrap().as_deref(), Some("\u{FFFD}"));
}

#[rstest]
fn ids_past_the_vocabulary_are_errors(#[values("qwen", "gemma")] model: &str) {
    let tok = by_name(model);
    let past = tok.vocab_size() as u32;
    assert!(matches!(tok.decode(&[past]), Err(TokenizerError::UnknownId { id, .. }) if id == past));
    assert_eq!(tok.token_bytes(past), None);
    let mut stream = TokenStream::new(tok);
    assert!(stream.push(past).is_err());
}

#[test]
fn qwen_1_5b_shares_the_vocabulary() {
    let tok = GgufTokenizer::from_gguf(&metadata("qwen2.5-coder-1.5b-instruct-q4_k_m")).unwrap();
    assert_eq!(tok.vocab_size(), qwen().vocab_size());
    for text in SAMPLES {
        assert_eq!(tok.encode(text, false).unwrap(), qwen().encode(text, false).unwrap());
    }
}
