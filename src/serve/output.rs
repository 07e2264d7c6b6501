//! The generated text turned into what the API sends, as it streams: text (held back only while it could still
//! be the start of a stop sequence or of a tool call) and whole tool calls, each sent once its closing tag is out,
//! so a streamed call is always complete, valid JSON. Where the grammar lets calls be bare JSON (an output that
//! opens with `{`, see `grammar`), each call is sent once its object is complete.

use super::grammar::{read_call, ToolCall, CALL_CLOSE, CALL_OPEN};

/// A JSON code block opening with a call's object: bare calls in a fence (the fence is not part of any call).
const FENCED_OPEN: &str = "```json\n{";

/// A piece of the answer ready to send.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// Answer text.
    Text(String),
    /// A complete tool call.
    Call(ToolCall),
}

/// What the output is, once its first characters tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Undecided,
    Text,
    Calls,
    /// Calls as bare JSON objects, one per line.
    BareCalls,
}

/// Splits generated text into pieces; `stopped` once a stop sequence appeared (the generation should end).
#[derive(Debug)]
pub struct OutputSplitter {
    stops: Vec<String>,
    /// Calls are possible (the grammar allows them).
    calls_allowed: bool,
    /// An output that opens with `{` is calls (`grammar::bare_calls`).
    bare_calls: bool,
    shape: Shape,
    pending: String,
    stopped: bool,
    /// Text sent so far (for usage counts when a stop sequence ends the generation early).
    sent_text: String,
}

impl OutputSplitter {
    /// A splitter for an answer that may hold calls (`calls_allowed`; bare ones too with `bare_calls`) and ends
    /// at any of `stops`.
    pub fn new(stops: Vec<String>, calls_allowed: bool, bare_calls: bool) -> Self {
        let shape = if calls_allowed { Shape::Undecided } else { Shape::Text };
        let bare_calls = calls_allowed && bare_calls;
        Self {
            stops,
            calls_allowed,
            bare_calls,
            shape,
            pending: String::new(),
            stopped: false,
            sent_text: String::new(),
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
            // The openings that decide the shape; text until none of them can still be on its way.
            let mut openings = vec![(CALL_OPEN, Shape::Calls)];
            if self.bare_calls {
                openings.extend([("{", Shape::BareCalls), (FENCED_OPEN, Shape::BareCalls)]);
            }
            if let Some((opening, shape)) = openings.iter().find(|(o, _)| self.pending.starts_with(o)) {
                self.shape = *shape;
                if *opening == FENCED_OPEN {
                    // The fence goes; its object stays.
                    self.pending.drain(..FENCED_OPEN.len() - 1);
                }
            } else if !openings.iter().any(|(o, _)| o.starts_with(self.pending.as_str())) {
                self.shape = Shape::Text;
            } else {
                return Vec::new();
            }
        }
        match self.shape {
            Shape::Calls => self.take_calls(),
            Shape::BareCalls => self.take_bare_calls(),
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
            Shape::BareCalls => self.take_bare_calls(),
            // An undecided output that ended is text (a prefix of `<tool_call>` is not a call).
            _ => self.take_text(true),
        }
    }

    /// Whether the output turned out to be calls.
    pub fn is_calls(&self) -> bool {
        self.calls_allowed && matches!(self.shape, Shape::Calls | Shape::BareCalls)
    }

    fn take_calls(&mut self) -> Vec<Piece> {
        let mut out = Vec::new();
        while let Some(open) = self.pending.find(CALL_OPEN) {
            let body_start = open + CALL_OPEN.len();
            let Some(close) = self.pending[body_start..].find(CALL_CLOSE) else { break };
            let body = &self.pending[body_start..body_start + close];
            if let Some(call) = read_call(body) {
                out.push(Piece::Call(call));
            }
            self.pending.drain(..body_start + close + CALL_CLOSE.len());
        }
        out
    }

    /// Every complete JSON object at the front of the pending text, as calls (the grammar made each one a call).
    fn take_bare_calls(&mut self) -> Vec<Piece> {
        let mut out = Vec::new();
        let mut objects = serde_json::Deserializer::from_str(&self.pending).into_iter::<serde_json::Value>();
        let mut consumed = 0;
        // An object still being written is an end-of-input error: it waits for more text. A closing fence is an
        // error too, and nothing follows it.
        while let Some(Ok(object)) = objects.next() {
            consumed = objects.byte_offset();
            if let Some(call) = read_call(&object.to_string()) {
                out.push(Piece::Call(call));
            }
        }
        self.pending.drain(..consumed);
        out
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut s = OutputSplitter::new(vec!["END".into()], false, false);
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
        let mut s = OutputSplitter::new(vec!["END".into()], false, false);
        let mut all = s.push("a E");
        all.extend(s.push("x"));
        all.extend(s.finish());
        assert_eq!(texts(&all), "a Ex");
        assert!(!s.stopped());
    }

    #[test]
    fn calls_come_out_whole_and_text_is_told_apart() {
        let mut s = OutputSplitter::new(Vec::new(), true, false);
        let mut all = Vec::new();
        for piece in [
            "<tool",
            "_call>\n{\"name\": \"f\", ",
            "\"arguments\": {\"x\": 1}}\n</tool_call>",
            "\n<tool_call>\n",
            "{\"name\": \"g\", \"arguments\": {}}\n</tool_call>",
        ] {
            all.extend(s.push(piece));
        }
        all.extend(s.finish());
        assert!(s.is_calls());
        assert_eq!(
            all,
            vec![
                Piece::Call(ToolCall { name: "f".into(), arguments: "{\"x\":1}".into() }),
                Piece::Call(ToolCall { name: "g".into(), arguments: "{}".into() })
            ]
        );
        let mut s = OutputSplitter::new(Vec::new(), true, false);
        let mut all = s.push("<to");
        assert!(all.is_empty(), "could still open a call");
        all.extend(s.push("day"));
        assert_eq!(texts(&all), "<today");
        assert!(!s.is_calls());
    }

    #[test]
    fn bare_calls_come_out_as_each_object_completes() {
        let mut s = OutputSplitter::new(Vec::new(), true, true);
        let mut all = s.push("{\"name\": \"f\", \"argu");
        assert!(all.is_empty(), "an unfinished object waits");
        all.extend(s.push("ments\": {\"x\": \"a}\"}}\n{\"name\""));
        assert_eq!(all, vec![Piece::Call(ToolCall { name: "f".into(), arguments: "{\"x\":\"a}\"}".into() })]);
        all.extend(s.push(": \"g\", \"arguments\": {}}"));
        all.extend(s.finish());
        assert!(s.is_calls());
        assert_eq!(all.len(), 2);
        assert_eq!(all[1], Piece::Call(ToolCall { name: "g".into(), arguments: "{}".into() }));
        // Without the bare form, the same output is text.
        let mut s = OutputSplitter::new(Vec::new(), true, false);
        assert_eq!(texts(&split(&mut s, &["{\"name\": \"f\"}"])), "{\"name\": \"f\"}");
        assert!(!s.is_calls());
    }

    #[test]
    fn bare_calls_in_a_json_code_block_lose_the_fence() {
        let mut s = OutputSplitter::new(Vec::new(), true, true);
        let all = split(&mut s, &["``", "`json\n", "{\"name\": \"f\", \"arguments\": {}}", "\n```"]);
        assert!(s.is_calls());
        assert_eq!(all, vec![Piece::Call(ToolCall { name: "f".into(), arguments: "{}".into() })]);
        // A code block of something else is text.
        let mut s = OutputSplitter::new(Vec::new(), true, true);
        assert_eq!(texts(&split(&mut s, &["```json\n[1]\n```"])), "```json\n[1]\n```");
    }
}
