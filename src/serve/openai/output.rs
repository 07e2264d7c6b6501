//! The generated text turned into what the API sends, as it streams: text (held back only while it could still
//! be the start of a stop sequence or of a tool call) and tool calls, each begun once its name is written, its
//! arguments sent in parts as the model writes them, and ended once its JSON object is complete. The grammar makes
//! the parts of a call's arguments add up to valid JSON, and lets nothing but markers, separators and fences
//! (`<tool_call>`, `[TOOL_CALLS][`, `, `, ```` ```json ````, none of which holds a `{`) come between calls, so calls
//! in any model's format (`grammar`) are the JSON objects of the output.

use crate::serve::openai::grammar::{read_call, ToolCall};
use crate::serve::openai::partial_call::{read_partial, PartialCall};

/// A piece of the answer ready to send.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// Answer text.
    Text(String),
    /// A tool call begins: its function's name.
    CallBegin(String),
    /// More of the begun call's arguments: the parts of one call, in order, are its arguments' JSON text.
    CallArguments(String),
    /// The begun call is complete: the whole of it (its arguments are the parts sent).
    CallEnd(ToolCall),
}

/// What the output is, once its first characters tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Undecided,
    Text,
    Calls,
}

/// Splits generated text into pieces; `stopped` once a stop sequence appeared (the generation should end).
#[derive(Debug)]
pub struct OutputSplitter {
    stops: Vec<String>,
    /// What opens calls (`grammar::call_openings`); none when calls are not allowed.
    openings: Vec<String>,
    shape: Shape,
    pending: String,
    stopped: bool,
    /// Text sent so far (for usage counts when a stop sequence ends the generation early).
    sent_text: String,
    /// The bytes of arguments sent for the call being written, once it has begun.
    open_call: Option<usize>,
}

impl OutputSplitter {
    /// A splitter for an answer that is calls when it opens with one of `openings` (none: text only) and ends at
    /// any of `stops`.
    pub fn new(stops: Vec<String>, openings: Vec<String>) -> Self {
        let shape = if openings.is_empty() { Shape::Text } else { Shape::Undecided };
        Self {
            stops,
            openings,
            shape,
            pending: String::new(),
            stopped: false,
            sent_text: String::new(),
            open_call: None,
        }
    }

    /// Whether a stop sequence ended the answer.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// The text the answer had when it stopped.
    pub fn sent_text(&self) -> &str {
        &self.sent_text
    }

    /// Takes newly generated text; returns the pieces now ready.
    pub fn push(&mut self, text: &str) -> Vec<Piece> {
        if self.stopped {
            return Vec::new();
        }
        self.pending.push_str(text);
        if self.shape == Shape::Undecided {
            // Text once none of the openings can still be on its way.
            if self.openings.iter().any(|o| self.pending.starts_with(o.as_str())) {
                self.shape = Shape::Calls;
            } else if !self.openings.iter().any(|o| o.starts_with(self.pending.as_str())) {
                self.shape = Shape::Text;
            } else {
                return Vec::new();
            }
        }
        match self.shape {
            Shape::Calls => self.take_calls(),
            _ => self.take_text(false),
        }
    }

    /// The end of the output: whatever is still held back.
    pub fn finish(&mut self) -> Vec<Piece> {
        if self.stopped {
            return Vec::new();
        }
        match self.shape {
            Shape::Calls => self.take_calls(),
            // An undecided output that ended is text (a prefix of `<tool_call>` is not a call).
            _ => self.take_text(true),
        }
    }

    /// Whether the output turned out to be calls.
    pub fn is_calls(&self) -> bool {
        self.shape == Shape::Calls
    }

    /// Every complete JSON object of the pending text, as calls (the grammar made each one a call; what comes
    /// between them is markers and separators, dropped), then the object still being written.
    fn take_calls(&mut self) -> Vec<Piece> {
        let mut out = Vec::new();
        loop {
            let Some(start) = self.pending.find('{') else {
                // Markers and separators only, so far.
                self.pending.clear();
                break;
            };
            self.pending.drain(..start);
            // Only where the object ends is needed here (`end_call` reads the call), so nothing is built.
            let mut objects = serde_json::Deserializer::from_str(&self.pending).into_iter::<serde::de::IgnoredAny>();
            // An object still being written is an end-of-input error: it waits for more text.
            let Some(Ok(_)) = objects.next() else {
                self.stream_call(&mut out);
                break;
            };
            let end = objects.byte_offset();
            let body = self.pending[..end].to_string();
            self.end_call(&body, &mut out);
            self.pending.drain(..end);
        }
        out
    }

    /// Sends what is new of the call being written at the front of the pending text: its beginning once its name
    /// is out, then its arguments as they grow.
    fn stream_call(&mut self, out: &mut Vec<Piece>) {
        let PartialCall::Named { name, arguments } = read_partial(&self.pending) else { return };
        self.open_call = Some(send_new_parts(self.open_call, &name, arguments, out));
    }

    /// Ends the call whose whole JSON is `body`: what was not sent of it yet, then its end.
    fn end_call(&mut self, body: &str, out: &mut Vec<Piece>) {
        let sent = self.open_call.take();
        let call = match (read_partial(body), read_call(body)) {
            // Its arguments as written, so that the whole call is what its parts add up to.
            (PartialCall::Named { name, arguments }, Some(_)) => ToolCall { name, arguments: arguments.to_string() },
            // Not written name first: nothing of it was sent, and its arguments go as one part.
            (_, Some(call)) => call,
            // The grammar lets no other call through.
            _ => return,
        };
        send_new_parts(sent, &call.name, &call.arguments, out);
        out.push(Piece::CallEnd(call));
    }

    fn take_text(&mut self, at_end: bool) -> Vec<Piece> {
        // A stop sequence ends the answer before it.
        let first_stop = self.stops.iter().filter_map(|s| self.pending.find(s.as_str())).min();
        let ready = if let Some(at) = first_stop {
            self.stopped = true;
            let text = self.pending[..at].to_string();
            self.pending.clear();
            text
        } else {
            // Hold back a tail that could still become a stop sequence.
            let keep = if at_end { 0 } else { self.stop_prefix_len() };
            let cut = self.pending.len() - keep;
            let text = self.pending[..cut].to_string();
            self.pending.drain(..cut);
            text
        };
        if ready.is_empty() {
            return Vec::new();
        }
        self.sent_text.push_str(&ready);
        vec![Piece::Text(ready)]
    }

    /// The longest tail of the pending text that is a proper start of some stop sequence (on a char boundary).
    fn stop_prefix_len(&self) -> usize {
        let mut longest = 0;
        for stop in &self.stops {
            for (i, _) in stop.char_indices().skip(1) {
                if i > longest && self.pending.ends_with(&stop[..i]) {
                    longest = i;
                }
            }
        }
        longest
    }
}

/// Sends what is new of a call: its beginning unless `sent` (the bytes of its arguments sent so far) says it has
/// begun, then its arguments past `sent`. Returns the bytes of arguments sent in all.
fn send_new_parts(sent: Option<usize>, name: &str, arguments: &str, out: &mut Vec<Piece>) -> usize {
    let sent = sent.unwrap_or_else(|| {
        out.push(Piece::CallBegin(name.to_string()));
        0
    });
    if let Some(rest) = arguments.get(sent..).filter(|rest| !rest.is_empty()) {
        out.push(Piece::CallArguments(rest.to_string()));
    }
    sent.max(arguments.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What opens Hermes calls, and bare ones too with `bare`.
    fn hermes(bare: bool) -> Vec<String> {
        let bare_openings = if bare { &crate::serve::openai::grammar::BARE_OPENINGS[..] } else { &[] };
        ["<tool_call>"].iter().chain(bare_openings).map(|o| o.to_string()).collect()
    }

    /// Pushes `pieces` one after another, then finishes: everything the splitter sent.
    fn split(s: &mut OutputSplitter, pieces: &[&str]) -> Vec<Piece> {
        let mut all: Vec<Piece> = pieces.iter().flat_map(|p| s.push(p)).collect();
        all.extend(s.finish());
        all
    }

    fn texts(pieces: &[Piece]) -> String {
        pieces.iter().filter_map(|p| if let Piece::Text(t) = p { Some(t.as_str()) } else { None }).collect()
    }

    #[test]
    fn stop_sequences_end_the_text_even_split_across_pieces() {
        let mut s = OutputSplitter::new(vec!["END".into()], Vec::new());
        let mut all = s.push("one two E");
        assert_eq!(texts(&all), "one two ", "the E is held back");
        all.extend(s.push("N"));
        all.extend(s.push("D three"));
        assert!(s.stopped());
        assert_eq!(texts(&all), "one two ");
        assert!(s.push("more").is_empty());
    }

    #[test]
    fn held_back_text_that_is_no_stop_comes_out() {
        let mut s = OutputSplitter::new(vec!["END".into()], Vec::new());
        let mut all = s.push("a E");
        all.extend(s.push("x"));
        all.extend(s.finish());
        assert_eq!(texts(&all), "a Ex");
        assert!(!s.stopped());
    }

    /// The complete calls sent.
    fn calls(pieces: &[Piece]) -> Vec<ToolCall> {
        pieces.iter().filter_map(|p| if let Piece::CallEnd(c) = p { Some(c.clone()) } else { None }).collect()
    }

    /// The calls as a streaming client puts them together from their beginnings and argument parts.
    fn reassembled(pieces: &[Piece]) -> Vec<ToolCall> {
        let mut out: Vec<ToolCall> = Vec::new();
        for piece in pieces {
            match piece {
                Piece::CallBegin(name) => out.push(ToolCall { name: name.clone(), arguments: String::new() }),
                Piece::CallArguments(part) => out.last_mut().unwrap().arguments.push_str(part),
                _ => {}
            }
        }
        out
    }

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall { name: name.into(), arguments: arguments.into() }
    }

    #[test]
    fn a_call_begins_at_its_name_and_its_arguments_stream_as_written() {
        let mut s = OutputSplitter::new(Vec::new(), hermes(false));
        assert!(s.push("<tool").is_empty(), "could still open a call");
        assert!(s.push("_call>\n{\"name\": \"f").is_empty(), "the name is not complete");
        let mut all = s.push("\", ");
        assert_eq!(all, vec![Piece::CallBegin("f".into())]);
        assert!(s.push("\"arguments\": ").is_empty());
        let parts = s.push("{\"x\": 1");
        assert_eq!(parts, vec![Piece::CallArguments("{\"x\": 1".into())]);
        all.extend(parts);
        let end = s.push("}}\n</tool_call>");
        assert_eq!(end, vec![Piece::CallArguments("}".into()), Piece::CallEnd(call("f", "{\"x\": 1}"))]);
        all.extend(end);
        let whole = s.push("\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>");
        let begun_and_ended =
            vec![Piece::CallBegin("g".into()), Piece::CallArguments("{}".into()), Piece::CallEnd(call("g", "{}"))];
        assert_eq!(whole, begun_and_ended, "a call that came whole is begun and ended at once");
        all.extend(whole);
        all.extend(s.finish());
        assert!(s.is_calls());
        assert_eq!(calls(&all), vec![call("f", "{\"x\": 1}"), call("g", "{}")]);
        assert_eq!(reassembled(&all), calls(&all));

        let mut s = OutputSplitter::new(Vec::new(), hermes(false));
        let mut all = s.push("<to");
        all.extend(s.push("day"));
        assert_eq!(texts(&all), "<today");
        assert!(!s.is_calls());
    }

    #[test]
    fn a_stream_in_any_pieces_adds_up_to_its_calls() {
        let output =
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"a}b\\\"ç\", \"n\": [1, {}]}}\n</tool_call>\n\
                      <tool_call>\n{\"arguments\": {\"k\": 2}, \"name\": \"g\"}\n</tool_call>";
        let bare = "{\"name\": \"f\", \"arguments\": {\"q\": \"x\"}}\n{\"name\": \"g\", \"arguments\": {}}";
        for (output, bare_calls) in [(output, false), (bare, true)] {
            for size in 1..=7 {
                let chars: Vec<char> = output.chars().collect();
                let pieces: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
                let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
                let mut s = OutputSplitter::new(Vec::new(), hermes(bare_calls));
                let all = split(&mut s, &pieces);
                let whole = calls(&all);
                assert_eq!(whole.len(), 2, "{output} in pieces of {size}");
                assert_eq!(reassembled(&all), whole, "{output} in pieces of {size}");
                for c in &whole {
                    serde_json::from_str::<serde_json::Value>(&c.arguments).unwrap();
                }
            }
        }
    }

    #[test]
    fn bare_calls_stream_and_end_as_each_object_completes() {
        let mut s = OutputSplitter::new(Vec::new(), hermes(true));
        let mut all = s.push("{\"name\": \"f\", \"argu");
        assert_eq!(all, vec![Piece::CallBegin("f".into())]);
        all.extend(s.push("ments\": {\"x\": \"a}\"}}\n{\"name\""));
        assert_eq!(calls(&all), vec![call("f", "{\"x\": \"a}\"}")]);
        all.extend(s.push(": \"g\", \"arguments\": {}}"));
        all.extend(s.finish());
        assert!(s.is_calls());
        assert_eq!(calls(&all), vec![call("f", "{\"x\": \"a}\"}"), call("g", "{}")]);
        assert_eq!(reassembled(&all), calls(&all));
        // Without the bare form, the same output is text.
        let mut s = OutputSplitter::new(Vec::new(), hermes(false));
        assert_eq!(texts(&split(&mut s, &["{\"name\": \"f\"}"])), "{\"name\": \"f\"}");
        assert!(!s.is_calls());
    }

    #[test]
    fn bare_calls_in_a_json_code_block_lose_the_fence() {
        let mut s = OutputSplitter::new(Vec::new(), hermes(true));
        let all = split(&mut s, &["``", "`json\n", "{\"name\": \"f\", \"arguments\": {}}", "\n```"]);
        assert!(s.is_calls());
        assert_eq!(calls(&all), vec![call("f", "{}")]);
        assert_eq!(reassembled(&all), calls(&all));
        // A code block of something else is text.
        let mut s = OutputSplitter::new(Vec::new(), hermes(true));
        assert_eq!(texts(&split(&mut s, &["```json\n[1]\n```"])), "```json\n[1]\n```");
    }
}
