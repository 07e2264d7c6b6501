//! The planner: renders the planner prompt (`prompts/planner_system.j2`) and has the planner model write a plan
//! under the grammar built from the tool registry, then validates it.

use std::time::Instant;

use minijinja::Environment;
use serde_json::json;

use super::plan::Plan;
use super::schema::plan_json_schema;
use super::validate::PlanIssue;
use crate::decode::constraint::ConstraintSpec;
use crate::decode::generate::TokenConstraint;
use crate::decode::{generate, GenerateRequest, Sampling, Timings};
use crate::llm::{ChatMessage, Model};
use crate::tools::ToolRegistry;
use crate::{Error, Result};

/// The planner's system prompt template.
const PLANNER_SYSTEM: &str = include_str!("../../prompts/planner_system.j2");

/// A written plan with what it cost.
#[derive(Debug, Clone)]
pub struct PlanOutcome {
    /// The plan as parsed.
    pub plan: Plan,
    /// Problems validation found (empty when the plan can run).
    pub issues: Vec<PlanIssue>,
    /// The JSON text the model wrote.
    pub text: String,
    /// Generation timings.
    pub timings: Timings,
    /// Wall time including grammar compilation.
    pub wall: std::time::Duration,
}

/// The planner's system message for these tools.
pub fn system_prompt(registry: &ToolRegistry) -> Result<String> {
    let tools: Vec<serde_json::Value> = registry
        .specs()
        .map(|spec| {
            let outputs: Vec<String> = spec.output_fields().unwrap_or_default().into_iter().map(|f| f.name).collect();
            json!({"name": spec.name, "description": spec.description,
                   "args": spec.args_schema.get("properties").cloned().unwrap_or(json!({})), "outputs": outputs})
        })
        .collect();
    let mut env = Environment::new();
    env.add_template("planner_system", PLANNER_SYSTEM).map_err(|e| Error::Usage(format!("planner template: {e}")))?;
    let template = env.get_template("planner_system").map_err(|e| Error::Usage(format!("planner template: {e}")))?;
    template
        .render(minijinja::context! { tools => tools })
        .map_err(|e| Error::Usage(format!("planner template: {e}")))
}

/// Writes a plan for `goal` with `model` (greedy, under the plan grammar) and validates it.
pub fn write_plan(model: &mut Model, goal: &str, registry: &ToolRegistry, max_tokens: usize) -> Result<PlanOutcome> {
    let started = Instant::now();
    let template = model
        .chat_template
        .as_ref()
        .ok_or_else(|| Error::Usage("the planner model has no chat template; choose an instruct model".into()))?;
    let messages = [ChatMessage::system(system_prompt(registry)?), ChatMessage::user(goal)];
    let prompt = template.render(&messages, None, true)?;
    let tokens = model.tokenizer.encode(&prompt, model.tokenizer.add_bos_by_default())?;
    let spec = ConstraintSpec::JsonSchema(plan_json_schema(registry));
    let mut matcher = model.grammar_engine()?.matcher(&spec)?;
    let request = GenerateRequest {
        prompt: tokens,
        max_tokens,
        sampling: Sampling::Greedy,
        seed: 0,
        stop_tokens: Vec::new(),
        constraint: Some(&mut matcher as &mut dyn TokenConstraint),
    };
    let generation = generate(model, request, &mut |_| {})?;
    let plan = Plan::from_json(&generation.text)?;
    let issues = plan.validate(registry);
    Ok(PlanOutcome { plan, issues, text: generation.text, timings: generation.timings, wall: started.elapsed() })
}
