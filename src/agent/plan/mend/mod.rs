//! Mends a model-written plan where its mistake has one reading, before validation. Each rule is stated in terms
//! of the tool's schema and the goal, and belongs to a profile (`--mend`, [`Mend`]):
//!
//! - `general` (the default of run, plan, batch, serve; every rule follows from the tools' schemas, the plan's own
//!   references and the goal):
//!   - [`drop_repeated_calls`] (`duplicates`): a step with the same tool and arguments as an earlier one is
//!     dropped and references to it point to the earlier step (the orchestrator would answer it from the earlier
//!     result anyway).
//!   - [`drop_unasked_reads`] (`unasked-reads-dropped`): a `read_file` or `list_dir` step that no step reads, where
//!     the goal names no file, folder or path, is dropped (the rest of the plan is kept; a read that a step uses is
//!     the `workspace-unasked` check's, which sends the plan back).
//!   - [`mend_references`] (`references`): a reference to an output field the tool does not declare, where the
//!     tool declares exactly one (`$s1.result$` on `llm`, whose only field is `text`), a whole-output reference
//!     inside longer text to such a tool, and a list of one reference to a field declared as a list.
//!   - [`mend_percentages_to_fractions`] (`percentages-as-fractions`): a number the goal writes as a percentage
//!     ("8%"), passed as `8` to a parameter whose description asks for a decimal or fraction, becomes `0.08`.
//!   - [`mend_durations`] (`durations`): a duration the goal gives in one unit, passed unconverted to a parameter
//!     whose description names exactly one other unit ("5 minutes" into a parameter "in seconds": 300).
//!   - [`mend_dates_and_times`] (`dates-and-times`): a date or time passed in another form than the one its
//!     parameter's schema asks for (`format`, `pattern`, a description showing the form like `HH:MM` or
//!     `MM/DD/YYYY`) is written in that form by code (`9:30 AM` → `09:30`); where the schema asks for none, a date
//!     or time the goal writes is passed as the goal writes it (`2024-01-15` → `01/15/2024`).
//!   - [`mend_unused_dates_and_times`] (`unused-dates-and-times`): a date or time the goal writes that no step
//!     passes goes to the one parameter that takes that kind of value (by the form its schema asks for, else by
//!     the words "date", "day", "time" in its name or description) and is left out or filled by an earlier
//!     result (`time: "$s1.datetime$"` → `"09:30"` for "It's 9:30 in the morning in Tokyo").
//!   - [`mend_time_zones`] (`time-zones`): a time zone passed under a name the time zone database does not have,
//!     to a parameter whose description says "IANA" or shows a database name, becomes the zone of the place it
//!     names (`America/Honolulu` → `Pacific/Honolulu`), else of the one place the goal writes that no other zone
//!     argument of the call takes (`Asia/Makati` for "the time in Manila" → `Asia/Manila`).
//!   - [`mend_languages_to_codes`] (`language-codes`): a language the goal names, passed by name to a language
//!     parameter whose description asks for a code or ISO code, becomes its code (`French` → `fr`).
//!   - [`mend_paths_as_written`] (`paths-as-written`): a path whose file name the goal writes but whose folder
//!     neither the goal nor an earlier result shows becomes the path as the goal writes it
//!     (`shopping_list/list.txt` → `list.txt`).
//!   - [`restore_declared_defaults`] (`declared-defaults`): a number passed to an optional parameter with a
//!     declared numeric default, other than the default, that the goal neither writes nor names the parameter of,
//!     is left out so the default applies (`fetch` `start_index: 100` → left out, default 0).
//!   - [`set_asked_switches`] (`switches-asked`): an optional boolean parameter that is off, whose description has a
//!     word of six letters or more the tool's own description does not use and the goal does, is turned on, unless
//!     the goal says no, not, never, without or except (`list_dir` `recursive` for "look in the subfolders too").
//!   - [`ask_the_goal`] (`reading-asks-the-goal`): where the goal asks a question and the plan ends in an `llm`
//!     step no step reads, its prompt becomes the goal as written followed by the whole results its reading rests
//!     on (through earlier `llm` readings of results, which are left out once nothing reads them).
//!   - [`drop_unused_workings`] (`unused-workings`): where the goal asks for a change and asks to be told nothing,
//!     an `llm` or `calculator` step worked from earlier results that no step uses is dropped (and back along the
//!     workings only it read).
//!   - [`mend_unused_dependencies`] (`dependencies`): a step that lists an earlier step in `depends_on` but passes
//!     a value where that step's one declared result belongs takes a reference to the result.
//!   - [`drop_prompt_examples`] (`prompt-examples`): a parenthesised example ("(e.g., 'Wednesday, January 1,
//!     2023')") the goal does not give is left out of a model step's prompt that reads an earlier result (the
//!     small executor answers with the example).
//!   - `fallback-values` is in this profile too, but is no function here: it asks the planner, so it runs where a
//!     plan is written (`agent::plan::fallbacks`, `planner::check_fallbacks`), after these rules.
//! - `nestful` (bench only; the general rules and these, which match NESTFUL's gold conventions rather than a
//!   rule about tools, so a real API could be given a wrong value by them):
//!   - [`mend_percentages_as_written`] (`percentages-as-written`): a percentage passed as its fraction (`0.05` for
//!     "5%") to a parameter whose description does not say "decimal" or "fraction" becomes the number as written
//!     (`5`). An API that takes 0.05 would get 5, a 100× error; NESTFUL's gold writes 5.
//!   - [`mend_languages_to_names`] (`language-names`): a language code (`fr`) passed to a language parameter
//!     whose description does not ask for a code becomes the language's name. Many APIs take codes without
//!     saying so; NESTFUL's gold writes names.
//!   - [`drop_unmentioned_optional`] (`optional`): an optional argument the goal names neither by value nor by
//!     the parameter's name is dropped, so the tool's default applies. A sensible value the planner chose (a
//!     unit, a format) is lost; NESTFUL's gold leaves such arguments out.
//!   - [`drop_invented_steps`] (`invented`): a call of a tool the goal does not name, with values the goal does
//!     not write, whose result a later step reads, is dropped and its reader pointed at an earlier result. The
//!     goal's words decide which tool a step serves, which holds for NESTFUL's distractor catalogues, not for a
//!     tool a real goal needs without naming it.
//!
//! Every rule names its change in one line (`s2: $s1.result$ → $s1.text$`), and [`mend_plan`] records each change
//! as a [`MendChange`] (rule, step, argument, before, after), which `tandem plan`, the run log's `plan_written`
//! event (`mends`), `tandem runs show` and `tandem run --json` show.

mod defaults;
mod dependencies;
mod duplicates;
mod durations;
mod examples;
pub mod forms;
mod goal_words;
mod invented;
mod languages;
mod optional;
mod options;
mod paths;
mod percentages;
mod reading;
mod references;
mod unasked;
mod unused_moments;
mod workings;
mod written;
mod zones;

pub use defaults::restore_declared_defaults;
pub use dependencies::mend_unused_dependencies;
pub use duplicates::drop_repeated_calls;
pub use durations::mend_durations;
pub use examples::drop_prompt_examples;
pub(crate) use goal_words::{split_name, words};
pub use invented::drop_invented_steps;
pub use languages::{mend_languages, mend_languages_to_codes, mend_languages_to_names};
pub use optional::drop_unmentioned_optional;
pub use options::set_asked_switches;
pub use paths::mend_paths_as_written;
pub use percentages::{mend_percentages, mend_percentages_as_written, mend_percentages_to_fractions};
pub use reading::ask_the_goal;
pub use references::mend_references;
pub use unasked::drop_unasked_reads;
pub use unused_moments::mend_unused_dates_and_times;
pub use workings::drop_unused_workings;
pub use written::mend_dates_and_times;
pub use zones::{mend_time_zones, zones_from_results};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::agent::plan::Plan;
use crate::settings::Mend;
use crate::tools::{OutputField, ToolRegistry, ToolSpec};

/// One change a mend made to a plan: which rule, at which step and argument, and the value before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MendChange {
    /// The rule's name (`references`, `durations`, …; the list in this module's documentation).
    pub rule: String,
    /// The step's id.
    pub step: String,
    /// The argument changed; absent where the step itself was dropped (`before` is its call, `after` null) or its
    /// dependencies changed (`before` and `after` are `{"depends_on": [...]}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument: Option<String>,
    /// The value before (null: the argument was absent).
    pub before: Value,
    /// The value after (null: the argument, or the step, was left out).
    pub after: Value,
}

impl std::fmt::Display for MendChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let after = if self.after.is_null() { "left out".to_string() } else { self.after.to_string() };
        match &self.argument {
            Some(argument) => write!(f, "{} {argument}: {} → {after} [{}]", self.step, self.before, self.rule),
            None => write!(f, "{}: {} → {after} [{}]", self.step, self.before, self.rule),
        }
    }
}

/// What the mends did to a plan: each rule's lines (with its reason) and each change with its before and after.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mended {
    /// One line per mend, as the rule wrote it (`s1: rate 0.05 → 5 (the goal's 5%)`).
    pub lines: Vec<String>,
    /// Every change, in the order the rules ran.
    pub changes: Vec<MendChange>,
}

/// Whether a rule runs in every profile that mends or only in NESTFUL's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    General,
    Nestful,
}

/// One rule: its name, its profile and what it does to a plan, given the tools and what the planner was shown
/// beside the goal (earlier results; only `paths-as-written` reads it), returning its lines.
type Rule = (&'static str, Scope, fn(&mut Plan, &ToolRegistry, &str) -> Vec<String>);

/// The rules in the order they run: repeated calls, references, percentages, durations, languages, paths,
/// unmentioned optional arguments (judged on the values as mended), unused dependencies (judged on the arguments
/// left), then invented steps (last, so a step that listed one as a dependency and now references it is pointed
/// on). The two directions of percentages and of languages exclude each other (the description asks for a decimal
/// or a code, or it does not), so running them apart changes nothing.
const RULES: &[Rule] = &[
    ("duplicates", Scope::General, |plan, _, _| drop_repeated_calls(plan)),
    ("unasked-reads-dropped", Scope::General, |plan, _, _| drop_unasked_reads(plan)),
    ("references", Scope::General, |plan, tools, _| mend_references(plan, tools)),
    ("percentages-as-fractions", Scope::General, |plan, tools, _| mend_percentages_to_fractions(plan, tools)),
    ("percentages-as-written", Scope::Nestful, |plan, tools, _| mend_percentages_as_written(plan, tools)),
    ("durations", Scope::General, |plan, tools, _| mend_durations(plan, tools)),
    ("dates-and-times", Scope::General, |plan, tools, _| mend_dates_and_times(plan, tools)),
    ("unused-dates-and-times", Scope::General, |plan, tools, _| mend_unused_dates_and_times(plan, tools)),
    ("time-zones", Scope::General, |plan, tools, _| mend_time_zones(plan, tools)),
    ("language-codes", Scope::General, |plan, tools, _| mend_languages_to_codes(plan, tools)),
    ("language-names", Scope::Nestful, |plan, tools, _| mend_languages_to_names(plan, tools)),
    ("paths-as-written", Scope::General, mend_paths_as_written),
    ("declared-defaults", Scope::General, |plan, tools, _| restore_declared_defaults(plan, tools)),
    ("switches-asked", Scope::General, |plan, tools, _| set_asked_switches(plan, tools)),
    ("optional", Scope::Nestful, |plan, tools, _| drop_unmentioned_optional(plan, tools)),
    ("reading-asks-the-goal", Scope::General, |plan, _, _| ask_the_goal(plan)),
    ("unused-workings", Scope::General, |plan, _, _| drop_unused_workings(plan)),
    ("dependencies", Scope::General, |plan, tools, _| mend_unused_dependencies(plan, tools)),
    ("prompt-examples", Scope::General, |plan, tools, _| drop_prompt_examples(plan, tools)),
    ("invented", Scope::Nestful, |plan, tools, _| drop_invented_steps(plan, tools)),
];

/// The names of the rules `profile` runs, in order.
pub fn rule_names(profile: Mend) -> Vec<&'static str> {
    RULES.iter().filter(|(_, scope, _)| runs_in(*scope, profile)).map(|(name, _, _)| *name).collect()
}

fn runs_in(scope: Scope, profile: Mend) -> bool {
    match profile {
        Mend::Off => false,
        Mend::General => scope == Scope::General,
        Mend::Nestful => true,
    }
}

/// Runs the rules of `profile` in turn ([`RULES`]); returns their lines and every change they made. `Mend::Off`
/// leaves the plan as written. `seen`: what the planner was shown beside the goal (earlier results), or "".
pub fn mend_plan(plan: &mut Plan, registry: &ToolRegistry, profile: Mend, seen: &str) -> Mended {
    let mut mended = Mended::default();
    for (name, scope, rule) in RULES {
        if !runs_in(*scope, profile) {
            continue;
        }
        let before = plan.clone();
        let lines = rule(plan, registry, seen);
        if lines.is_empty() && before == *plan {
            continue;
        }
        mended.changes.extend(changes(name, &before, plan));
        mended.lines.extend(lines);
    }
    mended
}

/// The changes from `before` to `after`, step by step (matched by id): a step dropped, an argument changed, added
/// or left out, the dependencies changed.
fn changes(rule: &str, before: &Plan, after: &Plan) -> Vec<MendChange> {
    let change = |step: &str, argument: Option<&str>, before: Value, after: Value| MendChange {
        rule: rule.to_string(),
        step: step.to_string(),
        argument: argument.map(str::to_string),
        before,
        after,
    };
    let mut found = Vec::new();
    for old in &before.steps {
        let Some(new) = after.steps.iter().find(|s| s.id == old.id) else {
            let call = json!({"tool": old.tool, "args": old.args});
            found.push(change(&old.id, None, call, Value::Null));
            continue;
        };
        for (name, value) in &old.args {
            let now = new.args.get(name);
            if now != Some(value) {
                found.push(change(&old.id, Some(name), value.clone(), now.cloned().unwrap_or(Value::Null)));
            }
        }
        for (name, value) in new.args.iter().filter(|(name, _)| !old.args.contains_key(*name)) {
            found.push(change(&old.id, Some(name), Value::Null, value.clone()));
        }
        if old.depends_on != new.depends_on {
            let (was, is) = (json!({"depends_on": old.depends_on}), json!({"depends_on": new.depends_on}));
            found.push(change(&old.id, None, was, is));
        }
    }
    found
}

/// Offers each top-level argument of each step whose tool the registry knows to `rewrite(name, value,
/// description)` (the parameter's description in lowercase), which gives the new value and why, or `None` to keep
/// it. Returns one line per rewrite: `s1: interest_rate 0.05 → 5 (the goal's 5%)`.
fn rewrite_arguments(
    plan: &mut Plan,
    registry: &ToolRegistry,
    mut rewrite: impl FnMut(&str, &Value, &str) -> Option<(Value, String)>,
) -> Vec<String> {
    let mut lines = Vec::new();
    for step in &mut plan.steps {
        let Some(spec) = registry.spec(&step.tool) else { continue };
        for (name, value) in step.args.iter_mut() {
            if let Some((new, why)) = rewrite(name, value, &parameter_description(spec, name).to_lowercase()) {
                lines.push(format!("{}: {name} {value} → {new} ({why})", step.id));
                *value = new;
            }
        }
    }
    lines
}

/// Whether an argument schema lists `name` among its `required` parameters.
fn is_required(schema: &Value, name: &str) -> bool {
    schema["required"].as_array().is_some_and(|names| names.iter().any(|n| n.as_str() == Some(name)))
}

/// Leaves out each argument of an optional parameter (declared by the tool, not in its `required` list: an
/// undeclared one is validation's to report) that holds no reference, that the goal names neither by value nor by
/// the parameter's name, and for which `reason(parameter schema, value)` gives a reason (`""` or `"default 0, "`);
/// returns one line per argument (`s1: max_results 10 left out (optional, and the goal names neither it nor 10)`).
fn leave_out_unasked(
    plan: &mut Plan,
    registry: &ToolRegistry,
    reason: impl Fn(&Value, &Value) -> Option<String>,
) -> Vec<String> {
    let goal = goal_words::GoalWords::new(&plan.goal);
    let mut lines = Vec::new();
    for step in &mut plan.steps {
        let Some(spec) = registry.spec(&step.tool) else { continue };
        let schema = &spec.args_schema;
        let unasked: Vec<String> = step
            .args
            .iter()
            .filter_map(|(name, value)| {
                let parameter = schema["properties"].get(name)?;
                if is_required(schema, name)
                    || !crate::agent::plan::refs::references_in(value).is_empty()
                    || goal.mentions_name(name)
                    || goal.mentions_value(value)
                {
                    return None;
                }
                let why = reason(parameter, value)?;
                lines.push(format!(
                    "{}: {name} {value} left out (optional, {why}and the goal names neither it nor {value})",
                    step.id
                ));
                Some(name.clone())
            })
            .collect();
        step.args.retain(|name, _| !unasked.contains(name));
    }
    lines
}

/// The description a tool gives its parameter `name`, or "" where it gives none.
pub(crate) fn parameter_description<'a>(spec: &'a ToolSpec, name: &str) -> &'a str {
    spec.args_schema["properties"][name]["description"].as_str().unwrap_or("")
}

/// The only output field of `tool`, where the registry knows it and it declares exactly one.
fn only_output_field(registry: &ToolRegistry, tool: &str) -> Option<OutputField> {
    let mut fields = registry.spec(tool)?.output_fields()?;
    (fields.len() == 1).then(|| fields.remove(0))
}
