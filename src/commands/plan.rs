//! `tandem plan "goal"`: the planner writes a plan under the grammar; it is validated and printed, not run.

use crate::agent::plan::goal_effects::{first_plan_checks, planning_catalogue};
use crate::agent::plan::planner::{plan_grammar, write_plan};
use crate::cli::PlanArgs;
use crate::commands::generate::model_engine;
use crate::progress::Reporter;
use crate::settings::Mend;
use crate::tools::toolbox::build_tools;
use crate::{Error, Result};

/// Runs `tandem plan`.
pub fn run(args: PlanArgs, reporter: &dyn Reporter) -> Result<()> {
    let settings = args.tools.settings();
    let (context, registry) = build_tools(&settings)?;
    let catalogue = planning_catalogue(&args.goal, &registry, settings.tools_top_k, args.mend.mend)?;
    if let Some(catalogue) = &catalogue {
        if let Some(selected) = &catalogue.selected {
            reporter.message(&format!(
                "the planner sees {} of {} tools (--tools-top-k {}): {}",
                selected.len(),
                registry.len(),
                settings.tools_top_k,
                selected.join(", ")
            ));
        }
        if !catalogue.left_out.is_empty() {
            reporter.message(&format!(
                "left out for this goal (--mend {}): {}",
                args.mend.mend.name(),
                catalogue.left_out.join(", ")
            ));
        }
    }
    let tools = catalogue.as_ref().map_or(&registry, |c| &c.registry);
    let model_args = args.model_args();
    // The prefix store keeps the planner prompt's opening (instructions and tools) across processes: with the
    // same tools, a later `tandem plan` computes only its goal.
    let engine = model_engine(&model_args)?.with_prefix_store(!args.no_prefix_store);
    // The plan grammar compiles beside the load.
    let grammar = plan_grammar(tools)?;
    let (mut model, _) = engine.load(&args.planner, "planner", &[grammar], reporter)?;
    reporter.message(&format!("planning with {} …", args.planner));
    let outcome = write_plan(&mut model, &args.goal, tools, args.plan_tokens, args.search.plans, args.mend.mend)?;
    // What a run would send back before running this plan (the checks of a planner-written plan; off with
    // `--mend off`, as in a run).
    let sent_back = match args.mend.mend {
        Mend::Off => Vec::new(),
        _ => first_plan_checks(&outcome.plan, &registry, context.workspace.root()),
    };
    if args.json {
        // The plan's own keys, and what the mends changed beside them (`run --plan` reads the plan and ignores it).
        let mut json = serde_json::to_value(&outcome.plan).map_err(Error::encode("the plan"))?;
        json["mends"] = serde_json::to_value(&outcome.mends).map_err(Error::encode("the mends"))?;
        json["sent_back"] = serde_json::to_value(&sent_back).map_err(Error::encode("the checks"))?;
        let json = serde_json::to_string_pretty(&json).map_err(Error::encode("the plan"))?;
        println!("{json}");
    } else {
        println!("Plan for: {}", outcome.plan.goal);
        for (i, step) in outcome.plan.steps.iter().enumerate() {
            let args = serde_json::Value::Object(step.args.clone());
            let after = if step.depends_on.is_empty() {
                String::new()
            } else {
                format!("  (after {})", step.depends_on.join(", "))
            };
            println!("{:>3}. [{}] {} {}{}", i + 1, step.id, step.tool, args, after);
            if !step.description.is_empty() {
                println!("       {}", step.description);
            }
        }
        if !outcome.mends.is_empty() {
            println!("Mended (--mend {}):", args.mend.mend.name());
            for mend in &outcome.mends {
                println!("     {mend}");
            }
        }
        if !sent_back.is_empty() {
            println!("A run would send this plan back to the planner first (--mend {}):", args.mend.mend.name());
            for feedback in &sent_back {
                println!("     {feedback}");
            }
        }
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
    if !outcome.issues.is_empty() {
        let list: Vec<String> = outcome.issues.iter().map(|i| format!("  - {i}")).collect();
        return Err(Error::Agent(format!("the plan does not validate:\n{}", list.join("\n"))));
    }
    Ok(())
}
