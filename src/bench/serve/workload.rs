//! The requests `tandem bench serve` sends, each one new, as a user's day brings them: a system prompt, a tool
//! list and message templates from `benches/serve/requests.json` (compiled in). Request number `n` of a run gets
//! its own user message (the templates' slots filled by counting through their combinations), so no prompt is
//! sent twice and a server can reuse only what clients really share: the system prompt and the tools. Three kinds:
//! `text` (no tools, exactly `max_tokens` new tokens: `ignore_eos`), `tools` (the tool list, `tool_choice:
//! required`, nothing else set, so each server lists and writes calls as it does by default) and `long` (a new
//! generated document of 1,500+ tokens with a question, answered as `text` is). Each is sent greedy or sampled
//! as clients send it (temperature 1 with a seed of its own).

use std::collections::BTreeMap;

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
    /// A document of generated orders (1,500+ tokens, new every request) and a question about it, answered as
    /// `text` is: the prompt-heavy requests of clients that send documents and long context.
    Long,
}

impl Kind {
    /// Every kind, in report order.
    pub const ALL: [Kind; 3] = [Kind::Text, Kind::Tools, Kind::Long];

    /// The name used in flags and reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Tools => "tools",
            Kind::Long => "long",
        }
    }

    /// The kind named `name` (`--workload`).
    pub fn parse(name: &str) -> Result<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name).ok_or_else(|| {
            Error::Usage(format!("unknown workload {name:?}: use text, tools, long, or several (text,tools,long)"))
        })
    }
}

/// How the answers are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sampling {
    /// Temperature 1 with a seed per request: what OpenAI clients send unless told otherwise.
    Sampled,
    /// Temperature 0.
    Greedy,
}

impl Sampling {
    /// Both, in report order.
    pub const ALL: [Sampling; 2] = [Sampling::Sampled, Sampling::Greedy];

    /// The name used in flags and reports.
    pub fn name(self) -> &'static str {
        match self {
            Sampling::Sampled => "sampled",
            Sampling::Greedy => "greedy",
        }
    }

    /// The sampling named `name` (`--sampling`).
    pub fn parse(name: &str) -> Result<Sampling> {
        Sampling::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| Error::Usage(format!("unknown sampling {name:?}: use sampled, greedy or both")))
    }
}

/// The committed workload.
const REQUESTS: &str = include_str!("../../../benches/serve/requests.json");

/// Rows of a `long` request's document: about 35 tokens each with Qwen's tokenizer (a digit is a token), so
/// 1,600 or so with the system prompt and the question.
const LONG_ROWS: u64 = 44;

/// `{number}`'s values: 2 to 9999.
const NUMBERS: (u64, u64) = (2, 9999);

/// `{date}`'s values: the days of 2027 and 2028.
const DAYS: u64 = 731;

/// The workload: what every request shares, and what its own message is made from.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Workload {
    /// The system prompt every request starts with.
    pub system: String,
    /// OpenAI function tools, sent with every `tools` request (`tool_choice: required`).
    pub tools: Vec<Value>,
    /// User-message templates of `text` and `tools` requests, with `{slot}`s.
    pub messages: Vec<String>,
    /// The values of each named slot.
    pub slots: BTreeMap<String, Vec<String>>,
    /// The questions a `long` request asks about its document, with `{slot}`s.
    pub long_questions: Vec<String>,
}

impl Workload {
    /// The committed workload, checked: every slot a template names has values.
    pub fn builtin() -> Result<Workload> {
        let workload: Workload = serde_json::from_str(REQUESTS)
            .map_err(|e| Error::Bench(format!("benches/serve/requests.json is not a workload: {e}")))?;
        if workload.messages.is_empty() || workload.long_questions.is_empty() {
            return Err(Error::Bench("benches/serve/requests.json needs messages and long_questions".into()));
        }
        // A `long` document's customers and items.
        if workload.sizes(&["name", "item"]).is_none() {
            return Err(Error::Bench("benches/serve/requests.json needs slots `name` and `item`".into()));
        }
        for template in workload.messages.iter().chain(&workload.long_questions) {
            for slot in slot_names(template) {
                if workload.sizes(&[slot]).is_none() {
                    return Err(Error::Bench(format!(
                        "benches/serve/requests.json: the template {template:?} names {{{slot}}}, which has no values"
                    )));
                }
            }
        }
        Ok(workload)
    }

    /// How many values each of `slots` takes (`None` when one has none).
    fn sizes(&self, slots: &[&str]) -> Option<Vec<u64>> {
        slots
            .iter()
            .map(|&slot| match slot {
                "number" => Some(NUMBERS.1 - NUMBERS.0 + 1),
                "date" => Some(DAYS),
                _ => self.slots.get(slot).map(|v| v.len() as u64).filter(|&n| n > 0),
            })
            .collect()
    }

    /// The value `index` of `slot`.
    fn value(&self, slot: &str, index: u64) -> String {
        match slot {
            "number" => (NUMBERS.0 + index).to_string(),
            "date" => date_of(index),
            _ => self.slots[slot][index as usize].clone(),
        }
    }

    /// `template` with its slots filled by combination `k` (counted in mixed radix over the slots in order, so
    /// combinations 0 to the product of their sizes less one are all different).
    fn fill(&self, template: &str, k: u64) -> String {
        let names = slot_names(template);
        let sizes = self.sizes(&names).unwrap_or_default();
        let mut rest = k % sizes.iter().product::<u64>().max(1);
        let mut text = template.to_string();
        for (name, size) in names.iter().zip(sizes) {
            text = text.replacen(&format!("{{{name}}}"), &self.value(name, rest % size), 1);
            rest /= size;
        }
        text
    }

    /// How many different messages template `index` of `messages` makes.
    pub fn capacity(&self, index: usize) -> u64 {
        self.sizes(&slot_names(&self.messages[index])).unwrap_or_default().iter().product()
    }

    /// The user message of request `n` of a run: the templates in turn, each filled with its next combination.
    pub fn message(&self, kind: Kind, n: u64) -> String {
        match kind {
            Kind::Text | Kind::Tools => {
                let count = self.messages.len() as u64;
                self.fill(&self.messages[(n % count) as usize], n / count)
            }
            Kind::Long => {
                let count = self.long_questions.len() as u64;
                let question = self.fill(&self.long_questions[(n % count) as usize], n / count);
                format!("{}\n{question}", self.document(n))
            }
        }
    }

    /// The document of `long` request `n`: a table of orders drawn from its own random stream.
    fn document(&self, n: u64) -> String {
        let mut random = SplitMix(n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5EED);
        let names = &self.slots["name"];
        let items = &self.slots["item"];
        let mut text = format!("Orders of travel shop {} (order, date, customer, item, units, price in EUR):\n", n + 1);
        for row in 0..LONG_ROWS {
            let name = &names[random.below(names.len() as u64) as usize];
            let item = &items[random.below(items.len() as u64) as usize];
            let units = 1 + random.below(12);
            let cents = 150 + random.below(40_000);
            text.push_str(&format!(
                "{}-{:03}, {}, {name}, {item}, {units}, {}.{:02}\n",
                n + 1,
                row + 1,
                date_of(random.below(DAYS)),
                cents / 100,
                cents % 100
            ));
        }
        text
    }

    /// The body of request `n` of `kind`: streamed with usage in the last chunk, at most `max_tokens` new tokens
    /// (exactly that many for `text` and `long`: `ignore_eos`, which llama-server and tandem serve both take).
    pub fn body(&self, kind: Kind, sampling: Sampling, model: &str, n: u64, max_tokens: usize) -> Value {
        let mut body = json!({
            "model": model,
            "messages": [
                {"role": "system", "content": self.system},
                {"role": "user", "content": self.message(kind, n)}
            ],
            "max_tokens": max_tokens,
            "stream": true,
            "stream_options": {"include_usage": true}
        });
        match sampling {
            Sampling::Greedy => body["temperature"] = json!(0),
            Sampling::Sampled => {
                body["temperature"] = json!(1);
                body["seed"] = json!(n);
            }
        }
        match kind {
            Kind::Text | Kind::Long => body["ignore_eos"] = json!(true),
            Kind::Tools => {
                // Nothing else: a client leaves `parallel_tool_calls` at its default (true), so Tandem runs its
                // listing pass and llama-server its own parsing, as each does for users.
                body["tools"] = json!(self.tools);
                body["tool_choice"] = json!("required");
            }
        }
        body
    }
}

/// The slots a template names, in order: `{name}` where the name is letters, digits and `_`.
fn slot_names(template: &str) -> Vec<&str> {
    template
        .split('{')
        .skip(1)
        .filter_map(|part| part.split_once('}').map(|(name, _)| name))
        .filter(|name| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .collect()
}

/// Day `index` counted from 2027-01-01, as YYYY-MM-DD.
fn date_of(index: u64) -> String {
    const MONTHS: [u64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let (mut year, mut day) = (2027u64, index % DAYS);
    loop {
        let length = if year % 4 == 0 { 366 } else { 365 };
        if day < length {
            break;
        }
        day -= length;
        year += 1;
    }
    let mut month = 0;
    loop {
        let length = MONTHS[month] + u64::from(month == 1 && year % 4 == 0);
        if day < length {
            break;
        }
        day -= length;
        month += 1;
    }
    format!("{year}-{:02}-{:02}", month + 1, day + 1)
}

/// SplitMix64: a small, well-mixed stream of numbers, the same on every machine (documents must not depend on
/// a random crate's version).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `bound` (bound > 0).
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn tool_bodies_require_a_call_as_clients_send_them_and_text_bodies_run_to_max_tokens() {
        let workload = Workload::builtin().unwrap();
        assert!(workload.tools.len() >= 2 && workload.messages.len() >= 4);
        let body = workload.body(Kind::Tools, Sampling::Greedy, "m", 9, 16);
        assert_eq!(body["tools"].as_array().unwrap().len(), workload.tools.len());
        assert_eq!(body["tool_choice"], "required");
        assert!(body.get("parallel_tool_calls").is_none(), "left at the client's default: {body}");
        assert!(body.get("ignore_eos").is_none(), "a call ends where the grammar does");
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["messages"][1]["content"], workload.message(Kind::Tools, 9));
        assert_eq!(body["messages"].as_array().unwrap().len(), 2, "no prefill: {body}");
        assert_eq!((body["temperature"].clone(), body.get("seed")), (json!(0), None));
        let sampled = workload.body(Kind::Text, Sampling::Sampled, "m", 5, 32);
        assert_eq!((sampled["temperature"].clone(), sampled["seed"].clone()), (json!(1), json!(5)));
        assert!(sampled.get("tools").is_none() && sampled.get("tool_choice").is_none(), "{sampled}");
        assert_eq!((sampled["ignore_eos"].clone(), sampled["max_tokens"].clone()), (json!(true), json!(32)));
        assert_eq!(sampled["messages"][0]["content"], workload.system, "every kind shares the system prompt");
        let long = workload.body(Kind::Long, Sampling::Greedy, "m", 5, 32);
        assert_eq!(long["ignore_eos"], true);
        assert!(long.get("tools").is_none());
    }

    #[test]
    fn every_request_of_a_run_gets_a_message_of_its_own() {
        let workload = Workload::builtin().unwrap();
        for (index, template) in workload.messages.iter().enumerate() {
            assert!(workload.capacity(index) >= 10_000, "{template} makes {} messages", workload.capacity(index));
        }
        let short: HashSet<String> = (0..40_000).map(|n| workload.message(Kind::Text, n)).collect();
        assert_eq!(short.len(), 40_000);
        assert!(short.iter().all(|m| !m.contains('{')), "every slot filled");
        assert_eq!(workload.message(Kind::Tools, 7), workload.message(Kind::Text, 7), "the same message either way");
        let long: HashSet<String> = (0..500).map(|n| workload.message(Kind::Long, n)).collect();
        assert_eq!(long.len(), 500);
        // About 35 tokens a row: the long prompt is long (Qwen's tokenizer gives 1,500+; checked end to end).
        let one = workload.message(Kind::Long, 3);
        assert!(one.lines().count() as u64 > LONG_ROWS && one.len() > 2_500, "{} bytes", one.len());
        assert_eq!(one, workload.message(Kind::Long, 3), "the same on every call and machine");
    }

    #[test]
    fn slots_fill_in_order_and_dates_are_real_days() {
        assert_eq!(slot_names("a {city} to {airport2} on {date}, {not a slot}"), ["city", "airport2", "date"]);
        assert_eq!(date_of(0), "2027-01-01");
        assert_eq!(date_of(58), "2027-02-28");
        assert_eq!(date_of(365 + 59), "2028-02-29");
        assert_eq!(date_of(730), "2028-12-31");
        let workload = Workload::builtin().unwrap();
        assert_eq!(workload.fill("{number}/{number}", 1), "3/2", "the first slot counts fastest");
    }

    #[test]
    fn workload_and_sampling_names_round_trip_and_unknown_ones_say_what_to_use() {
        for kind in Kind::ALL {
            assert_eq!(Kind::parse(kind.name()).unwrap(), kind);
        }
        for sampling in Sampling::ALL {
            assert_eq!(Sampling::parse(sampling.name()).unwrap(), sampling);
        }
        let error = Kind::parse("chat").unwrap_err().to_string();
        assert!(error.contains("text") && error.contains("long"), "{error}");
        assert!(Sampling::parse("hot").unwrap_err().to_string().contains("sampled"));
    }
}
