//! An `llm` step's text: the reading worked out from a list (rule `reading-asks-the-goal`), a reading a tool takes
//! whole as a value (`fields-read-from-text`), the reading written by the executor and, for a question's answer,
//! by the planner too (`readings-agree`), and the results a reading is shown beside its prompt.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::execution::READ_TOKENS;
use super::judging::output_part;
use super::Agent;
use crate::agent::log::events::Event;
use crate::agent::log::runs::RunState;
use crate::agent::plan::refs::{literal_text, parse_reference};
use crate::agent::plan::{Plan, Step};
use crate::agent::records::{holds_nothing, list_items, readable};
use crate::agent::rules::{parameter_description, FieldsReadFromText, ReadingAsksTheGoal, ReadingsAgree};
use crate::agent::run::agreement::{agree, choose};
use crate::agent::run::executor::{read_value, write_text};
use crate::agent::run::picking::{read_list, MAX_ROWS};
use crate::decode::Model;
use crate::tools::{Calculator, Llm};
use crate::Result;

impl Agent<'_> {
    pub(super) fn run_text_step(
        &mut self,
        version: u32,
        step: &Step,
        args: &Map<String, Value>,
    ) -> Result<(Map<String, Value>, Value)> {
        if let Some(text) = self.picked_reading(version, step)? {
            let output = self.judge(Llm::NAME, serde_json::json!({ "text": text }))?;
            return Ok((args.clone(), output));
        }
        if let Some(value) = self.reading_as_value(version, step)? {
            let output = self.judge(Llm::NAME, serde_json::json!({ "text": value }))?;
            return Ok((args.clone(), output));
        }
        // A prompt that is a whole result (`$s1$`) is shown as a model reads it, as results inside a prompt are.
        let behind_empty = self.rules().on(&ReadingAsksTheGoal);
        let written = args.get("prompt").map(readable).unwrap_or_default();
        let prompt = with_unreferenced_inputs(step, &written, &self.state, self.state.plan.as_ref(), behind_empty);
        let tokens = self.settings.budgets.executor_tokens;
        let model = self.models.executor()?;
        let written = write_text(model, &prompt, tokens);
        self.log_model_loads()?;
        let (text, usage) = written?;
        self.emit(Event::ExecutorCall { version, step: step.id.clone(), purpose: "text".into(), role: None, usage })?;
        let text = self.agreed_reading(version, step, &prompt, text)?;
        let output = self.judge(Llm::NAME, serde_json::json!({ "text": text }))?;
        Ok((args.clone(), output))
    }

    /// Rule `fields-read-from-text`'s part for readings: an `llm` step whose whole text a tool step passes as an
    /// argument (`read_file(path: "$s2.text$")`) is a value, not a sentence: the planner's model reads it out of the
    /// results the step reads, under a grammar that admits only a piece of them (a line, what follows a `Label:`, a
    /// word), shown the step's question and the parameter it fills, where the parameter's schema bounds it as a value
    /// ([`takes_a_value`]) rather than leaving room for new text (a summary to write, a query). Asked "What is the path to the expenses file?" over a folder's listing, the 0.5B wrote "The
    /// path to the expenses file is: shop.db", and `read_file` was called with that sentence. `None`: the reading is
    /// written as any other.
    fn reading_as_value(&mut self, version: u32, step: &Step) -> Result<Option<String>> {
        if !self.rules().on(&FieldsReadFromText) {
            return Ok(None);
        }
        let Some(plan) = self.state.plan.as_ref() else { return Ok(None) };
        let whole = |value: &Value| {
            value
                .as_str()
                .and_then(parse_reference)
                .is_some_and(|r| r.step == step.id && r.field.as_deref().is_none_or(|field| field == "text"))
        };
        let passed = plan.steps.iter().filter(|s| s.tool != Llm::NAME).find_map(|s| {
            let bounded = |name: &str| self.registry.spec(&s.tool).is_some_and(|spec| takes_a_value(spec, name));
            s.args
                .iter()
                .find(|(name, value)| whole(value) && bounded(name))
                .map(|(name, _)| (s.tool.clone(), name.clone()))
        });
        let Some((tool, parameter)) = passed else { return Ok(None) };
        let data: Vec<String> = step
            .dependencies()
            .into_iter()
            .filter_map(|dep| self.state.outputs.get(&dep).map(|output| readable(output_part(output))))
            .collect();
        let data = data.join("\n");
        if data.trim().is_empty() {
            return Ok(None);
        }
        let question = literal_text(step.args.get("prompt").and_then(Value::as_str).unwrap_or_default());
        let description = self.registry.spec(&tool).map_or("", |spec| parameter_description(spec, &parameter));
        let description = if description.is_empty() { String::new() } else { format!(": {description}") };
        let wanted = format!("the value for {tool}'s `{parameter}`{description}");
        let (value, usage) = read_value(self.models.planner()?, &data, &wanted, question.trim(), READ_TOKENS)?;
        let role = Some("planner".to_string());
        self.emit(Event::ExecutorCall { version, step: step.id.clone(), purpose: "value".into(), role, usage })?;
        self.note_rule(
            &FieldsReadFromText,
            &step.id,
            &format!("{tool}'s `{parameter}` takes this reading whole: read as a piece of its results: {value:?}"),
        );
        Ok(Some(value))
    }

    /// Rule `readings-agree` (agent::run::agreement): the answer's reading (a step no other reads) of a goal that asks
    /// a question, over results a tool other than the calculator gave, written by an executor that is not the
    /// planner's model, is written by the planner's model too; where the two differ, the planner's model chooses
    /// one. Returns the reading that answers; the path is logged.
    fn agreed_reading(&mut self, version: u32, step: &Step, prompt: &str, written: String) -> Result<String> {
        if !self.rules().on(&ReadingsAgree) || step.dependencies().is_empty() {
            return Ok(written);
        }
        let Some(plan) = self.state.plan.as_ref() else { return Ok(written) };
        // The answer to a question (the goal's `?`), read from results some tool gave: a reading only of numbers
        // the calculator worked out is phrasing, which the joiner's number check already holds to them.
        let computed_only = step
            .dependencies()
            .iter()
            .all(|dep| plan.step(dep).is_some_and(|s| s.tool == Calculator::NAME || s.tool == Llm::NAME));
        if !plan.goal.contains('?') || computed_only || plan.steps.iter().any(|s| s.dependencies().contains(&step.id)) {
            return Ok(written);
        }
        let executor: *const Model = self.models.executor()?;
        let planner: *const Model = self.models.planner()?;
        self.log_model_loads()?;
        if std::ptr::eq(executor, planner) {
            return Ok(written);
        }
        let tokens = self.settings.budgets.executor_tokens;
        let (second, usage) = write_text(self.models.planner()?, prompt, tokens)?;
        let role = Some("planner".to_string());
        self.emit(Event::ExecutorCall { version, step: step.id.clone(), purpose: "reading".into(), role, usage })?;
        let question = literal_text(step.args.get("prompt").and_then(Value::as_str).unwrap_or_default());
        if agree(&written, &second, &question) {
            self.note_rule(
                &ReadingsAgree,
                &step.id,
                &format!("the planner's reading agrees with the executor's: {written:?}"),
            );
            return Ok(written);
        }
        let (chose_second, usage) = choose(self.models.planner()?, prompt, &written, &second)?;
        let role = Some("planner".to_string());
        self.emit(Event::ExecutorCall { version, step: step.id.clone(), purpose: "choice".into(), role, usage })?;
        let (whose, chosen) =
            if chose_second { ("its own", second.clone()) } else { ("the executor's", written.clone()) };
        self.note_rule(
            &ReadingsAgree,
            &step.id,
            &format!(
                "the readings differ (executor: {written:?}; planner: {second:?}): the planner's model chose {whose}"
            ),
        );
        Ok(chosen)
    }

    /// Rule `reading-asks-the-goal`'s run-time part (agent::run::picking): the answer's reading (a step no other
    /// reads) over one result that holds one list, whose question asks for an item, items, a count or a total of it
    /// (the planner's judgement among fixed labels), is worked out from the list's items: rows copied under a
    /// grammar of its rows, or found, counted and added up by code. `None`: the reading is written in free text.
    fn picked_reading(&mut self, version: u32, step: &Step) -> Result<Option<String>> {
        if !self.rules().on(&ReadingAsksTheGoal) {
            return Ok(None);
        }
        let Some(plan) = self.state.plan.as_ref() else { return Ok(None) };
        if plan.steps.iter().any(|s| s.dependencies().contains(&step.id)) {
            return Ok(None);
        }
        let mut read: Vec<String> = step.references().into_iter().map(|r| r.step).collect();
        read.sort();
        read.dedup();
        let [source] = read.as_slice() else { return Ok(None) };
        let Some(items) = self.state.outputs.get(source).and_then(list_items) else { return Ok(None) };
        let prompt = step.args.get("prompt").and_then(Value::as_str).unwrap_or_default();
        let question = literal_text(prompt).split_whitespace().collect::<Vec<_>>().join(" ");
        if !(2..=MAX_ROWS).contains(&items.len()) || question.is_empty() {
            return Ok(None);
        }
        let least_tokens = self.settings.budgets.executor_tokens;
        let model = self.models.planner()?;
        let read = read_list(model, &question, &items, least_tokens);
        self.log_model_loads()?;
        let reading = read?;
        for (purpose, usage) in reading.calls {
            let role = Some("planner".to_string());
            self.emit(Event::ExecutorCall { version, step: step.id.clone(), purpose: purpose.into(), role, usage })?;
        }
        if let Some(text) = &reading.text {
            self.note_rule(&ReadingAsksTheGoal, &step.id, &format!("read off {source}'s list: {}", reading.how));
            return Ok(Some(text.clone()));
        }
        Ok(None)
    }
}

/// The prompt of an `llm` step, followed by the outputs of steps it depends on but does not reference: small
/// planners often write "summarise the file" after a `read_file` step without `$s1.content$`, and the
/// dependency says what they meant. With `behind_empty` (rule `reading-asks-the-goal`'s run-time part), where a
/// step it reads came back empty (its one list holds no item, or it holds nothing), the outputs of the steps that
/// step depends on follow too: asked "Is there anything about Mia on my list?" over a filter by a project `Mia`
/// that found nothing, the reading answered "No" while the list the filter was taken from held "Buy birthday
/// present for Mia".
fn with_unreferenced_inputs(
    step: &Step,
    prompt: &str,
    state: &RunState,
    plan: Option<&Plan>,
    behind_empty: bool,
) -> String {
    let referenced: HashSet<String> = step.references().into_iter().map(|r| r.step).collect();
    let mut shown: Vec<String> = step.dependencies().into_iter().filter(|dep| !referenced.contains(dep)).collect();
    if behind_empty {
        for read in step.dependencies() {
            let empty = state.outputs.get(&read).is_some_and(came_back_empty);
            let Some(source) = plan.and_then(|p| p.step(&read)).filter(|_| empty) else { continue };
            for behind in source.dependencies() {
                if !referenced.contains(&behind) && !shown.contains(&behind) && behind != step.id {
                    shown.push(behind);
                }
            }
        }
    }
    let inputs: Vec<String> = shown
        .into_iter()
        // An output's text (a file's `content`, a tool's `text`) as before, and a list in it as a model reads it.
        .filter_map(|dep| state.outputs.get(&dep).map(|output| readable(output_part(output))))
        .collect();
    if inputs.is_empty() {
        prompt.to_string()
    } else {
        format!("{prompt}\n\nInput:\n{}", inputs.join("\n\n"))
    }
}

/// Whether `spec`'s parameter `name` is declared as a value rather than free text: a string whose schema gives it
/// an `enum`, a `pattern`, a `format` or a length cap of at most 200 characters (a path, a name, an id). A text to
/// write, a message or a query is declared without them. (The planner's model, asked to tell the two apart under
/// a grammar of two labels, took whichever label came first.)
fn takes_a_value(spec: &crate::tools::ToolSpec, name: &str) -> bool {
    let schema = &spec.args_schema["properties"][name];
    let capped = schema["maxLength"].as_u64().is_some_and(|cap| cap <= 200);
    schema["type"] == "string"
        && (capped || schema.get("enum").is_some() || schema.get("pattern").is_some() || schema.get("format").is_some())
}

/// Whether a tool's result came back empty: it holds nothing, or its one list holds no item.
fn came_back_empty(output: &Value) -> bool {
    holds_nothing(output) || list_items(output).is_some_and(|items| items.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_of_a_result_that_came_back_empty_is_shown_what_it_was_taken_from() {
        let plan = Plan::from_json(
            r#"{"goal": "Is there anything about Mia on my list?", "steps": [
            {"id": "s1", "tool": "list_todos", "args": {}},
            {"id": "s2", "tool": "filter_by_project", "args": {"project": "Mia"}, "depends_on": ["s1"]},
            {"id": "s3", "tool": "llm", "args": {"prompt": "Is there anything about Mia on my list?\n\n$s2$"}}]}"#,
        )
        .unwrap();
        let mut state = RunState::default();
        state.outputs.insert("s1".into(), serde_json::json!({"todos": [{"text": "Buy birthday present for Mia"}]}));
        state.outputs.insert("s2".into(), serde_json::json!({"todos": [], "count": 0, "project": "Mia"}));
        let reading = &plan.steps[2];
        let shown = with_unreferenced_inputs(reading, "Q\n\ncount: 0", &state, Some(&plan), true);
        assert!(shown.contains("Buy birthday present for Mia"), "{shown}");
        // Off, or where the result holds an item, the prompt is as written.
        assert_eq!(with_unreferenced_inputs(reading, "Q\n\ncount: 0", &state, Some(&plan), false), "Q\n\ncount: 0");
        state.outputs.insert("s2".into(), serde_json::json!({"todos": [{"text": "Call Mia"}], "count": 1}));
        assert_eq!(with_unreferenced_inputs(reading, "Q", &state, Some(&plan), true), "Q");
    }
}
