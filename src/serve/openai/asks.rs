//! Several calls when several are asked, in a chat completion: before a tool-calling turn that may write several
//! calls, the same model on the same slot lists the actions the request asks for (`agent::asks`), the numbered
//! list goes into the system prompt, and the call grammar takes exactly that many calls when the answer is calls.
//!
//! Why: a small model asked for "weather in Paris and in Oslo" writes one call and ends the turn; listing the
//! actions is a short step it does well, and the count then fixes the grammar. Under `auto` a text answer stays
//! possible: only the number of calls, when it writes calls, is fixed. A list of one action, or one that does not
//! parse, leaves the request as it came. The request's prompt is within its caps before the pass runs
//! (`engine::run_job` checks it first), and so is the pass's own.

use serde_json::{json, Value};

use crate::agent::asks::{asks_note, list_asks, listing_messages};
use crate::decode::{Model, Timings};
use crate::llm::ChatMessage;
use crate::serve::openai::request::{ChatRequest, ToolChoice};

/// Whether `request` gets a listing pass: it may be listed (`asks`, and the server's `--asks`), it declares
/// functions, it may call any of them (`auto` or `required`, not `none` nor one named function), several calls are
/// allowed, and its last message is the user's (a new request, not a turn after tool results).
pub fn wants_listing(request: &ChatRequest) -> bool {
    request.asks
        && request.raw_prompt.is_none()
        && !request.functions.is_empty()
        && matches!(request.tool_choice, ToolChoice::Auto | ToolChoice::Required)
        && request.parallel_tool_calls
        && request.messages.last().and_then(|m| m["role"].as_str()) == Some("user")
}

/// The conversation's user and assistant text, as the listing pass reads it (tool results and calls left out:
/// the request's own words say what it asks).
fn turns(request: &ChatRequest) -> Vec<ChatMessage> {
    request
        .messages
        .iter()
        .filter_map(|m| {
            let role = m["role"].as_str()?;
            let content = m["content"].as_str()?;
            (matches!(role, "user" | "assistant") && !content.trim().is_empty())
                .then(|| ChatMessage::new(role, content))
        })
        .collect()
}

/// Runs the listing pass on `model` and fits `request` to its list: the numbered actions in the system prompt and
/// exactly that many calls, when it lists two or more. Returns what the pass cost (nothing spent when it failed:
/// the request then runs as it came). The pass's own prompt is held to `max_prompt_tokens` too (the functions'
/// descriptions are in it even where the model's template leaves tools out): past it, no pass runs.
pub fn list_and_fit(model: &mut Model, request: &mut ChatRequest, max_prompt_tokens: usize) -> crate::Result<Timings> {
    let functions: Vec<(String, String)> =
        request.functions.iter().map(|f| (f.name.clone(), f.description.clone())).collect();
    let turns = turns(request);
    let length = listing_prompt_tokens(model, &listing_messages(&turns, &functions))?;
    if length > max_prompt_tokens || length >= model.weights.context_length() {
        return Err(crate::Error::Model(format!(
            "the listing pass's prompt is {length} tokens, over the server's cap of {max_prompt_tokens}"
        )));
    }
    let (asks, timings) = list_asks(model, "listing", &turns, &functions)?;
    fit(request, &asks);
    Ok(timings)
}

/// How many tokens `messages` are, rendered with the model's chat template.
fn listing_prompt_tokens(model: &Model, messages: &[ChatMessage]) -> crate::Result<usize> {
    let template = model
        .chat_template
        .as_ref()
        .ok_or_else(|| crate::Error::Model("the model has no chat template: no listing pass".into()))?;
    let text = template.render(messages, None, true)?;
    Ok(model.tokenizer.encode(&text, model.tokenizer.add_bos_by_default())?.len())
}

/// `request` fitted to the listed `asks` (see [`list_and_fit`]); one action or none leaves it as it is.
pub fn fit(request: &mut ChatRequest, asks: &[String]) {
    if asks.len() < 2 {
        return;
    }
    let note = asks_note(asks);
    match request.messages.first_mut() {
        Some(first) if first["role"] == "system" => {
            let content = first["content"].as_str().unwrap_or_default();
            first["content"] = Value::String(format!("{content}\n\n{note}").trim_start().to_string());
        }
        _ => request.messages.insert(0, json!({"role": "system", "content": note})),
    }
    request.exact_calls = Some(asks.len());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::openai::request::parse;

    fn request(extra: Value) -> ChatRequest {
        let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "weather in Paris and Oslo"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "the weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]});
        for (key, value) in extra.as_object().unwrap() {
            body[key] = value.clone();
        }
        parse(&body).unwrap()
    }

    #[test]
    fn only_turns_that_may_write_several_calls_of_any_function_are_listed() {
        assert!(wants_listing(&request(json!({}))), "auto by default");
        assert!(wants_listing(&request(json!({"tool_choice": "required"}))));
        assert!(!wants_listing(&request(json!({"tool_choice": "none"}))));
        let named = json!({"tool_choice": {"type": "function", "function": {"name": "get_weather"}}});
        assert!(!wants_listing(&request(named)));
        assert!(!wants_listing(&request(json!({"parallel_tool_calls": false}))));
        assert!(!wants_listing(&request(json!({"asks": false}))), "the request's own switch");
        assert!(wants_listing(&request(json!({"asks": true}))));
        let no_tools = parse(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})).unwrap();
        assert!(!wants_listing(&no_tools));
        let after_results = json!({"messages": [
            {"role": "user", "content": "weather in Paris"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]});
        assert!(!wants_listing(&request(after_results)), "a turn after tool results is not a new request");
    }

    #[test]
    fn two_actions_fix_two_calls_and_number_them_in_the_system_prompt() {
        let mut req = request(json!({"messages": [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "weather in Paris and Oslo"}]}));
        fit(&mut req, &["weather in Paris".into(), "weather in Oslo".into()]);
        assert_eq!(req.exact_calls, Some(2));
        let system = req.messages[0]["content"].as_str().unwrap();
        assert!(system.starts_with("Be brief.\n\n") && system.contains("1. weather in Paris\n2. weather in Oslo"));
        let mut bare = request(json!({}));
        fit(&mut bare, &["a".into(), "b".into(), "c".into()]);
        assert_eq!((bare.exact_calls, bare.messages[0]["role"].as_str()), (Some(3), Some("system")));
    }

    #[test]
    fn one_action_or_none_leaves_the_request_as_it_came() {
        for asks in [vec![], vec!["weather in Paris".to_string()]] {
            let mut req = request(json!({}));
            fit(&mut req, &asks);
            assert_eq!((req.exact_calls, req.messages.len()), (None, 1));
        }
    }

    #[test]
    fn the_listing_reads_the_requests_words_only() {
        let req = request(json!({"messages": [{"role": "system", "content": "rules"},
            {"role": "user", "content": "weather in Paris"}, {"role": "assistant", "content": "Sunny."},
            {"role": "user", "content": "and in Oslo and Rome?"}]}));
        let roles: Vec<String> = turns(&req).into_iter().map(|m| m.role).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
    }
}
