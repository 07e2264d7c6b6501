//! Mends a step that declares it depends on an earlier step yet passes a value where that step's result belongs:
//! `create_invoice(amount: 1200)` listing `depends_on: ["s1"]`, where s1 computes the gross salary of 1000 + 200,
//! `convert_currency(amount: 7000)` after `calculate_profit(revenue: 7000, …)`, or `translate_text(text: "I'm not
//! good at english")` after `check_grammar(sentence: "I'm not good at english")`.
//!
//! Rule `dependencies`, profile `general`: the plan's own `depends_on` and the earlier tool's declared result
//! say where the value belongs.
//!
//! Why: the 1.5B planner often knows that a step needs an earlier result (it lists the dependency) but writes a
//! value instead of the reference, either one of the earlier step's own inputs or one it worked out itself
//! (`word: "Hello"` after translating "Hallo"), against the prompt's rule not to work out or guess a result (its
//! effect on NESTFUL: docs/benchmarks.md, "Plans mended where they break the prompt's rules"). It has one reading only:
//! the earlier step's tool gives exactly one field, a number or a text, and exactly one argument of that kind is
//! such a copy or such a guess (a number not among the goal's, a text the goal does not write). A language name is
//! no guess: it is a setting the planner picks (or the language mend wrote for a code), not a result it worked
//! out, and taking it for one sent a joke's encryption to a translation as its source language. Where the earlier
//! tool has several fields (the calculator's `result` and `text`), only an arithmetic expression may take its one
//! number field, in place of the one number it copied from that step's inputs ([`reference_in_expression`]; the
//! answers dev suite's "how far in 5 hours at that speed", planned `150*5` after `150/2`). A step that passes a path
//! inside one its dependency passes (a file written into the folder the dependency made) depends on it for order,
//! and is left as written.
//!
//! At run time, where the earlier step's result has no one reading (its tool declares no one result), the rule's
//! other part acts, once a run, in plan-ahead mode: a tool step that lists an earlier tool step in `depends_on` (one
//! that shows something: not the calculator, not a tool declared to change things), reads none of its result and
//! passes a text the goal does not hold (a path inside one the earlier step passes aside) was written before the
//! result it waits for was seen: the planner guessed what that step would show (a table's columns, a folder's files,
//! a list's ids). Once the earlier step has run, the steps after it are not run as guessed: the plan is written again with its
//! result in view ([`WRITTEN_BEFORE_SEEN`]; the steps that ran are not run again, a step with the same call takes
//! its result), and the revision does not count against `--max-replans`. On a shop's database the 1.5B planned
//! `list_tables`, then `describe_table("orders")` and queries naming columns it had not seen (`signup_date`, a
//! table `customer_orders`); the server answered "no such column", and the reading made up an answer. Applied by
//! the orchestrator after each round of steps (`agent::run::orchestrator::execution`).
//!
//! Equations across steps are the third part, also at run time: calculator steps whose equations share unknowns
//! depend on each other whatever `depends_on` says. A calculator step whose equations have more unknowns than
//! equations (`a + b = 60` alone) is solved with the other equations over those unknowns that the plan's other
//! calculator steps write, and that calculator calls earlier in the run wrote and had refused as underdetermined
//! ([`joined_equations`]): one system, so a split with two unknowns planned as two one-equation steps is answered,
//! and a replan after "underdetermined" that writes one equation again is solved with the equation written before.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use serde_json::{Map, Value};

use super::language_codes::is_language_name;
use super::percentages_as_fractions::percentages_in;
use super::support::goal_words::GoalWords;
use super::{only_output_field, parameter_description};
use crate::agent::numbers::{numbers_in, same_value};
use crate::agent::plan::refs::{literal_texts, one_list, references_in};
use crate::agent::plan::{Plan, Step};
use crate::tools::equation::{is_equation, unknowns_of};
use crate::tools::linear_system::{split_equations, MAX_EQUATIONS};
use crate::tools::{Calculator, ToolRegistry};

/// Whether `step` passes a path inside one `source` passes (`archive/old.txt` after `create_directory(path:
/// "archive")`): it then depends on `source` for order, acting inside what `source` made, and no argument stands in
/// for its result. Taking one for it wrote "Successfully created directory archive" into the file a goal asked to
/// move there (tasks-mcp `fs-folder-move`).
fn acts_inside(step: &Step, source: &Step) -> bool {
    let made: Vec<&str> = source
        .args
        .values()
        .filter_map(Value::as_str)
        .map(|p| p.trim_end_matches('/'))
        .filter(|p| !p.is_empty())
        .collect();
    step.args.values().filter_map(Value::as_str).any(|path| made.iter().any(|m| path.starts_with(&format!("{m}/"))))
}

/// Rewrites, in each step with a dependency it lists but does not reference, the one top-level argument that
/// copies an argument of that dependency or that the goal does not give, into a reference to the dependency's only
/// output field: a number argument where that field is a number, a text where it is a text (or a file, or of no
/// declared type). Returns one line per mend
/// (`s2: amount 7000 → $s1.profit$ (s2 depends on s1 but did not use its result)`).
pub fn mend_unused_dependencies(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    // The goal's numbers, and its percentages as fractions too (a tax rate "as a decimal" is 0.05 for "5%").
    let written: Vec<f64> = numbers_in(&plan.goal).iter().map(|n| n.value).collect();
    let fractions = percentages_in(&plan.goal).into_iter().map(|(_, p)| p / 100.0);
    let goal_numbers: Vec<f64> = written.iter().copied().chain(fractions).collect();
    let in_goal = |v: f64| goal_numbers.iter().any(|g| same_value(*g, v));
    let goal = GoalWords::new(&plan.goal);
    let mut mends = Vec::new();
    for k in 0..plan.steps.len() {
        let (earlier, rest) = plan.steps.split_at_mut(k);
        let step = &mut rest[0];
        let referenced: Vec<String> = step.args.values().flat_map(references_in).map(|r| r.step).collect();
        for dependency in step.depends_on.clone() {
            if referenced.contains(&dependency) {
                continue;
            }
            let Some(source) = earlier.iter().find(|s| s.id == dependency) else { continue };
            if acts_inside(step, source) {
                continue;
            }
            let Some(field) = only_output_field(registry, &source.tool) else {
                // A tool of several fields (the calculator's result and text): only an expression may take its
                // number.
                mends.extend(reference_in_expression(step, source, registry, &written, &in_goal));
                continue;
            };
            let stands_in: Box<dyn Fn(&Value) -> bool> = match field.json_type.as_deref() {
                Some("number" | "integer") => {
                    let inputs: Vec<f64> = source.args.values().filter_map(Value::as_f64).collect();
                    Box::new(move |value: &Value| {
                        value.as_f64().is_some_and(|v| inputs.iter().any(|s| same_value(*s, v)) || !in_goal(v))
                    })
                }
                Some("boolean" | "array" | "object") => continue,
                // A text, a file, or a field of no declared type: a text argument may stand in for it.
                _ => {
                    let inputs: Vec<&str> = source.args.values().filter_map(Value::as_str).collect();
                    let goal = &goal;
                    Box::new(move |value: &Value| {
                        value.as_str().is_some_and(|text| {
                            let guessed = !goal.mentions_value(value) && !is_language_name(text);
                            references_in(value).is_empty() && (inputs.contains(&text) || guessed)
                        })
                    })
                }
            };
            let copies_or_guesses: Vec<&String> =
                step.args.iter().filter(|(_, value)| stands_in(value)).map(|(name, _)| name).collect();
            let [name] = copies_or_guesses.as_slice() else {
                if copies_or_guesses.is_empty() {
                    mends.extend(reference_in_expression(step, source, registry, &written, &in_goal));
                }
                continue;
            };
            let name = (*name).clone();
            let reference = format!("${dependency}.{}$", field.name);
            mends.push(format!(
                "{}: {name} {} → {reference} ({} depends on {dependency} but did not use its result)",
                step.id, step.args[&name], step.id
            ));
            step.args.insert(name, Value::String(reference));
            // One argument per dependency; the next dependency looks at the step as mended.
        }
    }
    mends
}

/// Where a step lists `source` without using it and passes no value standing in for its result, an arithmetic
/// expression among its arguments (a parameter named or described as an expression or formula: `150*5` after s1's
/// `150/2`, "how far at that speed") that holds exactly one number copying one of `source`'s inputs (and written at
/// most once among the goal's numbers, `written`), and otherwise only the goal's numbers, takes `source`'s only
/// number field in that number's place (`$s1.result$*5`). A number of the planner's own beside it (`50-10`) leaves
/// two readings, and the expression stays.
fn reference_in_expression(
    step: &mut Step,
    source: &Step,
    registry: &ToolRegistry,
    written: &[f64],
    in_goal: &impl Fn(f64) -> bool,
) -> Option<String> {
    let fields = registry.spec(&source.tool)?.output_fields()?;
    let mut numeric = fields.iter().filter(|f| matches!(f.json_type.as_deref(), Some("number" | "integer")));
    let (Some(field), None) = (numeric.next(), numeric.next()) else { return None };
    let inputs: Vec<f64> = source
        .args
        .values()
        .flat_map(|v| match v {
            Value::String(text) => numbers_in(text).into_iter().map(|n| n.value).collect::<Vec<f64>>(),
            other => other.as_f64().into_iter().collect(),
        })
        .collect();
    // A number the goal writes twice ("3 notebooks at 4 dollars and 2 pens at 3 dollars") may be the goal's other
    // one: copied from the dependency only where the goal writes it at most once.
    let written_once = |v: f64| written.iter().filter(|g| same_value(**g, v)).count() <= 1;
    let copies = |v: f64| inputs.iter().any(|i| same_value(*i, v)) && written_once(v);
    let spec = registry.spec(&step.tool)?;
    let mut found = step.args.iter().filter_map(|(name, value)| {
        // Only where the parameter says it takes an expression: "2023-01-31" is digits and signs too.
        let takes_expression = |t: &str| {
            let t = t.to_lowercase();
            t.contains("expression") || t.contains("formula")
        };
        if !(takes_expression(name) || takes_expression(parameter_description(spec, name))) {
            return None;
        }
        let text = value.as_str()?;
        let numbers = expression_numbers(text)?;
        let copied: Vec<&(Range<usize>, f64)> = numbers.iter().filter(|(_, v)| copies(*v)).collect();
        let [(range, _)] = copied.as_slice() else { return None };
        let guessed = numbers.iter().any(|(_, v)| !copies(*v) && !in_goal(*v));
        (!guessed).then(|| {
            (name.clone(), format!("{}${}.{}${}", &text[..range.start], source.id, field.name, &text[range.end..]))
        })
    });
    let (Some((name, mended)), None) = (found.next(), found.next()) else { return None };
    let line = format!(
        "{}: {name} {} → \"{mended}\" ({} depends on {} but did not use its result)",
        step.id, step.args[&name], step.id, source.id
    );
    step.args.insert(name, Value::String(mended));
    Some(line)
}

/// The numbers of an arithmetic expression, a text of digits, operators and brackets only (`150*5`, `(96 + 4) /
/// 3`), with where each is written; `None` for any other text.
fn expression_numbers(text: &str) -> Option<Vec<(Range<usize>, f64)>> {
    let arithmetic = |c: char| c.is_ascii_digit() || " .+-*/^%()".contains(c);
    if !text.chars().all(arithmetic) || !text.chars().any(|c| c.is_ascii_digit()) {
        return None;
    }
    let bytes = text.as_bytes();
    let mut numbers = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        numbers.push((start..i, text[start..i].parse().ok()?));
    }
    Some(numbers)
}

/// The words that open the feedback of the rule's run-time part.
pub const WRITTEN_BEFORE_SEEN: &str = "Steps were written before the results they wait for were seen";

/// A step written before the result it waits for was seen: its id, the step it waits for, and how, in words for
/// the planner (`s3 picks an item of s2's list by position, and the list holds 0`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Blind {
    pub step: String,
    pub waited: String,
    pub how: String,
}

/// The tool steps of `plan` not yet done (no result in `outputs`) that were written blind on one of the steps just
/// called (`called`), each with the step it waits for: they wait for it without reading its result and pass a text
/// the goal does not hold, or they pick an item of a list it gave by position where that list holds other than one
/// item, or pass a list of it that came back empty ([`picks_blind`]).
pub(crate) fn written_before_seen(
    plan: &Plan,
    registry: &ToolRegistry,
    called: &[String],
    outputs: &HashMap<String, Value>,
) -> Vec<Blind> {
    let model_step = |step: &Step| registry.spec(&step.tool).is_none_or(|spec| spec.needs_model);
    // A step that shows something: not a model, not the calculator, not a tool declared to change things (a step
    // after a folder is made waits for it for order, not for what it shows).
    let shows = |step: &Step| {
        !model_step(step)
            && step.tool != Calculator::NAME
            && registry.spec(&step.tool).is_some_and(|spec| spec.changes_things != Some(true))
    };
    let goal = plan.goal.to_lowercase();
    let mut blind = Vec::new();
    for step in plan.steps.iter().filter(|s| !outputs.contains_key(&s.id) && !model_step(s)) {
        let picked = step.references().into_iter().find_map(|reference| {
            let seen = outputs.get(&reference.step).filter(|_| called.contains(&reference.step))?;
            let how = plan.step(&reference.step).filter(|earlier| shows(earlier)).and(picks_blind(&reference, seen))?;
            Some(Blind { step: step.id.clone(), waited: reference.step.clone(), how: format!("{} {how}", step.id) })
        });
        if let Some(picked) = picked {
            blind.push(picked);
            continue;
        }
        let read: HashSet<String> = step.references().into_iter().map(|r| r.step).collect();
        // A path inside one the earlier step passes (a file in the folder it lists) is no guess at its result: the
        // step follows it for order ([`acts_inside`], as the mend part reads it).
        let waited = step.depends_on.iter().find(|id| {
            called.contains(id)
                && !read.contains(*id)
                && plan.step(id).is_some_and(|earlier| shows(earlier) && !acts_inside(step, earlier))
        });
        if let Some(waited) = waited.filter(|_| guesses(step, &goal)) {
            let how = format!("{} waits for {waited}", step.id);
            blind.push(Blind { step: step.id.clone(), waited: waited.clone(), how });
        }
    }
    blind
}

/// Whether `reference` into `output` chose before it saw: it picks a list's item by position (`$s2.todos.0.id$`)
/// where the list holds none or several (which one the goal means is for the list's contents to say, not its
/// order as the planner imagined it), or it reads a list that came back empty. The list is found as the
/// `references` rule reads it at run time: a field the result lacks is its one list. Why: on a to-do list, the
/// 1.5B planned `filter_by_project("birthday")`, then `get_todo($s2.entries.0.id$)` and a delete of that id; the
/// filter found nothing, and the replans kept the guess.
fn picks_blind(reference: &crate::agent::plan::refs::Reference, output: &Value) -> Option<String> {
    let path: Vec<&str> = reference.field.as_deref().map(|f| f.split('.').collect()).unwrap_or_default();
    let index_at = path.iter().position(|part| part.parse::<usize>().is_ok());
    let mut current = output;
    for part in &path[..index_at.unwrap_or(path.len())] {
        current = match current {
            Value::Object(map) => map.get(*part).or_else(|| one_list(map).map(|(_, list)| list))?,
            _ => return None,
        };
    }
    let list = match current {
        Value::Object(map) => one_list(map).map(|(_, list)| list),
        other => Some(other),
    };
    let waited = &reference.step;
    match (list.and_then(Value::as_array), index_at) {
        (Some(items), Some(_)) if items.len() != 1 => {
            Some(format!("picks an item of {waited}'s list by position, and the list holds {}", items.len()))
        }
        (Some(items), None) if items.is_empty() => Some(format!("passes {waited}'s list, which came back empty")),
        _ => None,
    }
}

/// Whether `step` passes a text (references cut out) that `goal` (lower-cased) does not hold.
fn guesses(step: &Step, goal: &str) -> bool {
    literal_texts(&step.args).iter().any(|text| !goal.contains(&text.to_lowercase()))
}

/// The feedback that has the plan written again, with the results of the steps that ran (`results`: one line
/// each, as the execution record writes them).
pub(crate) fn feedback(blind: &[Blind], results: &[String]) -> String {
    let pairs: Vec<&str> = blind.iter().map(|b| b.how.as_str()).collect();
    format!(
        "{WRITTEN_BEFORE_SEEN} ({}), so their arguments are guesses. What has run so far:\n{}\nWrite the plan again \
         for the whole goal, with the names and values these results show (tables, columns, files, ids, fields); \
         keep the steps that ran as they are (a step with the same tool and arguments is not run again).",
        pairs.join(", "),
        results.join("\n")
    )
}

/// The words of the run log's line for a joined system: `a + b = 60 solved with the equations … write: a + b = 60;
/// a - b = 10`.
pub const EQUATIONS_JOINED: &str = "solved with the equations over its unknowns that other steps write";

/// Equations across steps: where `expression` (a calculator step's, resolved) is equations only, with more unknowns
/// than equations, the system of those equations and the ones among `written` (the other calculator expressions of
/// the plan and of the run's refused calls, in order) over the same unknowns, as one expression (`;` between
/// equations). Each added equation shares an unknown with the system so far; a piece that is no equation, has no
/// unknown, writes the same on both sides (`b = b`) or is already in the system is left out; the system stops at
/// as many equations as unknowns (or [`MAX_EQUATIONS`]). `None` where nothing is added.
pub fn joined_equations(expression: &str, written: &[String]) -> Option<String> {
    let normal = |text: &str| text.split_whitespace().collect::<String>();
    let equations = |text: &str| -> Option<Vec<(String, Vec<String>)>> {
        split_equations(text)
            .into_iter()
            .map(|piece| Some((piece.to_string(), unknowns_of(piece).filter(|_| is_equation(piece))?)))
            .collect()
    };
    let own = equations(expression)?;
    let mut unknowns: Vec<String> = own.iter().flat_map(|(_, names)| names.clone()).collect();
    unknowns.sort();
    unknowns.dedup();
    let mut system: Vec<String> = own.into_iter().map(|(piece, _)| piece).collect();
    if system.is_empty() || unknowns.len() <= system.len() {
        return None;
    }
    let mut candidates: Vec<(String, Vec<String>)> =
        written.iter().filter_map(|text| equations(text)).flatten().collect();
    candidates.retain(|(piece, names)| {
        let (left, right) =
            piece.replace("==", "=").split_once('=').map(|(l, r)| (normal(l), normal(r))).unwrap_or_default();
        !names.is_empty() && left != right
    });
    let added_from = system.len();
    // Adding an equation may bring a new unknown that a later candidate pins down: look again after each addition.
    while system.len() < unknowns.len().min(MAX_EQUATIONS) {
        let next = candidates.iter().position(|(piece, names)| {
            names.iter().any(|name| unknowns.contains(name)) && !system.iter().any(|held| normal(held) == normal(piece))
        });
        let Some(at) = next else { break };
        let (piece, names) = candidates.remove(at);
        unknowns.extend(names.into_iter().filter(|name| !unknowns.contains(name)).collect::<Vec<_>>());
        system.push(piece);
    }
    (system.len() > added_from).then(|| system.join("; "))
}

/// The calculator expressions `step`'s equations may be joined with ([`joined_equations`]): those of the plan's other
/// calculator steps that reference no result, then those of the run's `failed` calls of the calculator (tool,
/// arguments, error), each once.
pub(crate) fn equations_written(
    plan: &Plan,
    step: &Step,
    failed: &[(String, Map<String, Value>, String)],
) -> Vec<String> {
    let planned =
        plan.steps.iter().filter(|s| s.id != step.id && s.tool == Calculator::NAME && s.references().is_empty());
    let refused = failed.iter().filter(|(tool, ..)| tool == Calculator::NAME).map(|(_, args, _)| args);
    let mut written: Vec<String> = Vec::new();
    for args in planned.map(|s| &s.args).chain(refused) {
        if let Some(text) = args.get("expression").and_then(Value::as_str) {
            if !written.iter().any(|held| held == text) {
                written.push(text.to_string());
            }
        }
    }
    written
}

/// Rule `dependencies` (mend, general).
pub struct Dependencies;

impl super::Rule for Dependencies {
    fn about(&self) -> super::About {
        super::About {
            name: "dependencies",
            stage: super::Stage::Mend,
            profile: super::Profile::General,
            keys_on: "a step listing an earlier one in depends_on but passing a value where that step's one declared result belongs: a reference to it; at run time (once a run), where it reads none of that result and passes a text the goal does not hold, or picks an item of a list it gave by position where the list holds none or several, or passes a list of it that came back empty: the plan is written again once that result is seen; a calculator step with more unknowns than equations: solved with the equations over them that the plan's other calculator steps and the run's refused calculator calls write",
        }
    }

    fn mend(&self, plan: &mut Plan, tools: &ToolRegistry, _seen: &str) -> Vec<String> {
        mend_unused_dependencies(plan, tools)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{Llm, Tool, ToolContext, ToolError};

    /// A tool of a server that says nothing of what it changes or returns.
    struct Named(&'static str);

    impl Tool for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            "a server's tool"
        }
        fn args_schema(&self) -> Value {
            serde_json::json!({"type": "object", "properties": {"query": {"type": "string"}}})
        }
        fn call(&self, _args: &Value, _context: &ToolContext) -> Result<Value, ToolError> {
            Ok(Value::Null)
        }
    }

    fn registry() -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        registry.register(Named("list_tables")).unwrap();
        registry.register(Named("read_query")).unwrap();
        registry.register(Llm).unwrap();
        registry
    }

    fn plan(goal: &str, query: &str, depends_on: &[&str]) -> Plan {
        Plan::for_goal(
            goal,
            serde_json::json!([
                {"id": "s1", "tool": "list_tables", "args": {}},
                {"id": "s2", "tool": "read_query", "args": {"query": query}, "depends_on": depends_on},
                {"id": "s3", "tool": "llm", "args": {"prompt": "Answer: $s2$"}, "depends_on": ["s2"]}
            ]),
        )
    }

    #[test]
    fn a_call_waiting_for_a_result_it_does_not_read_is_written_again_after_it() {
        let registry = registry();
        let called = ["s1".to_string()];
        let done: HashMap<String, Value> = [("s1".to_string(), serde_json::json!({"text": "customers"}))].into();
        let guessed = plan("Who signed up last?", "SELECT name FROM customers ORDER BY signup_date", &["s1"]);
        let pairs =
            |blind: Vec<Blind>| -> Vec<(String, String)> { blind.into_iter().map(|b| (b.step, b.waited)).collect() };
        assert_eq!(pairs(written_before_seen(&guessed, &registry, &called, &done)), [("s2".into(), "s1".into())]);
        // Not where it reads the result, does not wait for it, passes only the goal's text, or the step it waits
        // for came from the cache (its result was in view).
        let reads = plan("Who signed up last?", "SELECT * FROM $s1.text$", &["s1"]);
        assert!(written_before_seen(&reads, &registry, &called, &done).is_empty());
        assert!(written_before_seen(&plan("Who?", "SELECT 1", &[]), &registry, &called, &done).is_empty());
        let asked = plan("Run SELECT 1 for me", "SELECT 1", &["s1"]);
        assert!(written_before_seen(&asked, &registry, &called, &done).is_empty());
        assert!(written_before_seen(&guessed, &registry, &[], &done).is_empty());
        // A path inside the one the earlier step lists waits for it for order only.
        let mut inside = plan("Read the report in docs", "docs/report.txt", &["s1"]);
        inside.steps[0].args.insert("query".into(), "docs".into());
        assert!(written_before_seen(&inside, &registry, &called, &done).is_empty());
        let blind = Blind { step: "s2".into(), waited: "s1".into(), how: "s2 waits for s1".into() };
        let text = feedback(&[blind], &["- s1 (list_tables) succeeded with output x".into()]);
        assert!(text.starts_with(WRITTEN_BEFORE_SEEN) && text.contains("s2 waits for s1") && text.contains("output x"));
    }

    #[test]
    fn an_item_picked_by_position_from_a_list_of_other_than_one_is_written_again_after_it() {
        let registry = registry();
        let called = ["s1".to_string()];
        let picks = |field: &str| plan("Take the present off my list", &format!("${field}$"), &["s1"]);
        let seen = |list: Value| -> HashMap<String, Value> {
            [("s1".to_string(), serde_json::json!({"todos": list, "count": 0}))].into()
        };
        let two = seen(serde_json::json!([{"id": "1"}, {"id": "2"}]));
        let one = seen(serde_json::json!([{"id": "2"}]));
        let none = seen(serde_json::json!([]));
        let how = |plan: &Plan, seen: &HashMap<String, Value>| -> Vec<String> {
            written_before_seen(plan, &registry, &called, seen).into_iter().map(|b| b.how).collect()
        };
        // By position, under the field the result has or one it lacks (its one list is read): none or several.
        assert_eq!(
            how(&picks("s1.entries.0.id"), &two),
            ["s2 picks an item of s1's list by position, and the list holds 2"]
        );
        assert_eq!(
            how(&picks("s1.todos.1.id"), &none),
            ["s2 picks an item of s1's list by position, and the list holds 0"]
        );
        assert!(how(&picks("s1.todos.0.id"), &one).is_empty());
        // A list passed whole: only where it came back empty.
        assert_eq!(how(&picks("s1.todos"), &none), ["s2 passes s1's list, which came back empty"]);
        assert!(how(&picks("s1.todos"), &two).is_empty());
        // Not before the list was called this round, nor for a model's reading (s3 reads s2 whole).
        assert!(written_before_seen(&picks("s1.todos.0.id"), &registry, &[], &two).is_empty());
    }

    #[test]
    fn equations_over_shared_unknowns_are_solved_as_one_system() {
        let written = |texts: &[&str]| texts.iter().map(ToString::to_string).collect::<Vec<_>>();
        // A split planned as one equation a step: each step is solved with the other's equation.
        let others = written(&["a - b = 10", "c * 2 = 8"]);
        assert_eq!(joined_equations("a + b = 60", &others).as_deref(), Some("a + b = 60; a - b = 10"));
        // A replan's `b = b` is no equation to add; an equation already held is not added twice.
        let replanned = written(&["b = b", "a + b = 60", "a = b + 10"]);
        assert_eq!(joined_equations("a + b = 60", &replanned).as_deref(), Some("a + b = 60; a = b + 10"));
        // An equation that brings a new unknown is followed by the one that pins it down.
        let chain = written(&["b = 2 * c", "c + 1 = a"]);
        assert_eq!(joined_equations("a + b = 9", &chain).as_deref(), Some("a + b = 9; b = 2 * c; c + 1 = a"));
        // Nothing joins where the step is solvable alone, is arithmetic, or no equation shares its unknowns.
        assert_eq!(joined_equations("3 * x = 9", &others), None);
        assert_eq!(joined_equations("6 * 7", &others), None);
        assert_eq!(joined_equations("p + q = 5", &others), None);
    }
}
