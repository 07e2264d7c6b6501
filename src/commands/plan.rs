//! `tandem plan "goal"`: the planner writes a plan under the grammar, the rule book mends and checks it, and it is
//! validated and printed, not run. `--from FILE` puts a given plan through the same rules without a model.

use std::path::Path;

use crate::agent::plan::pipeline::PlanPipeline;
use crate::agent::plan::validate::PlanIssue;
use crate::agent::plan::Plan;
use crate::agent::rules::{check_plan, mend_plan, MendChange, Refusal, RuleSet};
use crate::cli::PlanArgs;
use crate::commands::generate::model_engine;
use crate::progress::Reporter;
use crate::tools::toolbox::build_tools;
use crate::tools::ToolRegistry;
use crate::{Error, Result};

/// Runs `tandem plan`.
pub fn run(args: PlanArgs, reporter: &dyn Reporter) -> Result<()> {
    let settings = args.tools.settings();
    let (context, registry) = build_tools(&settings)?;
    let rules = args.mend.rules();
    let workspace = context.workspace.root();
    if let Some(file) = &args.from {
        return replay(file, &args, &registry, rules, workspace);
    }
    let pipeline = PlanPipeline::new(&args.goal, &registry, settings.tools_top_k, rules)?.thinking(args.think);
    if let Some(selected) = pipeline.selected() {
        reporter.message(&format!(
            "the planner sees {} of {} tools (--tools-top-k {}): {}",
            selected.len(),
            registry.len(),
            settings.tools_top_k,
            selected.join(", ")
        ));
    }
    let model_args = args.model_args();
    // The prefix store keeps the planner prompt's opening (instructions and tools) across processes: with the
    // same tools, a later `tandem plan` computes only its goal.
    let engine = model_engine(&model_args)?.with_prefix_store(!args.no_prefix_store);
    // The plan grammar compiles beside the load.
    let (mut model, _) = engine.load(&args.planner, "planner", &[pipeline.grammar()?], reporter)?;
    reporter.message(&format!("planning with {} …", args.planner));
    let outcome = pipeline.write(&mut model, &args.goal, &[], args.plan_tokens, args.search.plans)?;
    // What a run would send back before running this plan (the rule book's checks of a planner-written plan).
    let sent_back: Vec<String> =
        check_plan(&outcome.plan, &registry, workspace, rules, |_| false).into_iter().map(|r| r.feedback).collect();
    if args.json {
        // The plan's own keys, and what the mends changed beside them (`run --plan` reads the plan and ignores it).
        let mut json = serde_json::to_value(&outcome.plan).map_err(Error::encode("the plan"))?;
        json["mends"] = serde_json::to_value(&outcome.mends).map_err(Error::encode("the mends"))?;
        json["sent_back"] = serde_json::to_value(&sent_back).map_err(Error::encode("the checks"))?;
        if let Some(thought) = &outcome.thought {
            json["thinking"] = thought.as_str().into();
        }
        let json = serde_json::to_string_pretty(&json).map_err(Error::encode("the plan"))?;
        println!("{json}");
    } else {
        if let Some(thought) = &outcome.thought {
            println!("thinking:\n{thought}\n");
        }
        print_plan(&outcome.plan);
        print_rules(&args, &outcome.mends, &sent_back);
    }
    let t = &outcome.timings;
    reporter.message(&format!(
        "prompt {} tokens ({} reused from the prefix cache), prefill {:.1} s; {} tokens ({} forced by the grammar, \
         {} of {} passes on only the allowed tokens' logits) in {:.1} s",
        t.prompt_tokens,
        t.reused_tokens,
        t.prefill.as_secs_f64(),
        t.generated_tokens,
        t.forced_tokens,
        t.narrowed_passes,
        t.forward_passes,
        outcome.wall.as_secs_f64()
    ));
    if let Some(search) = outcome.search {
        reporter.message(&format!(
            "plan search: {} candidates, {} valid, the kept plan (candidate {}) agreed by {}",
            search.candidates, search.valid, search.chosen, search.agreeing
        ));
    }
    invalid(&outcome.issues)
}

/// `tandem plan --from FILE GOAL`: the plan in `file` for the goal, through the mends and checks of `rules` with
/// the run's tools, printed with each change and refusal. Users debug their plans with it; tests replay plans.
fn replay(file: &Path, args: &PlanArgs, registry: &ToolRegistry, rules: RuleSet, workspace: &Path) -> Result<()> {
    let text =
        std::fs::read_to_string(file).map_err(|e| Error::io(format!("reading the plan {}", file.display()), e))?;
    let mut plan = Plan::from_json(&text).map_err(|e| {
        Error::Usage(format!(
            "{} is not a plan ({e}); give the JSON `tandem plan --json` prints: {{\"steps\": [{{\"id\": \"s1\", \
             \"tool\": …, \"args\": {{…}}}}]}}",
            file.display()
        ))
    })?;
    plan.goal = args.goal.clone();
    let mended = mend_plan(&mut plan, registry, rules, "");
    let refusals: Vec<Refusal> = check_plan(&plan, registry, workspace, rules, |_| false);
    let issues = plan.validate(registry);
    if args.json {
        let json = serde_json::json!({
            "plan": plan,
            "changes": mended.changes,
            "refusals": refusals,
            "issues": issues.iter().map(ToString::to_string).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&json).map_err(Error::encode("the plan"))?);
    } else {
        print_plan(&plan);
        let sent_back: Vec<String> = refusals.iter().map(|r| format!("[{}] {}", r.rule, r.feedback)).collect();
        print_rules(args, &mended.changes, &sent_back);
        if mended.changes.is_empty() && refusals.is_empty() {
            println!("No rule changed or refused it (rules: {}).", rule_list(rules));
        }
    }
    invalid(&issues)
}

/// The rules that ran, by name, or `none (--mend off)`.
fn rule_list(rules: RuleSet) -> String {
    match rules.names() {
        names if names.is_empty() => "none (--mend off)".to_string(),
        names => names.join(", "),
    }
}

/// A plan as a numbered list, each step with its call, dependencies and description.
fn print_plan(plan: &Plan) {
    println!("Plan for: {}", plan.goal);
    for (i, step) in plan.steps.iter().enumerate() {
        let args = serde_json::Value::Object(step.args.clone());
        let after = match step.depends_on.is_empty() {
            true => String::new(),
            false => format!("  (after {})", step.depends_on.join(", ")),
        };
        println!("{:>3}. [{}] {} {}{}", i + 1, step.id, step.tool, args, after);
        if !step.description.is_empty() {
            println!("       {}", step.description);
        }
    }
}

/// What the rule book changed, and what a run would send back.
fn print_rules(args: &PlanArgs, changes: &[MendChange], sent_back: &[String]) {
    if !changes.is_empty() {
        println!("Mended (--mend {}):", args.mend.mend.name());
        for change in changes {
            println!("     {change}");
        }
    }
    if !sent_back.is_empty() {
        println!("A run would send this plan back to the planner first (--mend {}):", args.mend.mend.name());
        for feedback in sent_back {
            println!("     {feedback}");
        }
    }
}

/// An error listing `issues`, where the plan does not validate.
fn invalid(issues: &[PlanIssue]) -> Result<()> {
    if issues.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = issues.iter().map(|i| format!("  - {i}")).collect();
    Err(Error::Agent(format!("the plan does not validate:\n{}", list.join("\n"))))
}
