//! The requests `tandem bench serve` sends: a system prompt, a tool list and user messages from
//! `benches/serve/requests.json` (compiled in), each made into a streamed chat-completion body.

use serde_json::{json, Value};

use crate::{Error, Result};

/// The committed workload.
const REQUESTS: &str = include_str!("../../../benches/serve/requests.json");

/// The workload: what every request shares, and the user messages it varies.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Workload {
    /// The system prompt every request starts with.
    pub system: String,
    /// OpenAI function tools, sent with every request (`tool_choice: auto`).
    pub tools: Vec<Value>,
    /// The user messages, one a request.
    pub messages: Vec<String>,
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

    /// The message for request `request` of client `client` (each client sends `per_client`): the clients of a
    /// level walk through the messages in turn, so requests in flight at once mostly differ.
    pub fn message_for(&self, client: usize, request: usize, per_client: usize) -> &str {
        &self.messages[(client * per_client + request) % self.messages.len()]
    }

    /// The body of one request: streamed with usage in the last chunk, greedy, at most `max_tokens` new tokens.
    pub fn body(&self, model: &str, message: &str, max_tokens: usize) -> Value {
        json!({
            "model": model,
            "messages": [
                {"role": "system", "content": self.system},
                {"role": "user", "content": message}
            ],
            "tools": self.tools,
            "tool_choice": "auto",
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": true,
            "stream_options": {"include_usage": true}
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_workload_reads_and_every_body_carries_the_tools() {
        let workload = Workload::builtin().unwrap();
        assert!(workload.tools.len() >= 2 && workload.messages.len() >= 4);
        let body = workload.body("m", workload.message_for(1, 0, 2), 16);
        assert_eq!(body["tools"].as_array().unwrap().len(), workload.tools.len());
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["messages"][1]["content"], workload.messages[2]);
    }
}
