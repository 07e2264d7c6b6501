//! The tools Tandem offers as an MCP server: their input and output schemas and the annotations that say what
//! each does to the world.

use std::sync::{Arc, OnceLock};

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Value};

/// `run_goal`: plan and run a goal, answer when it ends (or stops at its plan for approval).
pub const RUN_GOAL: &str = "run_goal";
/// `plan_goal`: the plan for a goal, not run; the run waits on `approve_plan`.
pub const PLAN_GOAL: &str = "plan_goal";
/// `get_run`: a run's state and timeline.
pub const GET_RUN: &str = "get_run";
/// `resume_run`: continue a run stopped before its end.
pub const RESUME_RUN: &str = "resume_run";
/// `approve_plan`: run (or reject, or replace) the plan a run waits on.
pub const APPROVE_PLAN: &str = "approve_plan";

/// The budget fields a run may lower (never raise above the server's), with what each bounds.
pub const BUDGETS: [(&str, &str); 4] = [
    ("max_steps", "most tool and model steps"),
    ("max_replans", "most plan revisions after failures"),
    ("max_seconds", "most seconds the run may take"),
    ("max_tokens", "most model tokens the run may use"),
];

/// Every tool, built once.
pub fn all() -> &'static [Tool] {
    static TOOLS: OnceLock<Vec<Tool>> = OnceLock::new();
    TOOLS.get_or_init(build)
}

/// The tool named `name`.
pub fn named(name: &str) -> Option<&'static Tool> {
    all().iter().find(|tool| tool.name == name)
}

fn build() -> Vec<Tool> {
    let run_id = json!({"type": "string", "description": "The run's id, as run_goal or plan_goal returned it."});
    let mut budgets = serde_json::Map::new();
    for (name, what) in BUDGETS {
        budgets.insert(
            name.into(),
            json!({"type": "integer", "minimum": 0,
                   "description": format!("At most this many ({what}); never above the server's own budget.")}),
        );
    }
    let mut goal_properties = serde_json::Map::new();
    goal_properties
        .insert("goal".into(), json!({"type": "string", "minLength": 1, "description": "What to do, in plain words."}));
    let mut run_properties = goal_properties.clone();
    run_properties.extend(budgets.clone());
    run_properties.insert(
        "approve".into(),
        json!({"type": "string", "enum": ["none", "plan"],
               "description": "plan: stop at the plan and return it; approve_plan then runs it. A server started \
                               with --approve plan asks for every plan whatever this says."}),
    );
    goal_properties.extend(budgets);
    vec![
        tool(
            RUN_GOAL,
            "Run a goal",
            "Plans a goal with the local planner model, runs the plan's steps with the tools this server was \
             started with, and answers. The answer comes back as text; the run's id, plan, steps and usage as \
             structured content. Progress notifications report each plan and step; cancelling the request stops \
             the run at its next step (resume_run continues it).",
            object(run_properties, &["goal"]),
            ToolAnnotations::with_title("Run a goal")
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(true),
        ),
        tool(
            PLAN_GOAL,
            "Plan a goal",
            "Writes the plan for a goal and returns it without running any step. The run waits at its plan: \
             approve_plan with its run_id runs it, or rejects it.",
            object(goal_properties, &["goal"]),
            ToolAnnotations::with_title("Plan a goal")
                .read_only(true)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
        tool(
            GET_RUN,
            "Show a run",
            "A run's status (queued, running, awaiting_approval, interrupted, finished, cancelled), answer, plan, \
             steps, usage and timeline.",
            object(props([("run_id", run_id.clone())]), &["run_id"]),
            ToolAnnotations::with_title("Show a run")
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        tool(
            RESUME_RUN,
            "Resume a run",
            "Continues a run that stopped before its end (a cancelled request, a stopped server) from its log, and \
             answers as run_goal does. A step whose tool call may or may not have happened is refused unless \
             rerun_in_doubt is true.",
            object(
                props([
                    ("run_id", run_id.clone()),
                    (
                        "rerun_in_doubt",
                        json!({"type": "boolean",
                        "description": "Run again a step whose call may or may not have happened."}),
                    ),
                ]),
                &["run_id"],
            ),
            ToolAnnotations::with_title("Resume a run")
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(true),
        ),
        tool(
            APPROVE_PLAN,
            "Approve a plan",
            "Decides on the plan a run waits on: approve (the default) runs it and answers as run_goal does; \
             approve: false rejects it and ends the run; a plan given instead (the same JSON document as the \
             waiting plan, edited) is checked against the run's tools and run in its place.",
            object(
                props([
                    ("run_id", run_id),
                    (
                        "approve",
                        json!({"type": "boolean", "default": true,
                        "description": "true runs the plan; false rejects it."}),
                    ),
                    (
                        "plan",
                        json!({"type": "object",
                        "description": "An edited plan to run instead (goal, steps with id, tool, args, depends_on)."}),
                    ),
                ]),
                &["run_id"],
            ),
            ToolAnnotations::with_title("Approve a plan")
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(true),
        ),
    ]
}

fn tool(
    name: &'static str,
    title: &str,
    description: &'static str,
    input: Value,
    annotations: ToolAnnotations,
) -> Tool {
    Tool::new(name, description, schema(input))
        .with_title(title)
        .with_raw_output_schema(schema(output()))
        .with_annotations(annotations)
}

fn props<const N: usize>(entries: [(&str, Value); N]) -> serde_json::Map<String, Value> {
    entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn object(properties: serde_json::Map<String, Value>, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(object) => Arc::new(object),
        _ => unreachable!("every schema here is an object"),
    }
}

/// What every tool returns as structured content: one run, as far as it has gone.
fn output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "run_id": {"type": "string"},
            "status": {"type": "string",
                       "enum": ["queued", "running", "awaiting_approval", "interrupted", "finished", "cancelled"]},
            "goal": {"type": "string"},
            "answer": {"type": ["string", "null"], "description": "The answer, once the run has finished with one."},
            "stop": {"type": "string", "description": "How the run ended (done, budget, rejected, error, \
                     cancelled), or interrupted."},
            "detail": {"type": ["string", "null"]},
            "plan": {"type": ["object", "null"], "description": "The newest plan: goal, steps, version."},
            "steps": {"type": "array", "items": {"type": "object"}},
            "replans": {"type": "integer"},
            "usage": {"type": "object"},
            "timeline": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["run_id", "status"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_input_an_output_schema_and_annotations() {
        let names: Vec<&str> = all().iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, [RUN_GOAL, PLAN_GOAL, GET_RUN, RESUME_RUN, APPROVE_PLAN]);
        for tool in all() {
            assert_eq!(tool.input_schema.get("type"), Some(&json!("object")), "{}", tool.name);
            assert!(tool.output_schema.is_some(), "{}", tool.name);
            assert!(tool.annotations.as_ref().and_then(|a| a.read_only_hint).is_some(), "{}", tool.name);
        }
        let run = named(RUN_GOAL).unwrap();
        let properties = run.input_schema["properties"].as_object().unwrap();
        for (budget, _) in BUDGETS {
            assert!(properties.contains_key(budget), "{budget}");
        }
        assert_eq!(named(GET_RUN).unwrap().annotations.as_ref().unwrap().read_only_hint, Some(true));
        assert_eq!(named(RUN_GOAL).unwrap().annotations.as_ref().unwrap().destructive_hint, Some(true));
    }
}
