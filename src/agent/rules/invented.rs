//! Drops a step the goal never asked for whose result a later step reads: a tool the goal does not name, called
//! only with values the goal does not write (`calculate_gross_salary(basic_salary: 5000, allowance: 1000)` between
//! "the average sales per day" and "convert this amount to EUR"). The step that read its result reads the result
//! before it instead, the one nothing read.
//!
//! Rule `invented`, profile `nestful` only: it judges which tool a step serves by the goal's words, which holds for
//! NESTFUL's catalogues of distractor tools, not for a tool a real goal needs without naming it.
//!
//! Why: among distracting tools the 1.5B planner sometimes puts a made-up call between two parts of the goal and
//! passes its result on, so the part after it reads a number nobody asked for. The rules say to copy values as the
//! goal gives them and to use as few steps as the goal needs; a step breaking both has no part in the goal. Every
//! reading must be clear, or the plan is left as written: the tool's name has words and the goal uses none, no
//! value has a word or number of the goal's, a later step reads it, and an earlier result nothing read fits where
//! it is read. A made-up step that nothing reads stays: without the stranded result beside it, a goal may name the
//! tool by another word ("the weather" for `get_forecast(city: "current location")`), and such a step costs a call,
//! not a wrong answer. A step whose reader wants another kind of value than the result before it gives (a number
//! where the earlier result is an ID) stays too (docs/benchmarks.md, "Steps nobody asked for, durations, texts for
//! a result").

use serde_json::Value;

use super::support::goal_words::GoalWords;
use crate::agent::plan::refs::{
    parse_reference, reference_fits, references_in, rewrite_references, schema_types, Reference,
};
use crate::agent::plan::{Plan, Step};
use crate::tools::{OutputField, ToolRegistry, BUILTIN_TOOLS};

/// Verbs that tool names start with (`calculate_`, `get_`): they say what a tool does, not which part of a goal
/// it serves, so a goal's "calculate" names no `calculate_gross_salary`.
const TOOL_VERBS: &[&str] = &[
    "add",
    "analyze",
    "book",
    "calculate",
    "check",
    "compute",
    "convert",
    "create",
    "execute",
    "fetch",
    "find",
    "generate",
    "get",
    "list",
    "look",
    "lookup",
    "make",
    "play",
    "read",
    "record",
    "run",
    "schedule",
    "search",
    "send",
    "set",
    "update",
    "write",
];

/// Removes each step whose tool the goal does not name, whose arguments (at least one, no reference among them)
/// hold nothing the goal writes, and whose result a later step reads; the steps reading it are pointed at the
/// latest earlier step whose result nothing reads. Returns one line per step dropped (`s2: dropped,
/// calculate_gross_salary(…) is no part of the goal; s3 reads $s1.average_sales_per_day$ instead`).
pub fn drop_invented_steps(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    let goal = GoalWords::new(&plan.goal);
    let mut lines = Vec::new();
    let mut k = 0;
    while k < plan.steps.len() {
        if !is_invented(&plan.steps[k], &goal) {
            k += 1;
            continue;
        }
        let Some(instead) = result_instead(plan, k, registry, &goal) else {
            k += 1;
            continue;
        };
        let dropped = plan.steps.remove(k);
        let mut readers = Vec::new();
        for step in &mut plan.steps[k..] {
            step.depends_on.retain(|d| *d != dropped.id);
            if !step.references().iter().any(|r| r.step == dropped.id) {
                continue;
            }
            let mut redirect =
                |reference: &Reference, _whole: bool| (reference.step == dropped.id).then(|| instead.clone());
            for value in step.args.values_mut() {
                rewrite_references(value, &mut redirect);
            }
            readers.push(step.id.clone());
            if !step.depends_on.contains(&instead.step) {
                step.depends_on.push(instead.step.clone());
            }
        }
        let call = format!("{}({})", dropped.tool, Value::Object(dropped.args));
        lines.push(format!(
            "{}: dropped, {call} is no part of the goal; {} reads {instead} instead",
            dropped.id,
            readers.join(", ")
        ));
    }
    lines
}

/// Whether the step calls a tool the goal does not name with values the goal does not write. A built-in tool
/// (the calculator, files, the executor model) serves any goal, so no goal needs to name it.
fn is_invented(step: &Step, goal: &GoalWords) -> bool {
    if BUILTIN_TOOLS.contains(&step.tool.as_str()) {
        return false;
    }
    let (used, named) = goal.name_words_used(&step.tool, TOOL_VERBS);
    let values_made_up = step.args.values().all(|v| references_in(v).is_empty() && !goal.mentions_any_part(v));
    let has_values = step.args.values().any(has_number_or_text);
    named > 0 && used == 0 && has_values && values_made_up
}

fn has_number_or_text(value: &Value) -> bool {
    match value {
        Value::Number(_) | Value::String(_) => true,
        Value::Array(items) => items.iter().any(has_number_or_text),
        Value::Object(map) => map.values().any(has_number_or_text),
        Value::Bool(_) | Value::Null => false,
    }
}

/// What the steps reading step `k` read once it is dropped: the latest earlier step whose result no step reads
/// (its only output field that fits every argument reading step `k`, or of several such the one whose name the
/// goal uses most); `None` where no step reads step `k` or there is no such single reading.
fn result_instead(plan: &Plan, k: usize, registry: &ToolRegistry, goal: &GoalWords) -> Option<Reference> {
    let id = &plan.steps[k].id;
    let read_steps: Vec<String> =
        plan.steps.iter().flat_map(|s| s.args.values().flat_map(references_in)).map(|r| r.step).collect();
    if !read_steps.contains(id) {
        return None;
    }
    // The types each argument that is a whole reference to step k admits (inside text, any field fits).
    let reading_types: Vec<Vec<&str>> = plan.steps[k + 1..]
        .iter()
        .flat_map(|step| {
            let schema = registry.spec(&step.tool).map(|spec| &spec.args_schema);
            step.args.iter().filter_map(move |(name, value)| {
                let reference = parse_reference(value.as_str()?)?;
                (reference.step == *id).then(|| schema.map_or(Vec::new(), |s| schema_types(&s["properties"][name])))
            })
        })
        .collect();
    let source = plan.steps[..k].iter().rev().find(|s| !read_steps.contains(&s.id))?;
    let fields: Vec<OutputField> = registry
        .spec(&source.tool)?
        .output_fields()?
        .into_iter()
        .filter(|f| reading_types.iter().all(|types| reference_fits(types, f.json_type.as_deref())))
        .collect();
    let field = match fields.as_slice() {
        [] => return None,
        [only] => only.name.clone(),
        _ => {
            let share = |name: &str| {
                let (used, named) = goal.name_words_used(name, &[]);
                if named == 0 {
                    0.0
                } else {
                    used as f64 / named as f64
                }
            };
            let best = fields.iter().map(|f| share(&f.name)).fold(0.0, f64::max);
            let mut tops = fields.iter().filter(|f| share(&f.name) == best);
            match (best > 0.0, tops.next(), tops.next()) {
                (true, Some(top), None) => top.name.clone(),
                _ => return None,
            }
        }
    };
    Some(Reference { step: source.id.clone(), field: Some(field) })
}

/// Rule `invented` (mend, nestful).
pub struct Invented;

impl super::Rule for Invented {
    fn about(&self) -> super::About {
        super::About {
            name: "invented",
            stage: super::Stage::Mend,
            profile: super::Profile::Nestful,
            keys_on: "a call of a tool the goal does not name, with values it does not write, whose result is read: dropped (NESTFUL's distractors)",
        }
    }

    fn mend(&self, plan: &mut Plan, tools: &ToolRegistry, _seen: &str) -> Vec<String> {
        drop_invented_steps(plan, tools)
    }
}
