//! Token log-probabilities in the shapes OpenAI's APIs answer with: chat's `logprobs.content`, the Responses API's
//! `logprobs` of an output text, and text completions' parallel lists. The slot names each token by its text and
//! bytes (`Logprob::new`); the handlers only shape them.

use serde_json::{json, Value};

use crate::decode::TokenLogprob;
use crate::llm::tokenizer::GgufTokenizer;

/// One token's text and bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Named {
    /// Its text (bytes that are not whole UTF-8 characters become U+FFFD, as OpenAI's do).
    pub token: String,
    /// Its exact bytes.
    pub bytes: Vec<u8>,
    /// Its natural-log probability.
    pub logprob: f32,
}

/// A chosen token's log-probability and its alternatives, named.
#[derive(Debug, Clone, PartialEq)]
pub struct Logprob {
    /// The chosen token.
    pub chosen: Named,
    /// The most likely tokens at its position, most likely first.
    pub top: Vec<Named>,
}

impl Logprob {
    /// Names a generation's token and its alternatives with the model's tokenizer.
    pub fn new(tokenizer: &GgufTokenizer, logprob: &TokenLogprob) -> Self {
        let named = |id: u32, logprob: f32| {
            let bytes = tokenizer.token_bytes(id).unwrap_or_default().to_vec();
            Named { token: String::from_utf8_lossy(&bytes).into_owned(), bytes, logprob }
        };
        Logprob {
            chosen: named(logprob.token, logprob.logprob),
            top: logprob.top.iter().map(|&(id, lp)| named(id, lp)).collect(),
        }
    }
}

/// A log-probability as JSON: −inf (a token the grammar ruled out) has no JSON number, so it is OpenAI's floor.
fn number(logprob: f32) -> Value {
    json!(if logprob.is_finite() { f64::from(logprob) } else { -9999.0 })
}

fn named(token: &Named) -> Value {
    json!({"token": token.token, "bytes": token.bytes, "logprob": number(token.logprob)})
}

/// Chat's and the Responses API's entry for one token: `{"token", "bytes", "logprob", "top_logprobs": [...]}`.
pub fn entry(logprob: &Logprob) -> Value {
    let mut value = named(&logprob.chosen);
    value["top_logprobs"] = Value::Array(logprob.top.iter().map(named).collect());
    value
}

/// Chat's `choices[].logprobs`: `{"content": [entry...], "refusal": null}`.
pub fn chat(logprobs: &[Logprob]) -> Value {
    json!({"content": logprobs.iter().map(entry).collect::<Vec<_>>(), "refusal": null})
}

/// Text completions' `choices[].logprobs`: parallel lists of tokens, their log-probabilities, each position's
/// alternatives as a map from token text to log-probability, and each token's character offset in the text,
/// counted from `offset`.
pub fn completion(logprobs: &[Logprob], offset: usize) -> Value {
    let mut at = offset;
    let mut offsets = Vec::with_capacity(logprobs.len());
    for lp in logprobs {
        offsets.push(at);
        at += lp.chosen.token.chars().count();
    }
    let tops: Vec<Value> = logprobs
        .iter()
        .map(|lp| {
            let map: serde_json::Map<String, Value> =
                lp.top.iter().map(|t| (t.token.clone(), number(t.logprob))).collect();
            Value::Object(map)
        })
        .collect();
    json!({
        "tokens": logprobs.iter().map(|lp| lp.chosen.token.clone()).collect::<Vec<_>>(),
        "token_logprobs": logprobs.iter().map(|lp| number(lp.chosen.logprob)).collect::<Vec<_>>(),
        "top_logprobs": tops,
        "text_offset": offsets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lp(token: &str, logprob: f32, top: &[(&str, f32)]) -> Logprob {
        let n = |t: &str, l| Named { token: t.into(), bytes: t.as_bytes().to_vec(), logprob: l };
        Logprob { chosen: n(token, logprob), top: top.iter().map(|&(t, l)| n(t, l)).collect() }
    }

    #[test]
    fn shapes_follow_openai() {
        let lps = [lp("Hi", -0.5, &[("Hi", -0.5), ("Hey", -1.0)]), lp("!", f32::NEG_INFINITY, &[])];
        let chat = chat(&lps);
        assert_eq!(chat["content"][0]["top_logprobs"][1]["token"], "Hey");
        assert_eq!(chat["content"][0]["bytes"], json!([72, 105]));
        assert_eq!(chat["content"][1]["logprob"], json!(-9999.0));
        let text = completion(&lps, 3);
        assert_eq!(text["text_offset"], json!([3, 5]));
        assert_eq!(text["top_logprobs"][0]["Hey"], json!(-1.0));
        assert_eq!(text["tokens"], json!(["Hi", "!"]));
    }
}
