//! The requests `tandem bench serve` sends: a system prompt, a tool list and user messages from
//! `benches/serve/requests.json` (compiled in), each made into a streamed chat-completion body of one of two kinds
//! that make both servers do the same work: `text` (no tools, exactly `max_tokens` new tokens: `ignore_eos`) and
//! `tools` (the tool list with `tool_choice: required` and `parallel_tool_calls: false`, so every answer is one call
//! under each server's grammar).

use serde_json::{json, Value};

use crate::{Error, Result};

/// What the requests ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// No tools; `ignore_eos` and `max_tokens`, so every answer is exactly `max_tokens` tokens on both servers.
    Text,
    /// The tool list with `tool_choice: required`: every answer is one or more calls.
    Tools,
}

impl Kind {
    /// Both kinds, in report order.
    pub const ALL: [Kind; 2] = [Kind::Text, Kind::Tools];

    /// The name used in flags and reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Tools => "tools",
        }
    }

    /// The kind named `name` (`--workload`).
    pub fn parse(name: &str) -> Result<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| Error::Usage(format!("unknown workload {name:?}: use text, tools or both (text,tools)")))
    }
}

/// The committed workload.
const REQUESTS: &str = include_str!("../../../benches/serve/requests.json");

/// The workload: what every request shares, and the user messages it varies.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Workload {
    /// The system prompt every request starts with.
    pub system: String,
    /// OpenAI function tools, sent with every `tools` request (`tool_choice: required`).
    pub tools: Vec<Value>,
    /// The user messages, one a request.
    pub messages: Vec<String>,
    /// Text a `tools` answer is prefilled with, as a final assistant message (llama-server only: see `prefill`).
    #[serde(skip)]
    pub call_prefill: Option<String>,
}

impl Workload {
    /// The committed workload.
    pub fn builtin() -> Result<Workload> {
        let workload: Workload = serde_json::from_str(REQUESTS)
            .map_err(|e| Error::Bench(format!("benches/serve/requests.json is not a workload: {e}")))?;
        if workload.messages.is_empty() {
            return Err(Error::Bench("benches/serve/requests.json has no messages".into()));
        }
        Ok(workload)
    }

    /// The same workload with its `tools` answers prefilled with `prefill`.
    pub fn with_call_prefill(&self, prefill: Option<String>) -> Workload {
        Workload { call_prefill: prefill, ..self.clone() }
    }

    /// The message for request `request` of client `client` (each client sends `per_client`): the clients of a
    /// level walk through the messages in turn, so requests in flight at once mostly differ.
    pub fn message_for(&self, client: usize, request: usize, per_client: usize) -> &str {
        &self.messages[(client * per_client + request) % self.messages.len()]
    }

    /// The body of one request of `kind`: streamed with usage in the last chunk, greedy, at most `max_tokens` new
    /// tokens (exactly that many for `text`: `ignore_eos`, which llama-server and tandem serve both take).
    pub fn body(&self, kind: Kind, model: &str, message: &str, max_tokens: usize) -> Value {
        let mut body = json!({
            "model": model,
            "messages": [
                {"role": "system", "content": self.system},
                {"role": "user", "content": message}
            ],
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": true,
            "stream_options": {"include_usage": true}
        });
        match kind {
            Kind::Text => body["ignore_eos"] = json!(true),
            Kind::Tools => {
                body["tools"] = json!(self.tools);
                body["tool_choice"] = json!("required");
                // One call an answer on both: llama-server writes one unless asked for more, and Tandem lists the
                // actions a request asks for (an extra generation) only where several calls are allowed.
                body["parallel_tool_calls"] = json!(false);
                if let (Some(prefill), Some(messages)) = (&self.call_prefill, body["messages"].as_array_mut()) {
                    messages.push(json!({"role": "assistant", "content": prefill}));
                }
            }
        }
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_bodies_require_a_call_and_text_bodies_run_to_max_tokens_without_tools() {
        let workload = Workload::builtin().unwrap();
        assert!(workload.tools.len() >= 2 && workload.messages.len() >= 4);
        let body = workload.body(Kind::Tools, "m", workload.message_for(1, 0, 2), 16);
        assert_eq!(body["tools"].as_array().unwrap().len(), workload.tools.len());
        assert_eq!(body["tool_choice"], "required");
        assert_eq!(body["parallel_tool_calls"], false, "one call an answer on both servers");
        assert!(body.get("ignore_eos").is_none(), "a call ends where the grammar does");
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["messages"][1]["content"], workload.messages[2]);
        assert_eq!(body["messages"].as_array().unwrap().len(), 2, "no prefill unless asked: {body}");
        let prefilled = workload.with_call_prefill(Some("<tool_call>\n".into()));
        let body = prefilled.body(Kind::Tools, "m", workload.message_for(1, 0, 2), 16);
        assert_eq!(body["messages"][2], json!({"role": "assistant", "content": "<tool_call>\n"}));
        let text = prefilled.body(Kind::Text, "m", workload.message_for(1, 0, 2), 16);
        assert_eq!(text["messages"].as_array().unwrap().len(), 2, "text answers are never prefilled: {text}");
        let text = workload.body(Kind::Text, "m", workload.message_for(0, 1, 2), 32);
        assert!(text.get("tools").is_none() && text.get("tool_choice").is_none(), "{text}");
        assert_eq!((text["ignore_eos"].clone(), text["max_tokens"].clone()), (json!(true), json!(32)));
        assert_eq!(text["messages"][0]["content"], workload.system, "both kinds share the system prompt");
    }

    #[test]
    fn workload_names_round_trip_and_unknown_ones_say_what_to_use() {
        for kind in Kind::ALL {
            assert_eq!(Kind::parse(kind.name()).unwrap(), kind);
        }
        let error = Kind::parse("chat").unwrap_err().to_string();
        assert!(error.contains("text") && error.contains("tools"), "{error}");
    }
}
