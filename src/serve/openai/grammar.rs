//! The grammar of an answer: what a request's `tools`, `tool_choice`, `parallel_tool_calls` and
//! `response_format` allow, as one llguidance constraint. Tool calls are written in the loaded model's own format
//! (`llm::chat::CallFormat`, told from its chat template at load): Hermes/Qwen `<tool_call>\n{"name": …,
//! "arguments": …}\n</tool_call>` blocks, Llama 3's `{"name": …, "parameters": …}` (marked by `<|python_tag|>`),
//! Mistral's `[TOOL_CALLS][{…}, …]`, Phi-4's `<|tool_call|>[{…}, …]<|/tool_call|>`. A marker that is one control
//! token of the vocabulary is named by id (plain text can never produce it). Each call's JSON is constrained to a
//! declared name and that function's argument schema, and under `auto` the choice between a text answer and calls
//! is the grammar's first branch, taken by the model.
//!
//! Small models often write a call as bare JSON instead (`{"name": …, "arguments": …}` with no marker; the 0.5B
//! did so for every call under `auto`, in a JSON code block), and bare JSON is how Llama 3's templates ask for
//! calls. So where it cannot be confused with an answer (no `json_schema` answer, which would also open with `{`),
//! an output that opens with `{`, or with a ```` ```json ```` block that does, is calls too, one per line, under
//! the same schema: what would have reached the client as JSON text is a tool call. Text answers then never open
//! that way.

use serde_json::{json, Value};

use crate::decode::constraint::ConstraintSpec;
pub use crate::llm::chat::ToolCall;
use crate::llm::chat::{CallFormat, CallSyntax, Marker};
use crate::serve::openai::request::{ChatRequest, Function, ToolChoice};

/// What opens calls written bare: a JSON object, or a JSON code block holding one.
pub const BARE_OPENINGS: [&str; 2] = ["{", "```json\n{"];

/// The constraint for a request's answer in `syntax`, or `None` for free text.
pub fn constraint(request: &ChatRequest, syntax: &CallSyntax) -> Option<ConstraintSpec> {
    let functions: Vec<&Function> = match &request.tool_choice {
        ToolChoice::None => Vec::new(),
        ToolChoice::Auto | ToolChoice::Required => request.functions.iter().collect(),
        ToolChoice::Function(name) => request.functions.iter().filter(|f| &f.name == name).collect(),
    };
    let no_marker = never_contains(syntax.open);
    if functions.is_empty() {
        return match (&request.json_schema, request.functions.is_empty()) {
            (Some(schema), _) => Some(ConstraintSpec::JsonSchema(schema.clone())),
            (None, true) => None,
            // Tools declared but `none` chosen: text that never opens a call.
            (None, false) => Some(ConstraintSpec::Lark(format!("start: TEXT\nTEXT: /(?s:.+)/{no_marker}\n"))),
        };
    }
    let format = syntax.format;
    // How many calls one turn holds: one, any number, or exactly the count the listing pass found.
    let count = match (request.parallel_tool_calls, request.exact_calls) {
        (false, _) => Count::One,
        (true, Some(n)) if n >= 2 => Count::Exactly(n),
        (true, _) => Count::Any,
    };
    let bodies = count.of("body", "\"\\n\"");
    let open = lark_marker(syntax.open);
    let close = syntax.close.map(lark_marker).unwrap_or_default();
    let (calls, block) = match format {
        CallFormat::Hermes => (count.of("block", "\"\\n\""), format!("{open} \"\\n\" body \"\\n\" {close}")),
        CallFormat::Llama3 => ("block".to_string(), format!("{open} body")),
        CallFormat::Mistral | CallFormat::Phi4 => {
            ("block".to_string(), format!("{open} \"[\" {} \"]\" {close}", count.of("body", "\", \"")))
        }
    };
    let answer = match (&request.tool_choice, &request.json_schema) {
        (ToolChoice::Auto, Some(schema)) => Some(format!("answer: %json {}", lark_json(schema))),
        // A text answer never opens as a bare call would (here `bare_calls` holds).
        (ToolChoice::Auto, None) => {
            Some(format!("answer: OPENING\nOPENING: /(?s:[^{{].*)/{no_marker} & ~/(?s:```json\\n\\{{.*)/"))
        }
        _ => None,
    };
    let offer_bare = bare_calls(request);
    // Llama 3's marker holds one call: several go bare, one a line, as its templates ask.
    let offer_marked = !(format == CallFormat::Llama3 && matches!(count, Count::Exactly(_)) && offer_bare);
    let branches: Vec<&str> =
        [answer.is_some().then_some("answer"), offer_marked.then_some("calls"), offer_bare.then_some("bare")]
            .into_iter()
            .flatten()
            .collect();
    let bare =
        if offer_bare { format!("bare: {bodies} | \"```json\\n\" {bodies} \"\\n```\"\n") } else { String::new() };
    Some(ConstraintSpec::Lark(format!(
        "start: {}\ncalls: {calls}\nblock: {block}\n{bare}body: %json {}\n{}\n",
        branches.join(" | "),
        json_body(&functions, format.arguments_key()),
        answer.unwrap_or_default()
    )))
}

/// How many calls one turn holds.
#[derive(Debug, Clone, Copy)]
enum Count {
    One,
    Any,
    Exactly(usize),
}

impl Count {
    /// A Lark sequence of `item`s joined by `separator` (a Lark literal), as many as this count.
    fn of(self, item: &str, separator: &str) -> String {
        match self {
            Count::One => item.to_string(),
            Count::Any => format!("{item} ({separator} {item})*"),
            Count::Exactly(n) => vec![item; n].join(&format!(" {separator} ")),
        }
    }
}

/// What opens calls in the output (for `OutputSplitter`): the format's marker, and the bare openings where the
/// grammar offers them; nothing when no call may be written.
pub fn call_openings(request: &ChatRequest, syntax: &CallSyntax) -> Vec<String> {
    let calls_allowed = request.tool_choice != ToolChoice::None && !request.functions.is_empty();
    if !calls_allowed {
        return Vec::new();
    }
    let mut openings = vec![syntax.open.text.to_string()];
    if bare_calls(request) {
        openings.extend(BARE_OPENINGS.map(String::from));
    }
    openings
}

/// A marker in a Lark grammar: its control token by id, or its text.
fn lark_marker(marker: Marker) -> String {
    match marker.token {
        Some(id) => format!("<[{id}]>"),
        None => Value::String(marker.text.to_string()).to_string(),
    }
}

/// The part of a text rule that keeps it from holding the opening marker, so text and calls cannot be confused:
/// none for a control token, which text rules can never produce.
fn never_contains(marker: Marker) -> String {
    if marker.token.is_some() {
        return String::new();
    }
    let escaped: String = marker
        .text
        .chars()
        .flat_map(|c| if "\\.+*?()|[]{}^$#&-~/".contains(c) { vec!['\\', c] } else { vec![c] })
        .collect();
    format!(" & ~/(?s:.*{escaped}.*)/")
}

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

/// The schema of one call: a declared name and that function's arguments, under `arguments_key`.
fn json_body(functions: &[&Function], arguments_key: &str) -> String {
    let alternatives: Vec<Value> = functions
        .iter()
        .map(|f| {
            json!({
                "type": "object",
                "properties": {"name": {"const": f.name}, arguments_key: f.parameters},
                "required": ["name", arguments_key],
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

/// Reads one call's JSON (what the grammar let through): its arguments under `arguments` or, as Llama 3 writes
/// them, `parameters`.
pub fn read_call(body: &str) -> Option<ToolCall> {
    let value: Value = serde_json::from_str(body).ok()?;
    let name = value.get("name")?.as_str()?.to_string();
    let arguments = value.get("arguments").or_else(|| value.get("parameters"));
    let arguments = arguments.cloned().unwrap_or_else(|| json!({})).to_string();
    Some(ToolCall { name, arguments })
}
