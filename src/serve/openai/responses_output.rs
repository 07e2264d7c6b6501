//! The Responses API's answer, built from a job's events: output items (a reasoning item where the model thought
//! first, one assistant message of `output_text`, or function calls) and the typed stream events that add up to them (`response.created`,
//! `response.output_item.added`, `response.output_text.delta`, `response.function_call_arguments.delta`,
//! `response.output_item.done`, `response.completed`, ...). A whole answer is the same builder with its events
//! dropped, so the two cannot disagree.

use serde_json::{json, Value};

use crate::serve::openai::chat::call_id;
use crate::serve::openai::logprobs::{self, Logprob};
use crate::serve::openai::output::Piece;
use crate::serve::openai::reasoning::{Part, Split};
use crate::serve::plumbing::engine::{Finished, JobEvent};
use crate::serve::plumbing::error::ApiError;

/// The item being written.
enum Open {
    Reasoning { index: usize, id: String, text: String },
    Message { index: usize, id: String, text: String, logprobs: Vec<Value> },
    Call { index: usize, id: String, call_id: String, name: String, arguments: String },
}

/// Builds a response's items and events.
pub struct Builder {
    /// The response object without `output`, `status` and `usage` (id, model, the request's echoed settings).
    base: Value,
    output: Vec<Value>,
    open: Option<Open>,
    sequence: u64,
    /// Log-probabilities of tokens whose text has not been added yet.
    pending: Vec<Logprob>,
    /// The answer's thinking, apart from its text.
    split: Split,
}

fn item_id(prefix: &str) -> String {
    format!("{prefix}_{:016x}", rand::random::<u64>())
}

impl Builder {
    /// A builder for the response `base` describes (`id`, `model`, `created_at`, the echoed request fields).
    pub fn new(base: Value) -> Self {
        Builder { base, output: Vec::new(), open: None, sequence: 0, pending: Vec::new(), split: Split::default() }
    }

    fn event(&mut self, kind: &str, mut body: Value) -> Value {
        body["type"] = json!(kind);
        body["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        body
    }

    /// The response object as it stands, with `status`.
    fn snapshot(&self, status: &str) -> Value {
        let mut response = self.base.clone();
        response["status"] = json!(status);
        response["output"] = Value::Array(self.output.clone());
        response
    }

    /// The first events: `response.created` and `response.in_progress`.
    pub fn start(&mut self) -> Vec<Value> {
        let created = self.snapshot("in_progress");
        let first = self.event("response.created", json!({"response": created}));
        let progress = self.event("response.in_progress", json!({"response": created}));
        vec![first, progress]
    }

    /// The events one job event makes.
    pub fn push(&mut self, event: JobEvent) -> Vec<Value> {
        let mut out = Vec::new();
        match event {
            JobEvent::Logprob(lp) => self.pending.push(lp),
            JobEvent::Piece(Piece::Text(text)) => {
                for part in self.split.push(text) {
                    self.add(part, &mut out);
                }
            }
            JobEvent::Piece(Piece::CallBegin(name)) => {
                self.close(&mut out);
                self.pending.clear();
                let (index, id, call_id) = (self.output.len(), item_id("fc"), call_id());
                let item = json!({"type": "function_call", "id": id, "call_id": call_id, "name": name,
                                  "arguments": "", "status": "in_progress"});
                self.output.push(item.clone());
                out.push(self.event("response.output_item.added", json!({"output_index": index, "item": item})));
                self.open = Some(Open::Call { index, id, call_id, name, arguments: String::new() });
            }
            JobEvent::Piece(Piece::CallArguments(part)) => {
                self.pending.clear();
                if let Some(Open::Call { index, id, arguments, .. }) = &mut self.open {
                    arguments.push_str(&part);
                    let body = json!({"item_id": id, "output_index": index, "delta": part});
                    out.push(self.event("response.function_call_arguments.delta", body));
                }
            }
            JobEvent::Piece(Piece::CallEnd(_)) => self.close(&mut out),
            // Only text completions ask for an echo.
            JobEvent::Accepted | JobEvent::Echo(_) | JobEvent::Done(_) => {}
        }
        out
    }

    /// Adds a part of the answer's text: thinking to the reasoning item, the rest to the message (each opened
    /// when its first text comes).
    fn add(&mut self, part: Part, out: &mut Vec<Value>) {
        match part {
            Part::Reasoning(text) => self.add_reasoning(text, out),
            Part::Content(text) => self.add_text(text, out),
        }
    }

    fn add_reasoning(&mut self, text: String, out: &mut Vec<Value>) {
        if !matches!(self.open, Some(Open::Reasoning { .. })) {
            self.close(out);
            let (index, id) = (self.output.len(), item_id("rs"));
            let item = json!({"type": "reasoning", "id": id, "summary": [], "content": [], "status": "in_progress"});
            self.output.push(item.clone());
            out.push(self.event("response.output_item.added", json!({"output_index": index, "item": item})));
            self.open = Some(Open::Reasoning { index, id, text: String::new() });
        }
        // Thinking tokens' log-probabilities are not reported (OpenAI reports none for reasoning).
        self.pending.clear();
        if let Some(Open::Reasoning { index, id, text: so_far }) = &mut self.open {
            so_far.push_str(&text);
            let body = json!({"item_id": id, "output_index": index, "content_index": 0, "delta": text});
            out.push(self.event("response.reasoning_text.delta", body));
        }
    }

    fn add_text(&mut self, text: String, out: &mut Vec<Value>) {
        if !matches!(self.open, Some(Open::Message { .. })) {
            self.close(out);
            let (index, id) = (self.output.len(), item_id("msg"));
            let item = json!({"type": "message", "id": id, "status": "in_progress", "role": "assistant",
                              "content": []});
            self.output.push(item.clone());
            out.push(self.event("response.output_item.added", json!({"output_index": index, "item": item})));
            let part = json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
            let body = json!({"item_id": id, "output_index": index, "content_index": 0, "part": part});
            out.push(self.event("response.content_part.added", body));
            self.open = Some(Open::Message { index, id, text: String::new(), logprobs: Vec::new() });
        }
        let lps: Vec<Value> = self.pending.drain(..).map(|lp| logprobs::entry(&lp)).collect();
        if let Some(Open::Message { index, id, text: so_far, logprobs }) = &mut self.open {
            so_far.push_str(&text);
            logprobs.extend(lps.iter().cloned());
            let body = json!({"item_id": id, "output_index": index, "content_index": 0, "delta": text,
                              "logprobs": lps});
            out.push(self.event("response.output_text.delta", body));
        }
    }

    /// Ends the item being written: its `.done` events, and the item completed in the output.
    fn close(&mut self, out: &mut Vec<Value>) {
        self.close_as(out, "completed");
    }

    /// Ends the item being written with `status` (`incomplete` when the answer was cut inside it): its `.done`
    /// events, and the item in the output.
    fn close_as(&mut self, out: &mut Vec<Value>, status: &str) {
        match self.open.take() {
            None => {}
            Some(Open::Reasoning { index, id, text }) => {
                let body = json!({"item_id": id, "output_index": index, "content_index": 0, "text": text});
                out.push(self.event("response.reasoning_text.done", body));
                let item = json!({"type": "reasoning", "id": id, "summary": [],
                                  "content": [{"type": "reasoning_text", "text": text}], "status": status});
                self.output[index] = item.clone();
                out.push(self.event("response.output_item.done", json!({"output_index": index, "item": item})));
            }
            Some(Open::Message { index, id, text, logprobs }) => {
                let body = json!({"item_id": id, "output_index": index, "content_index": 0, "text": text,
                                  "logprobs": logprobs});
                out.push(self.event("response.output_text.done", body));
                let part = json!({"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs});
                let body = json!({"item_id": id, "output_index": index, "content_index": 0, "part": part});
                out.push(self.event("response.content_part.done", body));
                let item = json!({"type": "message", "id": id, "status": status, "role": "assistant",
                                  "content": [part]});
                self.output[index] = item.clone();
                out.push(self.event("response.output_item.done", json!({"output_index": index, "item": item})));
            }
            Some(Open::Call { index, id, call_id, name, arguments }) => {
                let body = json!({"item_id": id, "output_index": index, "name": name, "arguments": arguments});
                out.push(self.event("response.function_call_arguments.done", body));
                let item = json!({"type": "function_call", "id": id, "call_id": call_id, "name": name,
                                  "arguments": arguments, "status": status});
                self.output[index] = item.clone();
                out.push(self.event("response.output_item.done", json!({"output_index": index, "item": item})));
            }
        }
    }

    /// The last events of an answer that failed midway (its slot failed or stopped): OpenAI's `error` event, then
    /// `response.failed` with the response as it stood (an item cut off `incomplete`) and the error, both numbered
    /// in sequence, so a stream always ends with a `response.*` event an SDK waits for.
    pub fn fail(&mut self, error: &ApiError) -> Vec<Value> {
        let mut out = Vec::new();
        self.close_as(&mut out, "incomplete");
        let body = error.body();
        // OpenAI's code for a failure of its own is `server_error`; ours name theirs where they have one.
        let code = Some(&body["error"]["code"]).filter(|c| c.is_string()).cloned().unwrap_or(json!("server_error"));
        let message = body["error"]["message"].clone();
        let event = json!({"code": code, "message": message, "param": body["error"]["param"].clone()});
        out.push(self.event("error", event));
        let mut response = self.snapshot("failed");
        response["error"] = json!({"code": code, "message": message});
        out.push(self.event("response.failed", json!({"response": response})));
        out
    }

    /// The last events and the whole response: `response.completed`, or `response.incomplete` when the token
    /// limit cut the answer.
    pub fn finish(&mut self, finished: &Finished) -> (Vec<Value>, Value) {
        let mut out = Vec::new();
        for part in self.split.finish() {
            self.add(part, &mut out);
        }
        if !self.output.iter().any(|item| item["type"] == "message" || item["type"] == "function_call") {
            // An empty answer (or one that only thought) is still a message, so `output_text` is "" rather than
            // missing.
            self.add_text(String::new(), &mut out);
        }
        // Cut by the token limit: the item it was writing is `incomplete`, as the response is.
        let cut = finished.reason == "length";
        self.close_as(&mut out, if cut { "incomplete" } else { "completed" });
        let mut response = self.snapshot(if cut { "incomplete" } else { "completed" });
        if cut {
            response["incomplete_details"] = json!({"reason": "max_output_tokens"});
        }
        response["usage"] = json!({
            "input_tokens": finished.prompt_tokens,
            "input_tokens_details": {"cached_tokens": finished.cached_tokens},
            "output_tokens": finished.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": finished.listing_tokens + self.split.reasoning_tokens()},
            "total_tokens": finished.prompt_tokens + finished.completion_tokens,
        });
        let kind = if cut { "response.incomplete" } else { "response.completed" };
        let last = self.event(kind, json!({"response": response}));
        out.push(last);
        (out, response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::openai::grammar::ToolCall;

    fn finished(reason: &'static str) -> Finished {
        Finished { reason, prompt_tokens: 10, completion_tokens: 3, cached_tokens: 4, listing_tokens: 0 }
    }

    #[test]
    fn thinking_is_a_reasoning_item_before_the_message() {
        let mut b = Builder::new(json!({"id": "resp_1", "object": "response"}));
        let mut events = b.start();
        for piece in ["<think>", "Two and two", "</think>", "It is 4."] {
            events.extend(b.push(JobEvent::Piece(Piece::Text(piece.into()))));
        }
        let (last, response) = b.finish(&finished("stop"));
        events.extend(last);
        assert_eq!(response["output"][0]["type"], "reasoning", "{response}");
        assert_eq!(response["output"][0]["content"][0]["text"], "Two and two");
        assert_eq!(response["output"][1]["content"][0]["text"], "It is 4.");
        assert_eq!(response["usage"]["output_tokens_details"]["reasoning_tokens"], 3);
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert!(kinds.contains(&"response.reasoning_text.delta") && kinds.contains(&"response.reasoning_text.done"));
        // Only thinking, cut off: the reasoning item and an empty message.
        let mut b = Builder::new(json!({"id": "resp_2", "object": "response"}));
        b.start();
        b.push(JobEvent::Piece(Piece::Text("<think>Two".into())));
        let (_, response) = b.finish(&finished("length"));
        assert_eq!(response["output"][0]["content"][0]["text"], "Two", "{response}");
        assert_eq!(response["output"][1]["content"][0]["text"], "", "{response}");
    }

    #[test]
    fn events_add_up_to_the_items() {
        let mut b = Builder::new(json!({"id": "resp_1", "object": "response"}));
        let mut events = b.start();
        for piece in [Piece::Text("Hel".into()), Piece::Text("lo".into())] {
            events.extend(b.push(JobEvent::Piece(piece)));
        }
        let (last, response) = b.finish(&finished("stop"));
        events.extend(last);
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(kinds.first(), Some(&"response.created"));
        assert_eq!(kinds.last(), Some(&"response.completed"));
        let deltas: String = events
            .iter()
            .filter(|e| e["type"] == "response.output_text.delta")
            .map(|e| e["delta"].as_str().unwrap())
            .collect();
        assert_eq!(deltas, "Hello");
        assert_eq!(response["output"][0]["content"][0]["text"], "Hello");
        assert_eq!(response["usage"]["input_tokens_details"]["cached_tokens"], 4);
        let seqs: Vec<u64> = events.iter().map(|e| e["sequence_number"].as_u64().unwrap()).collect();
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));

        let mut b = Builder::new(json!({}));
        for piece in [
            Piece::CallBegin("f".into()),
            Piece::CallArguments("{\"x\"".into()),
            Piece::CallArguments(": 1}".into()),
            Piece::CallEnd(ToolCall { name: "f".into(), arguments: "{\"x\": 1}".into() }),
        ] {
            b.push(JobEvent::Piece(piece));
        }
        let (_, response) = b.finish(&finished("tool_calls"));
        let call = &response["output"][0];
        assert_eq!((call["type"].as_str(), call["arguments"].as_str()), (Some("function_call"), Some("{\"x\": 1}")));
        assert!(call["call_id"].as_str().unwrap().starts_with("call_"));
        assert_eq!(response["output"].as_array().unwrap().len(), 1);
        let (_, cut) = Builder::new(json!({})).finish(&finished("length"));
        assert_eq!(cut["status"], "incomplete");
    }

    #[test]
    fn an_answer_cut_by_the_limit_is_incomplete_down_to_the_item_it_was_writing() {
        let mut b = Builder::new(json!({}));
        b.start();
        b.push(JobEvent::Piece(Piece::Text("The answer is".into())));
        let (events, response) = b.finish(&finished("length"));
        assert_eq!(
            (response["status"].as_str(), response["output"][0]["status"].as_str()),
            (Some("incomplete"), Some("incomplete"))
        );
        assert_eq!(response["incomplete_details"], json!({"reason": "max_output_tokens"}));
        let done = events.iter().find(|e| e["type"] == "response.output_item.done").unwrap();
        assert_eq!(done["item"]["status"], "incomplete");
        assert_eq!(events.last().unwrap()["type"], "response.incomplete");
        let (_, whole) = Builder::new(json!({})).finish(&finished("stop"));
        assert_eq!(
            (whole["output"][0]["status"].as_str(), &whole["incomplete_details"]),
            (Some("completed"), &Value::Null)
        );
    }

    #[test]
    fn a_failure_midway_ends_the_stream_with_an_error_and_response_failed_in_sequence() {
        let mut b = Builder::new(json!({"id": "resp_1"}));
        let mut events = b.start();
        events.extend(b.push(JobEvent::Piece(Piece::Text("Hel".into()))));
        events.extend(b.fail(&ApiError::internal("generation failed: boom")));
        let seqs: Vec<u64> = events.iter().map(|e| e["sequence_number"].as_u64().unwrap()).collect();
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
        let n = events.len();
        assert_eq!(
            (events[n - 2]["type"].as_str(), events[n - 1]["type"].as_str()),
            (Some("error"), Some("response.failed"))
        );
        assert!(events[n - 2]["message"].as_str().unwrap().contains("boom"));
        let failed = &events[n - 1]["response"];
        assert_eq!((failed["status"].as_str(), failed["id"].as_str()), (Some("failed"), Some("resp_1")));
        assert!(failed["error"]["message"].as_str().unwrap().contains("boom") && failed["error"]["code"].is_string());
        assert_eq!(
            (failed["output"][0]["status"].as_str(), failed["output"][0]["content"][0]["text"].as_str()),
            (Some("incomplete"), Some("Hel"))
        );
    }
}
