//! Where a chat template shows a request's tools, told once by rendering it, and the conversation placed so the
//! model sees them: most templates read `tools` (Qwen, Llama 3.x, Mistral), Phi-4-mini's reads them from the
//! system message's `tools` field, and some show none at all (Gemma 3, SmolLM2, Phi-3.5, this SmolLM3 build).
//! For those, Tandem writes the functions into the system message itself in one documented form (docs/models.md,
//! "Tools in every template"): without it the model would be asked for a call under a grammar while never told
//! which functions exist or what they take.

use serde_json::{json, Value};

use super::tojson::dumps;
use super::{CallFormat, ChatTemplate};

/// How a template shows the tools of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolsShown {
    /// It reads `tools` (Qwen2.5, Qwen3, Llama 3.x, Mistral Nemo): they are passed as they are.
    Tools,
    /// It reads the system message's `tools` field, a JSON text of the functions (Phi-4-mini).
    SystemField,
    /// It shows none: Tandem writes them at the end of the system message (see `system_text`).
    SystemText,
}

impl ToolsShown {
    /// The name docs and logs give it.
    pub fn name(self) -> &'static str {
        match self {
            ToolsShown::Tools => "tools",
            ToolsShown::SystemField => "system-field",
            ToolsShown::SystemText => "system-text",
        }
    }

    /// How `template` shows tools, told by rendering a conversation with a function no conversation names: shown
    /// through `tools`, else through the system message's field, else not at all. A template that refuses a
    /// probe counts as showing nothing there.
    pub(super) fn probe(template: &ChatTemplate) -> ToolsShown {
        let function = json!({"name": PROBE, "description": "d", "parameters": {"type": "object", "properties": {}}});
        let system = json!({"role": "system", "content": "s"});
        let user = json!({"role": "user", "content": "u"});
        let shows = |messages: &[Value], tools: Option<&Value>| {
            template.render_json(messages, tools, true, &Default::default()).is_ok_and(|text| text.contains(PROBE))
        };
        let tools = json!([{"type": "function", "function": function}]);
        if shows(&[system.clone(), user.clone()], Some(&tools)) {
            return ToolsShown::Tools;
        }
        let with_field = json!({"role": "system", "content": "s", "tools": dumps(&json!([function]))});
        if shows(&[with_field, user], None) {
            return ToolsShown::SystemField;
        }
        ToolsShown::SystemText
    }
}

/// The probe's function name.
const PROBE: &str = "tandem_probe_function";

/// The conversation and the `tools` value to render so that a template showing tools as `shown` shows `tools` (an
/// OpenAI tools array): as they are for [`ToolsShown::Tools`]; otherwise in the system message (one is added first
/// where the conversation has none), as its `tools` field or at the end of its text, and no `tools` value.
pub(super) fn place_tools(
    shown: ToolsShown,
    format: CallFormat,
    messages: &[Value],
    tools: &Value,
) -> (Vec<Value>, bool) {
    if shown == ToolsShown::Tools {
        return (messages.to_vec(), true);
    }
    let functions: Vec<Value> = tools
        .as_array()
        .into_iter()
        .flatten()
        .map(|tool| tool.get("function").cloned().unwrap_or_else(|| tool.clone()))
        .collect();
    let mut placed = messages.to_vec();
    let has_system = placed.first().is_some_and(|m| m["role"] == "system" && m["content"].is_string());
    if !has_system {
        placed.insert(0, json!({"role": "system", "content": ""}));
    }
    let system = &mut placed[0];
    match shown {
        ToolsShown::SystemField => system["tools"] = Value::String(dumps(&Value::Array(functions))),
        _ => {
            let text = system["content"].as_str().unwrap_or_default();
            let tools_text = system_text(&functions, format);
            system["content"] =
                Value::String(if text.is_empty() { tools_text } else { format!("{text}\n\n{tools_text}") });
        }
    }
    (placed, false)
}

/// The tools as Tandem writes them into a system message for a template that shows none: a heading, the functions
/// one JSON object a line (as Python's `json.dumps` writes them), and how to call one in the template's format.
fn system_text(functions: &[Value], format: CallFormat) -> String {
    let lines: Vec<String> = functions.iter().map(dumps).collect();
    let call = format!("{{\"name\": <function name>, \"{}\": <arguments as a JSON object>}}", format.arguments_key());
    let block = match (format, format.close()) {
        (CallFormat::Hermes, Some(close)) => format!("{}\n{call}\n{close}", format.open()),
        (_, close) if format.lists_calls() => format!("{}[{call}]{}", format.open(), close.unwrap_or_default()),
        (_, close) => format!("{}{call}{}", format.open(), close.unwrap_or_default()),
    };
    format!(
        "# Tools\n\nYou may call one or more of these functions. Their signatures, one JSON object a line:\n{}\n\n\
         To call a function, answer with:\n{block}",
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Value {
        json!([{"type": "function", "function": {"name": "calculator", "description": "Evaluate",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}])
    }

    #[test]
    fn a_template_reading_tools_gets_them_as_they_are() {
        let messages = vec![json!({"role": "user", "content": "2+3?"})];
        let (placed, pass_tools) = place_tools(ToolsShown::Tools, CallFormat::Hermes, &messages, &tools());
        assert_eq!((placed, pass_tools), (messages, true));
    }

    #[test]
    fn phi4_gets_the_functions_as_its_system_messages_field() {
        let messages = vec![json!({"role": "user", "content": "2+3?"})];
        let (placed, pass_tools) = place_tools(ToolsShown::SystemField, CallFormat::Phi4, &messages, &tools());
        assert!(!pass_tools);
        assert_eq!(placed.len(), 2, "a system message added: {placed:?}");
        assert_eq!(placed[0]["content"], "");
        let field = placed[0]["tools"].as_str().unwrap();
        assert!(field.starts_with(r#"[{"name": "calculator", "description": "Evaluate""#), "{field}");
    }

    #[test]
    fn a_template_showing_no_tools_gets_them_at_the_end_of_the_system_text() {
        let messages = vec![json!({"role": "system", "content": "You plan."}), json!({"role": "user", "content": "x"})];
        let (placed, pass_tools) = place_tools(ToolsShown::SystemText, CallFormat::Hermes, &messages, &tools());
        assert!(!pass_tools && placed.len() == 2);
        let text = placed[0]["content"].as_str().unwrap();
        assert!(text.starts_with("You plan.\n\n# Tools\n"), "{text}");
        assert!(
            text.contains("\n{\"name\": \"calculator\", \"description\": \"Evaluate\", \"parameters\": "),
            "{text}"
        );
        assert!(
            text.ends_with(
                "<tool_call>\n{\"name\": <function name>, \"arguments\": <arguments as a JSON object>}\n</tool_call>"
            ),
            "{text}"
        );
        assert_eq!(placed[1], messages[1], "the rest unchanged");
    }

    #[test]
    fn each_format_says_how_to_call_in_its_own_markers() {
        let phi = system_text(&[], CallFormat::Phi4);
        assert!(
            phi.ends_with(
                "<|tool_call|>[{\"name\": <function name>, \"arguments\": <arguments as a JSON object>}]<|/tool_call|>"
            ),
            "{phi}"
        );
        let mistral = system_text(&[], CallFormat::Mistral);
        assert!(
            mistral.ends_with("[TOOL_CALLS][{\"name\": <function name>, \"arguments\": <arguments as a JSON object>}]")
        );
        let llama = system_text(&[], CallFormat::Llama3);
        assert!(
            llama.ends_with("<|python_tag|>{\"name\": <function name>, \"parameters\": <arguments as a JSON object>}")
        );
    }

    #[test]
    fn the_probe_tells_the_three_ways_apart() {
        let reads_tools =
            "{% for t in tools %}{{ t.function.name }}{% endfor %}{% for m in messages %}{{ m.content }}{% endfor %}";
        let field = "{% for m in messages %}{{ m.content }}{% if m.tools %}{{ m.tools }}{% endif %}{% endfor %}";
        let none = "{% for m in messages %}{{ m.content }}{% endfor %}";
        let refuses = "{{ raise_exception('no system role') }}";
        let shown = |source: &str| ToolsShown::probe(&ChatTemplate::new(source, "", "").unwrap());
        assert_eq!(shown(reads_tools), ToolsShown::Tools);
        assert_eq!(shown(field), ToolsShown::SystemField);
        assert_eq!(shown(none), ToolsShown::SystemText);
        assert_eq!(shown(refuses), ToolsShown::SystemText);
    }
}
