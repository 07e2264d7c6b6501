//! Byte-level BPE pre-tokenizers by their `tokenizer.ggml.pre` name: the split regexes llama.cpp applies for each
//! name (src/llama-vocab.cpp), in its order, and the two settings that come with the name there (whether a whole
//! word found in the vocabulary skips the merges, and whether BOS is added when the file does not say).
//!
//! Each regex of a list splits every piece the previous ones left, keeping both the matches and the text between
//! them, which is what a `Sequence` of `Split` pre-tokenizers with `Isolated` behaviour does in the `tokenizers`
//! crate. The regexes are llama.cpp's adapted forms where it adapted one (e.g. `'[sS]` for `(?i:'s)`, and
//! `(?=\p{L})[^a-z]` for "a letter that is not a lower-case ASCII letter" in GPT-4o's), so the splits are
//! llama.cpp's rather than the original tokenizer's where the two differ. A name not listed here is refused.

/// GPT-2's split (`gpt-2`, and the middle step of `default` and `smollm`).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
/// Llama 3's (GPT-4's cl100k): contractions, letters with one leading non-letter, digits in runs of up to three.
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's (also Qwen3's): Llama 3's with single digits.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen3.5's: Qwen2's with combining marks kept on their letters.
const QWEN35: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// GPT-4o's (o200k; Phi-4, Llama 4): words split before an upper-case run, contractions kept on the word, digits in
/// threes, `/` kept on a punctuation run.
const GPT4O: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Mistral's Tekken (Nemo and later): GPT-4o's without contractions, single digits.
const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// What a pre-tokenizer name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreTokenizer {
    /// The name as llama.cpp spells it (the first of its aliases).
    pub name: &'static str,
    /// The split regexes, applied in order.
    pub regexes: &'static [&'static str],
    /// A word that is itself a token is that token, without running the merges (llama.cpp's `ignore_merges`).
    pub ignore_merges: bool,
    /// Whether BOS is added when `tokenizer.ggml.add_bos_token` is absent.
    pub add_bos: bool,
}

/// Every name we accept, with its aliases; the first alias is the display name.
const TABLE: &[(&[&str], &[&str], bool, bool)] = &[
    // (names, regexes, ignore_merges, add_bos)
    (&["llama3", "llama-bpe", "llama-v3", "falcon3", "pixtral"], &[LLAMA3], true, true),
    (&["dbrx", "smaug-bpe"], &[LLAMA3], false, false),
    (&["qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"], &[QWEN2], false, false),
    (&["qwen35"], &[QWEN35], false, false),
    (
        &["smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"],
        &[r"\p{N}", GPT2],
        false,
        false,
    ),
    (&["gpt-4o", "llama4"], &[GPT4O], false, false),
    (&["tekken"], &[TEKKEN], true, true),
    (&["gpt-2", "phi-2", "mpt", "olmo"], &[GPT2], false, false),
    (&["default"], &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"], false, false),
];

impl PreTokenizer {
    /// The pre-tokenizer called `name` in `tokenizer.ggml.pre`; `None` when we do not know it. A file without the
    /// key gets `default`, as in llama.cpp (which warns that such a file tokenizes badly).
    pub fn by_name(name: &str) -> Option<Self> {
        TABLE.iter().find(|(names, ..)| names.contains(&name)).map(|&(names, regexes, ignore_merges, add_bos)| Self {
            name: names[0],
            regexes,
            ignore_merges,
            add_bos,
        })
    }

    /// The names we accept, for error messages.
    pub fn supported() -> String {
        TABLE.iter().flat_map(|(names, ..)| names.iter().copied()).collect::<Vec<_>>().join(", ")
    }

    /// The `tokenizers` pre-tokenizer: each regex as an isolating `Split`, then the GPT-2 byte-to-character map (its
    /// own regex off).
    pub fn spec(&self) -> serde_json::Value {
        let mut steps: Vec<serde_json::Value> = self
            .regexes
            .iter()
            .map(|regex| {
                serde_json::json!({"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false})
            })
            .collect();
        steps.push(serde_json::json!({
            "type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false
        }));
        serde_json::json!({"type": "Sequence", "pretokenizers": steps})
    }
}

#[cfg(test)]
mod tests {
    use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer as _, PreTokenizerWrapper};

    use super::PreTokenizer;

    /// The pieces `name` splits `text` into, as text (before the byte-to-character map).
    fn split(name: &str, text: &str) -> Vec<String> {
        let pre = PreTokenizer::by_name(name).unwrap();
        let mut spec = pre.spec();
        spec["pretokenizers"].as_array_mut().unwrap().pop(); // keep the pieces readable: no ByteLevel
        let wrapper: PreTokenizerWrapper = serde_json::from_value(spec).unwrap();
        let mut pieces = PreTokenizedString::from(text);
        wrapper.pre_tokenize(&mut pieces).unwrap();
        pieces
            .get_splits(OffsetReferential::Original, OffsetType::Char)
            .into_iter()
            .map(|(piece, _, _)| piece.to_string())
            .collect()
    }

    fn check(name: &str, text: &str, expected: &[&str]) {
        let got = split(name, text);
        assert_eq!(got, expected, "{name} on {text:?}");
        assert_eq!(got.concat(), text, "pieces cover the text");
    }

    // Expected splits were worked out by hand from each name's regex list in llama.cpp's src/llama-vocab.cpp.

    #[test]
    fn llama3_groups_digits_by_three_and_keeps_newline_runs() {
        check("llama-bpe", "I'm 1234567 DONE'S", &["I", "'m", " ", "123", "456", "7", " DONE", "'S"]);
        check("llama3", "a\n\n  b", &["a", "\n\n", " ", " b"]);
        check("llama3", "x = (1+2);\n", &["x", " =", " (", "1", "+", "2", ");\n"]);
        check("llama3", "héllo wörld  ", &["héllo", " wörld", "  "]);
        check("llama3", "你好，世界", &["你好", "，世界"]);
    }

    #[test]
    fn qwen2_splits_every_digit() {
        check("qwen2", "I'm 1234 DONE'S", &["I", "'m", " ", "1", "2", "3", "4", " DONE", "'S"]);
        check("qwen2", "\tdef f():\r\n    return", &["\tdef", " f", "():\r\n", "   ", " return"]);
    }

    #[test]
    fn smollm_isolates_digits_first_then_splits_like_gpt2() {
        check("smollm", "I'm 1234 x2y", &["I", "'m", " ", "1", "2", "3", "4", " x", "2", "y"]);
        // GPT-2's split: contractions only in lower case, a space joins the next word, punctuation runs together.
        check("smollm", "IT'S ok!!\n\nyes", &["IT", "'", "S", " ok", "!!", "\n", "\n", "yes"]);
        check("smollm", "a   b", &["a", "  ", " b"]);
    }

    #[test]
    fn gpt4o_splits_before_capitals_and_keeps_contractions_on_words() {
        check("gpt-4o", "helloWorld HTTPServer", &["hello", "World", " HTTPServer"]);
        check("gpt-4o", "they'll DON'T 12345", &["they'll", " DON'T", " ", "123", "45"]);
        check("gpt-4o", "a/b//\n c", &["a", "/b", "//\n", " c"]);
    }

    #[test]
    fn dbrx_splits_as_llama3_but_runs_the_merges() {
        for name in ["dbrx", "smaug-bpe"] {
            check(name, "I'm 1234567 DONE'S", &["I", "'m", " ", "123", "456", "7", " DONE", "'S"]);
            check(name, "a\n\n  b", &["a", "\n\n", " ", " b"]);
            let pre = PreTokenizer::by_name(name).unwrap();
            assert_eq!((pre.name, pre.ignore_merges), ("dbrx", false), "{name}");
        }
    }

    #[test]
    fn qwen35_splits_every_digit_and_keeps_combining_marks_on_their_letter() {
        // "nai\u{308}ve cafe\u{301}": the diaeresis and the acute are combining marks, not letters.
        check("qwen35", "nai\u{308}ve cafe\u{301} 42", &["nai\u{308}ve", " cafe\u{301}", " ", "4", "2"]);
        check("qwen35", "I'm DONE'S", &["I", "'m", " DONE", "'S"]);
        // Qwen2's split cuts at each mark.
        check("qwen2", "nai\u{308}ve cafe\u{301} 42", &["nai", "\u{308}ve", " cafe", "\u{301}", " ", "4", "2"]);
    }

    #[test]
    fn tekken_splits_before_capitals_without_contractions_and_every_digit() {
        check("tekken", "helloWorld HTTPServer", &["hello", "World", " HTTPServer"]);
        // GPT-4o keeps "'ll" and "'T" on their words and groups digits by three (see above); Tekken does neither.
        check("tekken", "they'll DON'T 12345", &["they", "'ll", " DON", "'T", " ", "1", "2", "3", "4", "5"]);
        check("tekken", "a/b//\n c", &["a", "/b", "//\n", " c"]);
    }

    #[test]
    fn gpt2_and_default_differ_on_punctuation_and_digits() {
        check("gpt-2", "Hi!! 2024-01 it's", &["Hi", "!!", " 2024", "-", "01", " it", "'s"]);
        // `default` isolates punctuation runs first, then numbers, then ASCII digits by three.
        check("default", "Hi!! 12345 $5", &["Hi", "!!", " ", "123", "45", " ", "$", "5"]);
    }

    #[test]
    fn names_are_known_or_refused() {
        assert_eq!(PreTokenizer::by_name("llama-bpe").unwrap().name, "llama3");
        assert!(PreTokenizer::by_name("llama-bpe").unwrap().ignore_merges);
        assert!(!PreTokenizer::by_name("qwen2").unwrap().add_bos);
        assert_eq!(PreTokenizer::by_name("gpt2"), None, "llama.cpp spells it gpt-2");
        assert_eq!(PreTokenizer::by_name("deepseek-llm"), None);
        assert!(PreTokenizer::supported().contains("smollm"));
    }
}
