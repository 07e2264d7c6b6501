//! The grammar of an answer: what a request's `tools`, `tool_choice`, `parallel_tool_calls` and
//! `response_format` allow, as one llguidance constraint. Tool calls are written the way Qwen's chat template
//! tells the model to write them (`<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`); each call's JSON is
//! constrained to a declared name and that function's argument schema, and under `auto` the choice between a
//! text answer and calls is the grammar's first branch, taken by the model.
//!
//! Small models often write a call as bare JSON instead (`{"name": …, "arguments": …}` with no tags; the 0.5B
//! did so for every call under `auto`, in a JSON code block). So where it cannot be confused with an answer (no
//! `json_schema` answer, which would also open with `{`), an output that opens with `{`, or with a ```` ```json ````
//! block that does, is calls too, one per line, under the same schema: what would have reached the client as JSON
//! text is a tool call. Text answers then never open that way.

use serde_json::{json, Value};

use super::request::{ChatRequest, Function, ToolChoice};
use crate::decode::constraint::ConstraintSpec;

/// What opens a tool call in the output.
pub const CALL_OPEN: &str = "<tool_call>\n";
/// What closes it.
pub const CALL_CLOSE: &str = "\n</tool_call>";

/// The constraint for a request's answer, or `None` for free text.
pub fn constraint(request: &ChatRequest) -> Option<ConstraintSpec> {
    let functions: Vec<&Function> = match &request.tool_choice {
        ToolChoice::None => Vec::new(),
        ToolChoice::Auto | ToolChoice::Required => request.functions.iter().collect(),
        ToolChoice::Function(name) => request.functions.iter().filter(|f| &f.name == name).collect(),
    };
    if functions.is_empty() {
        return match (&request.json_schema, request.functions.is_empty()) {
            (Some(schema), _) => Some(ConstraintSpec::JsonSchema(schema.clone())),
            (None, true) => None,
            // Tools declared but `none` chosen: text that never opens a call.
            (None, false) => Some(ConstraintSpec::Lark(format!("start: TEXT\n{TEXT_RULE}\n"))),
        };
    }
    let calls = if request.parallel_tool_calls { "call (\"\\n\" call)*" } else { "call" };
    let bodies = if request.parallel_tool_calls { "body (\"\\n\" body)*" } else { "body" };
    let body = json_body(&functions);
    let answer = match (&request.tool_choice, &request.json_schema) {
        (ToolChoice::Auto, Some(schema)) => Some(format!("answer: %json {}", lark_json(schema))),
        // A text answer never opens as a bare call would (here `bare_calls` holds).
        (ToolChoice::Auto, None) => Some(format!("answer: OPENING\n{OPENING_RULE}")),
        _ => None,
    };
    let offer_bare = bare_calls(request);
    let branches: Vec<&str> = [answer.is_some().then_some("answer"), Some("calls"), offer_bare.then_some("bare")]
        .into_iter()
        .flatten()
        .collect();
    let bare =
        if offer_bare { format!("bare: {bodies} | \"```json\\n\" {bodies} \"\\n```\"\n") } else { String::new() };
    Some(ConstraintSpec::Lark(format!(
        "start: {}\ncalls: {calls}\n{bare}call: \"<tool_call>\\n\" body \"\\n</tool_call>\"\nbody: %json {body}\n{}\n",
        branches.join(" | "),
        answer.unwrap_or_default()
    )))
}

/// Free text that is not empty and never contains a call's opening (so text and calls cannot be confused).
const TEXT_RULE: &str = "TEXT: /(?s:.+)/ & ~/(?s:.*<tool_call>.*)/";

/// [`TEXT_RULE`] that does not open as a bare call either (`{`, or a JSON code block that opens with `{`): where
/// a bare call may open the output.
const OPENING_RULE: &str = "OPENING: /(?s:[^{].*)/ & ~/(?s:.*<tool_call>.*)/ & ~/(?s:```json\\n\\{.*)/";

/// Whether an output that opens with `{` is a call (see the module's note): some function may be called and no
/// answer could be JSON (`constraint` offers the bare form exactly then).
pub fn bare_calls(request: &ChatRequest) -> bool {
    let callable = match &request.tool_choice {
        ToolChoice::None => false,
        ToolChoice::Function(name) => request.functions.iter().any(|f| &f.name == name),
        ToolChoice::Auto | ToolChoice::Required => !request.functions.is_empty(),
    };
    callable && !(request.tool_choice == ToolChoice::Auto && request.json_schema.is_some())
}

/// The schema of one call: a declared name and that function's arguments.
fn json_body(functions: &[&Function]) -> String {
    let alternatives: Vec<Value> = functions
        .iter()
        .map(|f| {
            json!({
                "type": "object",
                "properties": {"name": {"const": f.name}, "arguments": f.parameters},
                "required": ["name", "arguments"],
                "additionalProperties": false
            })
        })
        .collect();
    let schema = if alternatives.len() == 1 { alternatives[0].clone() } else { json!({"anyOf": alternatives}) };
    lark_json(&schema)
}

/// A schema as `%json` takes it: prepared as every JSON constraint of the crate is (compact whitespace, numbers
/// bounded).
fn lark_json(schema: &Value) -> String {
    crate::decode::constraint::prepare_json_schema(schema).to_string()
}

/// A tool call read back from the output.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The function's name.
    pub name: String,
    /// Its arguments as a JSON text (as the API sends them).
    pub arguments: String,
}

/// Reads one call's JSON (what the grammar let through between the tags).
pub fn read_call(body: &str) -> Option<ToolCall> {
    let value: Value = serde_json::from_str(body).ok()?;
    let name = value.get("name")?.as_str()?.to_string();
    let arguments = value.get("arguments").cloned().unwrap_or_else(|| json!({})).to_string();
    Some(ToolCall { name, arguments })
}
