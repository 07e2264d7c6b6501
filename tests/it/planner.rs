//! The planner end to end on a real model: prompt from the tool registry, plan written under the plan grammar,
//! parsed and validated. Uses the 0.5B model with a short goal to stay quick.

use candle_core::Device;
use tandem::agent::plan::pipeline::PlanPipeline;
use tandem::agent::plan::planner::{system_prompt_with, PlanOutcome};
use tandem::agent::plan::tool_lines::ToolListing;
use tandem::agent::rules::RuleSet;
use tandem::decode::Model;
use tandem::llm::LoadOptions;
use tandem::settings::Mend;
use tandem::tools::{ToolContext, ToolRegistry, Workspace};

fn registry(dir: &std::path::Path) -> ToolRegistry {
    ToolRegistry::builtins(&ToolContext::new(Workspace::new(dir).unwrap()))
}

/// The built-ins over a fresh workspace and the 0.5B as planner.
fn small_planner() -> (tempfile::TempDir, ToolRegistry, Model) {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path());
    let path = crate::common::real_model("qwen2.5-coder-0.5b-instruct-q4_k_m");
    let model = Model::load(&path, &Device::Cpu, &LoadOptions::default()).unwrap();
    (dir, registry, model)
}

#[test]
fn the_system_prompt_lists_every_tool_and_the_reference_syntax() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path());
    let prompt = system_prompt_with(&registry, ToolListing::Compact).unwrap();
    for name in registry.names() {
        assert!(prompt.contains(&format!("- {name}(")), "{name} missing from:\n{prompt}");
    }
    assert!(prompt.contains("$s1.result$") && prompt.contains("- calculator(expression: string) -> "), "{prompt}");
}

#[test]
fn a_real_planner_writes_a_valid_calculator_plan() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path());
    let path = crate::common::real_model("qwen2.5-coder-0.5b-instruct-q4_k_m");
    let mut model = Model::load(&path, &Device::Cpu, &LoadOptions::default()).unwrap();
    let outcome = write_plan(&mut model, "What is 12*4+5?", &registry, 1).unwrap();
    assert!(outcome.issues.is_empty(), "{:?}\n{}", outcome.issues, outcome.text);
    assert!(outcome.plan.steps.iter().any(|s| s.tool == "calculator"), "{}", outcome.text);
    assert!(outcome.timings.forced_tokens > 0, "the grammar should force the JSON keys");
}

#[test]
fn a_tool_the_grammar_cannot_express_is_left_out_and_planning_goes_on() {
    use std::sync::Arc;
    use tandem::tools::DeclaredTool;
    let dir = tempfile::tempdir().unwrap();
    let mut registry = registry(dir.path());
    // A lookahead is a valid JSON Schema pattern (the argument checker takes it) that the grammar engine's regex
    // cannot express, lenient or not.
    let args =
        serde_json::json!({"type": "object", "properties": {"code": {"type": "string", "pattern": "^(?=A)[A-Z]+$"}}});
    registry
        .register_arc(Arc::new(DeclaredTool {
            name: "Codes.Check".into(),
            description: "Checks a code".into(),
            args_schema: args,
            output_schema: None,
        }))
        .unwrap();
    let path = crate::common::real_model("qwen2.5-coder-0.5b-instruct-q4_k_m");
    let mut model = Model::load(&path, &Device::Cpu, &LoadOptions::default()).unwrap();
    let engine = model.grammar_engine().unwrap();
    let whole = tandem::decode::constraint::ConstraintSpec::JsonSchema(tandem::agent::plan_json_schema(&registry));
    assert!(engine.matcher(&whole).is_err(), "the check needs a schema the engine rejects");
    let outcome = write_plan(&mut model, "What is 12*4+5?", &registry, 1).unwrap();
    assert!(outcome.issues.is_empty(), "{:?}\n{}", outcome.issues, outcome.text);
    assert!(outcome.plan.steps.iter().all(|s| s.tool != "Codes.Check"), "{}", outcome.text);
}

#[test]
fn plan_search_keeps_a_valid_candidate_and_says_what_it_saw() {
    let (_dir, registry, mut model) = small_planner();
    let goal = "What is 12*4+5?";
    let greedy = write_plan(&mut model, goal, &registry, 1).unwrap();
    assert!(greedy.search.is_none());
    let searched = write_plan(&mut model, goal, &registry, 3).unwrap();
    let report = searched.search.expect("three candidates make a search");
    assert_eq!(report.candidates, 3);
    assert!(report.valid >= 1 && report.agreeing >= 1 && report.agreeing <= report.valid, "{report:?}");
    assert!(searched.issues.is_empty(), "{:?}\n{}", searched.issues, searched.text);
    // The greedy candidate is the plan a search of one writes: when it is kept, it is the same text.
    if report.chosen == 0 {
        assert_eq!(searched.text, greedy.text);
    }
    // Every candidate's tokens count, so a search generates more than the plan it keeps.
    assert!(searched.timings.generated_tokens > greedy.timings.generated_tokens, "{:?}", searched.timings);
}

#[test]
fn a_planner_loaded_warm_finds_its_plan_grammar_compiled_and_plans_the_same() {
    use tandem::agent::plan::planner::plan_grammar;
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path());
    let path = crate::common::real_model("qwen2.5-coder-0.5b-instruct-q4_k_m");
    let grammar = plan_grammar(&registry).unwrap();
    let mut warm =
        Model::load_warm(&path, &Device::Cpu, &LoadOptions::default(), None, std::slice::from_ref(&grammar)).unwrap();
    // Compiled beside the load: the planner's first request is served from the engine's cache.
    let matcher = warm.grammar_engine().unwrap().matcher(&grammar).unwrap();
    assert!(matcher.stats().from_cache, "the plan grammar was not compiled beside the load");
    // A plain load compiles nothing ahead; both write the same plan.
    let mut cold = Model::load(&path, &Device::Cpu, &LoadOptions::default()).unwrap();
    assert!(!cold.grammar_engine().unwrap().matcher(&grammar).unwrap().stats().from_cache);
    cold.grammar_engine().unwrap().clear_cache();
    let goal = "What is 12*4+5?";
    let (a, b) =
        (write_plan(&mut warm, goal, &registry, 1).unwrap(), write_plan(&mut cold, goal, &registry, 1).unwrap());
    assert_eq!(a.text, b.text);
}

/// A replan's sampled revisions (rule `replans-resampled`): the first valid candidate the caller accepts
/// is kept, with its mends; where the caller accepts none, there is none.
#[test]
fn a_sampled_revision_is_one_the_caller_accepts() {
    use tandem::agent::plan::planner::{sampled_revision, Revision, Writing};
    let writing = || Writing { max_tokens: 200, rules: RuleSet::profile(Mend::General), think: false };
    let (_dir, registry, mut model) = small_planner();
    let goal = "What is 12*4+5?";
    let greedy = write_plan(&mut model, goal, &registry, 1).unwrap();
    let history = [Revision {
        plan_text: greedy.text.clone(),
        feedback: "Running that plan: step s1 failed. Write a corrected plan.".into(),
    }];
    let seen = std::cell::RefCell::new(Vec::new());
    let kept = sampled_revision(&mut model, goal, &registry, &history, writing(), |plan| {
        seen.borrow_mut().push(plan.clone());
        seen.borrow().len() == 2
    })
    .unwrap()
    .expect("the second valid candidate is accepted");
    let seen = seen.into_inner();
    assert_eq!(seen.len(), 2, "candidates are offered until one is accepted");
    assert_eq!(kept.plan, seen[1]);
    assert!(kept.issues.is_empty() && kept.search.is_none());
    let none = sampled_revision(&mut model, goal, &registry, &history, writing(), |_| false).unwrap();
    assert!(none.is_none());
}

/// A plan for `goal` through the run's pipeline: every tool shown, the `general` rules.
fn write_plan(model: &mut Model, goal: &str, registry: &ToolRegistry, plans: usize) -> tandem::Result<PlanOutcome> {
    let pipeline = PlanPipeline::new(goal, registry, 0, RuleSet::profile(Mend::General)).unwrap();
    pipeline.write(model, goal, &[], 200, plans)
}
