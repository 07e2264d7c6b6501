//! Executing steps: ready steps in rounds (tool calls on threads while model steps run here), references
//! resolved, the executor filling arguments (an `llm` step's text: `readings.rs`), and the execution record for
//! replanning.

use std::collections::HashSet;
use std::time::Instant;

use serde_json::{Map, Value};

use super::judging::step_results;
use super::{Agent, Execution, Mode, Prepared, Stop};
use crate::agent::log::events::{Event, PlanOrigin};
use crate::agent::log::runs::call_key;
use crate::agent::plan::refs::{coerce_to_schema, output_as_text, parse_reference, Reference, Resolution};
use crate::agent::plan::resolve_args_with;
use crate::agent::plan::{Plan, Step};
use crate::agent::provenance::sources;
use crate::agent::rules::{
    discovery_feedback, equations_written, joined_equations, lost_data, made_up_values, parameter_description,
    written_before_seen, ContentsNotMadeUp, Dependencies, FieldsReadFromText, References, WritesKeepData,
    EQUATIONS_JOINED, WRITTEN_BEFORE_SEEN,
};
use crate::agent::run::evaluation::{invented_number, work_out};
use crate::agent::run::executor::{fill_arguments, read_value, ExecutorCall};
use crate::agent::run::joiner::{shown_output, StepResult};
use crate::agent::run::repair::failed_step_text;
use crate::agent::usage::ModelUsage;
use crate::tools::{Calculator, Llm, ToolError};
use crate::Result;

impl Agent<'_> {
    /// Runs the plan's remaining steps, ready ones together, until all are done, one fails, or the run stops.
    pub(super) fn execute(&mut self, plan: &Plan) -> Result<Execution> {
        loop {
            let done: HashSet<String> = self.state.outputs.keys().cloned().collect();
            if plan.steps.iter().all(|s| done.contains(&s.id)) {
                return Ok(Execution::Complete);
            }
            let ready: Vec<Step> = plan.ready_steps(&done).into_iter().cloned().collect();
            if ready.is_empty() {
                return Ok(Execution::Failed(
                    "No step can run: every remaining step waits for one that cannot.".into(),
                ));
            }
            if let Some(stop) = self.spent_budget(ready.len()) {
                return Ok(Execution::Stopped(stop));
            }
            let mut called = Vec::new();
            match self.run_round(plan, &ready, &mut called)? {
                Some(Ok(failure)) => return Ok(Execution::Failed(self.execution_record(plan, &failure))),
                Some(Err(stop)) => return Ok(Execution::Stopped(stop)),
                None => {
                    if let Some(feedback) = self.calls_written_before_seen(plan, &called) {
                        return Ok(Execution::Rewrite(feedback));
                    }
                }
            }
        }
    }

    /// Runs one round of ready steps: tool calls on threads while the model steps run here. Returns the first
    /// failure (`Ok`) or a stop (`Err`), or `None` when every step succeeded; `called` gets the steps whose tool was
    /// called with their planned arguments and answered.
    fn run_round(
        &mut self,
        plan: &Plan,
        ready: &[Step],
        called: &mut Vec<String>,
    ) -> Result<Option<std::result::Result<String, Stop>>> {
        let version = plan.version;
        let mut direct = Vec::new();
        let mut model_steps = Vec::new();
        let mut failure = None;
        for step in ready {
            self.emit(Event::StepStarted { version, step: step.id.clone(), tool: step.tool.clone() })?;
            match self.prepare(plan, step) {
                Ok(Prepared::Cached(args, output)) => {
                    self.finish_step(version, step, args, Ok(output), 0, "cache")?;
                }
                Ok(Prepared::Known(args, output)) => {
                    tracing::info!(step = %step.id, "dropped: it recomputes a result already known");
                    self.finish_step(version, step, args, Ok(output), 0, "dropped")?;
                }
                Ok(Prepared::Direct(args)) => direct.push((step.clone(), args)),
                Ok(other) => model_steps.push((step.clone(), other)),
                Err(e) => {
                    let error = e.to_string();
                    self.finish_step(version, step, Map::new(), Err(error.clone()), 0, "tool")?;
                    failure.get_or_insert(format!("step {} failed: {error}", step.id));
                }
            }
        }
        for (step, args) in &direct {
            if self.asks_before(&step.tool) {
                if let Some(stop) = self.approve_step(version, step, args)? {
                    return Ok(Some(Err(stop)));
                }
            }
        }
        for (step, args) in &direct {
            self.emit(Event::ToolCall { version, step: step.id.clone(), tool: step.tool.clone(), args: args.clone() })?;
        }
        let registry = self.registry;
        let context = self.context;
        let results: Vec<(std::result::Result<Value, ToolError>, u64)> = std::thread::scope(|scope| {
            let handles: Vec<_> = direct
                .iter()
                .map(|(step, args)| {
                    scope.spawn(move || {
                        let started = Instant::now();
                        let result = registry.call(&step.tool, &Value::Object(args.clone()), context);
                        crate::agent::log::fault::after_tool(&step.id);
                        (result, started.elapsed().as_millis() as u64)
                    })
                })
                .collect();
            // Model steps run on this thread meanwhile; their errors are kept until the tools are joined.
            let model_result = self.run_model_steps(version, &model_steps, &mut failure);
            let results = handles.into_iter().map(|h| h.join().expect("a tool thread panicked")).collect();
            model_result.map(|()| results)
        })?;
        for ((step, args), (result, ms)) in direct.into_iter().zip(results) {
            let outcome = match result {
                Ok(output) => self.judge_call(&step.id, &step.tool, &args, output),
                Err(e) => Err(e),
            };
            match outcome {
                Ok(output) => {
                    self.finish_step(version, &step, args, Ok(output), ms, "tool")?;
                    called.push(step.id.clone());
                }
                Err(e) if retryable(&e) && !step.references().is_empty() && failure.is_none() => {
                    // A reference brought text the tool cannot take: the executor pulls the value out of it.
                    let problem = e.to_string();
                    self.finish_step(version, &step, args.clone(), Err(problem.clone()), ms, "tool")?;
                    self.run_model_steps(version, &[(step.clone(), Prepared::Fill(args, problem))], &mut failure)?;
                }
                Err(e) => {
                    let error = e.to_string();
                    self.finish_step(version, &step, args, Err(error.clone()), ms, "tool")?;
                    failure.get_or_insert(format!("step {} failed: {error}", step.id));
                }
            }
        }
        Ok(failure.map(Ok))
    }

    /// Resolves a step's references and decides who runs it.
    fn prepare(&self, plan: &Plan, step: &Step) -> Result<Prepared> {
        let spec = self.spec_of(step)?;
        // Rules `fields-read-from-text` and `references` (agent::rules) decide how references resolve: a field
        // missing from a text output reads the text; one missing from a result of one field reads that field.
        let rules = self.rules();
        let mut how = Resolution {
            read_text: rules.on(&FieldsReadFromText),
            one_field: rules.on(&References),
            // A model's prompt shows a list counted and one item a line (agent::records), not compact JSON.
            records_in_text: spec.needs_model,
            ..Resolution::default()
        };
        let mut args = self.coerced(resolve_args_with(step, &self.state.outputs, &mut how)?, &spec.args_schema);
        if !how.read_from_text.is_empty() {
            let fields: Vec<String> = how.read_from_text.iter().map(ToString::to_string).collect();
            self.note_rule(&FieldsReadFromText, &step.id, &format!("{} read from text outputs", fields.join(", ")));
        }
        for (reference, field) in &how.took_one_field {
            self.note_rule(&References, &step.id, &format!("{reference} read as the result's one field, `{field}`"));
        }
        if spec.needs_model {
            return Ok(Prepared::Text(args));
        }
        if !how.read_from_text.is_empty() {
            // A tool takes values, not a page of text: each value is read out of its text first.
            return Ok(Prepared::Read(args, how.read_from_text));
        }
        self.join_equations(plan, step, &mut args);
        if let Some(problems) = self.arg_problems(step, &args)? {
            return Ok(Prepared::Fill(args, problems));
        }
        self.refuse_failed_call(step, &args)?;
        self.refuse_lost_data(step, &args)?;
        self.refuse_made_up_values(step)?;
        if let Some(output) = self.state.call_cache.get(&call_key(&step.tool, &args)) {
            return Ok(Prepared::Cached(args, output.clone()));
        }
        if let Some(output) = self.known_result(plan, step) {
            return Ok(Prepared::Known(args, output));
        }
        Ok(Prepared::Direct(args))
    }

    /// Rule `dependencies`' equations across steps: a calculator step whose equations have more unknowns than
    /// equations is solved with the other equations over them that the plan and the run's refused calls write.
    fn join_equations(&self, plan: &Plan, step: &Step, args: &mut Map<String, Value>) {
        if step.tool != Calculator::NAME || !self.rules().on(&Dependencies) {
            return;
        }
        let Some(expression) = args.get("expression").and_then(Value::as_str) else { return };
        let written = equations_written(plan, step, &self.state.failed_calls);
        if let Some(system) = joined_equations(expression, &written) {
            self.note_rule(&Dependencies, &step.id, &format!("{expression} {EQUATIONS_JOINED}: {system}"));
            args.insert("expression".into(), Value::String(system));
        }
    }

    /// The output of a step that only recomputes a result already known: a `calculator` step whose expression is
    /// exactly a reference to an earlier `calculator` step's `result` (small planners follow "What is 12*4+5?"'s
    /// one step with `calculator("$s1.result$")`). The calculator would give that step's output again, so the
    /// step takes it without running, and the log says it was dropped.
    fn known_result(&self, plan: &Plan, step: &Step) -> Option<Value> {
        if step.tool != Calculator::NAME || step.args.len() != 1 {
            return None;
        }
        let reference = parse_reference(step.args.get("expression")?.as_str()?)?;
        let source = plan.step(&reference.step)?;
        if source.tool != Calculator::NAME || reference.field.as_deref() != Some("result") {
            return None;
        }
        self.state.outputs.get(&source.id).cloned()
    }

    /// Runs steps that need the executor model, one after another; the first failure lands in `failure`.
    fn run_model_steps(
        &mut self,
        version: u32,
        steps: &[(Step, Prepared)],
        failure: &mut Option<String>,
    ) -> Result<()> {
        for (step, prepared) in steps {
            let started = Instant::now();
            let result = match prepared {
                Prepared::Text(args) => self.run_text_step(version, step, args),
                Prepared::Fill(args, problem) => self.run_fill_step(version, step, args, problem),
                Prepared::Read(_, references) => self.run_read_step(version, step, references),
                Prepared::Direct(_) | Prepared::Cached(..) | Prepared::Known(..) => {
                    unreachable!("tool steps do not reach the executor")
                }
            };
            let ms = started.elapsed().as_millis() as u64;
            let args = match prepared {
                Prepared::Text(a)
                | Prepared::Fill(a, _)
                | Prepared::Read(a, _)
                | Prepared::Direct(a)
                | Prepared::Cached(a, _)
                | Prepared::Known(a, _) => a.clone(),
            };
            match result {
                Ok((args, output)) => self.finish_step(version, step, args, Ok(output), ms, "executor")?,
                Err(e) => {
                    let error = e.to_string();
                    // A call the model wrote and the tool refused is logged as made, not as prepared.
                    let args = self.state.in_flight.get(&step.id).map_or(args, |(_, called)| called.clone());
                    self.finish_step(version, step, args, Err(error.clone()), ms, "executor")?;
                    failure.get_or_insert(format!("step {} failed: {error}", step.id));
                }
            }
        }
        Ok(())
    }

    fn run_fill_step(
        &mut self,
        version: u32,
        step: &Step,
        args: &Map<String, Value>,
        problem: &str,
    ) -> Result<(Map<String, Value>, Value)> {
        let (call, usage, purpose, role) = if step.tool == Calculator::NAME {
            let (call, usage) = self.work_out_expression(step)?;
            (call, usage, "expression", Some("planner".to_string()))
        } else {
            let spec = self.spec_of(step)?;
            let tokens = self.settings.budgets.executor_tokens;
            let model = self.models.executor()?;
            let filled = fill_arguments(model, step, &spec, args, problem, tokens);
            self.log_model_loads()?;
            let (call, usage) = filled?;
            (call, usage, "arguments", None)
        };
        self.emit(Event::ExecutorCall { version, step: step.id.clone(), purpose: purpose.into(), role, usage })?;
        self.call_written(version, step, call)
    }

    /// Runs a step whose references name fields its text outputs lack: the planner's model reads each value out of
    /// its text (`read_value`), the arguments are resolved with those values, and the tool is called; arguments that
    /// still do not fit go to the executor to fill, as any others.
    fn run_read_step(
        &mut self,
        version: u32,
        step: &Step,
        references: &[Reference],
    ) -> Result<(Map<String, Value>, Value)> {
        let spec = self.spec_of(step)?;
        let mut outputs = self.state.outputs.clone();
        let mut done: HashSet<String> = HashSet::new();
        for reference in references {
            let (Some(field), Some(text)) =
                (reference.field.as_deref(), self.state.outputs.get(&reference.step).and_then(output_as_text))
            else {
                continue;
            };
            if !done.insert(reference.to_string()) {
                continue;
            }
            let wanted = wanted_value(step, reference, field, &spec);
            // The planner's model reads it: asked for "the commit id" of a log listing two, the 0.5B executor took
            // the older one in 3 of 4 runs of the test below, the 1.5B the newest in 4 of 4
            // (`plans_hold::a_field_guessed_from_a_text_output_is_read_from_the_text_and_off_turns_it_off`).
            let model = self.models.planner()?;
            let purpose = format!("Goal: {}\nStep: {}", self.state.goal, step.description);
            let read = read_value(model, text, &wanted, &purpose, READ_TOKENS);
            self.log_model_loads()?;
            let (value, usage) = read?;
            tracing::info!(step = %step.id, reference = %reference, value = %value, "read from the text output");
            self.emit(Event::ExecutorCall {
                version,
                step: step.id.clone(),
                purpose: format!("{reference} read from text"),
                role: Some("planner".to_string()),
                usage,
            })?;
            if let Some(output) = outputs.get_mut(&reference.step) {
                insert_field(output, field, value);
            }
        }
        let args = self.coerced(resolve_args_with(step, &outputs, &mut Resolution::default())?, &spec.args_schema);
        if let Some(problems) = self.arg_problems(step, &args)? {
            return self.run_fill_step(version, step, &args, &problems);
        }
        self.refuse_failed_call(step, &args)?;
        self.call_written(version, step, ExecutorCall { tool: step.tool.clone(), args })
    }

    /// Resolved arguments coerced to the tool's argument schema.
    fn coerced(&self, args: Map<String, Value>, schema: &Value) -> Map<String, Value> {
        match coerce_to_schema(Value::Object(args), schema) {
            Value::Object(map) => map,
            _ => unreachable!("coercing an object keeps it an object"),
        }
    }

    /// The step's tool's spec (its own copy: the caller goes on to use the models mutably).
    fn spec_of(&self, step: &Step) -> Result<crate::tools::ToolSpec> {
        Ok(self.registry.spec(&step.tool).cloned().ok_or_else(|| ToolError::UnknownTool {
            name: step.tool.clone(),
            known: self.registry.names().join(", "),
        })?)
    }

    /// The ways `args` do not fit the step's tool, in words, or `None` when they fit.
    fn arg_problems(&self, step: &Step, args: &Map<String, Value>) -> Result<Option<String>> {
        let problems = self.registry.arg_errors(&step.tool, &Value::Object(args.clone()))?;
        Ok((!problems.is_empty()).then(|| problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")))
    }

    /// Refuses a call that already failed with these arguments in this run.
    fn refuse_failed_call(&self, step: &Step, args: &Map<String, Value>) -> Result<()> {
        match self.state.failed_call(&step.tool, args) {
            Some(error) => Err(crate::Error::Agent(format!(
                "{} was already called with these arguments and failed ({error}); the call is not made again",
                step.tool
            ))),
            None => Ok(()),
        }
    }

    /// Rule `writes-keep-data` (agent::rules): a whole write that would lose most of a file's lines is refused,
    /// once a run.
    fn refuse_lost_data(&self, step: &Step, args: &Map<String, Value>) -> Result<()> {
        if !self.rules().on(&WritesKeepData) || self.state.lost_data_refused > 0 {
            return Ok(());
        }
        match lost_data(self.registry, self.context, &step.tool, args) {
            Some(feedback) => {
                self.note_rule(&WritesKeepData, &step.id, &feedback);
                Err(crate::Error::Agent(feedback))
            }
            None => Ok(()),
        }
    }

    /// Rule `contents-not-made-up`'s run-time part (agent::rules): a call that may change the user's data, planned
    /// with names or quoted values that neither the goal nor an earlier tool's result holds, is not made.
    fn refuse_made_up_values(&self, step: &Step) -> Result<()> {
        if !self.rules().on(&ContentsNotMadeUp) {
            return Ok(());
        }
        // A model's reading is no source: only tools' results (the call cache holds every result of the run).
        let reading = format!("{}\u{0}", Llm::NAME);
        let results = self.state.call_cache.iter().filter(|(key, _)| !key.starts_with(&reading)).map(|(_, v)| v);
        match made_up_values(self.registry, step, || sources(&self.state.goal, results)) {
            Some(feedback) => {
                self.note_rule(&ContentsNotMadeUp, &step.id, &feedback);
                Err(crate::Error::Agent(feedback))
            }
            None => Ok(()),
        }
    }

    /// Rule `dependencies`' run-time part (agent::rules), once a run in plan-ahead mode, on a plan the planner
    /// wrote: where steps still to run wait for a step just `called` without reading its result, the feedback that
    /// has the plan written again with the results in view.
    fn calls_written_before_seen(&self, plan: &Plan, called: &[String]) -> Option<String> {
        let planner_written = !matches!(self.state.plan_origin, Some(PlanOrigin::Given | PlanOrigin::Edited));
        let applied = self.state.revisions.iter().any(|r| r.feedback.starts_with(WRITTEN_BEFORE_SEEN));
        if called.is_empty()
            || applied
            || !planner_written
            || self.settings.pair.mode != Mode::PlanAhead
            || !self.rules().on(&Dependencies)
        {
            return None;
        }
        let blind = written_before_seen(plan, self.registry, called, &self.state.outputs);
        if blind.is_empty() {
            return None;
        }
        // The results as the joiner is shown them: a list one item a line, counted, clipped.
        let results: Vec<String> = plan
            .steps
            .iter()
            .filter_map(|s| {
                Some(format!("- {} ({}) gave: {}", s.id, s.tool, shown_output(self.state.outputs.get(&s.id)?)))
            })
            .collect();
        let feedback = discovery_feedback(&blind, &results);
        self.note_rule(&Dependencies, &blind[0].step, &format!("{}: plan written again", blind[0].how));
        Some(feedback)
    }

    /// Calls a step's tool with arguments a model wrote (asking for approval first where steps need it).
    pub(super) fn call_written(
        &mut self,
        version: u32,
        step: &Step,
        call: ExecutorCall,
    ) -> Result<(Map<String, Value>, Value)> {
        if self.asks_before(&call.tool) {
            if let Some(stop) = self.approve_step(version, step, &call.args)? {
                return Err(crate::Error::Agent(stop.detail));
            }
        }
        self.emit(Event::ToolCall {
            version,
            step: step.id.clone(),
            tool: call.tool.clone(),
            args: call.args.clone(),
        })?;
        let output = self.registry.call(&call.tool, &Value::Object(call.args.clone()), self.context);
        crate::agent::log::fault::after_tool(&step.id);
        let output = output?;
        let output = self.judge_call(&step.id, &call.tool, &call.args, output)?;
        Ok((call.args, output))
    }

    /// The expression of a calculator step whose planned one broke on an earlier step's text (an `llm` answer, a
    /// file): written from the goal, the step's description and the earlier results, under an arithmetic grammar,
    /// as the step evaluation's check writes it. Shown the broken expression instead, the 0.5B copied the text back
    /// or garbled its numbers. The planner writes it: on the answers suite the 0.5B's expressions were wrong where
    /// the 1.5B's checks of the same steps were right (`docs/benchmarks.md`, "Step evaluation").
    fn work_out_expression(&mut self, step: &Step) -> Result<(ExecutorCall, ModelUsage)> {
        let goal = self.state.goal.clone();
        // The finished steps before this one in plan order (a step after it may have finished beside it).
        let earlier: Vec<StepResult> = match &self.state.plan {
            Some(plan) => {
                let before: HashSet<&str> =
                    plan.steps.iter().take_while(|s| s.id != step.id).map(|s| s.id.as_str()).collect();
                step_results(plan, &self.state).into_iter().filter(|r| before.contains(r.id.as_str())).collect()
            }
            None => Vec::new(),
        };
        let model = self.models.planner()?;
        let worked = work_out(model, &goal, &step.id, &step.description, &earlier);
        self.log_model_loads()?;
        let (expression, usage) = worked?;
        // A bare number that neither the goal nor an earlier result gives is made up: the step fails.
        if !invented_number(&expression, &goal, &earlier).is_empty() {
            return Err(crate::Error::Agent(format!(
                "the expression could not be worked out from the goal and the earlier results (the model wrote \
                 {expression}, a number neither gives)"
            )));
        }
        let mut args = Map::new();
        args.insert("expression".into(), Value::String(expression));
        Ok((ExecutorCall { tool: step.tool.clone(), args }, usage))
    }

    /// The execution record the planner sees when it revises: what ran, what came out, what failed.
    fn execution_record(&self, plan: &Plan, failure: &str) -> String {
        let mut lines = vec![format!("Running that plan: {failure}.")];
        for step in &plan.steps {
            if let Some(output) = self.state.outputs.get(&step.id) {
                lines.push(format!("- {} ({}) succeeded with output {}", step.id, step.tool, output));
            }
            // The failed step's call, error, parameters and schema, next to it.
            let failed = self.state.last_failure.as_ref().filter(|f| f.version == plan.version && f.step == step.id);
            if let (Some(failed), Some(spec)) = (failed, self.registry.spec(&step.tool)) {
                lines.push(format!("- {}", failed_step_text(&step.id, spec, &failed.args, &failed.error)));
            }
        }
        lines.push(
            "Write a corrected plan for the whole goal. You may write the outputs above as literal values; a step \
             with the same tool and arguments as one that succeeded is not run again, and a call that failed is \
             not made again with the same arguments."
                .into(),
        );
        lines.join("\n")
    }
}

/// Tool errors that better arguments might fix.
fn retryable(error: &ToolError) -> bool {
    matches!(error, ToolError::InvalidArgs { .. } | ToolError::Calculation { .. })
}

/// Tokens a value read out of a text may take.
pub(super) const READ_TOKENS: usize = 96;

/// What a reference asks for, in words the reading model is shown: its field as words, and the parameter it fills when it
/// is a whole argument (`the commit id (for git_show's revision)`).
fn wanted_value(step: &Step, reference: &Reference, field: &str, spec: &crate::tools::ToolSpec) -> String {
    let words = field.rsplit('.').find(|part| part.parse::<usize>().is_err()).unwrap_or(field).replace(['_', '-'], " ");
    let whole = reference.to_string();
    let parameter = step.args.iter().find(|(_, value)| value.as_str() == Some(whole.as_str())).map(|(name, _)| name);
    match parameter {
        Some(name) => {
            let description = parameter_description(spec, name);
            let about = if description.is_empty() { String::new() } else { format!(": {description}") };
            format!("the {words} (for {}'s `{name}`{about})", spec.name)
        }
        None => format!("the {words}"),
    }
}

/// Puts `value` at the field path `field` of a text output (a string output becomes `{"text": …}` first), keeping
/// what is there, so the strict resolution finds it.
fn insert_field(output: &mut Value, field: &str, value: String) {
    if let Value::String(text) = output {
        *output = serde_json::json!({ "text": std::mem::take(text) });
    }
    let (path, last) = field.rsplit_once('.').map_or((None, field), |(path, last)| (Some(path), last));
    let mut current = output;
    for part in path.into_iter().flat_map(|p| p.split('.')) {
        let Value::Object(map) = current else { return };
        let slot = map.entry(part.to_string()).or_insert_with(|| Value::Object(Map::new()));
        if !slot.is_object() {
            *slot = Value::Object(Map::new());
        }
        current = slot;
    }
    if let Value::Object(map) = current {
        map.insert(last.to_string(), Value::String(value));
    }
}
