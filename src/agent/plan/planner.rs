//! The planner: renders the planner prompt (`prompts/planner_system.j2`) and has the planner model write a plan
//! under the grammar built from the tool registry, then validates it.

use std::time::Instant;

use minijinja::Environment;
use serde_json::{json, Value};

use crate::agent::model_call::{chat_call, chat_candidates};
use crate::agent::plan::schema::{next_step_json_schema, plan_json_schema_with, PlanSchemaOptions};
use crate::agent::plan::search::{self, SearchReport};
use crate::agent::plan::tool_lines::{self, ToolListing};
use crate::agent::plan::validate::PlanIssue;
use crate::agent::plan::{Plan, Step};
use crate::agent::rules::{mend_plan, MendChange, Mended, RuleSet};
use crate::decode::constraint::{split_thinking, ConstraintSpec};
use crate::decode::Model;
use crate::decode::Timings;
use crate::llm::ChatMessage;
use crate::tools::ToolRegistry;
use crate::{Error, Result};

/// The planner's system prompt template.
const PLANNER_SYSTEM: &str = include_str!("../../../prompts/planner_system.j2");

/// A written plan with what it cost.
#[derive(Debug, Clone)]
pub struct PlanOutcome {
    /// The plan as parsed.
    pub plan: Plan,
    /// Problems validation found (empty when the plan can run).
    pub issues: Vec<PlanIssue>,
    /// The JSON text the model wrote.
    pub text: String,
    /// Generation timings (with plan search: the chosen candidate's, with the tokens of every candidate and the
    /// decoding time of the slowest).
    pub timings: Timings,
    /// Wall time including grammar compilation.
    pub wall: std::time::Duration,
    /// What plan search saw, when more than one candidate was written.
    pub search: Option<SearchReport>,
    /// With a search, every candidate's plan in order (`None` where it failed or did not parse).
    pub candidates: Vec<Option<Plan>>,
    /// What the mends changed after parsing (references, percentages, languages, optional arguments left out),
    /// one line each (`mend`).
    pub mended: Vec<String>,
    /// The same changes, each with its rule and the value before and after.
    pub mends: Vec<MendChange>,
    /// What the planner thought before the plan, in thinking mode (`--think`, a template with the switch).
    pub thought: Option<String>,
}

/// The step-mode planner's system prompt template.
const STEP_SYSTEM: &str = include_str!("../../../prompts/step_system.j2");

/// The planner's system message for these tools, listed as `TANDEM_TOOL_LISTING` asks (JSON by default).
pub fn system_prompt(registry: &ToolRegistry) -> Result<String> {
    system_prompt_with(registry, ToolListing::from_env()?)
}

/// The planner's system message for these tools, listed as `listing` says. It opens with the instructions and
/// the tools, and nothing in it depends on the goal: with the same tools it is the same text, so its positions
/// are computed once and reused (the prefix cache in memory, the prefix store on disk).
pub fn system_prompt_with(registry: &ToolRegistry, listing: ToolListing) -> Result<String> {
    render_prompt("planner_system", PLANNER_SYSTEM, registry, listing)
}

/// Step mode's system message for these tools.
pub fn step_system_prompt(registry: &ToolRegistry) -> Result<String> {
    render_prompt("step_system", STEP_SYSTEM, registry, ToolListing::Json)
}

/// Renders a prompt template with the registry's tools (name, description, argument schema, output fields, and
/// the compact listing's signature and description lines), the user's own tools before the built-ins, and
/// `compact` saying which listing to write.
fn render_prompt(name: &str, source: &str, registry: &ToolRegistry, listing: ToolListing) -> Result<String> {
    let tools: Vec<serde_json::Value> = registry
        .specs_users_first()
        .map(|spec| {
            let outputs: Vec<String> = spec.output_fields().unwrap_or_default().into_iter().map(|f| f.name).collect();
            json!({"name": spec.name, "description": spec.description,
                   "args": spec.args_schema.get("properties").cloned().unwrap_or(json!({})), "outputs": outputs,
                   "signature": tool_lines::signature(spec), "summary": tool_lines::description(spec)})
        })
        .collect();
    let mut env = Environment::new();
    let fail = |e: minijinja::Error| Error::Internal(format!("prompt template {name}: {e}"));
    env.add_template(name, source).map_err(fail)?;
    let template = env.get_template(name).map_err(fail)?;
    let compact = listing == ToolListing::Compact;
    let thought = PlanSchemaOptions::from_env()?.max_thought > 0;
    template
        .render(minijinja::context! { tools => tools, tool_names => registry.names(), compact => compact,
        thought => thought })
        .map_err(fail)
}

/// How a plan is written: the token budget of the plan, the rules that mend it, and whether the planner thinks
/// first (`--think`: the thought comes on top of the budget).
#[derive(Debug, Clone, Copy)]
pub struct Writing {
    /// Token budget of the plan.
    pub max_tokens: usize,
    /// The rule book's rules that mend it.
    pub rules: RuleSet,
    /// Whether the planner thinks before it (where its chat template has the switch).
    pub think: bool,
}

/// One earlier plan and what became of it, replayed to the planner as conversation so it can correct itself.
#[derive(Debug, Clone)]
pub struct Revision {
    /// The plan's JSON as the planner wrote it.
    pub plan_text: String,
    /// What happened: validation problems, or the execution record up to the failure.
    pub feedback: String,
}

/// Writes a plan after earlier attempts: each earlier plan is the assistant's turn and its feedback the user's
/// reply, so the planner revises with the whole record in view. With `plans` > 1 the planner writes that many
/// candidates side by side and the valid plan closest to the others is kept ([`search`]).
pub fn revise_plan(
    model: &mut Model,
    goal: &str,
    registry: &ToolRegistry,
    history: &[Revision],
    plans: usize,
    how: Writing,
) -> Result<PlanOutcome> {
    let Writing { max_tokens, rules, think } = how;
    let started = Instant::now();
    let Revising { spec, messages, seen } = revising(model, goal, registry, history)?;
    let samplings = search::samplings(plans.max(1));
    let written = chat_candidates(model, "planner", &messages, Some(&spec), max_tokens, &samplings, think)?;
    if plans <= 1 {
        let (text, timings) = written.into_iter().next().expect("one sampling, one output")?;
        let written = read_plan(text, timings, goal, &seen, registry, rules)?;
        return Ok(written.into_outcome(started.elapsed()));
    }
    let read: Vec<Result<Written>> = written
        .into_iter()
        .map(|w| w.and_then(|(text, timings)| read_plan(text, timings, goal, &seen, registry, rules)))
        .collect();
    let views: Vec<Option<(&Plan, bool)>> =
        read.iter().map(|r| r.as_ref().ok().map(|w| (&w.plan, w.issues.is_empty()))).collect();
    let Some(report) = search::choose(&views) else {
        // No candidate parsed: the greedy one's error says why.
        return Err(read.into_iter().find_map(Result::err).expect("no candidate parsed, so one failed"));
    };
    let candidates: Vec<Option<Plan>> = read.iter().map(|r| r.as_ref().ok().map(|w| w.plan.clone())).collect();
    let total_tokens: usize = read.iter().flatten().map(|w| w.timings.generated_tokens).sum();
    let slowest = read.iter().flatten().map(|w| w.timings.decode).max().unwrap_or_default();
    let Written { plan, issues, text, mut timings, mended, thought } =
        read.into_iter().nth(report.chosen).expect("the chosen candidate exists").expect("the chosen one parsed");
    timings.generated_tokens = total_tokens;
    timings.decode = slowest;
    tracing::debug!(?report, "plan search");
    let wall = started.elapsed();
    let Mended { lines: mended, changes: mends } = mended;
    Ok(PlanOutcome { plan, issues, text, timings, wall, search: Some(report), candidates, mended, mends, thought })
}

/// What a revision is written from: the plan grammar, the conversation (the goal, then each earlier plan and its
/// feedback) and what the planner was shown beside the goal (the feedback, which the mends read as seen).
struct Revising {
    spec: ConstraintSpec,
    messages: Vec<ChatMessage>,
    seen: String,
}

fn revising(model: &mut Model, goal: &str, registry: &ToolRegistry, history: &[Revision]) -> Result<Revising> {
    let options = PlanSchemaOptions::from_env()?;
    let (planning, spec) = plannable(model, registry, |r| plan_json_schema_with(r, &options))?;
    let planning = planning.as_ref().unwrap_or(registry);
    let mut messages = vec![ChatMessage::system(system_prompt(planning)?), ChatMessage::user(goal)];
    for revision in history {
        messages.push(ChatMessage::new("assistant", &revision.plan_text));
        messages.push(ChatMessage::user(&revision.feedback));
    }
    let seen = history.iter().map(|r| r.feedback.as_str()).collect::<Vec<_>>().join("\n");
    Ok(Revising { spec, messages, seen })
}

/// Sampled revisions a replan writes when its greedy one is not acceptable.
const REPLAN_SAMPLES: usize = 3;

/// Sampled revisions ([`REPLAN_SAMPLES`] of them, seeds 1, 2, …, the greedy one left out: the caller has it), and the
/// first that validates and that `acceptable` takes, with its mends; `None` where none does. Why: a greedy
/// planner shown that its plan repeats a failed call writes the same plan again (the 1.5B wrote `Asia/Makati`,
/// refused, three times); sampling is how a replan gets a plan that does not.
pub fn sampled_revision(
    model: &mut Model,
    goal: &str,
    registry: &ToolRegistry,
    history: &[Revision],
    how: Writing,
    acceptable: impl Fn(&Plan) -> bool,
) -> Result<Option<PlanOutcome>> {
    let Writing { max_tokens, rules, think } = how;
    let started = Instant::now();
    let Revising { spec, messages, seen } = revising(model, goal, registry, history)?;
    let samplings: Vec<_> = search::samplings(REPLAN_SAMPLES + 1).into_iter().skip(1).collect();
    // The last round of rule `replans-resampled` (where every sample repeats what was refused): the planner copies its own
    // earlier turn, so a round shown the goal and the last feedback alone, without the plans that drew it, writes
    // candidates of its own (greedy and sampled). The 1.5B sampled the plan it had been told not to write, three
    // times in three ("Make a folder called archive and put old.txt in it." with a made-up `archive/old.txt`).
    let fresh = history.last().zip(messages.first()).map(|(last, system)| {
        let user = format!("{goal}\n\nAn earlier plan for this goal was sent back: {}", last.feedback);
        ("fresh", vec![system.clone(), ChatMessage::user(&user)], search::samplings(REPLAN_SAMPLES))
    });
    let mut tokens = 0;
    for (round, messages, samplings) in std::iter::once(("with the plans", messages, samplings)).chain(fresh) {
        let written = chat_candidates(model, "planner", &messages, Some(&spec), max_tokens, &samplings, think)?;
        // The candidates are written side by side: each one's cost is all of theirs (and every round's).
        tokens += written.iter().flatten().map(|(_, t)| t.generated_tokens).sum::<usize>();
        for candidate in written {
            let Ok((text, timings)) = candidate else { continue };
            let Ok(mut written) = read_plan(text, timings, goal, &seen, registry, rules) else { continue };
            // Each candidate's calls at debug level: why no sampled replan was kept is otherwise not in the log.
            let calls: Vec<String> =
                written.plan.steps.iter().map(|s| format!("{} {}", s.tool, Value::Object(s.args.clone()))).collect();
            tracing::debug!(round, issues = written.issues.len(), ?calls, "sampled replan candidate");
            if written.issues.is_empty() && acceptable(&written.plan) {
                written.timings.generated_tokens = tokens;
                return Ok(Some(written.into_outcome(started.elapsed())));
            }
        }
    }
    Ok(None)
}

/// One plan as the planner wrote it, parsed and validated.
struct Written {
    plan: Plan,
    issues: Vec<PlanIssue>,
    text: String,
    timings: Timings,
    mended: Mended,
    thought: Option<String>,
}

impl Written {
    /// The outcome of a plan written alone (no search), `wall` after its start.
    fn into_outcome(self, wall: std::time::Duration) -> PlanOutcome {
        let Written { plan, issues, text, timings, mended, thought } = self;
        let Mended { lines: mended, changes: mends } = mended;
        PlanOutcome { plan, issues, text, timings, wall, search: None, candidates: Vec::new(), mended, mends, thought }
    }
}

/// Parses, mends and validates the planner's text (a thinking block read apart first); the goal is the user's,
/// whatever the planner copied into the plan, and `seen` what else the planner was shown (earlier results).
fn read_plan(
    text: String,
    timings: Timings,
    goal: &str,
    seen: &str,
    registry: &ToolRegistry,
    rules: RuleSet,
) -> Result<Written> {
    let (thought, plan_text) = split_thinking(&text);
    let text = plan_text.to_string();
    let (plan, mended, issues) = read_written_plan(&text, goal, seen, registry, rules)?;
    Ok(Written { plan, issues, text, timings, mended, thought })
}

/// A plan read from a planner's text for `goal` as every written plan is read: parsed, mended (`agent::rules`)
/// (with the rules `rules` turns on; `seen`: what the planner was shown beside the goal) and validated. Returns the plan,
/// what the mends did and what validation found; `bench rescore --mend` reads recorded plans again with it.
pub fn read_written_plan(
    text: &str,
    goal: &str,
    seen: &str,
    registry: &ToolRegistry,
    rules: RuleSet,
) -> Result<(Plan, Mended, Vec<PlanIssue>)> {
    let mut plan = Plan::from_json(text)?;
    plan.goal = goal.to_string();
    let mended = mend_plan(&mut plan, registry, rules, seen);
    let issues = plan.validate(registry);
    Ok((plan, mended, issues))
}

/// The grammar the planner first tries for plans over `registry` (with the plan options of the environment): a
/// caller that loads the planner can compile it beside the load (`Model::load_warm`), so planning finds it ready.
pub fn plan_grammar(registry: &ToolRegistry) -> Result<ConstraintSpec> {
    Ok(ConstraintSpec::JsonSchema(plan_json_schema_with(registry, &PlanSchemaOptions::from_env()?)))
}

/// The plan grammar for the registry's tools, as `schema_of` builds it, checked against the model's grammar
/// engine. Where the engine rejects it (a keyword it does not support, a pattern it cannot compile, a schema that
/// admits nothing), it is retried with unsupported keywords ignored (llguidance's `lenient`), and where it is still
/// rejected, without each tool whose own steps the engine rejects: one tool the grammar cannot express must not
/// stop planning with all the others. Returns the narrower registry when tools were left out (plan and prompt
/// with it; each left-out tool is named in its warnings and the log).
fn plannable(
    model: &Model,
    registry: &ToolRegistry,
    schema_of: impl Fn(&ToolRegistry) -> serde_json::Value,
) -> Result<(Option<ToolRegistry>, ConstraintSpec)> {
    let engine = model.grammar_engine()?;
    let spec = ConstraintSpec::JsonSchema(schema_of(registry));
    let first_error = match engine.matcher(&spec) {
        Ok(_) => return Ok((None, spec)),
        Err(e) => e,
    };
    let lenient = |schema: serde_json::Value| {
        let mut schema = schema;
        schema["x-guidance"] = json!({"whitespace_flexible": false, "lenient": true});
        ConstraintSpec::JsonSchema(schema)
    };
    let spec = lenient(schema_of(registry));
    if engine.matcher(&spec).is_ok() {
        tracing::warn!("the plan grammar ignores schema keywords the grammar engine does not support ({first_error})");
        return Ok((None, spec));
    }
    let rejected: Vec<String> = registry
        .names()
        .into_iter()
        .filter(|name| engine.matcher(&lenient(schema_of(&registry.subset(|n| n == *name)))).is_err())
        .map(str::to_string)
        .collect();
    if rejected.len() == registry.len() {
        return Err(first_error.into());
    }
    let narrower = registry.without(
        &rejected,
        "left out of planning: the grammar engine cannot express its argument schema (`tandem tools list` shows it)",
    );
    let spec = lenient(schema_of(&narrower));
    engine.matcher(&spec)?;
    Ok((Some(narrower), spec))
}

/// What step mode's planner decided.
#[derive(Debug, Clone)]
pub enum NextMove {
    /// Run this step next.
    Step(Step),
    /// The goal is reached; this is the answer.
    Answer(String),
}

/// Step mode: the planner proposes only the next step (or the answer) after seeing every observation so far.
/// `record` lists the steps run and their outputs or errors, in order; the step id is assigned by the caller.
pub fn next_move(
    model: &mut Model,
    goal: &str,
    registry: &ToolRegistry,
    record: &str,
    max_tokens: usize,
) -> Result<(NextMove, String, Timings)> {
    let (planning, spec) = plannable(model, registry, |r| next_step_json_schema(r, &PlanSchemaOptions::default()))?;
    let registry = planning.as_ref().unwrap_or(registry);
    let system = step_system_prompt(registry)?;
    let user = if record.is_empty() {
        format!("Goal: {goal}\nNo results yet.")
    } else {
        format!("Goal: {goal}\nResults so far:\n{record}\nIf these answer the goal, reply with {{\"answer\": ...}}.")
    };
    let messages = [ChatMessage::system(system), ChatMessage::user(user)];
    let (text, timings) = chat_call(model, "planner", &messages, Some(&spec), max_tokens)?;
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Reply {
        Next { next: Step },
        Answer { answer: String },
    }
    let reply: Reply = serde_json::from_str(&text).map_err(crate::agent::PlanError::Parse)?;
    let next = match reply {
        Reply::Next { next } => NextMove::Step(next),
        Reply::Answer { answer } => NextMove::Answer(answer),
    };
    Ok((next, text, timings))
}
