//! Thinking apart from the answer: a model that thinks first (Qwen3, SmolLM3 and others in thinking mode) opens its
//! answer with `<think>…</think>`; chat returns that part as `reasoning_content` (streamed as `reasoning_content`
//! deltas) and the rest as `content`, as vLLM and llama-server do, and counts it in `reasoning_tokens`.

/// What opens and closes a model's thinking.
const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// A part of an answer, as it goes out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Reasoning(String),
    Content(String),
}

/// Where the split stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    /// Nothing but white space yet: the answer may still open with `<think>`.
    #[default]
    Start,
    Thinking,
    Answer,
}

/// Splits an answer's text, piece by piece as it is generated, into thinking and answer. Text that might be the
/// start of a tag is held back until the next piece says.
#[derive(Debug, Default)]
pub struct Split {
    state: State,
    held: String,
    /// Pieces that went to thinking (each piece is a generated token's text, or a few where a character spans
    /// tokens).
    reasoning_pieces: usize,
    /// White space at the start of the thinking, or of the answer after it, is dropped (the tags' own line breaks).
    trim_lead: bool,
}

impl Split {
    /// The parts `piece` completes.
    pub fn push(&mut self, piece: String) -> Vec<Part> {
        match self.state {
            State::Answer => return self.lead_trimmed(piece).map(Part::Content).into_iter().collect(),
            State::Thinking => self.reasoning_pieces += 1,
            State::Start => {}
        }
        self.held.push_str(&piece);
        let mut parts = Vec::new();
        if self.state == State::Start {
            let text = self.held.trim_start();
            if text.len() < OPEN.len() && OPEN.starts_with(text) {
                return parts;
            }
            if let Some(thought) = text.strip_prefix(OPEN) {
                // The piece that completes `<think>` is the first of the thinking.
                self.reasoning_pieces += 1;
                self.held = thought.to_string();
                self.state = State::Thinking;
                self.trim_lead = true;
            } else {
                self.state = State::Answer;
                parts.push(Part::Content(std::mem::take(&mut self.held)));
                return parts;
            }
        }
        // Thinking: everything up to the close tag, keeping back a tail that may be its beginning, and the white
        // space before it (the line break before `</think>` is not part of the thought).
        if let Some(end) = self.held.find(CLOSE) {
            let thought = self.held[..end].trim_end().to_string();
            let rest = self.held[end + CLOSE.len()..].to_string();
            self.held.clear();
            parts.extend(self.lead_trimmed(thought).map(Part::Reasoning));
            self.state = State::Answer;
            self.trim_lead = true;
            parts.extend(self.lead_trimmed(rest).map(Part::Content));
        } else {
            let tag = (1..CLOSE.len()).rev().find(|&n| self.held.ends_with(&CLOSE[..n])).unwrap_or(0);
            let cut = self.held[..self.held.len() - tag].trim_end().len();
            let thought: String = self.held.drain(..cut).collect();
            parts.extend(self.lead_trimmed(thought).map(Part::Reasoning));
        }
        parts
    }

    /// `text` without the white space that opens a part (taken as it is otherwise: no copy per token of an
    /// answer that does not think); `None` when nothing is left of it.
    fn lead_trimmed(&mut self, text: String) -> Option<String> {
        let text = match self.trim_lead {
            true => text.trim_start().to_string(),
            false => text,
        };
        if text.is_empty() {
            return None;
        }
        self.trim_lead = false;
        Some(text)
    }

    /// What is still held when the answer ends: unfinished thinking stays thinking.
    pub fn finish(&mut self) -> Vec<Part> {
        let held = std::mem::take(&mut self.held);
        match self.state {
            _ if held.is_empty() => Vec::new(),
            State::Thinking => {
                self.lead_trimmed(held.trim_end().to_string()).map(Part::Reasoning).into_iter().collect()
            }
            State::Start | State::Answer => vec![Part::Content(held)],
        }
    }

    /// Pieces of the answer that were thinking: `reasoning_tokens`.
    pub fn reasoning_tokens(&self) -> usize {
        self.reasoning_pieces
    }
}

/// A whole answer gathered piece by piece: its thinking (where it opened with one) and its text.
#[derive(Debug, Default)]
pub struct Whole {
    split: Split,
    reasoning: Option<String>,
    content: String,
}

impl Whole {
    /// Adds a generated piece.
    pub fn push(&mut self, piece: String) {
        let parts = self.split.push(piece);
        self.take(parts);
    }

    /// Ends the answer: its thinking, its text, and the pieces that were thinking (`reasoning_tokens`).
    pub fn finish(mut self) -> (Option<String>, String, usize) {
        let parts = self.split.finish();
        self.take(parts);
        (self.reasoning, self.content, self.split.reasoning_tokens())
    }

    fn take(&mut self, parts: Vec<Part>) {
        for part in parts {
            match part {
                Part::Reasoning(r) => self.reasoning.get_or_insert_with(String::new).push_str(&r),
                Part::Content(c) => self.content.push_str(&c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whole answer's text split into its thinking and its answer.
    fn split_whole(text: &str) -> (Option<String>, String) {
        let mut whole = Whole::default();
        whole.push(text.to_string());
        let (reasoning, content, _) = whole.finish();
        (reasoning, content)
    }

    /// The parts of `pieces` fed one by one, adjacent parts of one kind joined.
    fn streamed(pieces: &[&str]) -> (Vec<Part>, usize) {
        let mut split = Split::default();
        let mut parts: Vec<Part> = Vec::new();
        for piece in pieces {
            split.push(piece.to_string()).into_iter().for_each(|part| joined(&mut parts, part));
        }
        split.finish().into_iter().for_each(|part| joined(&mut parts, part));
        (parts, split.reasoning_tokens())
    }

    fn joined(parts: &mut Vec<Part>, part: Part) {
        match (parts.last_mut(), part) {
            (Some(Part::Reasoning(a)), Part::Reasoning(b)) => a.push_str(&b),
            (Some(Part::Content(a)), Part::Content(b)) => a.push_str(&b),
            (_, part) => parts.push(part),
        }
    }

    #[test]
    fn thinking_comes_apart_however_the_tags_are_cut() {
        let whole = "<think>\nTwo and two.\n</think>\n\nIt is 4.";
        let want = vec![Part::Reasoning("Two and two.".into()), Part::Content("It is 4.".into())];
        // Every cut of the text into two pieces, and one piece per character.
        for cut in 1..whole.len() {
            assert_eq!(streamed(&[&whole[..cut], &whole[cut..]]).0, want, "cut at {cut}");
        }
        let chars: Vec<String> = whole.chars().map(String::from).collect();
        let pieces: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(streamed(&pieces).0, want);
        assert_eq!(split_whole(whole), (Some("Two and two.".into()), "It is 4.".into()));
    }

    #[test]
    fn answers_without_thinking_pass_as_they_are() {
        assert_eq!(split_whole("It is 4."), (None, "It is 4.".into()));
        assert_eq!(split_whole("  <thin"), (None, "  <thin".into()));
        assert_eq!(split_whole("Use <think> tags."), (None, "Use <think> tags.".into()));
        // Thinking cut off by the token limit stays thinking.
        assert_eq!(split_whole("<think>Two and"), (Some("Two and".into()), String::new()));
        let (parts, reasoning) = streamed(&["<think>", "\nTwo", " and two", "</think>", "4"]);
        assert_eq!(parts, vec![Part::Reasoning("Two and two".into()), Part::Content("4".into())]);
        assert_eq!(reasoning, 4, "the pieces from <think> to </think>");
    }
}
