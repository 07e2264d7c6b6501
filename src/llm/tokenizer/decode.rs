//! Decoding ids to bytes and text, and streaming text out as soon as it forms complete UTF-8 characters.

use super::{GgufTokenizer, TokenizerError};

impl GgufTokenizer {
    /// Decodes ids to text, special tokens' text included: the exact inverse of [`encode`](Self::encode) (for
    /// vocabularies with `add_space_prefix`, the space that encoding prepended shows). Bytes that do not form
    /// valid UTF-8 (a cut multi-byte character) become U+FFFD; [`decode_bytes`](Self::decode_bytes) keeps them.
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        let bytes = self.decode_bytes(ids)?;
        Ok(match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// The concatenated bytes of `ids`.
    pub fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>, TokenizerError> {
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            bytes.extend_from_slice(self.bytes_of(id)?);
        }
        Ok(bytes)
    }

    fn bytes_of(&self, id: u32) -> Result<&[u8], TokenizerError> {
        self.bytes.get(id as usize).ok_or(TokenizerError::UnknownId { id, vocab: self.texts.len() })
    }
}

/// Splits `pending` into the longest prefix that is complete UTF-8 (invalid bytes replaced by U+FFFD) and
/// the incomplete multi-byte sequence at its end, which is kept in `pending` for the next token's bytes.
fn take_complete_utf8(pending: &mut Vec<u8>) -> String {
    let mut out = String::new();
    let mut start = 0;
    loop {
        match std::str::from_utf8(&pending[start..]) {
            Ok(text) => {
                out.push_str(text);
                start = pending.len();
                break;
            }
            Err(e) => {
                let valid_end = start + e.valid_up_to();
                // `valid_up_to` guarantees this slice is UTF-8; the lossy call only avoids an unwrap.
                out.push_str(&String::from_utf8_lossy(&pending[start..valid_end]));
                match e.error_len() {
                    // Bytes that can never start or continue a character: replace them and go on.
                    Some(len) => {
                        out.push(char::REPLACEMENT_CHARACTER);
                        start = valid_end + len;
                    }
                    // A sequence cut short at the end: wait for more bytes.
                    None => {
                        start = valid_end;
                        break;
                    }
                }
            }
        }
    }
    pending.drain(..start);
    out
}

/// Incremental decoding for streaming: returns text as soon as it forms complete UTF-8 characters, so an emoji
/// spread over several byte tokens comes out whole.
pub struct TokenStream<'a> {
    tokenizer: &'a GgufTokenizer,
    pending: Vec<u8>,
}

impl<'a> TokenStream<'a> {
    /// A stream over `tokenizer`'s ids.
    pub fn new(tokenizer: &'a GgufTokenizer) -> Self {
        Self { tokenizer, pending: Vec::new() }
    }

    /// Adds a token; returns the newly completed text, if any. Bytes that can never become valid UTF-8 come
    /// out as U+FFFD; an incomplete character at the end waits for the next token.
    pub fn push(&mut self, id: u32) -> Result<Option<String>, TokenizerError> {
        self.pending.extend_from_slice(self.tokenizer.bytes_of(id)?);
        let text = take_complete_utf8(&mut self.pending);
        Ok((!text.is_empty()).then_some(text))
    }

    /// Flushes whatever is left (an incomplete character becomes U+FFFD).
    pub fn finish(&mut self) -> Result<Option<String>, TokenizerError> {
        if self.pending.is_empty() {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        Ok(Some(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_splitting_holds_back_incomplete_characters() {
        let crab = "🦀".as_bytes();
        let mut pending = b"ab".to_vec();
        pending.extend_from_slice(&crab[..2]);
        assert_eq!(take_complete_utf8(&mut pending), "ab");
        assert_eq!(pending, &crab[..2]);
        pending.extend_from_slice(&crab[2..]);
        assert_eq!(take_complete_utf8(&mut pending), "🦀");
        assert!(pending.is_empty());
        // An invalid byte is replaced, and a cut character after it is still held back.
        let mut pending = vec![b'x', 0xFF, b'y', 0xE6, 0x97];
        assert_eq!(take_complete_utf8(&mut pending), "x\u{FFFD}y");
        assert_eq!(pending, [0xE6, 0x97]);
    }
}
