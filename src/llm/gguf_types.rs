//! The tensor types a GGUF file names, read from its header ourselves where candle's reader stops at a type it
//! does not know ("unknown dtype for tensor 23", a number and no name): which tensor, and its type as ggml names
//! it, so the error can say what to do.

/// The ggml tensor types candle reads (`GgmlDType::from_u32`).
const READ_BY_CANDLE: [u32; 15] = [0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 30];

/// ggml's name for tensor type `number` (its `ggml_type` enum).
pub fn type_name(number: u32) -> &'static str {
    match number {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        6 => "Q5_0",
        7 => "Q5_1",
        8 => "Q8_0",
        9 => "Q8_1",
        10 => "Q2_K",
        11 => "Q3_K",
        12 => "Q4_K",
        13 => "Q5_K",
        14 => "Q6_K",
        15 => "Q8_K",
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        20 => "IQ4_NL",
        21 => "IQ3_S",
        22 => "IQ2_S",
        23 => "IQ4_XS",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        30 => "BF16",
        31 => "Q4_0_4_4",
        32 => "Q4_0_4_8",
        33 => "Q4_0_8_8",
        34 => "TQ1_0",
        35 => "TQ2_0",
        36 => "IQ4_NL_4_4",
        37 => "IQ4_NL_4_8",
        38 => "IQ4_NL_8_8",
        39 => "MXFP4",
        _ => "a type ggml does not name",
    }
}

/// The first tensor of the GGUF file `bytes` whose type candle does not read: its name and type number. `None`
/// where every type is read, or the header cannot be followed that far (then candle's own error stands).
pub fn first_unreadable(bytes: &[u8]) -> Option<(String, u32)> {
    let mut header = Header { bytes, at: 4 };
    let version = header.u32()?;
    let count = |h: &mut Header| if version == 1 { h.u32().map(u64::from) } else { h.u64() };
    let (tensors, values) = (count(&mut header)?, count(&mut header)?);
    for _ in 0..values {
        header.string()?;
        let kind = header.u32()?;
        header.skip_value(kind, 0)?;
    }
    for _ in 0..tensors {
        let name = String::from_utf8_lossy(header.string()?).into_owned();
        let dims = header.u32()?;
        header.take(8 * usize::try_from(dims).ok()?)?;
        let kind = header.u32()?;
        header.u64()?;
        if !READ_BY_CANDLE.contains(&kind) {
            return Some((name, kind));
        }
    }
    None
}

/// A cursor over a header's bytes (little-endian, as GGUF is written); every read is bounds-checked.
struct Header<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Header<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let slice = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(slice)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn string(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.u64()?).ok()?;
        self.take(len)
    }

    /// Steps over a metadata value of GGUF value type `kind` (arrays nest, a little).
    fn skip_value(&mut self, kind: u32, depth: u8) -> Option<()> {
        let fixed = match kind {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            10..=12 => 8,
            8 => return self.string().map(|_| ()),
            9 if depth < 4 => {
                let (inner, len) = (self.u32()?, self.u64()?);
                for _ in 0..len {
                    self.skip_value(inner, depth + 1)?;
                }
                return Some(());
            }
            _ => return None,
        };
        self.take(fixed).map(|_| ())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A GGUF v3 header with one string value and these tensors (name, type), no tensor data.
    pub(crate) fn header_with(tensors: &[(&str, u32)]) -> Vec<u8> {
        let string = |out: &mut Vec<u8>, s: &str| {
            out.extend((s.len() as u64).to_le_bytes());
            out.extend(s.as_bytes());
        };
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend((tensors.len() as u64).to_le_bytes());
        out.extend(2u64.to_le_bytes());
        string(&mut out, "general.architecture");
        out.extend(8u32.to_le_bytes());
        string(&mut out, "llama");
        string(&mut out, "tokenizer.ggml.scores");
        out.extend(9u32.to_le_bytes());
        out.extend(6u32.to_le_bytes());
        out.extend(2u64.to_le_bytes());
        out.extend([0u8; 8]);
        for (i, (name, kind)) in tensors.iter().enumerate() {
            string(&mut out, name);
            out.extend(1u32.to_le_bytes());
            out.extend(256u64.to_le_bytes());
            out.extend(kind.to_le_bytes());
            out.extend((i as u64 * 1024).to_le_bytes());
        }
        out
    }

    #[test]
    fn the_first_tensor_of_a_type_candle_does_not_read_is_named() {
        let bytes = header_with(&[("token_embd.weight", 12), ("blk.0.ffn_down.weight", 23), ("x", 39)]);
        assert_eq!(first_unreadable(&bytes), Some(("blk.0.ffn_down.weight".into(), 23)));
        assert_eq!(type_name(23), "IQ4_XS");
        assert_eq!(first_unreadable(&header_with(&[("a", 0), ("b", 14), ("c", 30)])), None);
        // A header cut short gives no answer rather than a wrong one.
        assert_eq!(first_unreadable(&bytes[..60]), None);
    }
}
