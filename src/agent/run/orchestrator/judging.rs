//! Judging observations (empty or off-schema output fails), step evaluation (a model works the calculator steps
//! out again), logging finished steps, and turning outputs into text and the run's answer (the joiner's, checked, or the last
//! steps' output).

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::Agent;
use crate::agent::log::events::Event;
use crate::agent::log::runs::RunState;
use crate::agent::numbers::{numbers_in, Number};
use crate::agent::plan::refs::value_text;
use crate::agent::plan::{resolve_args, Plan, Step};
use crate::agent::rules::{reported_error, ErrorsInResults};
use crate::agent::run::evaluation::{checkable, doubts, evaluate};
use crate::agent::run::joiner::{join, unsourced_names, StepResult, Verdict};
use crate::settings::{Evaluator, Joiner};
use crate::tools::{Llm, ToolError, BUILTIN_TOOLS};
use crate::Result;

/// How a plan whose steps all finished ends: answered, sent back to the planner, or with no answer to give.
pub(super) enum Conclusion {
    Answered,
    /// Replan with this feedback.
    Replan(String),
    /// The replans are spent and what the steps give is no answer: why.
    NoAnswer(String),
}

impl Agent<'_> {
    /// Judges an observation: empty output, or output that breaks the tool's declared schema, is a failure.
    pub(super) fn judge(&self, tool: &str, output: Value) -> std::result::Result<Value, ToolError> {
        let empty = match &output {
            Value::Null => true,
            Value::String(s) => s.trim().is_empty(),
            Value::Object(map) => {
                map.is_empty() || map.values().all(|v| v.as_str().is_some_and(|s| s.trim().is_empty()))
            }
            Value::Array(items) => items.is_empty(),
            _ => false,
        };
        if empty {
            return Err(ToolError::Refused {
                tool: tool.into(),
                reason: format!("it returned empty output ({output})"),
            });
        }
        let problems = self.registry.output_errors(tool, &output)?;
        if !problems.is_empty() {
            return Err(ToolError::Refused {
                tool: tool.into(),
                reason: format!("its output does not match its declared schema: {}", problems.join("; ")),
            });
        }
        Ok(output)
    }

    /// Judges a tool's observation of `step`'s call with `args` as [`Agent::judge`] does, and first (rule
    /// `errors-in-results`) takes a result that is only an error report for the call failing with that message.
    pub(super) fn judge_call(
        &self,
        step: &str,
        tool: &str,
        args: &Map<String, Value>,
        output: Value,
    ) -> std::result::Result<Value, ToolError> {
        if self.rules().on(&ErrorsInResults) {
            if let Some(message) = reported_error(&output, args) {
                self.note_rule(&ErrorsInResults, step, &format!("{tool} answered an error as its result: {message}"));
                return Err(ToolError::Reported { tool: tool.into(), message });
            }
        }
        self.judge(tool, output)
    }

    /// Writes the answer of a plan whose steps all finished: the joiner's when it passes the number check, else
    /// the last steps' output. Says to replan with the joiner's reason when it judged the goal not met and a replan
    /// is still within budget (then no answer is written: the planner gets another go).
    pub(super) fn conclude(&mut self, plan: &Plan) -> Result<Conclusion> {
        let fallback = final_answer(plan, &self.state);
        let role = match self.settings.pair.joiner {
            Joiner::Off => {
                self.emit(Event::Answer { text: fallback })?;
                return Ok(Conclusion::Answered);
            }
            Joiner::Planner => "planner",
            Joiner::Executor => "executor",
        };
        if let Some(feedback) = self.no_tool_called(plan) {
            // Checked in code before any model reads: an answer that rests on no tool is sent back once. Its steps'
            // text is logged as no answer (`from_steps` empty), so it never displaces, as the answer a run gives
            // when its replans run out, an earlier doubted plan's that rests on tool results (a git log read
            // right, doubted, then "a user named JohnDoe" from a plan of model steps alone).
            tracing::warn!(target: "tandem::joiner", "plan sent back: {feedback}");
            let (version, role) = (plan.version, role.to_string());
            let text = feedback.clone();
            let usage = Default::default();
            let from_steps = String::new();
            self.emit(Event::Joined { version, verdict: "not_met".into(), text, role, from_steps, usage })?;
            return Ok(Conclusion::Replan(feedback));
        }
        let results = step_results(plan, &self.state);
        let required = final_numbers(plan, &self.state);
        let goal = self.state.goal.clone();
        let joined = self.model_for(role).and_then(|model| join(model, &goal, &results, &required));
        self.log_model_loads()?;
        let (verdict, usage) = match joined {
            Ok(joined) => joined,
            // The answer never depends on the joiner working: say why it did not, and answer from the steps.
            Err(e) => {
                tracing::warn!("the joiner failed: {e}");
                (Verdict::Unchecked(vec![format!("the joiner failed: {e}")]), Default::default())
            }
        };
        let version = plan.version;
        let role = role.to_string();
        match verdict {
            Verdict::Answer(text) => {
                self.emit(Event::Joined {
                    version,
                    verdict: "answer".into(),
                    text: text.clone(),
                    role,
                    from_steps: fallback.clone(),
                    usage,
                })?;
                self.emit(Event::Answer { text })?;
                Ok(Conclusion::Answered)
            }
            Verdict::NotMet(reason) => {
                // The steps' own answer, doubted, is still the run's answer once the replans run out (or an earlier
                // doubted plan's is, `answer_doubted_results`), unless it names what no tool result holds ("John
                // Doe" read over a folder listing): that is logged as no answer, and the run ends without one.
                let unsourced = unsourced_names(&goal, &results, &fallback);
                let from_steps = if unsourced.is_empty() { fallback.clone() } else { String::new() };
                self.emit(Event::Joined {
                    version,
                    verdict: "not_met".into(),
                    text: reason.clone(),
                    role,
                    from_steps: from_steps.clone(),
                    usage,
                })?;
                if self.state.replans < self.settings.budgets.max_replans {
                    return Ok(Conclusion::Replan(reason));
                }
                if !unsourced.is_empty() {
                    return Ok(Conclusion::NoAnswer(format!(
                        "the joiner judged plan v{version} not to meet the goal, and its steps' answer names {}, \
                         which no tool result holds",
                        unsourced.join(", ")
                    )));
                }
                self.emit(Event::Answer { text: fallback })?;
                Ok(Conclusion::Answered)
            }
            Verdict::Unchecked(drafts) => {
                let text = drafts.join("\n");
                self.emit(Event::Joined {
                    version,
                    verdict: "unchecked".into(),
                    text,
                    role,
                    from_steps: fallback.clone(),
                    usage,
                })?;
                self.emit(Event::Answer { text: fallback })?;
                Ok(Conclusion::Answered)
            }
        }
    }

    /// The joiner's first check, in code: a plan whose steps are all model steps (`llm`), where the catalogue the
    /// planner saw has tools connected to the run (an MCP server's, a tool file's: any but the built-ins), answers
    /// from no tool at all. It is sent back once a run, within the replan budget, naming those tools; a revision that
    /// again calls none is answered (a goal no tool serves: "write a haiku"). A plan that called any tool, a
    /// built-in one included, is not: the built-in calculator answers arithmetic beside a connected calculator, and
    /// sent back, the 1.5B wandered to file reads and spent its budget (the held-out suite's recipe goal).
    ///
    /// Why: told "I watered the plants, tick that off." beside a to-do list server, the 1.5B planned one `llm` step,
    /// and the run answered "The task 'Watering' was ticked off." with the list untouched.
    fn no_tool_called(&self, plan: &Plan) -> Option<String> {
        let catalogue = self.pipeline.shown();
        let connected: Vec<&str> = catalogue.names().into_iter().filter(|name| !BUILTIN_TOOLS.contains(name)).collect();
        let calls_one = plan.steps.iter().any(|step| step.tool != Llm::NAME);
        let sent_back = self.state.revisions.iter().any(|revision| revision.feedback.contains(NO_TOOL_MARKER));
        if connected.is_empty() || calls_one || sent_back || self.state.replans >= self.settings.budgets.max_replans {
            return None;
        }
        let shown: Vec<&str> = connected.iter().copied().take(SHOWN_TOOLS).collect();
        let more = connected.len().saturating_sub(SHOWN_TOOLS);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        Some(format!(
            "{NO_TOOL_MARKER} ({}{more}), so its answer rests on none of the user's data or tools. If one of them \
             gives or does what the goal asks, write the plan again with it; if none does, write the same plan again.",
            shown.join(", ")
        ))
    }

    /// Checks the finished calculator steps of `plan` (step evaluation, when the settings ask for it) and logs
    /// the judgments. Returns the planner's feedback when a step was doubted and the run may still go back to the
    /// planner: a doubt is weaker evidence than a failed step, so it sends a run back once, within the replan
    /// budget; after that it is only logged. The run never depends on the evaluation working.
    pub(super) fn evaluate_steps(&mut self, plan: &Plan) -> Result<Option<String>> {
        let role = match self.settings.pair.evaluate {
            Evaluator::Off => return Ok(None),
            Evaluator::Planner => "planner",
            Evaluator::Executor => "executor",
        };
        let results = step_results(plan, &self.state);
        // A plan without a step to check loads no model and logs nothing.
        if !results.iter().any(checkable) {
            return Ok(None);
        }
        let goal = self.state.goal.clone();
        let evaluated = self.model_for(role).and_then(|model| evaluate(model, &goal, &results));
        self.log_model_loads()?;
        let (judgments, usage) = match evaluated {
            Ok(evaluated) => evaluated,
            Err(e) => {
                tracing::warn!("the step evaluation failed: {e}");
                return Ok(None);
            }
        };
        let feedback = doubts(&judgments, &results);
        let sent_back = feedback.is_some()
            && self.state.evaluations_sent_back == 0
            && self.state.replans < self.settings.budgets.max_replans;
        self.emit(Event::StepsEvaluated { version: plan.version, role: role.into(), judgments, sent_back, usage })?;
        Ok(feedback.filter(|_| sent_back))
    }

    /// The model of a role, `planner` or `executor`, loaded on first use.
    fn model_for(&mut self, role: &str) -> Result<&mut crate::decode::Model> {
        if role == "planner" {
            self.models.planner()
        } else {
            self.models.executor()
        }
    }

    pub(super) fn finish_step(
        &mut self,
        version: u32,
        step: &Step,
        args: Map<String, Value>,
        result: std::result::Result<Value, String>,
        ms: u64,
        via: &str,
    ) -> Result<()> {
        let (output, error) = match result {
            Ok(output) => (Some(output), None),
            Err(error) => (None, Some(error)),
        };
        self.emit(Event::StepFinished {
            version,
            step: step.id.clone(),
            tool: step.tool.clone(),
            args,
            output,
            error,
            ms,
            via: via.into(),
        })
    }
}

/// The words that open the feedback of a plan that called no tool (sent back once a run).
pub const NO_TOOL_MARKER: &str = "No step called a tool, though tools are connected to this run";
/// Tool names that feedback lists.
const SHOWN_TOOLS: usize = 12;

/// The answer from the outputs: the output of the step(s) nothing else depends on, as text.
pub fn final_answer(plan: &Plan, state: &RunState) -> String {
    let sinks = last_steps(plan);
    let text_of = |step: &Step| state.outputs.get(&step.id).map(output_text).unwrap_or_default();
    match sinks.as_slice() {
        [one] => text_of(one),
        many => many.iter().map(|s| format!("{}: {}", s.id, text_of(s))).collect::<Vec<_>>().join("\n"),
    }
}

/// The steps nothing else depends on, in plan order: whose outputs make the answer.
fn last_steps(plan: &Plan) -> Vec<&Step> {
    let needed: HashSet<String> = plan.steps.iter().flat_map(|s| s.dependencies()).collect();
    plan.steps.iter().filter(|s| !needed.contains(&s.id)).collect()
}

/// The most digits a result that is a quantity has: what a double holds exactly. More (a data file of 50 digits
/// read back, which the answer "50 bytes" rightly left out) are not a number an answer should copy.
const QUANTITY_DIGITS: usize = 15;

/// The numbers the answer must give: each last step's output when it is one number (a calculation's result), as
/// the tool wrote it; a text output (an `llm` step, a file) requires nothing, nor do digits too many for a
/// quantity ([`QUANTITY_DIGITS`]: a file of digits, an id).
fn final_numbers(plan: &Plan, state: &RunState) -> Vec<Number> {
    last_steps(plan)
        .into_iter()
        .filter_map(|s| state.outputs.get(&s.id).map(output_text))
        .filter_map(|text| match numbers_in(&text).as_slice() {
            [one]
                if one.text.len() + 1 >= text.trim().trim_start_matches('-').len()
                    && one.text.chars().filter(char::is_ascii_digit).count() <= QUANTITY_DIGITS =>
            {
                Some(one.clone())
            }
            _ => None,
        })
        .collect()
}

/// The finished steps of `plan` in plan order, with their arguments as they ran (references resolved).
pub(super) fn step_results(plan: &Plan, state: &RunState) -> Vec<StepResult> {
    plan.steps
        .iter()
        .filter_map(|step| {
            let output = state.outputs.get(&step.id)?;
            let args = resolve_args(step, &state.outputs).unwrap_or_else(|_| step.args.clone());
            Some(StepResult {
                id: step.id.clone(),
                tool: step.tool.clone(),
                description: step.description.clone(),
                args: Value::Object(args),
                output: output.clone(),
            })
        })
        .collect()
}

/// An output as text: [`output_part`] as text (a JSON value as compact JSON).
pub(super) fn output_text(output: &Value) -> String {
    value_text(output_part(output))
}

/// The part of an output that is its answer: a single field's value, else its `text`, `result` or `content` field,
/// else the whole output.
pub(super) fn output_part(output: &Value) -> &Value {
    match output {
        Value::Object(map) if map.len() == 1 => map.values().next().expect("one value"),
        Value::Object(map) => {
            map.get("text").or_else(|| map.get("result")).or_else(|| map.get("content")).unwrap_or(output)
        }
        other => other,
    }
}
