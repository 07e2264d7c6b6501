//! Tandem as an MCP server: other agents (Claude Desktop, Cursor, VS Code, any MCP client) hand a goal to the
//! local planner–executor. `tandem mcp` serves it over stdio; `tandem serve --allow-runs` at `/mcp` over
//! Streamable HTTP, behind the server's guard and key. The tools (`tools`) start, plan, show, resume and approve
//! runs on the same machinery as `/v1/runs`, so a run is logged, budgeted and resumable exactly as `tandem run`'s;
//! a request follows its run (`follow`) with progress notifications. What a run may use (tools, MCP servers,
//! workspace, budgets) is fixed when the server starts: a client may lower budgets and ask for plan approval,
//! nothing more.

mod ask;
mod follow;
mod tools;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Map, Value};

use crate::serve::plumbing::error::ApiError;
use crate::serve::runs::routes::{off_runtime, run_dir, start_run, summary_of};
use crate::serve::runs::run_control;
use crate::serve::AppState;
use crate::settings::Approval;
use follow::Rest;

/// What MCP clients may ask of runs, beyond what `/v1/runs` allows.
#[derive(Debug, Clone, Copy)]
pub struct McpPolicy {
    /// `Plan`: every run stops at its plan for `approve_plan` (a client cannot skip it).
    pub approve: Approval,
}

/// Who decided a plan, as the run's log records it: the `approve_plan` tool, or the client's user asked by
/// elicitation.
const BY_TOOL: &str = "mcp approve_plan";
const BY_USER: &str = "mcp client's user";

/// What the server tells a client when it connects.
const INSTRUCTIONS: &str = "Tandem runs goals on local models: a planner writes a plan of tool calls, an executor \
    carries it out with the tools this server was started with, and the answer comes back. run_goal does it all; \
    plan_goal shows the plan first (approve_plan runs it); get_run shows a run; resume_run continues one that \
    stopped. Every run is logged on this machine.";

/// The MCP server: one per connection (stdio) or session (HTTP), all on one server state.
#[derive(Clone)]
pub struct TandemMcp {
    state: Arc<AppState>,
}

/// Serves MCP over this process's stdin and stdout until the client closes them.
pub async fn serve_stdio(state: Arc<AppState>) -> std::io::Result<()> {
    let running = TandemMcp { state }
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| std::io::Error::other(format!("starting MCP on stdio: {e}")))?;
    running.waiting().await.map_err(|e| std::io::Error::other(format!("serving MCP on stdio: {e}")))?;
    Ok(())
}

/// The Streamable HTTP service `tandem serve` mounts at `/mcp` (the server's own guard checks hosts and origins,
/// so rmcp's check defers to it).
pub fn http_service(
    state: Arc<AppState>,
    max_body_bytes: usize,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    TandemMcp,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
    let mut config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    config.max_request_body_bytes = max_body_bytes;
    StreamableHttpService::new(move || Ok(TandemMcp { state: state.clone() }), Default::default(), config)
}

impl ServerHandler for TandemMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("tandem", env!("CARGO_PKG_VERSION")).with_title("Tandem"))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::all().to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::named(name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // A call again with the user's answer to the plan's approval form (protocol 2026-07-28's rounds).
        if let Some(state) = request.request_state.as_deref() {
            let answered = self.answered(state, request.input_responses.as_ref(), &context).await;
            return Ok(answered.unwrap_or_else(|e| tool_error(e).into()));
        }
        let args = request.arguments.unwrap_or_default();
        let outcome = match request.name.as_ref() {
            tools::RUN_GOAL => self.run_goal(&args, &context, false).await,
            tools::PLAN_GOAL => self.run_goal(&args, &context, true).await,
            tools::GET_RUN => self.get_run(&args).await,
            tools::RESUME_RUN => self.resume_run(&args, &context).await,
            tools::APPROVE_PLAN => self.approve_plan(&args, &context).await,
            other => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "no tool {other:?}: this server has run_goal, plan_goal, get_run, resume_run, approve_plan"
                    ),
                    None,
                ))
            }
        };
        Ok(outcome.unwrap_or_else(|e| tool_error(e).into()))
    }
}

/// Errors a caller should read come back as tool errors (protocol errors reach users as opaque failures).
fn tool_error(e: ApiError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(e.message)])
}

impl TandemMcp {
    /// `run_goal` (and `plan_goal`, which asks for plan approval and takes no `approve`).
    async fn run_goal(
        &self,
        args: &JsonObject,
        context: &RequestContext<RoleServer>,
        plan_only: bool,
    ) -> Result<CallToolResponse, ApiError> {
        let mut allowed = vec!["goal"];
        allowed.extend(tools::BUDGETS.map(|(name, _)| name));
        if !plan_only {
            allowed.push("approve");
        }
        only(args, &allowed)?;
        let mut body: Map<String, Value> = args.clone();
        let asked = match args.get("approve") {
            None => Approval::None,
            Some(Value::String(s)) if s == "none" => Approval::None,
            Some(Value::String(s)) if s == "plan" => Approval::Plan,
            Some(_) => return Err(ApiError::invalid("approve", "approve is \"none\" or \"plan\"")),
        };
        if asked == Approval::None && self.state.mcp.approve == Approval::Plan && args.contains_key("approve") {
            return Err(ApiError::invalid(
                "approve",
                "this server asks for approval of every plan (tandem mcp --approve plan): approve cannot be \"none\"",
            ));
        }
        let plan_first = plan_only || asked == Approval::Plan || self.state.mcp.approve == Approval::Plan;
        body.insert("approve".into(), json!(if plan_first { "plan" } else { "none" }));
        let id = {
            let state = self.state.clone();
            off_runtime(move || start_run(&state, &Value::Object(body))).await?
        };
        // plan_goal asked for the plan itself; a run that waits on one asks the client's user where it can.
        self.follow(&id, context, !plan_only).await
    }

    /// `get_run`: the run as it stands, with its timeline.
    async fn get_run(&self, args: &JsonObject) -> Result<CallToolResponse, ApiError> {
        only(args, &["run_id"])?;
        let id = run_id(args)?;
        let dir = {
            let (state, id) = (self.state.clone(), id.clone());
            off_runtime(move || run_dir(&state, &id)).await?
        };
        let timeline = follow::timeline(&dir).await?;
        let mut result = self.outcome(&id, Rest::Settled).await?;
        if let Some(object) = result.structured_content.as_mut() {
            object["timeline"] = json!(timeline);
        }
        Ok(result.into())
    }

    /// `resume_run`: queues the resume, then follows it as `run_goal` does.
    async fn resume_run(
        &self,
        args: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ApiError> {
        only(args, &["run_id", "rerun_in_doubt"])?;
        let id = run_id(args)?;
        let mut fields = Map::new();
        if let Some(rerun) = args.get("rerun_in_doubt") {
            fields.insert("rerun_in_doubt".into(), rerun.clone());
        }
        run_control::restart(&self.state, &id, &fields).await?;
        self.follow(&id, context, true).await
    }

    /// `approve_plan`: approves, rejects or replaces the plan a run waits on, then follows the run.
    async fn approve_plan(
        &self,
        args: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ApiError> {
        only(args, &["run_id", "approve", "plan"])?;
        let id = run_id(args)?;
        let approve = match args.get("approve") {
            None => true,
            Some(Value::Bool(yes)) => *yes,
            Some(_) => return Err(ApiError::invalid("approve", "approve must be true or false")),
        };
        run_control::decide(&self.state, &id, args.get("plan"), approve, BY_TOOL).await?;
        self.follow(&id, context, true).await
    }

    /// The retry of a call that asked for approval in rounds: the user's answer decides the run's plan.
    async fn answered(
        &self,
        state: &str,
        responses: Option<&rmcp::model::InputResponses>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ApiError> {
        let id = ask::run_of_state(state)?;
        if !self.decide_by(id, ask::answer_in(responses)).await? {
            // Not decided: the plan comes back, for approve_plan.
            return Ok(self.outcome(id, Rest::Settled).await?.into());
        }
        self.follow(id, context, true).await
    }

    /// Follows run `id` to its end; where it waits for approval and `ask` holds, asks the client's user (MCP
    /// elicitation) and goes on with the answer, or returns the plan for `approve_plan`.
    async fn follow(
        &self,
        id: &str,
        context: &RequestContext<RoleServer>,
        ask: bool,
    ) -> Result<CallToolResponse, ApiError> {
        let mut place = follow::Place::open(&self.state, id).await?;
        loop {
            let rest = follow::until_settled(&self.state, id, context, &mut place).await?;
            let result = self.outcome(id, rest).await?;
            let run = match &result.structured_content {
                Some(run) if ask && rest == Rest::Settled && run["status"] == "awaiting_approval" => run,
                _ => return Ok(result.into()),
            };
            let (goal, plan) = (run["goal"].as_str().unwrap_or_default().to_string(), plan_lines(&run["plan"]));
            let answer = match ask::how(context) {
                ask::Asking::Not => return Ok(result.into()),
                ask::Asking::InRounds => return Ok(ask::in_rounds(id, &goal, &plan).into()),
                ask::Asking::ByRequest => tokio::select! {
                    answer = ask::by_request(context, &goal, &plan) => answer,
                    // The request was cancelled while the user looked at the plan: it still waits.
                    () = context.ct.cancelled() => return Ok(result.into()),
                },
            };
            if !self.decide_by(id, answer).await? {
                return Ok(result.into());
            }
        }
    }

    /// Approves or rejects run `id`'s plan as the user answered; false where the user did not decide.
    async fn decide_by(&self, id: &str, answer: ask::Answer) -> Result<bool, ApiError> {
        let approve = match answer {
            ask::Answer::Approve => true,
            ask::Answer::Reject => false,
            ask::Answer::Undecided => return Ok(false),
        };
        run_control::decide(&self.state, id, None, approve, BY_USER).await?;
        Ok(true)
    }

    /// The run as a tool result: its answer (or what it waits on) as text, the run as structured content.
    async fn outcome(&self, id: &str, rest: Rest) -> Result<CallToolResult, ApiError> {
        let summary = summary_of(&self.state, id).await?;
        let status = summary["status"].as_str().unwrap_or("interrupted").to_string();
        let text = match (status.as_str(), summary["answer"].as_str()) {
            (_, _) if rest == Rest::Cancelled => format!(
                "run {id} was cancelled by the request and stops at its next step; resume_run with this run_id \
                 continues it"
            ),
            ("finished", Some(answer)) => answer.to_string(),
            ("awaiting_approval", _) => format!(
                "run {id} waits for approval of this plan:\n{}\napprove_plan with this run_id runs it (approve: \
                 false rejects it)",
                plan_lines(&summary["plan"])
            ),
            ("interrupted", _) => format!("run {id} stopped before its end; resume_run with this run_id continues it"),
            _ => format!(
                "run {id} ended ({}) without an answer: {}",
                summary["stop"].as_str().unwrap_or("?"),
                summary["detail"].as_str().unwrap_or("")
            ),
        };
        let usage = json!({
            "planner": summary["planner"],
            "executor": summary["executor"],
            "wall_ms": summary["wall_ms"],
        });
        let mut structured = json!({"run_id": id, "status": status, "usage": usage});
        // How it ended only once it has (the summary says "interrupted" of a run still going or waiting).
        let ended = matches!(status.as_str(), "finished" | "cancelled");
        for key in ["goal", "answer", "stop", "detail", "plan", "steps", "replans"] {
            if let Some(value) = summary.get(key).filter(|_| ended || !matches!(key, "stop" | "detail")) {
                structured[key] = value.clone();
            }
        }
        let mut result = CallToolResult::structured(structured);
        result.content = vec![ContentBlock::text(text)];
        Ok(result)
    }
}

/// Refuses fields the tool does not take (a client cannot slip in a tool set or another server's field).
fn only(args: &JsonObject, allowed: &[&str]) -> Result<(), ApiError> {
    match args.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(other) => Err(ApiError::invalid(
            other.clone(),
            format!("unknown argument {other:?}; this tool takes {}", allowed.join(", ")),
        )),
        None => Ok(()),
    }
}

fn run_id(args: &JsonObject) -> Result<String, ApiError> {
    match args.get("run_id") {
        Some(Value::String(id)) if !id.is_empty() => Ok(id.clone()),
        _ => Err(ApiError::invalid("run_id", "run_id must be a run's id (a string), as run_goal returned it")),
    }
}

/// A plan's steps, one a line, as a person reads them.
fn plan_lines(plan: &Value) -> String {
    let steps = plan["steps"].as_array().map(Vec::as_slice).unwrap_or_default();
    steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            format!(
                "{}. {} ({}) {}",
                i + 1,
                step["id"].as_str().unwrap_or("?"),
                step["tool"].as_str().unwrap_or("?"),
                step["args"]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
