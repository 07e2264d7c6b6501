//! The reading that answers asks the user's question, over the results it rests on.
//!
//! Rule `reading-asks-the-goal`, profile `general`: where the goal asks a question (it has a `?`) and the plan ends
//! in an `llm` step that no step reads (the reading whose text is the answer), that step's prompt becomes the goal
//! as the user wrote it, then the whole outputs of the steps its reading rests on: the steps its prompt references,
//! and, through each `llm` step among them that itself reads results, the ones that step references in turn. The
//! `llm` steps passed through are left out once no step reads them (they only call a model, so nothing else is
//! lost).
//!
//! Why: the planner restates the user's question for the reading, and the restatement loses what was asked ("Who
//! is Alice married to?" read as "What is the marriage information of Alice?", answered with her birthday and
//! employer; "Who made the very first commit?" read as "What is the commit that made the very first commit?",
//! answered with a hash); a chain of readings (the library's hours summarised, then "Is Sunday open?" asked of the
//! summary) lets the executor answer from a paraphrase that dropped or garbled the fact. Replayed on the recorded
//! runs of five whole tasks-mcp runs (the last reading asked again with the executor, the same settings, checked
//! as the suite checks answers), the goal's own question over the results answered 1–3 more goals in each run than
//! the planner's prompt (e.g. 10 → 13 of 18), and one fewer elsewhere in two of them (docs/benchmarks.md).
//!
//! At run time, the same reading can only say what is there where its question asks for one or more items of a
//! list: where it reads one result that holds one list (2 to 60 items), the planner model judges under a grammar of
//! three labels whether the question asks for one item, several items or anything else, and for items copies them
//! under a grammar whose only words are the list's rows; the reading is those rows as the result holds them
//! (`agent::run::picking`, applied in `agent::run::orchestrator::readings`). Over a shop's customers the 0.5B had
//! read "The most recent customer to sign up was John Doe", a name the result did not hold.
//!
//! Also at run time, a reading (any `llm` step) of a result that came back empty is shown the results of the steps
//! that step depends on after its prompt (`with_unreferenced_inputs` in `agent::run::orchestrator::readings`):
//! over a to-do filter by a project `Mia` that found nothing, the reading answered "No" to "Is there anything about
//! Mia on my list?" while the list the filter was taken from held "Buy birthday present for Mia".

use std::collections::HashSet;

use serde_json::Value;

use crate::agent::plan::{Plan, Step};
use crate::tools::llm::Llm;
use crate::tools::ToolRegistry;

/// Rewrites the last reading's prompt (see the module's documentation); returns one line per change.
pub fn ask_the_goal(plan: &mut Plan) -> Vec<String> {
    if !plan.goal.contains('?') {
        return Vec::new();
    }
    let Some(last) = plan.steps.last() else { return Vec::new() };
    let read_by_others = plan.steps.iter().any(|s| s.id != last.id && s.dependencies().contains(&last.id));
    if last.tool != Llm::NAME || read_by_others || !last.args.contains_key("prompt") {
        return Vec::new();
    }
    let (sources, passed) = reading_sources(plan, &last.id);
    if sources.is_empty() {
        return Vec::new();
    }
    // The goal as the user wrote it (a `$` written as the reference syntax's literal `$$`), then each source whole.
    let mut prompt = plan.goal.replace('$', "$$");
    for source in &sources {
        prompt.push_str(&format!("\n\n${source}$"));
    }
    let last = plan.steps.last_mut().expect("the plan has a last step");
    let before = last.args.insert("prompt".into(), Value::String(prompt.clone())).unwrap_or(Value::Null);
    last.depends_on.retain(|id| !passed.contains(id));
    let mut lines = vec![format!(
        "{}: prompt {before} → {:?} (the goal asks a question: the reading that answers asks it as the user wrote \
         it, over the results of {})",
        last.id,
        prompt,
        sources.join(", ")
    )];
    // The readings passed through, once nothing reads them.
    loop {
        let unread = plan.steps.iter().position(|s| {
            passed.contains(&s.id) && !plan.steps.iter().any(|other| other.dependencies().contains(&s.id))
        });
        let Some(at) = unread else { break };
        let step = plan.steps.remove(at);
        lines.push(format!("{}: left out (an llm step whose text only the last reading read)", step.id));
    }
    lines
}

/// The steps the reading `id` rests on, in plan order (each step it depends on, and through an `llm` step that
/// reads results, what that one depends on), and the `llm` steps passed through.
fn reading_sources(plan: &Plan, id: &str) -> (Vec<String>, HashSet<String>) {
    let step_of = |id: &str| plan.steps.iter().find(|s| s.id == id);
    let reads_results = |step: &Step| step.tool == Llm::NAME && !step.dependencies().is_empty();
    let (mut sources, mut passed, mut seen) = (HashSet::new(), HashSet::new(), HashSet::new());
    let mut pending: Vec<String> = step_of(id).map(Step::dependencies).unwrap_or_default();
    while let Some(next) = pending.pop() {
        if !seen.insert(next.clone()) {
            continue;
        }
        match step_of(&next) {
            Some(step) if reads_results(step) => {
                passed.insert(next.clone());
                pending.extend(step.dependencies());
            }
            Some(_) => {
                sources.insert(next);
            }
            None => {}
        }
    }
    let ordered = plan.steps.iter().filter(|s| sources.contains(&s.id)).map(|s| s.id.clone()).collect();
    (ordered, passed)
}

/// Rule `reading-asks-the-goal` (mend, general).
pub struct ReadingAsksTheGoal;

impl super::Rule for ReadingAsksTheGoal {
    fn about(&self) -> super::About {
        super::About {
            name: "reading-asks-the-goal",
            stage: super::Stage::Mend,
            profile: super::Profile::General,
            keys_on: "a goal with a '?' and a plan ending in an llm step nothing reads: its prompt is the goal as written and the whole results it rests on; at run time, where that reading reads one result holding one list: the planner's Python expression over the list's items, worked out by code where it is one of a few fixed forms (an extreme, a filter, a count, a sum, any or all), else items copied under a grammar of the list's rows where it asks for items (the planner's pick among fixed labels); a reading of a result that came back empty is shown the results that result's step depends on",
        }
    }

    fn mend(&self, plan: &mut Plan, _tools: &ToolRegistry, _seen: &str) -> Vec<String> {
        ask_the_goal(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_last_reading_asks_the_goal_over_the_results_and_its_paraphrases_go() {
        let mut p = Plan::for_goal(
            "Can I go to the library on Sunday? The hours are posted at http://x/library.html",
            json!([
                {"id": "s1", "tool": "fetch", "args": {"url": "http://x/library.html"}},
                {"id": "s2", "tool": "llm", "args": {"prompt": "What are the hours? $s1.content$"}},
                {"id": "s3", "tool": "llm", "args": {"prompt": "Is Sunday open? $s2.text$"}, "depends_on": ["s2"]}
            ]),
        );
        let lines = ask_the_goal(&mut p);
        assert_eq!(p.steps.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["s1", "s3"], "{lines:?}");
        assert_eq!(
            p.steps[1].args["prompt"],
            "Can I go to the library on Sunday? The hours are posted at http://x/library.html\n\n$s1$"
        );
        assert!(p.steps[1].depends_on.is_empty());
        assert_eq!(lines.len(), 2, "{lines:?}");
    }

    #[test]
    fn a_goal_without_a_question_or_a_plan_ending_otherwise_is_left_as_written() {
        let steps = json!([
            {"id": "s1", "tool": "read_file", "args": {"path": "a.txt"}},
            {"id": "s2", "tool": "llm", "args": {"prompt": "Summarise: $s1.content$"}}
        ]);
        let mut statement = Plan::for_goal("Summarise a.txt.", steps.clone());
        assert!(ask_the_goal(&mut statement).is_empty());
        let mut then_written = Plan::for_goal(
            "What does a.txt say?",
            json!([
                {"id": "s1", "tool": "read_file", "args": {"path": "a.txt"}},
                {"id": "s2", "tool": "llm", "args": {"prompt": "Summarise: $s1.content$"}},
                {"id": "s3", "tool": "write_file", "args": {"path": "b.txt", "content": "$s2.text$"}}
            ]),
        );
        assert!(ask_the_goal(&mut then_written).is_empty());
        // A reading of nothing (no result to ask over) keeps its prompt.
        let mut alone = Plan::for_goal(
            "What rhymes with cat?",
            json!([{"id": "s1", "tool": "llm", "args": {"prompt": "Rhymes?"}}]),
        );
        assert!(ask_the_goal(&mut alone).is_empty());
    }

    #[test]
    fn a_reading_other_steps_use_and_a_reading_of_nothing_are_kept_as_sources() {
        // s2 writes text from nothing: it is a source, not a paraphrase; s3 feeds a calculator, so it stays.
        let mut p = Plan::for_goal(
            "How much do 6 notebooks cost, and is $5 enough? Also, what rhymes with cat?",
            json!([
                {"id": "s1", "tool": "fetch", "args": {"url": "http://x/shop.html"}},
                {"id": "s2", "tool": "llm", "args": {"prompt": "A word that rhymes with cat."}},
                {"id": "s3", "tool": "llm", "args": {"prompt": "The notebook's price: $s1.content$"}},
                {"id": "s4", "tool": "calculator", "args": {"expression": "6 * $s3.text$"}},
                {"id": "s5", "tool": "llm", "args": {"prompt": "Answer: $s4.result$ and $s2.text$"}}
            ]),
        );
        ask_the_goal(&mut p);
        assert_eq!(p.steps.len(), 5);
        assert_eq!(
            p.steps[4].args["prompt"],
            "How much do 6 notebooks cost, and is $$5 enough? Also, what rhymes with cat?\n\n$s2$\n\n$s4$"
        );
    }
}
