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

impl Named {
    /// Token `id` named by the model's tokenizer.
    pub fn new(tokenizer: &GgufTokenizer, id: u32, logprob: f32) -> Self {
        let bytes = tokenizer.token_bytes(id).unwrap_or_default().to_vec();
        Named { token: String::from_utf8_lossy(&bytes).into_owned(), bytes, logprob }
    }
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
        Logprob {
            chosen: Named::new(tokenizer, logprob.token, logprob.logprob),
            top: logprob.top.iter().map(|&(id, lp)| Named::new(tokenizer, id, lp)).collect(),
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

/// A text completion's token: generated or scored, with its log-probability; or an echoed prompt's first token,
/// which nothing precedes, so it has none.
#[derive(Debug, Clone, PartialEq)]
pub enum TextToken {
    /// With its log-probability and alternatives.
    Scored(Logprob),
    /// Only its text (its `logprob` is not read).
    Unscored(Named),
}

/// Text completions' `choices[].logprobs`: parallel lists of tokens, their log-probabilities, each position's
/// alternatives as a map from token text to log-probability, and each token's character offset in the text,
/// counted from `offset`. An unscored token's log-probability and alternatives are `null`, as OpenAI's echo has
/// them for a prompt's first token.
pub fn completion(tokens: &[TextToken], offset: usize) -> Value {
    let mut at = offset;
    let (mut texts, mut values, mut tops, mut offsets) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for token in tokens {
        let chosen = match token {
            TextToken::Scored(lp) => {
                values.push(number(lp.chosen.logprob));
                let map: serde_json::Map<String, Value> =
                    lp.top.iter().map(|t| (t.token.clone(), number(t.logprob))).collect();
                tops.push(Value::Object(map));
                &lp.chosen
            }
            TextToken::Unscored(named) => {
                values.push(Value::Null);
                tops.push(Value::Null);
                named
            }
        };
        offsets.push(at);
        at += chosen.token.chars().count();
        texts.push(json!(chosen.token));
    }
    json!({"tokens": texts, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets})
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
        let scored: Vec<TextToken> = lps.iter().cloned().map(TextToken::Scored).collect();
        let text = completion(&scored, 3);
        assert_eq!(text["text_offset"], json!([3, 5]));
        assert_eq!(text["top_logprobs"][0]["Hey"], json!(-1.0));
        assert_eq!(text["tokens"], json!(["Hi", "!"]));
        let first = Named { token: "def".into(), bytes: b"def".to_vec(), logprob: 0.0 };
        let echoed = completion(&[TextToken::Unscored(first), scored[0].clone()], 0);
        assert_eq!(echoed["tokens"], json!(["def", "Hi"]));
        assert_eq!(echoed["token_logprobs"], json!([null, -0.5]));
        assert_eq!(echoed["top_logprobs"][0], Value::Null);
        assert_eq!(echoed["text_offset"], json!([0, 3]));
    }
}
