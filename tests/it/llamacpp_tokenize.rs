//! Our tokenizers against llama.cpp's on the same files: `llama-tokenize` (built by scripts/build-llama-tokenize.sh)
//! reads each real model's vocabulary and tokenizes the same texts (special tokens parsed, BOS as the file asks),
//! and every id sequence must be ours. The texts are the hard cases for pre-tokenizers and SentencePiece (digit
//! runs, contractions in both cases, newline and space runs, CRLF, accents, CJK, emoji, code) and each model's
//! chat template rendered over a conversation, so the prompts the agent sends are covered too.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use candle_core::quantized::gguf_file::{self, Value};
use rstest::rstest;
use tandem::llm::chat::{ChatMessage, ChatTemplate};
use tandem::llm::tokenizer::GgufTokenizer;

const TEXTS: &[&str] = &[
    "Hello world",
    "I'm sure they'll say it's DONE'S, WE'VE, you'D",
    "12345 3.14159 1,000,000 2024-01-31 x2y 0x1F",
    "  two leading spaces, trailing  ",
    "multiple   spaces    between     words",
    "tabs\tand\nnewlines\n\n\nand\r\nCRLF\r\n\r\n",
    "\n\n\t leading and trailing whitespace \t\n\n",
    "café naïve façade — “quotes” ÅÄÖ, decomposed e\u{301}, ǅ Σίσυφος",
    "CJK: 你好，世界。日本語のテキスト 한국어",
    "emoji: 👍🏽 🇫🇷 👨‍👩‍👧 🦀",
    "helloWorld HTTPServer getHTTPResponseCode snake_case",
    "def f(x):\n    return x ** 2  # square\n\n\nclass A:\n\tpass\n",
    "json: {\"steps\": [{\"id\": \"s1\", \"args\": {\"x\": -1.5e3, \"path\": \"/tmp/a b\"}}]}",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "punctuation!!! ... ?! (a) [b] {c} <d> a/b//c \\ | ~ ^ $5 + 3 = 8 % @ #",
    "control chars \u{1}\u{7f} and nbsp\u{a0}here",
    " ",
    "a",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// llama.cpp's `llama-tokenize`, at the fixed path scripts/build-llama-tokenize.sh builds it to (whatever
/// CARGO_TARGET_DIR says).
fn llama_tokenize() -> PathBuf {
    let path = root().join("target/llama.cpp/build/bin/llama-tokenize");
    assert!(
        path.is_file(),
        "llama.cpp's tokenizer {} is missing: run scripts/build-llama-tokenize.sh (builds it from the \
         llama-cpp-python source package, in the tree scripts/build-llama-bench.sh uses)",
        path.display()
    );
    path
}

/// The ids llama.cpp gives `text` (special tokens parsed, BOS if the file asks for it and `no_bos` is false).
fn llama_ids(binary: &Path, model: &Path, text: &str, scratch: &Path, no_bos: bool) -> Vec<u32> {
    let file = scratch.join("prompt.txt");
    std::fs::write(&file, text).unwrap();
    let output = Command::new(binary)
        .arg("-m")
        .arg(model)
        .arg("-f")
        .arg(&file)
        .args(["--ids", "--no-escape", "--log-disable"])
        .args(no_bos.then_some("--no-bos"))
        .output()
        .unwrap_or_else(|e| panic!("could not run {}: {e}", binary.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "llama-tokenize failed on {text:?}: {}", String::from_utf8_lossy(&output.stderr));
    let line = stdout.lines().rev().find(|l| l.starts_with('[')).unwrap_or_else(|| panic!("no ids in {stdout:?}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("ids {line:?}: {e}"))
}

fn metadata(path: &Path) -> HashMap<String, Value> {
    let mut file = std::fs::File::open(path).unwrap();
    gguf_file::Content::read(&mut file).unwrap().metadata
}

#[rstest]
#[case::smollm2_smollm_pre("smollm2-135m-instruct-q4_1", "smollm")]
#[case::qwen_qwen2_pre("qwen2.5-coder-0.5b-instruct-q4_k_m", "qwen2")]
#[case::gemma_sentencepiece("gemma-3-270m-q4_k_m", "default")]
fn ids_match_llama_cpp(#[case] id: &str, #[case] pre: &str) {
    let binary = llama_tokenize();
    let model = crate::common::real_model(id);
    let md = metadata(&model);
    let file_pre = match md.get("tokenizer.ggml.pre") {
        Some(Value::String(p)) => p.as_str(),
        _ => "",
    };
    assert_eq!(file_pre, pre, "{id}: the pre-tokenizer this case is meant to cover");
    let tok = GgufTokenizer::from_gguf(&md).unwrap();
    let architecture = match md.get("general.architecture") {
        Some(Value::String(a)) => a.clone(),
        _ => panic!("{id}: no architecture"),
    };
    let template = ChatTemplate::from_gguf(&md, &architecture).unwrap().expect("a chat template");
    let conversation = [
        ChatMessage::system("You call tools. Answer with JSON."),
        ChatMessage::user("What's 12 * 345? Use the calculator."),
        ChatMessage::assistant("{\"name\": \"calculator\", \"arguments\": {\"expression\": \"12 * 345\"}}"),
        ChatMessage::user("Thanks!\nNow 6/7, please."),
    ];
    let chat = template.render(&conversation, None, true).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut texts: Vec<&str> = TEXTS.to_vec();
    texts.push(&chat);
    let mut mismatches = Vec::new();
    for text in texts {
        let ours = tok.encode(text, tok.add_bos_by_default()).unwrap();
        // A text that starts with the BOS text (Gemma's template writes `<bos>`) gets no second BOS from us, by
        // design; llama.cpp adds one (and warns), so it is asked not to.
        let bos_written = tok.bos_token().and_then(|b| tok.token_text(b)).is_some_and(|b| text.starts_with(b));
        let theirs = llama_ids(&binary, &model, text, scratch.path(), bos_written);
        if ours != theirs {
            mismatches.push(format!("{text:?}\n  ours:      {ours:?}\n  llama.cpp: {theirs:?}"));
        }
    }
    assert!(mismatches.is_empty(), "{id}: {} texts differ:\n{}", mismatches.len(), mismatches.join("\n"));
}

/// SentencePiece with the space prefix on (Llama 2, Mistral 7B, TinyLlama, Phi-3: files without
/// `tokenizer.ggml.add_space_prefix`): Gemma's real vocabulary written into a vocabulary-only file without that key,
/// so llama.cpp and we both fall back to prefixing, at the start and again after every special token.
#[test]
fn sentencepiece_space_prefix_matches_llama_cpp() {
    let binary = llama_tokenize();
    let mut md = metadata(&crate::common::real_model("gemma-3-270m-q4_k_m"));
    assert!(md.remove("tokenizer.ggml.add_space_prefix").is_some(), "Gemma's file sets the key; this drops it");
    md.remove("tokenizer.chat_template");
    let scratch = tempfile::tempdir().unwrap();
    let model = scratch.path().join("spm-prefix.gguf");
    let entries: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut out = std::io::BufWriter::new(std::fs::File::create(&model).unwrap());
    gguf_file::write(&mut out, &entries, &[]).unwrap();
    drop(out);
    let tok = GgufTokenizer::from_gguf(&md).unwrap();
    let texts = [
        "Hello world",
        " leading space",
        "<start_of_turn>user\nhi there<end_of_turn>\n<start_of_turn>model\n",
        "a<end_of_turn>b  c",
        "12345 café 你好\n\n\tend",
    ];
    for text in texts {
        let ours = tok.encode(text, tok.add_bos_by_default()).unwrap();
        let theirs = llama_ids(&binary, &model, text, scratch.path(), false);
        assert_eq!(ours, theirs, "{text:?}");
    }
    assert_eq!(tok.encode("Hello", false).unwrap(), [tok.token_to_id("▁Hello").unwrap()], "prefixed");
}
