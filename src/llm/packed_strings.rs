//! Byte strings indexed by position, stored end to end in one buffer.
//!
//! A tokenizer keeps two per-token tables (each token's vocabulary text and the bytes it stands for). As
//! `Vec<String>` / `Vec<Vec<u8>>` each of Qwen's 151,936 tokens cost a 24-byte header plus an allocation rounded
//! up to the allocator's 32-byte chunks, about 8 MB per table for 1 MB of text; packed, a table costs its bytes
//! plus four bytes of offset per entry.

/// Byte strings in one buffer; entry `i` is `data[ends[i - 1]..ends[i]]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackedStrings {
    data: Vec<u8>,
    ends: Vec<u32>,
}

impl PackedStrings {
    /// An empty table with room for `entries` strings of `bytes` bytes in all.
    pub fn with_capacity(entries: usize, bytes: usize) -> Self {
        Self { data: Vec::with_capacity(bytes), ends: Vec::with_capacity(entries) }
    }

    /// Appends one string.
    ///
    /// # Panics
    /// If the table would pass 4 GiB of text (a vocabulary is a few MB).
    pub fn push(&mut self, bytes: &[u8]) {
        self.data.extend_from_slice(bytes);
        self.ends.push(u32::try_from(self.data.len()).expect("packed strings stay under 4 GiB"));
    }

    /// Entry `index`, or `None` past the end.
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        let end = *self.ends.get(index)? as usize;
        let start = index.checked_sub(1).map_or(0, |previous| self.ends[previous] as usize);
        Some(&self.data[start..end])
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Gives back spare capacity (a table is built once and then only read).
    pub fn shrink_to_fit(&mut self) {
        self.data.shrink_to_fit();
        self.ends.shrink_to_fit();
    }
}

impl<B: AsRef<[u8]>> FromIterator<B> for PackedStrings {
    fn from_iter<I: IntoIterator<Item = B>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut table = Self::with_capacity(iter.size_hint().0, 0);
        for bytes in iter {
            table.push(bytes.as_ref());
        }
        table.shrink_to_fit();
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_back_as_pushed_empty_ones_included() {
        let words: [&[u8]; 5] = [b"", b"hello", b"", b" \xF0\x9F", b"x"];
        let table: PackedStrings = words.iter().collect();
        assert_eq!(table.len(), 5);
        for (i, word) in words.iter().enumerate() {
            assert_eq!(table.get(i), Some(*word), "entry {i}");
        }
        assert_eq!(table.get(5), None);
        assert!(PackedStrings::default().get(0).is_none() && PackedStrings::default().is_empty());
    }
}
