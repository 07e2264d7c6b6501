//! Asking the client's user to approve a plan (MCP elicitation): the plan shown as a form with one yes/no field.
//! Clients on protocol 2026-07-28 or later are asked in rounds (the tool call returns `input_required`, and the
//! client calls again with the answer and the run named in `requestState`); older clients that declared
//! elicitation get an `elicitation/create` request while the call waits. A client that can do neither gets the
//! plan back, and `approve_plan` continues the run.

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::{json, Value};

use crate::serve::plumbing::error::ApiError;

/// The key of the one input request (and of its answer in `inputResponses`).
const KEY: &str = "approve_plan";
/// What `requestState` holds before the run's id: the state is only a handle, the run itself stays here.
const STATE_PREFIX: &str = "approve_plan:";

/// How this client can be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asking {
    /// Protocol 2026-07-28 or later with form elicitation: an `input_required` result, answered by a retry.
    InRounds,
    /// An older protocol with form elicitation: an `elicitation/create` request to the client.
    ByRequest,
    /// No elicitation: the plan comes back as the result, for `approve_plan`.
    Not,
}

/// What the user answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Approve,
    Reject,
    /// Cancelled, dismissed or unreadable: the run keeps waiting, for `approve_plan`.
    Undecided,
}

/// How the client of this request can be asked (form elicitation is what a yes/no needs).
pub fn how(context: &RequestContext<RoleServer>) -> Asking {
    let forms = context
        .client_capabilities()
        .and_then(|capabilities| capabilities.elicitation)
        // A capability naming no mode is the form mode of the first protocols that had elicitation.
        .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none());
    if !forms {
        Asking::Not
    } else if context.protocol_version().is_some_and(|version| version >= ProtocolVersion::V_2026_07_28) {
        Asking::InRounds
    } else {
        Asking::ByRequest
    }
}

/// The form: the goal and its plan, one required yes/no.
pub fn form(goal: &str, plan: &str) -> ElicitRequestParams {
    let schema = json!({
        "type": "object",
        "properties": {"approve": {
            "type": "boolean",
            "title": "Run this plan",
            "description": "Yes runs the plan's steps with this server's tools; no rejects it and ends the run."
        }},
        "required": ["approve"],
    });
    let Value::Object(schema) = schema else { unreachable!("a JSON object literal") };
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!("Tandem planned this for the goal \"{goal}\":\n{plan}\nRun it?"),
        requested_schema: ElicitationSchema::from_json_schema(schema)
            .expect("the form's schema is an elicitation schema"),
    }
}

/// The `input_required` result asking for the form, with run `id` as the state the retry echoes.
pub fn in_rounds(id: &str, goal: &str, plan: &str) -> InputRequiredResult {
    let mut requests = InputRequests::new();
    requests.insert(KEY.into(), InputRequest::Elicitation(ElicitRequest::new(form(goal, plan))));
    InputRequiredResult::new(Some(requests), Some(format!("{STATE_PREFIX}{id}")))
}

/// The run a retry's `requestState` names (a client can name only what it could pass to `approve_plan`).
pub fn run_of_state(state: &str) -> Result<&str, ApiError> {
    state.strip_prefix(STATE_PREFIX).filter(|id| !id.is_empty()).ok_or_else(|| {
        ApiError::invalid(
            "requestState",
            "requestState is not one this server gave: call the tool again without it, or approve_plan with the \
             run's id",
        )
    })
}

/// The answer a retry carries in `inputResponses`.
pub fn answer_in(responses: Option<&InputResponses>) -> Answer {
    responses.and_then(|responses| responses.get(KEY)).map_or(Answer::Undecided, read)
}

/// Asks the client's user while the call waits (protocols before 2026-07-28).
pub async fn by_request(context: &RequestContext<RoleServer>, goal: &str, plan: &str) -> Answer {
    match context.peer.create_elicitation(form(goal, plan)).await {
        Ok(result) => serde_json::to_value(result).map_or(Answer::Undecided, |value| read(&value)),
        // A client that fails the request has not decided: the run waits for approve_plan.
        Err(e) => {
            tracing::warn!("asking the MCP client to approve a plan failed: {e}");
            Answer::Undecided
        }
    }
}

/// An elicitation result as the user's answer: accepted with `approve` true or false; declined is a no.
fn read(result: &Value) -> Answer {
    match serde_json::from_value::<ElicitationAction>(result["action"].clone()) {
        Ok(ElicitationAction::Accept) => match result["content"]["approve"].as_bool() {
            Some(true) => Answer::Approve,
            Some(false) => Answer::Reject,
            None => Answer::Undecided,
        },
        Ok(ElicitationAction::Decline) => Answer::Reject,
        _ => Answer::Undecided,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_as_the_user_gave_them() {
        let accept = |approve: Value| json!({"action": "accept", "content": {"approve": approve}});
        assert_eq!(read(&accept(json!(true))), Answer::Approve);
        assert_eq!(read(&accept(json!(false))), Answer::Reject);
        assert_eq!(read(&accept(json!("yes"))), Answer::Undecided);
        assert_eq!(read(&json!({"action": "decline"})), Answer::Reject);
        assert_eq!(read(&json!({"action": "cancel"})), Answer::Undecided);
        assert_eq!(read(&json!({"nothing": 1})), Answer::Undecided);
        assert_eq!(answer_in(None), Answer::Undecided);
    }

    #[test]
    fn the_state_names_the_run_and_nothing_else() {
        let asked = in_rounds("r-1", "Count the files", "1. s1 (list_directory) {}");
        let wire = serde_json::to_value(&asked).unwrap();
        assert_eq!(wire["resultType"], "input_required");
        assert_eq!(wire["inputRequests"][KEY]["method"], "elicitation/create");
        assert_eq!(wire["inputRequests"][KEY]["params"]["requestedSchema"]["required"], json!(["approve"]));
        assert!(wire["inputRequests"][KEY]["params"]["message"].as_str().unwrap().contains("list_directory"));
        assert_eq!(run_of_state(asked.request_state.as_deref().unwrap()).unwrap(), "r-1");
        assert!(run_of_state("r-1").is_err());
        assert!(run_of_state(STATE_PREFIX).is_err());
    }
}
