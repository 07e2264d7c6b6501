//! What a tool call still being written already tells: its name once the name is out, and as much of its
//! arguments' JSON text as the model has written (never past their closing brace). This is what lets a streamed
//! call go out as OpenAI clients expect it, the name first and the arguments in parts, while the model writes it.

/// What the start of a call's JSON (`{"name": …, "arguments": {…}}`, or `"parameters"` as Llama 3 writes it)
/// tells.
#[derive(Debug, PartialEq)]
pub enum PartialCall<'a> {
    /// Too little is written to know the name.
    Unnamed,
    /// The call is not written as a name followed by an arguments object: it can only be sent once complete.
    Unstreamable,
    /// The name, and the arguments' text written so far: empty until their `{`, and ending at their `}` once
    /// that is written (the concatenation of what is sent is then exactly the arguments' JSON).
    Named { name: String, arguments: &'a str },
}

/// Reads the start of a call's JSON.
pub fn read_partial(body: &str) -> PartialCall<'_> {
    let mut rest = body;
    for token in ["{", "\"name\"", ":"] {
        match expect(&mut rest, token) {
            Expect::Found => {}
            Expect::Incomplete => return PartialCall::Unnamed,
            Expect::Other => return PartialCall::Unstreamable,
        }
    }
    rest = rest.trim_start();
    let mut strings = serde_json::Deserializer::from_str(rest).into_iter::<String>();
    let name = match strings.next() {
        Some(Ok(name)) => name,
        // The name's string is still being written.
        Some(Err(e)) if e.is_eof() => return PartialCall::Unnamed,
        None => return PartialCall::Unnamed,
        Some(Err(_)) => return PartialCall::Unstreamable,
    };
    rest = &rest[strings.byte_offset()..];
    // Llama 3 writes the arguments under `parameters`.
    let key = if rest.trim_start().trim_start_matches(',').trim_start().starts_with("\"p") {
        "\"parameters\""
    } else {
        "\"arguments\""
    };
    for token in [",", key, ":", "{"] {
        match expect(&mut rest, token) {
            Expect::Found => {}
            Expect::Incomplete => return PartialCall::Named { name, arguments: "" },
            Expect::Other => return PartialCall::Unstreamable,
        }
    }
    // `rest` follows the arguments' opening brace; step back onto it.
    let start = body.len() - rest.len() - 1;
    PartialCall::Named { name, arguments: object_so_far(&body[start..]) }
}

enum Expect {
    Found,
    /// The text ends inside (or before) the token.
    Incomplete,
    Other,
}

/// Skips whitespace, then `token` if it comes next.
fn expect(rest: &mut &str, token: &str) -> Expect {
    let trimmed = rest.trim_start();
    if let Some(after) = trimmed.strip_prefix(token) {
        *rest = after;
        Expect::Found
    } else if token.starts_with(trimmed) {
        Expect::Incomplete
    } else {
        Expect::Other
    }
}

/// The JSON object that `text` opens with, up to its closing brace, or all of `text` while it is still open.
fn object_so_far(text: &str) -> &str {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    // Only ASCII bytes are structural, and no byte of a multi-byte character is ASCII, so a cut after one is on a
    // character boundary.
    for (i, byte) in text.bytes().enumerate() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return &text[..=i];
                }
            }
            _ => {}
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named<'a>(name: &str, arguments: &'a str) -> PartialCall<'a> {
        PartialCall::Named { name: name.into(), arguments }
    }

    #[test]
    fn the_name_is_known_once_its_string_closes() {
        assert_eq!(read_partial(""), PartialCall::Unnamed);
        assert_eq!(read_partial("{\"na"), PartialCall::Unnamed);
        assert_eq!(read_partial("{\"name\": \"get_we"), PartialCall::Unnamed);
        assert_eq!(read_partial("{\"name\": \"get_weather\""), named("get_weather", ""));
        assert_eq!(read_partial("{\"name\":\"a\\\"b\", \"argu"), named("a\"b", ""));
        assert_eq!(read_partial("{\"name\": \"f\", \"parameters\": {\"x\""), named("f", "{\"x\""));
    }

    #[test]
    fn arguments_grow_as_written_and_stop_at_their_closing_brace() {
        let whole = "{\"name\": \"f\", \"arguments\": {\"city\": \"Pa}ris\\\"\", \"days\": [1, {\"x\": 2}]}}";
        let mut sent = String::new();
        for end in 0..=whole.len() {
            if let PartialCall::Named { arguments, .. } = read_partial(&whole[..end]) {
                assert!(arguments.starts_with(&sent), "arguments only grow");
                sent = arguments.to_string();
            }
        }
        assert_eq!(sent, "{\"city\": \"Pa}ris\\\"\", \"days\": [1, {\"x\": 2}]}");
        assert_eq!(read_partial(&format!("{whole}\n</tool_call>")), named("f", &sent));
        // Multi-byte text is cut on character boundaries.
        let body = "{\"name\": \"f\", \"arguments\": {\"q\": \"çà\"";
        assert_eq!(read_partial(body), named("f", "{\"q\": \"çà\""));
    }

    #[test]
    fn calls_in_another_order_are_sent_whole() {
        assert_eq!(read_partial("{\"arguments\": {}"), PartialCall::Unstreamable);
        assert_eq!(read_partial("{\"name\": \"f\", \"id\": 1"), PartialCall::Unstreamable);
        assert_eq!(read_partial("{\"name\": \"f\", \"arguments\": 3}"), PartialCall::Unstreamable);
        assert_eq!(read_partial("[1]"), PartialCall::Unstreamable);
    }
}
