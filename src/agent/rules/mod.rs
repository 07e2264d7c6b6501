//! The rule book: every rule that mends, checks or steers a plan the planner wrote, in one table ([`RULES`]), one
//! file per rule, each named after its rule. A rule implements [`Rule`]: what it is ([`About`]: name, stage,
//! profile, what it keys on) and, by its stage, what it does:
//!
//! - [`Stage::Mend`]: rewrites a written plan before validation where its mistake has one reading
//!   ([`mend_plan`] runs them in the table's order);
//! - [`Stage::Check`]: sends a written plan back to the planner with feedback before it runs ([`check_plan`]);
//! - [`Stage::Run`]: decides something while a plan runs (a value read from a text result, a replan written
//!   again); the orchestrator asks [`RuleSet::on`] where it applies it, and the rule's file holds its logic or
//!   says where it is applied.
//!
//! Which rules are on is a [`RuleSet`]: a profile (`--mend off|general|nestful`) and the rules turned off one by
//! one (`--rules-off NAME,…`). Every rule is stated on what tools declare (schemas, annotations), what the plan
//! holds (references, what reads what) and what the goal writes literally (values, `?`), never on lists of
//! English words; the `nestful` profile adds rules that match one benchmark's gold conventions. Every change and
//! every refusal is logged at the default level (`warn`, target `tandem::rules`) with its rule, and recorded
//! ([`MendChange`], [`Refusal`]) for `tandem plan`, the run log and `run --json`. `tandem rules` lists the table;
//! docs/rules.md describes each rule, and a test keeps the two the same.

mod contents_not_made_up;
mod dates_and_times;
mod dependencies;
mod duplicates;
mod durations;
mod errors_in_results;
mod fields_read_from_text;
mod invented;
mod language_codes;
mod language_names;
mod optional;
mod percentages_as_fractions;
mod percentages_as_written;
mod reading_asks_the_goal;
mod readings_agree;
pub mod references;
mod replans_resampled;
pub mod support;
mod time_zones;
mod unused_dates_and_times;
mod writes_keep_data;

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub(crate) use contents_not_made_up::made_up_values;
pub use contents_not_made_up::{ContentsNotMadeUp, MADE_UP};
pub use dates_and_times::{mend_dates_and_times, DatesAndTimes};
pub(crate) use dependencies::{equations_written, feedback as discovery_feedback, written_before_seen};
pub use dependencies::{
    joined_equations, mend_unused_dependencies, Dependencies, EQUATIONS_JOINED, WRITTEN_BEFORE_SEEN,
};
pub use duplicates::{drop_repeated_calls, Duplicates};
pub use durations::{mend_durations, Durations};
pub use errors_in_results::{reported_error, ErrorsInResults};
pub use fields_read_from_text::FieldsReadFromText;
pub use invented::{drop_invented_steps, Invented};
pub use language_codes::{mend_languages, mend_languages_to_codes, mend_languages_to_names, LanguageCodes};
pub use language_names::LanguageNames;
pub use optional::{drop_unmentioned_optional, Optional};
pub use percentages_as_fractions::{
    mend_percentages, mend_percentages_as_written, mend_percentages_to_fractions, PercentagesAsFractions,
};
pub use percentages_as_written::PercentagesAsWritten;
pub use reading_asks_the_goal::{ask_the_goal, ReadingAsksTheGoal};
pub use readings_agree::ReadingsAgree;
pub use references::{mend_references, References};
pub use replans_resampled::ReplansResampled;
pub(crate) use support::arguments::{leave_out_unasked, only_output_field, parameter_description, rewrite_arguments};
pub use time_zones::{mend_time_zones, TimeZones};
pub use unused_dates_and_times::{mend_unused_dates_and_times, UnusedDatesAndTimes};
pub(crate) use writes_keep_data::lost_data;
pub use writes_keep_data::{WritesKeepData, LOSES_DATA};

use crate::agent::plan::Plan;
use crate::settings::Mend;
use crate::tools::ToolRegistry;

/// When a rule acts on a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// Rewrites a written plan before validation.
    Mend,
    /// Sends a written plan back to the planner before it runs.
    Check,
    /// Decides something while the plan runs.
    Run,
}

impl Stage {
    /// The name in `tandem rules` and docs/rules.md.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Mend => "mend",
            Stage::Check => "check",
            Stage::Run => "run",
        }
    }
}

/// The first profile a rule runs in (`nestful` runs every `general` rule too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// `general` and `nestful`: stated on schemas, annotations, the plan and the goal's literal values.
    General,
    /// `nestful` only (bench): matches NESTFUL's gold conventions rather than a rule about tools.
    Nestful,
}

impl Profile {
    /// The profiles that run a rule of this one, by name.
    pub fn profiles(self) -> &'static [&'static str] {
        match self {
            Profile::General => &["general", "nestful"],
            Profile::Nestful => &["nestful"],
        }
    }
}

/// What a rule is: its name, when it acts, where it runs, and what it keys on, in one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct About {
    /// The rule's name in logs, `--rules-off` and docs/rules.md (`duplicates`, `records-by-name`, …).
    pub name: &'static str,
    /// When it acts.
    pub stage: Stage,
    /// The first profile it runs in.
    pub profile: Profile,
    /// What it keys on and what it does, in one line.
    pub keys_on: &'static str,
}

/// A rule of the book. Each implements the method of its stage; the others keep their defaults.
pub trait Rule: Sync {
    /// What the rule is.
    fn about(&self) -> About;

    /// [`Stage::Mend`]: rewrites `plan` given the tools and what the planner was shown beside the goal (`seen`:
    /// earlier results, or ""); returns one line per change (`s2: $s1.result$ → $s1.text$`).
    fn mend(&self, _plan: &mut Plan, _tools: &ToolRegistry, _seen: &str) -> Vec<String> {
        Vec::new()
    }

    /// [`Stage::Check`]: the feedback that sends `plan` back, where it does; it opens with [`Rule::marker`].
    fn check(&self, _plan: &Plan, _tools: &ToolRegistry, _workspace: &Path) -> Option<String> {
        None
    }

    /// [`Stage::Check`]: the words that open the rule's feedback; a check sends a plan back once, so a revision
    /// whose earlier feedback holds them is not checked again.
    fn marker(&self) -> &'static str {
        ""
    }
}

/// Every rule, in the order each stage runs them. Mends: repeated calls first, then references, then values by the
/// form their schema declares, then what reads what (unused dependencies, judged on the arguments left), then the
/// reading that answers, then NESTFUL's (invented steps last, so a step that listed one as a dependency and now
/// references it is pointed on). The two directions of percentages and of languages exclude each other (the
/// description asks for a decimal or a code, or it does not), so running them apart changes nothing.
pub static RULES: &[&dyn Rule] = &[
    &Duplicates,
    &References,
    &PercentagesAsFractions,
    &PercentagesAsWritten,
    &Durations,
    &DatesAndTimes,
    &UnusedDatesAndTimes,
    &TimeZones,
    &LanguageCodes,
    &LanguageNames,
    &Optional,
    &ReadingAsksTheGoal,
    &Dependencies,
    &Invented,
    &ContentsNotMadeUp,
    &FieldsReadFromText,
    &ErrorsInResults,
    &WritesKeepData,
    &ReadingsAgree,
    &ReplansResampled,
];

/// The rule named `name`, where the book has one.
pub fn rule_named(name: &str) -> Option<&'static dyn Rule> {
    RULES.iter().copied().find(|rule| rule.about().name == name)
}

/// Which rules are on: a profile and the rules turned off one by one. Small and `Copy`, so every stage of a run
/// asks it without passing names around.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleSet {
    profile: Mend,
    /// Bit `i` set: `RULES[i]` is off.
    off: u64,
}

impl RuleSet {
    /// Every rule of `profile`.
    pub fn profile(profile: Mend) -> Self {
        Self { profile, off: 0 }
    }

    /// The rules of `profile` but those named in `off`; an unknown name is an error that lists the known ones.
    pub fn new(profile: Mend, off: &[String]) -> Result<Self, String> {
        let mut set = Self::profile(profile);
        for name in off {
            let Some(index) = RULES.iter().position(|rule| rule.about().name == name.trim()) else {
                let known: Vec<&str> = RULES.iter().map(|rule| rule.about().name).collect();
                return Err(format!("no rule is named {name:?} (`tandem rules` lists them): {}", known.join(", ")));
            };
            set.off |= 1 << index;
        }
        Ok(set)
    }

    /// As [`RuleSet::new`], where the names come from a run's log: a name the book no longer has is skipped with a
    /// warning (a run logged by another version still resumes).
    pub fn from_log(profile: Mend, off: &[String]) -> Self {
        let known: Vec<String> = off.iter().filter(|name| rule_named(name).is_some()).cloned().collect();
        if known.len() < off.len() {
            tracing::warn!(target: "tandem::rules", "the log turns off rules this version does not have: {off:?}");
        }
        Self::new(profile, &known).unwrap_or_else(|_| Self::profile(profile))
    }

    /// The profile.
    pub fn mend(self) -> Mend {
        self.profile
    }

    /// Whether `rule` runs: its profile is in this one and it was not turned off.
    pub fn on(self, rule: &dyn Rule) -> bool {
        let about = rule.about();
        let in_profile = match self.profile {
            Mend::Off => false,
            Mend::General => about.profile == Profile::General,
            Mend::Nestful => true,
        };
        let index = RULES.iter().position(|r| r.about().name == about.name);
        in_profile && index.is_none_or(|i| self.off & (1 << i) == 0)
    }

    /// The names of the rules that run, in the table's order.
    pub fn names(self) -> Vec<&'static str> {
        RULES.iter().filter(|rule| self.on(**rule)).map(|rule| rule.about().name).collect()
    }

    /// The names of the rules turned off one by one.
    pub fn off_names(self) -> Vec<String> {
        RULES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.off & (1 << i) != 0)
            .map(|(_, rule)| rule.about().name.to_string())
            .collect()
    }
}

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

/// The names of the rules `profile` runs, in order.
pub fn rule_names(profile: Mend) -> Vec<&'static str> {
    RuleSet::profile(profile).names()
}

/// Runs the mend rules `rules` turns on, in turn ([`RULES`]); returns their lines and every change they made, each
/// logged. `Mend::Off` leaves the plan as written. `seen`: what the planner was shown beside the goal (earlier
/// results), or "".
pub fn mend_plan(plan: &mut Plan, registry: &ToolRegistry, rules: RuleSet, seen: &str) -> Mended {
    let mut mended = Mended::default();
    for rule in RULES.iter().filter(|rule| rule.about().stage == Stage::Mend && rules.on(**rule)) {
        let before = plan.clone();
        let lines = rule.mend(plan, registry, seen);
        if lines.is_empty() && before == *plan {
            continue;
        }
        let name = rule.about().name;
        let changes = changes(name, &before, plan);
        for change in &changes {
            tracing::warn!(target: "tandem::rules", rule = name, step = %change.step, "mended: {change}");
        }
        mended.changes.extend(changes);
        mended.lines.extend(lines);
    }
    mended
}

/// A check that sent a plan back: the rule and its feedback for the planner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Refusal {
    /// The rule's name.
    pub rule: String,
    /// What the planner is told.
    pub feedback: String,
}

/// Runs the checks `rules` turns on against `plan`, in the table's order, skipping a check whose marker
/// `asked_before` finds in an earlier revision's feedback (a check sends a plan back once); returns each refusal,
/// logged. `workspace`: the folder the file tools work in (a check may look at the names it holds).
pub fn check_plan(
    plan: &Plan,
    registry: &ToolRegistry,
    workspace: &Path,
    rules: RuleSet,
    asked_before: impl Fn(&str) -> bool,
) -> Vec<Refusal> {
    let mut refusals = Vec::new();
    for rule in RULES.iter().filter(|rule| rule.about().stage == Stage::Check && rules.on(**rule)) {
        if asked_before(rule.marker()) {
            continue;
        }
        if let Some(feedback) = rule.check(plan, registry, workspace) {
            let name = rule.about().name;
            tracing::warn!(target: "tandem::rules", rule = name, "plan sent back: {feedback}");
            refusals.push(Refusal { rule: name.to_string(), feedback });
        }
    }
    refusals
}

/// Logs a change a [`Stage::Run`] rule made while a plan ran, at the default level, with the rule and step.
pub fn log_run_change(rule: &dyn Rule, step: &str, line: &str) {
    tracing::warn!(target: "tandem::rules", rule = rule.about().name, step, "{line}");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_has_a_name_of_its_own_and_fits_the_set() {
        assert!(RULES.len() <= 64, "RuleSet keeps one bit a rule");
        let mut names: Vec<&str> = RULES.iter().map(|r| r.about().name).collect();
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "two rules share a name");
        for rule in RULES {
            let about = rule.about();
            assert!(!about.keys_on.is_empty(), "{} says nothing of what it keys on", about.name);
            assert_eq!(
                rule.marker().is_empty(),
                about.stage != Stage::Check,
                "{}: only checks have markers",
                about.name
            );
        }
    }

    #[test]
    fn general_has_at_most_fifteen_rules_and_a_rule_turns_off_alone() {
        let general = RuleSet::profile(Mend::General);
        assert!(general.names().len() <= 15, "{:?}", general.names());
        assert!(RuleSet::profile(Mend::Off).names().is_empty());
        assert!(RuleSet::profile(Mend::Nestful).names().len() > general.names().len());
        let without = RuleSet::new(Mend::General, &["duplicates".to_string()]).unwrap();
        assert!(!without.on(&Duplicates) && without.on(&References));
        assert_eq!(without.off_names(), ["duplicates"]);
        assert_eq!(without.names().len(), general.names().len() - 1);
        let unknown = RuleSet::new(Mend::General, &["no-such-rule".to_string()]).unwrap_err();
        assert!(unknown.contains("tandem rules") && unknown.contains("time-zones"), "{unknown}");
        assert_eq!(RuleSet::from_log(Mend::General, &["gone".to_string()]), general);
    }
}
