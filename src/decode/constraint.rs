//! Grammar constraints (JSON Schema, Lark, regex) through llguidance, applied inside the generation loop.
//!
//! One [`GrammarEngine`] per tokenizer (the token trie and the parser factory are built once and shared); one
//! [`ConstraintMatcher`] per generation. We build llguidance's token environment from our own token bytes
//! rather than through `toktrie_hf_tokenizers`, which pins an older `tokenizers` than candle uses.

use std::sync::Arc;
use std::time::{Duration, Instant};

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{InferenceCapabilities, TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};

use super::generate::TokenConstraint;
use crate::llm::tokenizer::GgufTokenizer;

/// Errors compiling or applying a constraint.
#[derive(Debug, thiserror::Error)]
pub enum ConstraintError {
    #[error("the JSON Schema uses keywords the grammar engine does not support: {keywords} (remove them or use a Lark grammar; we never fall back to unconstrained output)")]
    UnsupportedKeyword { keywords: String },
    #[error("the grammar does not compile: {0}")]
    Compile(String),
    #[error("grammar engine error after {position} tokens ({message}); output so far: {text:?}")]
    Matcher { position: usize, text: String, message: String },
    #[error("building the grammar engine's token table failed: {0}")]
    TokenTable(String),
}

/// A constraint on the output.
#[derive(Debug, Clone, PartialEq)]
pub enum ConstraintSpec {
    /// JSON matching this schema. Compact JSON (no free whitespace) unless the schema's `x-guidance` says otherwise.
    JsonSchema(serde_json::Value),
    /// A Lark grammar (llguidance dialect).
    Lark(String),
    /// A regular expression the whole output must match.
    Regex(String),
}

impl ConstraintSpec {
    fn to_grammar(&self) -> TopLevelGrammar {
        match self {
            ConstraintSpec::JsonSchema(schema) => {
                let mut schema = schema.clone();
                // Bounded whitespace: without this the engine allows unlimited whitespace between tokens, which
                // small models fall into at temperature 0 (runaway "\n\n\n…" loops).
                if let Some(object) = schema.as_object_mut() {
                    object.entry("x-guidance").or_insert_with(|| serde_json::json!({"whitespace_flexible": false}));
                }
                TopLevelGrammar::from_json_schema(schema)
            }
            ConstraintSpec::Lark(grammar) => TopLevelGrammar::from_lark(grammar.clone()),
            ConstraintSpec::Regex(rx) => TopLevelGrammar::from_regex(rx),
        }
    }
}

/// llguidance's view of our tokenizer.
struct TokenEnvironment {
    trie: TokTrie,
    tokenizer: Arc<GgufTokenizer>,
}

impl TokenizerEnv for TokenEnvironment {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        match std::str::from_utf8(s) {
            Ok(text) => match self.tokenizer.encode(text, false) {
                // Special tokens in grammar text are matched by the marker path, not here: keep text as text.
                Ok(ids) if ids.iter().all(|&id| !self.tokenizer.is_control(id)) => ids,
                _ => self.trie.greedy_tokenize(s),
            },
            Err(_) => self.trie.greedy_tokenize(s),
        }
    }
}

/// Compiles constraints for one tokenizer. Cheap to clone.
#[derive(Clone)]
pub struct GrammarEngine {
    factory: Arc<ParserFactory>,
    env: TokEnv,
}

impl GrammarEngine {
    /// Builds the token trie (padded to the logits width) and the parser factory.
    pub fn new(tokenizer: Arc<GgufTokenizer>, n_logits: usize) -> Result<Self, ConstraintError> {
        let vocab = tokenizer.vocab_size();
        let n = n_logits.max(vocab);
        let mut words: Vec<Vec<u8>> = Vec::with_capacity(n);
        for id in 0..n as u32 {
            let word = if id as usize >= vocab || tokenizer.is_unused(id) {
                // Logit rows past the vocabulary and [PAD…] rows: empty words can never be produced.
                Vec::new()
            } else if tokenizer.is_control(id) {
                let mut marked = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                marked.extend(tokenizer.token_bytes(id).unwrap_or_default());
                marked
            } else {
                tokenizer.token_bytes(id).unwrap_or_default()
            };
            words.push(word);
        }
        let stops = tokenizer.stop_tokens();
        let eos = stops.first().copied().or(tokenizer.eos_token()).unwrap_or(0);
        let mut info = TokRxInfo::new(n as u32, eos);
        info.tok_bos = tokenizer.bos_token();
        let trie = TokTrie::from(&info, &words).with_eos_tokens(&stops);
        let env: TokEnv = Arc::new(TokenEnvironment { trie, tokenizer });
        let caps = InferenceCapabilities { ff_tokens: true, ..InferenceCapabilities::default() };
        let mut factory = ParserFactory::new(&env, caps, &llguidance::earley::SlicedBiasComputer::general_slices())
            .map_err(|e| ConstraintError::TokenTable(e.to_string()))?;
        factory.set_stderr_log_level(0);
        Ok(Self { factory: Arc::new(factory), env })
    }

    /// Compiles `spec` into a fresh matcher. Unsupported schema keywords are an error here, before generation.
    pub fn matcher(&self, spec: &ConstraintSpec) -> Result<ConstraintMatcher, ConstraintError> {
        let started = Instant::now();
        let parser = self.factory.create_parser(spec.to_grammar()).map_err(|e| classify_compile_error(&e.to_string()))?;
        let matcher = Matcher::new(Ok(parser));
        if let Some(message) = matcher.get_error() {
            return Err(classify_compile_error(&message));
        }
        let stats = ConstraintStats { compile_time: started.elapsed(), ..ConstraintStats::default() };
        Ok(ConstraintMatcher { matcher, env: self.env.clone(), produced: Vec::new(), stats })
    }

    /// Width of the token space (the logits width).
    pub fn n_tokens(&self) -> usize {
        self.env.tok_trie().vocab_size()
    }
}

fn classify_compile_error(message: &str) -> ConstraintError {
    match message.split_once("Unimplemented keys:") {
        Some((_, rest)) => ConstraintError::UnsupportedKeyword {
            keywords: rest.lines().next().unwrap_or("").trim().to_string(),
        },
        None => ConstraintError::Compile(message.to_string()),
    }
}

/// Counters for benchmarks and the audit log.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ConstraintStats {
    /// Time to compile the grammar.
    pub compile_time: Duration,
    /// Full masks computed (the unconstrained pick was rejected).
    pub masks: usize,
    /// Time spent computing and applying masks.
    pub mask_time: Duration,
    /// Longest single mask.
    pub max_mask_time: Duration,
    /// Unconstrained picks the grammar accepted (no mask needed).
    pub validations_passed: usize,
    /// Tokens forced by the grammar (fed without sampling).
    pub forced_tokens: usize,
}

/// The grammar state of one generation.
pub struct ConstraintMatcher {
    matcher: Matcher,
    env: TokEnv,
    produced: Vec<TokenId>,
    stats: ConstraintStats,
}

impl ConstraintMatcher {
    fn error(&self, message: String) -> ConstraintError {
        let text = self.env.tok_trie().decode_str(&self.produced);
        ConstraintError::Matcher { position: self.produced.len(), text, message }
    }

    /// Counters so far.
    pub fn stats(&self) -> ConstraintStats {
        self.stats.clone()
    }

    /// Tokens committed so far.
    pub fn produced(&self) -> &[TokenId] {
        &self.produced
    }

    /// Whether `token` may come next.
    pub fn validate(&mut self, token: u32) -> bool {
        let ok = (token as usize) < self.env.tok_trie().vocab_size() && matches!(self.matcher.validate_tokens(&[token]), Ok(1));
        if ok {
            self.stats.validations_passed += 1;
        }
        ok
    }

    /// Sets every forbidden token's logit to −inf. Walks the allowed-set bitmap a 32-bit word at a time:
    /// fully allowed words are skipped, so the cost is proportional to the forbidden share, not to 151,936
    /// branches.
    pub fn mask_logits(&mut self, logits: &mut [f32]) -> Result<(), ConstraintError> {
        let started = Instant::now();
        let mask = self.matcher.compute_mask().map_err(|e| self.error(e.to_string()))?;
        for (word_index, &word) in mask.as_slice().iter().enumerate() {
            if word == u32::MAX {
                continue;
            }
            let base = word_index * 32;
            let end = (base + 32).min(logits.len());
            if base >= end {
                break;
            }
            if word == 0 {
                logits[base..end].fill(f32::NEG_INFINITY);
                continue;
            }
            for (bit, logit) in logits[base..end].iter_mut().enumerate() {
                if word & (1 << bit) == 0 {
                    *logit = f32::NEG_INFINITY;
                }
            }
        }
        // Logit rows beyond the token table (none when the table was padded to the logits width).
        let covered = mask.as_slice().len() * 32;
        if logits.len() > covered {
            logits[covered..].fill(f32::NEG_INFINITY);
        }
        let elapsed = started.elapsed();
        self.stats.masks += 1;
        self.stats.mask_time += elapsed;
        self.stats.max_mask_time = self.stats.max_mask_time.max(elapsed);
        Ok(())
    }

    /// Advances the grammar by `token`.
    pub fn commit(&mut self, token: u32) -> Result<(), ConstraintError> {
        self.matcher.consume_token(token).map_err(|e| self.error(e.to_string()))?;
        self.produced.push(token);
        Ok(())
    }

    /// Tokens the grammar now forces, committed before they are returned.
    pub fn forced_tokens(&mut self) -> Result<Vec<u32>, ConstraintError> {
        if self.matcher.is_stopped() {
            return Ok(Vec::new());
        }
        let forced = self.matcher.compute_ff_tokens();
        if !forced.is_empty() {
            self.matcher.consume_tokens(&forced).map_err(|e| self.error(e.to_string()))?;
            self.produced.extend_from_slice(&forced);
            self.stats.forced_tokens += forced.len();
        }
        Ok(forced)
    }

    /// Whether the output so far is a complete match.
    pub fn is_accepting(&mut self) -> bool {
        self.matcher.is_accepting().unwrap_or(false)
    }

    /// Whether the grammar can take nothing more.
    pub fn is_finished(&self) -> bool {
        self.matcher.is_stopped()
    }
}

impl TokenConstraint for ConstraintMatcher {
    fn validate(&mut self, token: u32) -> bool {
        ConstraintMatcher::validate(self, token)
    }
    fn mask_logits(&mut self, logits: &mut [f32]) -> crate::Result<()> {
        Ok(ConstraintMatcher::mask_logits(self, logits)?)
    }
    fn commit(&mut self, token: u32) -> crate::Result<()> {
        Ok(ConstraintMatcher::commit(self, token)?)
    }
    fn forced_tokens(&mut self) -> crate::Result<Vec<u32>> {
        Ok(ConstraintMatcher::forced_tokens(self)?)
    }
    fn is_accepting(&mut self) -> bool {
        ConstraintMatcher::is_accepting(self)
    }
    fn is_finished(&self) -> bool {
        ConstraintMatcher::is_finished(self)
    }
}
