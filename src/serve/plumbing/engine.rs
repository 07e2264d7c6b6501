//! The engine: generation slots that own the models' sequences, fed from one bounded queue. Each slot is a worker
//! thread holding its own sequence of each model (`agent::LazyModels::share`: the networks live on one batching
//! thread per model, `decode::batching`), so the requests in flight share forward passes and a new request joins
//! between passes. HTTP handlers submit jobs without blocking; a full queue is refused at once (503). A job's
//! prompt and grammar are bounded (`Limits`): a grammar compiles on a thread of its own that the slot waits on
//! for a limited time, and no longer than its client stays.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use crate::agent::LazyModels;
use crate::decode::constraint::{ConstraintError, ConstraintMatcher, ConstraintSpec, GrammarEngine};
use crate::decode::token_constraint::TokenConstraint;
use crate::decode::{
    generate_observing, GenerateError, GenerateRequest, GenerationObserver, Model, StopReason, Timings, TokenLogprob,
};
use crate::llm::chat::TemplateError;
use crate::serve::openai::asks;
use crate::serve::openai::echo::{echo, Echo};
use crate::serve::openai::grammar;
use crate::serve::openai::ignore_eos::NoStopTokens;
use crate::serve::openai::logprobs::Logprob;
use crate::serve::openai::output::{OutputSplitter, Piece};
use crate::serve::openai::request::{ChatRequest, RawPrompt};
use crate::serve::plumbing::error::ApiError;
use crate::serve::plumbing::halt::{make_haltable, Stops};
use crate::serve::plumbing::histogram::Histogram;
use crate::serve::runs::run_jobs::{execute_run, RunJob};
use crate::Error;

/// Which of the two loaded models a job runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The planner model.
    Planner,
    /// The executor model.
    Executor,
}

/// One chat completion to run.
pub struct Job {
    /// The model.
    pub role: Role,
    /// The checked request.
    pub request: ChatRequest,
    /// Most new tokens.
    pub max_tokens: usize,
    /// Where the answer goes, piece by piece.
    pub events: UnboundedSender<JobEvent>,
    /// Set when the client is gone: the job is skipped, or its generation halted.
    pub cancel: Arc<AtomicBool>,
    /// The server's caps on its prompt and grammar.
    pub limits: Limits,
    /// When it was queued (its latency is measured from here).
    pub submitted: Instant,
}

/// What one chat job may cost before it generates.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most prompt tokens (`--max-prompt-tokens`).
    pub max_prompt_tokens: usize,
    /// Longest its grammar may take to compile (`--max-compile-ms`).
    pub compile: Duration,
}

/// What the slots take from the queue: a chat completion or an agent run.
pub enum Work {
    /// A chat completion (boxed, as runs are: the queue moves pointers, not requests).
    Chat(Box<Job>),
    /// An agent run (`POST /v1/runs`).
    Run(Box<RunJob>),
}

/// What a job reports, in order: `Accepted` (or an error `Done`), pieces, `Done`.
#[derive(Debug)]
pub enum JobEvent {
    /// The prompt is rendered and fits, the grammar compiles: generation starts.
    Accepted,
    /// A piece of the answer: text, or a tool call's beginning, argument parts and end.
    Piece(Piece),
    /// The next generated token's log-probability (when the request asked), sent before the text it adds.
    Logprob(Logprob),
    /// The prompt repeated (text completions' `echo`), sent before any piece of the answer.
    Echo(Echo),
    /// The end, with the usage or why it failed.
    Done(Result<Finished, ApiError>),
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    /// OpenAI's `finish_reason`: `stop`, `length` or `tool_calls`.
    pub reason: &'static str,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Generated tokens.
    pub completion_tokens: usize,
    /// Prompt tokens reused from the KV cache or the prefix store (not computed).
    pub cached_tokens: usize,
    /// Of the generated tokens, those of the listing pass (`serve::openai::asks`): reported as `reasoning_tokens`.
    pub listing_tokens: usize,
}

/// Counts the health endpoint reports.
#[derive(Debug, Default)]
pub struct Counters {
    /// Jobs waiting for a slot.
    pub queued: AtomicUsize,
    /// Jobs generating now.
    pub running: AtomicUsize,
    /// Jobs that ran to their end.
    pub completed: AtomicUsize,
    /// Jobs stopped because their client went away.
    pub cancelled: AtomicUsize,
    /// Prompt tokens of the chat and completion jobs that ran, in all.
    pub prompt_tokens: AtomicU64,
    /// Of those, the ones reused from a cache.
    pub cached_tokens: AtomicU64,
    /// Tokens they generated, in all.
    pub completion_tokens: AtomicU64,
    /// Every token the slots ran through the models (prompt tokens not reused, answer tokens, drafts), cancelled
    /// jobs and agent runs included: what the work cost.
    pub evaluated_tokens: Arc<AtomicU64>,
    /// Time from queueing to the last token, of each job that ran to its end.
    pub latency: Histogram,
}

/// The queue in front of the slots.
pub struct Engine {
    jobs: SyncSender<Work>,
    queue: usize,
    /// Shared with the slots.
    pub counters: Arc<Counters>,
    /// Set at shutdown: the slots start no more work.
    closing: Arc<AtomicBool>,
    cutter: Cutter,
}

/// Halts every slot's generation in flight (the end of a shutdown's grace period).
#[derive(Clone)]
pub struct Cutter {
    halts: Vec<Arc<AtomicBool>>,
    cut: Arc<AtomicBool>,
}

impl Cutter {
    /// Halts the generations in flight now, and every one after.
    pub fn cut_off(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for halt in &self.halts {
            halt.store(true, Ordering::SeqCst);
        }
    }
}

impl Engine {
    /// Starts `sources.len()` slots on `scope`, each with its own models; returns the engine (dropping it ends the
    /// slots once their jobs are done).
    pub fn start<'scope, 'env: 'scope>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        sources: Vec<LazyModels<'env>>,
        queue: usize,
    ) -> Engine {
        let (jobs, inbox) = mpsc::sync_channel(queue);
        let inbox = Arc::new(Mutex::new(inbox));
        let counters = Arc::new(Counters::default());
        let closing = Arc::new(AtomicBool::new(false));
        let cut = Arc::new(AtomicBool::new(false));
        let mut halts = Vec::new();
        for models in sources {
            let halt = Arc::new(AtomicBool::new(false));
            halts.push(halt.clone());
            let flags = SlotFlags { halt, closing: closing.clone(), cut: cut.clone() };
            let (inbox, counters) = (inbox.clone(), counters.clone());
            scope.spawn(move || slot(models, &inbox, &counters, &flags));
        }
        Engine { jobs, queue, counters, closing, cutter: Cutter { halts, cut } }
    }

    /// Starts no more work: chat requests still queued are answered 503; runs still queued are left for a resume
    /// (their handles are interrupted by the caller).
    pub fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    /// What halts the generations in flight.
    pub fn cutter(&self) -> Cutter {
        self.cutter.clone()
    }

    /// Queues a job; refused with 503 when the queue is full.
    pub fn submit(&self, job: Work) -> Result<(), ApiError> {
        self.counters.queued.fetch_add(1, Ordering::Relaxed);
        match self.jobs.try_send(job) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                self.counters.queued.fetch_sub(1, Ordering::Relaxed);
                Err(ApiError::queue_full(self.queue))
            }
            Err(TrySendError::Disconnected(_)) => {
                self.counters.queued.fetch_sub(1, Ordering::Relaxed);
                Err(ApiError::internal("the generation slots have stopped (see the server's log)"))
            }
        }
    }
}

/// A slot's flags: its own halt, and the engine's closing and cut-off.
struct SlotFlags {
    halt: Arc<AtomicBool>,
    closing: Arc<AtomicBool>,
    cut: Arc<AtomicBool>,
}

/// One slot: takes jobs until the engine is dropped.
fn slot(mut models: LazyModels<'_>, inbox: &Mutex<Receiver<Work>>, counters: &Counters, flags: &SlotFlags) {
    let halt = flags.halt.clone();
    let stops = Arc::new(Stops::new(halt.clone(), counters.evaluated_tokens.clone()));
    // The models are loaded before the server listens; planner and executor may be one model, wrapped once.
    let same = same_model(&mut models);
    if let Ok(model) = models.planner() {
        make_haltable(model, stops.clone());
    }
    if !same {
        if let Ok(model) = models.executor() {
            make_haltable(model, stops.clone());
        }
    }
    loop {
        // One idle slot at a time waits on the queue; the others wait for the lock.
        let job = match inbox.lock().unwrap_or_else(|p| p.into_inner()).recv() {
            Ok(Work::Chat(job)) => *job,
            Ok(Work::Run(run)) => {
                counters.queued.fetch_sub(1, Ordering::Relaxed);
                counters.running.fetch_add(1, Ordering::Relaxed);
                halt.store(flags.cut.load(Ordering::SeqCst), Ordering::SeqCst);
                execute_run(&mut models, *run, &halt);
                counters.running.fetch_sub(1, Ordering::Relaxed);
                counters.completed.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Err(_) => return,
        };
        counters.queued.fetch_sub(1, Ordering::Relaxed);
        if job.cancel.load(Ordering::Relaxed) {
            counters.cancelled.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if flags.closing.load(Ordering::SeqCst) {
            let _ = job.events.send(JobEvent::Done(Err(ApiError::shutting_down())));
            continue;
        }
        counters.running.fetch_add(1, Ordering::Relaxed);
        // Once the grace period is over every generation is halted, this one too.
        halt.store(flags.cut.load(Ordering::SeqCst), Ordering::SeqCst);
        // The client's leaving stops the job's passes too: its prefill between chunks, not only its decoding.
        stops.watch(Some(job.cancel.clone()));
        let outcome = match model_for(&mut models, job.role) {
            Ok(model) => run_job(model, &job, &halt),
            Err(e) => Some(Err(ApiError::internal(format!("the model could not be loaded: {e}")))),
        };
        stops.watch(None);
        counters.running.fetch_sub(1, Ordering::Relaxed);
        match outcome {
            Some(done) => {
                counters.completed.fetch_add(1, Ordering::Relaxed);
                if let Ok(finished) = &done {
                    counters.prompt_tokens.fetch_add(finished.prompt_tokens as u64, Ordering::Relaxed);
                    counters.cached_tokens.fetch_add(finished.cached_tokens as u64, Ordering::Relaxed);
                    counters.completion_tokens.fetch_add(finished.completion_tokens as u64, Ordering::Relaxed);
                    counters.latency.observe(job.submitted.elapsed());
                }
                let _ = job.events.send(JobEvent::Done(done));
            }
            None => {
                counters.cancelled.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn model_for<'m>(models: &'m mut LazyModels<'_>, role: Role) -> crate::Result<&'m mut Model> {
    match role {
        Role::Planner => models.planner(),
        Role::Executor => models.executor(),
    }
}

/// Whether the planner and the executor are one model.
fn same_model(models: &mut LazyModels<'_>) -> bool {
    let planner = models.planner().map(|m| m as *const Model).ok();
    let executor = models.executor().map(|m| m as *const Model).ok();
    planner == executor
}

/// Runs one job; `None` when its client went away before the end.
fn run_job(model: &mut Model, job: &Job, halt: &AtomicBool) -> Option<Result<Finished, ApiError>> {
    // Every cap on the prompt is checked on the rendered prompt before any model work, the listing pass included:
    // an over-long request is refused before it costs a single forward pass.
    let mut prompt = match checked_prompt(model, &job.request, job.limits) {
        Ok(prompt) => prompt,
        Err(e) => return Some(Err(e)),
    };
    // Several calls when several are asked: the listing pass runs here, on this slot's model, before the job is
    // accepted (so before a streamed answer's first chunk); a failed pass leaves the request as it came.
    let mut listing = Timings::default();
    let mut fitted = None;
    if asks::wants_listing(&job.request) {
        let mut request = job.request.clone();
        if let Ok(timings) = asks::list_and_fit(model, &mut request, job.limits.max_prompt_tokens) {
            listing = timings;
            // The listed actions lengthen the prompt: one they take past a cap runs as it came.
            if request.exact_calls.is_some() {
                if let Ok(longer) = checked_prompt(model, &request, job.limits) {
                    (prompt, fitted) = (longer, Some(request));
                }
            }
        }
    }
    if job.cancel.load(Ordering::Relaxed) {
        return None;
    }
    let request = fitted.as_ref().unwrap_or(&job.request);
    let mut matcher = match answer_grammar(model, request, job.limits, &job.cancel) {
        Ok(matcher) => matcher,
        Err(_) if job.cancel.load(Ordering::Relaxed) => return None,
        Err(e) => return Some(Err(e)),
    };
    if request.options.ignore_eos && matcher.is_some() {
        return Some(Err(ApiError::invalid(
            "ignore_eos",
            "ignore_eos applies to plain-text answers; tools and response_format end where their grammar does",
        )));
    }
    // `ignore_eos`: the end-of-text tokens are banned as a grammar would ban them.
    let mut no_stop = request.options.ignore_eos.then(|| NoStopTokens::new(model.tokenizer.stop_tokens()));
    let prompt_tokens = prompt.len();
    if job.events.send(JobEvent::Accepted).is_err() {
        return None;
    }
    if request.options.echo {
        match echo(model, request, &prompt, &job.cancel) {
            Ok(echoed) => {
                if job.events.send(JobEvent::Echo(echoed)).is_err() {
                    return None;
                }
            }
            Err(_) if job.cancel.load(Ordering::Relaxed) => return None,
            Err(e) => return Some(Err(e)),
        }
    }
    // The model's own tool-call format, told from its template when it loaded: the grammar writes it, and the
    // splitter reads it back.
    let openings = grammar::call_openings(request, &model.call_syntax());
    let mut splitter = OutputSplitter::new(request.options.stop.clone(), openings);
    let mut gone = false;
    let generate_request = GenerateRequest {
        prompt,
        max_tokens: job.max_tokens,
        sampling: request.options.sampling,
        seed: request.options.seed,
        stop_tokens: Vec::new(),
        constraint: match (matcher.as_mut(), no_stop.as_mut()) {
            (Some(m), _) => Some(m as &mut dyn TokenConstraint),
            (None, Some(n)) => Some(n as &mut dyn TokenConstraint),
            (None, None) => None,
        },
        speculation: model.speculation,
    };
    let tokenizer = model.tokenizer.clone();
    let mut observer = Observer { job, tokenizer: &tokenizer, cached: 0 };
    let result = generate_observing(model, generate_request, None, &mut observer, &mut |text| {
        if gone || splitter.stopped() {
            return;
        }
        for piece in splitter.push(text) {
            gone |= job.events.send(JobEvent::Piece(piece)).is_err();
        }
        gone |= job.cancel.load(Ordering::Relaxed);
        if gone || splitter.stopped() {
            halt.store(true, Ordering::Relaxed);
        }
    });
    let cached_tokens = observer.cached;
    if gone || job.cancel.load(Ordering::Relaxed) {
        return None;
    }
    let (reason, completion_tokens) = match result {
        Ok(generation) => {
            for piece in splitter.finish() {
                let _ = job.events.send(JobEvent::Piece(piece));
            }
            let reason = if splitter.is_calls() {
                "tool_calls"
            } else if generation.stop == StopReason::MaxTokens {
                "length"
            } else {
                "stop"
            };
            (reason, generation.timings.generated_tokens)
        }
        // A stop sequence halted the generation: the answer so far is the answer.
        Err(_) if splitter.stopped() => {
            let tokens = model.tokenizer.encode(splitter.sent_text(), false).map(|t| t.len()).unwrap_or(0);
            ("stop", tokens)
        }
        Err(Error::Generate(GenerateError::GrammarIncomplete { .. })) => ("length", job.max_tokens),
        Err(e) => return Some(Err(ApiError::internal(format!("generation failed: {e}")))),
    };
    // The listing pass is work the model did for this request: its prompt and its tokens are counted, its tokens
    // also as `listing_tokens` (OpenAI's `reasoning_tokens`).
    Some(Ok(Finished {
        reason,
        prompt_tokens: prompt_tokens + listing.prompt_tokens,
        completion_tokens: completion_tokens + listing.generated_tokens,
        cached_tokens: cached_tokens + listing.reused_tokens,
        listing_tokens: listing.generated_tokens,
    }))
}

/// Passes a job's token log-probabilities on (named by the tokenizer) and keeps its prompt's cached length.
struct Observer<'a> {
    job: &'a Job,
    tokenizer: &'a crate::llm::tokenizer::GgufTokenizer,
    cached: usize,
}

impl GenerationObserver for Observer<'_> {
    fn logprobs(&self) -> Option<usize> {
        self.job.request.options.logprobs
    }

    fn on_prefill(&mut self, reused: usize) {
        self.cached = reused;
    }

    fn on_token(&mut self, logprob: TokenLogprob) {
        let _ = self.job.events.send(JobEvent::Logprob(Logprob::new(self.tokenizer, &logprob)));
    }
}

/// The prompt's tokens, within the caps (`--max-prompt-tokens`, the model's context); errors are the request's.
fn checked_prompt(model: &Model, request: &ChatRequest, limits: Limits) -> Result<Vec<u32>, ApiError> {
    let prompt = prompt_tokens(model, request)?;
    let param = if request.raw_prompt.is_some() { "prompt" } else { "messages" };
    if prompt.is_empty() {
        return Err(ApiError::invalid(param, "the prompt is empty: give at least one token of text"));
    }
    if prompt.len() > limits.max_prompt_tokens {
        return Err(ApiError::over_cap(
            param,
            format!(
                "the prompt is {} tokens; this server takes at most {} prompt tokens (--max-prompt-tokens): \
                 shorten the messages or the tools",
                prompt.len(),
                limits.max_prompt_tokens
            ),
            "prompt_too_long",
        ));
    }
    let context = model.weights.context_length();
    if prompt.len() >= context {
        return Err(ApiError::bad_request(
            format!("the prompt is {} tokens; the model's context holds {context}", prompt.len()),
            Some("context_length_exceeded"),
        ));
    }
    Ok(prompt)
}

/// The answer's grammar (tools, `response_format`), compiled within `--max-compile-ms`; none for free text.
fn answer_grammar(
    model: &Model,
    request: &ChatRequest,
    limits: Limits,
    cancel: &AtomicBool,
) -> Result<Option<ConstraintMatcher>, ApiError> {
    let Some(spec) = grammar::constraint(request, &model.call_syntax()) else {
        return Ok(None);
    };
    let engine = model.grammar_engine().map_err(|e| ApiError::internal(format!("building the grammar engine: {e}")))?;
    let param = if request.json_schema.is_some() && request.functions.is_empty() { "response_format" } else { "tools" };
    let user = request.options.user.clone();
    let matcher = compile_within(engine, spec, user, limits.compile, cancel, param)?.map_err(|e| match e {
        ConstraintError::TokenTable(_) => ApiError::internal(e.to_string()),
        other => ApiError::invalid(param, other.to_string()),
    })?;
    Ok(Some(matcher))
}

/// The prompt's tokens: a completion's prompt as it is, or the conversation rendered with the model's template.
fn prompt_tokens(model: &Model, request: &ChatRequest) -> Result<Vec<u32>, ApiError> {
    let text = match &request.raw_prompt {
        Some(RawPrompt::Tokens(ids)) => {
            let vocab = model.weights.n_logits();
            if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
                return Err(ApiError::invalid("prompt", format!("token id {bad} is past the vocabulary ({vocab})")));
            }
            return Ok(ids.clone());
        }
        Some(RawPrompt::Text(text)) => text.clone(),
        None => {
            let template = model.chat_template.as_ref().ok_or_else(|| {
                ApiError::bad_request(
                    format!(
                        "{} has no chat template: it cannot serve chat (/v1/completions takes a plain prompt)",
                        model.info.path.display()
                    ),
                    None,
                )
            })?;
            template.render_request(&request.messages, request.tools.as_ref(), true, &request.template_kwargs).map_err(
                |e| match e {
                    TemplateError::Raised(message) => ApiError::invalid(
                        "messages",
                        format!("the model's chat template refused the conversation: {message}"),
                    ),
                    other => ApiError::invalid("messages", other.to_string()),
                },
            )?
        }
    };
    let param = if request.raw_prompt.is_some() { "prompt" } else { "messages" };
    model
        .tokenizer
        .encode(&text, model.tokenizer.add_bos_by_default())
        .map_err(|e| ApiError::invalid(param, format!("the prompt cannot be tokenized: {e}")))
}

/// Grammar compiles running now, abandoned ones (past their time limit) included.
static COMPILING: AtomicUsize = AtomicUsize::new(0);

/// Most grammar compiles running at once: past it a request's grammar is refused (503) rather than queued, so
/// abandoned compiles cannot pile up.
const MAX_COMPILING: usize = 8;

/// How often a slot waiting on a compile looks whether its client is still there.
const COMPILE_POLL: Duration = Duration::from_millis(20);

/// Compiles `spec` (for `user`, whose share of the grammar cache it joins) on a thread of its own and waits at most
/// `limit`, and only while the client stays: a grammar llguidance is slow on is refused (400 naming the limit) and the
/// slot goes back to work. llguidance cannot be interrupted, so the compile itself runs on to its end (its own fuel and
/// size limits bound it), counted in [`COMPILING`].
fn compile_within(
    engine: GrammarEngine,
    spec: ConstraintSpec,
    user: Option<String>,
    limit: Duration,
    cancel: &AtomicBool,
    param: &str,
) -> Result<Result<ConstraintMatcher, ConstraintError>, ApiError> {
    if COMPILING.fetch_add(1, Ordering::SeqCst) >= MAX_COMPILING {
        COMPILING.fetch_sub(1, Ordering::SeqCst);
        return Err(ApiError {
            status: axum::http::StatusCode::SERVICE_UNAVAILABLE,
            message: format!("{MAX_COMPILING} grammar compiles are running already; retry later"),
            param: None,
            code: Some("grammar_compiles_busy"),
        });
    }
    let (sender, compiled) = mpsc::channel();
    let spawned = std::thread::Builder::new().name("tandem-grammar".into()).spawn(move || {
        // Each client's grammars are its share of the cache; those of clients that name no `user`, one share.
        let _ = sender.send(engine.matcher_for(&spec, Some(user.as_deref().unwrap_or(""))));
        COMPILING.fetch_sub(1, Ordering::SeqCst);
    });
    if let Err(e) = spawned {
        COMPILING.fetch_sub(1, Ordering::SeqCst);
        return Err(ApiError::internal(format!("starting a grammar compile: {e}")));
    }
    let started = Instant::now();
    loop {
        // Never past the limit: a limit shorter than the poll is waited exactly.
        match compiled.recv_timeout(COMPILE_POLL.min(limit.saturating_sub(started.elapsed()))) {
            Ok(result) => return Ok(result),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(ApiError::internal("the grammar compile ended without a result"))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if cancel.load(Ordering::Relaxed) {
            return Err(ApiError::internal("the client went away"));
        }
        if started.elapsed() >= limit {
            return Err(ApiError::over_cap(
                param,
                format!(
                    "the grammar of {param} did not compile within {} ms (--max-compile-ms): simplify the schema",
                    limit.as_millis()
                ),
                "grammar_too_slow",
            ));
        }
    }
}
