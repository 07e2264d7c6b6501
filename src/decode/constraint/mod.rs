//! Grammar constraints (JSON Schema, Lark, regex) through llguidance, applied inside the generation loop.
//!
//! One [`GrammarEngine`] per tokenizer: the token trie (padded to the logits width) and llguidance's parser
//! factory are built once and shared (cheap clones). One [`ConstraintMatcher`] per generation, driven by the
//! loop with the protocol of docs/architecture.md (*decode*): [`ConstraintMatcher::validate`] the unconstrained
//! pick; if rejected, [`ConstraintMatcher::mask_logits`] and resample; [`ConstraintMatcher::commit`]; then feed
//! [`ConstraintMatcher::forced_tokens`] in one forward pass; stop when [`ConstraintMatcher::is_finished`].
//!
//! Stop tokens (end of turn / end of sequence) are allowed only where the grammar accepts; `[PAD…]`/unused
//! rows and logit rows past the vocabulary are never allowed; JSON whitespace is bounded (compact by default),
//! and so are JSON numbers the schema leaves unbounded, in magnitude and in fraction digits (see
//! [`UNBOUNDED_NUMBER_LIMIT`], [`NUMBER_RESOLUTION`]).

mod cache;
mod error;
mod mask;
mod spec;
mod token_env;

pub use error::ConstraintError;
pub use mask::apply_allowed_mask;
pub(crate) use spec::prepare_json_schema;
pub use spec::{
    split_thinking, ConstraintKind, ConstraintSpec, BOUNDED_JSON_WHITESPACE, NUMBER_RESOLUTION, UNBOUNDED_NUMBER_LIMIT,
};

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llguidance::api::StopReason as EngineStop;
use llguidance::toktrie::{InferenceCapabilities, TokEnv, TokenId};
use llguidance::{Matcher, ParserFactory};

use crate::decode::token_constraint::TokenConstraint;
use crate::llm::tokenizer::GgufTokenizer;
use cache::GrammarCache;
use token_env::TokenEnvironment;

/// Compiles constraints for one tokenizer. Cheap to clone; build once per tokenizer and share.
///
/// Compiled grammars are cached by spec: the planner asks for the same plan schema on every turn, and an
/// executor for the same tool schema on every call. A cached matcher is cloned in microseconds and shares its
/// lexer caches with earlier generations of the same grammar, so masks are warm instead of rebuilding lexer
/// states on each generation (concurrent generations on one grammar take turns on that shared lexer).
#[derive(Clone)]
pub struct GrammarEngine {
    factory: Arc<ParserFactory>,
    env: Arc<TokenEnvironment>,
    cache: Arc<Mutex<GrammarCache<Matcher>>>,
}

/// Lexer fuel for compiling a grammar: 20× llguidance's default (see `GrammarEngine::new`).
const INITIAL_LEXER_FUEL: u64 = 20_000_000;

impl GrammarEngine {
    /// Builds the token trie with `n_logits` rows (the model's logits width; the table is never narrower than
    /// the tokenizer) and the parser factory. Takes shared ownership of the tokenizer: forced tokens are
    /// tokenized canonically through it for the engine's whole life.
    pub fn new(tokenizer: impl Into<Arc<GgufTokenizer>>, n_logits: usize) -> Result<Self, ConstraintError> {
        let tokenizer = tokenizer.into();
        // toktrie asserts on inconsistent tables; a malformed GGUF vocabulary must be an error, not a crash.
        let env = std::panic::catch_unwind(AssertUnwindSafe(|| TokenEnvironment::new(tokenizer, n_logits)))
            .map_err(|p| ConstraintError::TokenTable(panic_message(p)))??;
        let env = Arc::new(env);
        let tok_env: TokEnv = env.clone();
        let caps = InferenceCapabilities { ff_tokens: true, ..InferenceCapabilities::default() };
        // No token slices. llguidance's JSON slices (four sub-tries for text inside strings) make a mask inside a
        // string cheaper, but building them is most of the engine's start, on the path of every process's first
        // plan; and our masks are few and cheap without them, a plan's masks taking little longer in all beside
        // seconds of forward passes (docs/performance.md, "Time to a plan on a laptop").
        let mut factory = std::panic::catch_unwind(AssertUnwindSafe(|| ParserFactory::new(&tok_env, caps, &[])))
            .map_err(|p| ConstraintError::TokenTable(panic_message(p)))?
            .map_err(|e| ConstraintError::TokenTable(format!("{e:#}")))?;
        // The library never prints: llguidance would log warnings to stderr.
        factory.quiet();
        // A plan grammar over a large tool catalogue (NESTFUL's 64 tools, `--tools all`) needs more lexer work to
        // set up than llguidance's default allows (1M, "initial lexer configuration too big").
        factory.limits_mut().initial_lexer_fuel = INITIAL_LEXER_FUEL;
        Ok(Self { factory: Arc::new(factory), env, cache: Arc::new(Mutex::new(GrammarCache::default())) })
    }

    /// A fresh matcher for `spec`, compiled or taken from the engine's cache. Unsupported schema keywords and
    /// formats are errors here, before any generation (errors are not cached).
    pub fn matcher(&self, spec: &ConstraintSpec) -> Result<ConstraintMatcher, ConstraintError> {
        self.matcher_for(spec, None)
    }

    /// [`Self::matcher`] for a caller that shares the engine with others (a server's client, by its `user`): once
    /// the cache is full, the grammars it compiles replace its own, so it cannot evict everyone else's
    /// ([`cache::OWNER_SHARE`]).
    pub fn matcher_for(
        &self,
        spec: &ConstraintSpec,
        owner: Option<&str>,
    ) -> Result<ConstraintMatcher, ConstraintError> {
        let started = Instant::now();
        let key = cache_key(spec);
        let cached = self.lock_cache().get(&key);
        let (matcher, from_cache) = match cached {
            Some(template) => (template, true),
            None => {
                let matcher = self.compile(spec)?;
                self.lock_cache().insert(key, matcher.clone(), owner);
                (matcher, false)
            }
        };
        let stats = ConstraintStats { compile_time: started.elapsed(), from_cache, ..ConstraintStats::default() };
        Ok(ConstraintMatcher { matcher, env: self.env.clone(), produced: Vec::new(), stats })
    }

    /// A matcher compiled from scratch, bypassing the cache (benchmarks of compile time and cold masks).
    pub fn matcher_uncached(&self, spec: &ConstraintSpec) -> Result<ConstraintMatcher, ConstraintError> {
        let started = Instant::now();
        let matcher = self.compile(spec)?;
        let stats = ConstraintStats { compile_time: started.elapsed(), ..ConstraintStats::default() };
        Ok(ConstraintMatcher { matcher, env: self.env.clone(), produced: Vec::new(), stats })
    }

    /// Forgets every cached grammar (and with them their lexer caches).
    pub fn clear_cache(&self) {
        self.lock_cache().clear();
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, GrammarCache<Matcher>> {
        // A panic while holding the lock leaves a map of complete entries: still usable.
        self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn compile(&self, spec: &ConstraintSpec) -> Result<Matcher, ConstraintError> {
        let kind = spec.kind();
        let grammar = spec.to_grammar();
        let parser = std::panic::catch_unwind(AssertUnwindSafe(|| self.factory.create_parser(grammar)))
            .map_err(|p| ConstraintError::Compile { kind, message: panic_message(p) })?
            .map_err(|e| error::classify_compile_error(kind, format!("{e:#}")))?;
        let matcher = Matcher::new(Ok(parser));
        match matcher.get_error() {
            Some(message) => Err(error::classify_compile_error(kind, message)),
            None => Ok(matcher),
        }
    }

    /// Rows in the token table (the logits width).
    pub fn n_tokens(&self) -> usize {
        self.env.n_tokens()
    }

    /// The stop tokens the grammar allows where it accepts (the tokenizer's end-of-turn / end-of-sequence).
    pub fn stop_tokens(&self) -> &[u32] {
        self.env.stops()
    }

    /// Whether `token` can never be emitted under any grammar (`[PAD…]`/unused rows, rows past the vocabulary).
    pub fn is_never_allowed(&self, token: u32) -> bool {
        self.env.is_never(token)
    }
}

fn cache_key(spec: &ConstraintSpec) -> String {
    match spec {
        // The same schema value gives the same text; a differently ordered twin only costs a cache miss.
        ConstraintSpec::JsonSchema(schema) => format!("json:{schema}"),
        ConstraintSpec::Lark(grammar) => format!("lark:{grammar}"),
        ConstraintSpec::Regex(rx) => format!("regex:{rx}"),
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    format!("the grammar engine panicked: {}", crate::panics::panic_text(&*payload))
}

/// Counters for benchmarks and the audit log.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ConstraintStats {
    /// Time to get the matcher: compiling the grammar, or cloning it from the engine's cache.
    pub compile_time: Duration,
    /// Whether the grammar came from the engine's cache.
    pub from_cache: bool,
    /// Full masks computed (each time the unconstrained pick was rejected, and before each pass that may be
    /// narrowed to the allowed tokens' logits: see [`ConstraintMatcher::allowed_if_few`]).
    pub masks: usize,
    /// Time spent in [`ConstraintMatcher::mask_logits`] (computing masks and applying them) and
    /// [`ConstraintMatcher::allowed_if_few`].
    pub mask_time: Duration,
    /// The part of `mask_time` spent writing −inf into logits.
    pub mask_apply_time: Duration,
    /// Longest single `mask_logits` call.
    pub max_mask_time: Duration,
    /// Cheap validations of an unconstrained pick.
    pub validations: usize,
    /// Validations the grammar accepted (no mask needed).
    pub validations_passed: usize,
    /// Tokens forced by the grammar (fed without sampling).
    pub forced_tokens: usize,
}

/// The grammar state of one generation.
pub struct ConstraintMatcher {
    matcher: Matcher,
    env: Arc<TokenEnvironment>,
    /// Committed tokens (forced ones included, stop tokens excluded): for positions and error messages.
    produced: Vec<TokenId>,
    stats: ConstraintStats,
}

impl ConstraintMatcher {
    /// Counters so far.
    pub fn stats(&self) -> ConstraintStats {
        self.stats.clone()
    }

    /// Tokens committed so far (forced ones included, stop tokens excluded).
    pub fn produced(&self) -> &[u32] {
        &self.produced
    }

    /// Text of the tokens committed so far.
    pub fn text(&self) -> String {
        self.env.text(&self.produced)
    }

    /// Cheap check of the unconstrained pick: may `token` come next? Never true for `[PAD…]`/unused rows or
    /// ids outside the table; true for a stop token only where the grammar accepts.
    pub fn validate(&mut self, token: u32) -> bool {
        self.stats.validations += 1;
        if self.env.is_never(token) {
            return false;
        }
        let ok = matches!(self.matcher.validate_tokens(&[token]), Ok(1));
        if ok {
            self.stats.validations_passed += 1;
        }
        ok
    }

    /// How many leading `tokens` the grammar would accept in a row, without committing any (checks a draft).
    pub fn valid_prefix(&mut self, tokens: &[u32]) -> usize {
        let usable = tokens.iter().take_while(|&&t| !self.env.is_never(t)).count();
        if usable == 0 || self.matcher.is_stopped() {
            return 0;
        }
        self.matcher.validate_tokens(&tokens[..usable]).unwrap_or(0)
    }

    /// Sets every token the grammar forbids next to −inf (allowed logits are left as they are).
    pub fn mask_logits(&mut self, logits: &mut [f32]) -> Result<(), ConstraintError> {
        let started = Instant::now();
        let mask = match self.matcher.compute_mask() {
            Ok(mask) => mask,
            Err(e) => return Err(self.failure(format!("{e:#}"))),
        };
        let computed = Instant::now();
        apply_allowed_mask(mask.as_slice(), logits);
        // The trie never holds these rows, but a Lark token range (`<[…]>`) could name them.
        for &(word, bits) in self.env.never_words() {
            let base = word * 32;
            let mut rest = bits;
            while rest != 0 {
                if let Some(logit) = logits.get_mut(base + rest.trailing_zeros() as usize) {
                    *logit = f32::NEG_INFINITY;
                }
                rest &= rest - 1;
            }
        }
        let done = Instant::now();
        self.stats.mask_apply_time += done - computed;
        self.count_mask(done - started);
        Ok(())
    }

    /// Counts one mask that took `elapsed` in the stats.
    fn count_mask(&mut self, elapsed: Duration) {
        self.stats.masks += 1;
        self.stats.mask_time += elapsed;
        self.stats.max_mask_time = self.stats.max_mask_time.max(elapsed);
    }

    /// The ids the grammar allows next, ascending, when there are at most `limit` (and at least one) of them;
    /// `None` otherwise, or when the mask fails (the step then takes the full logits, and the mask's error comes
    /// from `mask_logits` if it is needed). Counted as a mask in the stats.
    pub fn allowed_if_few(&mut self, limit: usize) -> Option<Vec<u32>> {
        let started = Instant::now();
        let mask = self.matcher.compute_mask().ok()?;
        let allowed = (1..=limit).contains(&mask.num_set()).then(|| self.allowed_in(&mask));
        self.count_mask(started.elapsed());
        allowed.filter(|a| !a.is_empty())
    }

    /// The ids the grammar allows next, ascending (for tests, benchmarks and debugging; not counted in stats).
    pub fn allowed_tokens(&mut self) -> Result<Vec<u32>, ConstraintError> {
        match self.matcher.compute_mask() {
            Ok(mask) => Ok(self.allowed_in(&mask)),
            Err(e) => Err(self.failure(format!("{e:#}"))),
        }
    }

    /// The ids `mask` allows that may ever be emitted, ascending.
    fn allowed_in(&self, mask: &llguidance::toktrie::SimpleVob) -> Vec<u32> {
        mask.to_list().into_iter().filter(|&t| !self.env.is_never(t)).collect()
    }

    /// Advances the grammar by `token`. A token the grammar forbids is an error naming it, its position and
    /// the output so far.
    pub fn commit(&mut self, token: u32) -> Result<(), ConstraintError> {
        if token as usize >= self.env.n_tokens() {
            return Err(ConstraintError::TokenOutOfRange { token, n_tokens: self.env.n_tokens() });
        }
        if self.env.is_never(token) {
            return Err(self.rejected(token, "padding and unused rows are never allowed".into()));
        }
        if self.is_finished() {
            return Err(self.rejected(token, "the grammar is already complete".into()));
        }
        if let Err(e) = self.matcher.consume_token(token) {
            return Err(self.rejected(token, format!("{e:#}")));
        }
        if !self.env.stops().contains(&token) {
            self.produced.push(token);
        }
        Ok(())
    }

    /// Tokens the grammar now forces (fast-forward), already committed when returned. Empty when nothing is
    /// forced or the grammar is finished.
    pub fn forced_tokens(&mut self) -> Result<Vec<u32>, ConstraintError> {
        if self.matcher.is_stopped() {
            return match self.matcher.get_error() {
                Some(message) => Err(self.failure(message)),
                None => Ok(Vec::new()),
            };
        }
        let forced = self.matcher.compute_ff_tokens();
        // compute_ff_tokens reports failure as an empty list plus an error state.
        if let Some(message) = self.matcher.get_error() {
            return Err(self.failure(message));
        }
        if !forced.is_empty() {
            if let Err(e) = self.matcher.consume_tokens(&forced) {
                return Err(self.failure(format!("{e:#}")));
            }
            self.produced.extend_from_slice(&forced);
            self.stats.forced_tokens += forced.len();
        }
        Ok(forced)
    }

    /// Whether the output so far is a complete match (a stop token would be allowed, or the grammar is done).
    pub fn is_accepting(&mut self) -> bool {
        !self.matcher.is_error() && self.matcher.is_accepting().unwrap_or(false)
    }

    /// Whether the grammar is complete and can take nothing more: stop without another model call. False in an
    /// error state, so that the loop's next call reports the error instead of stopping as if complete.
    pub fn is_finished(&self) -> bool {
        self.matcher.is_stopped() && !self.matcher.is_error()
    }

    /// For the loop when its token budget runs out: `Ok` if the output so far is a complete match, else
    /// [`ConstraintError::MaxTokens`] (a truncated output is never returned as valid).
    pub fn ensure_complete(&mut self, max_tokens: usize) -> Result<(), ConstraintError> {
        if let Some(message) = self.matcher.get_error() {
            return Err(self.failure(message));
        }
        if self.is_finished() || self.is_accepting() {
            Ok(())
        } else {
            Err(ConstraintError::MaxTokens { max_tokens, text: self.text() })
        }
    }

    fn rejected(&self, token: u32, message: String) -> ConstraintError {
        ConstraintError::Rejected {
            token,
            piece: self.env.piece(token),
            position: self.produced.len(),
            text: self.text(),
            message,
        }
    }

    fn failure(&self, message: String) -> ConstraintError {
        let (position, text) = (self.produced.len(), self.text());
        if self.matcher.stop_reason() == EngineStop::NoExtensionBias {
            ConstraintError::DeadEnd { position, text }
        } else {
            ConstraintError::Matcher { position, text, message }
        }
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
    fn valid_prefix(&mut self, tokens: &[u32]) -> usize {
        ConstraintMatcher::valid_prefix(self, tokens)
    }
    fn allowed_if_few(&mut self, limit: usize) -> Option<Vec<u32>> {
        ConstraintMatcher::allowed_if_few(self, limit)
    }
}
