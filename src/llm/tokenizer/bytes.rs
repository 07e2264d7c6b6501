//! The bytes each token stands for: GPT-2's byte ↔ character table, `▁` and `<0xXX>` byte tokens.

use std::collections::HashMap;

use super::{token_type, TokenizerKind};
use crate::llm::packed_strings::PackedStrings;

/// GPT-2's byte → printable character table: bytes that are printable map to themselves, the others (controls,
/// space, DEL, NBSP, soft hyphen) to U+0100 upwards in byte order. Byte-level BPE vocabularies are written in it.
pub fn gpt2_byte_to_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let code = if printable {
            u32::from(b)
        } else {
            next += 1;
            next - 1
        };
        // All codes are below U+0144, far from the surrogate range: the conversion cannot fail.
        table[b as usize] = char::from_u32(code).unwrap_or('\0');
    }
    table
}

/// The bytes of every token. Byte-level BPE: undo the GPT-2 character mapping. SentencePiece: `▁` is a space
/// and `<0xXX>` is that byte. Control, user-defined and unused tokens stand for their text, as llama.cpp prints
/// them (Gemma stores its user-defined whitespace tokens with real spaces and newlines).
pub(super) fn token_bytes_table(kind: TokenizerKind, tokens: &[String], types: &[i32]) -> PackedStrings {
    let char_to_byte: HashMap<char, u8> = gpt2_byte_to_char().iter().enumerate().map(|(b, &c)| (c, b as u8)).collect();
    tokens
        .iter()
        .zip(types)
        .map(|(token, &t)| {
            if matches!(t, token_type::CONTROL | token_type::USER_DEFINED | token_type::UNUSED) {
                return token.as_bytes().to_vec();
            }
            match kind {
                TokenizerKind::Bpe => token
                    .chars()
                    .map(|c| char_to_byte.get(&c).copied())
                    .collect::<Option<Vec<u8>>>()
                    .unwrap_or_else(|| token.as_bytes().to_vec()),
                TokenizerKind::SentencePiece => {
                    if t == token_type::BYTE {
                        if let Some(b) = parse_byte_token(token) {
                            return vec![b];
                        }
                    }
                    token.replace('▁', " ").into_bytes()
                }
            }
        })
        .collect()
}

/// `<0x41>` → 0x41.
fn parse_byte_token(token: &str) -> Option<u8> {
    let hex = token.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_table_is_a_bijection_with_printable_bytes_kept() {
        let table = gpt2_byte_to_char();
        let unique: std::collections::HashSet<char> = table.iter().copied().collect();
        assert_eq!(unique.len(), 256);
        assert_eq!(table[b'A' as usize], 'A');
        assert_eq!(table[b'~' as usize], '~');
        assert_eq!(table[0xE9], 'é');
        assert_eq!(table[0], 'Ā');
        assert_eq!(table[b' ' as usize], 'Ġ');
        assert_eq!(table[b'\n' as usize], 'Ċ');
        assert_eq!(table[b'\t' as usize], 'ĉ');
        assert_eq!(table[0x7F], 'ġ');
        assert_eq!(table[0xAD], 'Ń');
    }

    #[test]
    fn byte_tokens_parse_only_in_their_exact_form() {
        assert_eq!(parse_byte_token("<0x0A>"), Some(b'\n'));
        assert_eq!(parse_byte_token("<0xff>"), Some(0xFF));
        assert_eq!(parse_byte_token("<0x100>"), None);
        assert_eq!(parse_byte_token("0x41"), None);
    }
}
