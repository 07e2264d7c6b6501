//! SentencePiece merges derived from scores, for `llama` vocabularies (which store scores, not merges).

use std::collections::HashMap;

/// SentencePiece merges derived from scores (GGUF `llama` vocabularies store scores, not merges).
///
/// SentencePiece's BPE encoder starts from characters and repeatedly merges the adjacent pair whose
/// concatenation is a vocabulary piece with the highest score (leftmost on ties). A BPE merge list reproduces
/// that exactly when it holds, for every mergeable piece, every way of splitting it into two mergeable pieces,
/// ranked by the merged piece's score (higher score = lower rank = merged earlier): whichever segmentation is
/// current, the pair the list ranks first is the pair SentencePiece would pick. Equal scores are ordered by
/// id, then by split point, so the result is deterministic. Only `mergeable` pieces take part (normal pieces:
/// SentencePiece never builds control, user-defined, unused or byte pieces by merging).
pub fn merges_from_scores(
    tokens: &[String],
    scores: &[f32],
    mergeable: impl Fn(usize) -> bool,
) -> Vec<(String, String)> {
    let mut index: HashMap<&str, u32, FxBuild> = HashMap::with_capacity_and_hasher(tokens.len(), FxBuild::default());
    for (id, token) in tokens.iter().enumerate() {
        if mergeable(id) {
            // The first row wins, as in the vocabulary map.
            index.entry(token.as_str()).or_insert(id as u32);
        }
    }
    // (score, merged id, left id, right id): ids instead of strings until the final order is known.
    let mut merges: Vec<(f32, u32, u32, u32)> = Vec::with_capacity(tokens.len() * 2);
    for (id, token) in tokens.iter().enumerate() {
        if !mergeable(id) || index.get(token.as_str()) != Some(&(id as u32)) {
            continue;
        }
        let score = scores.get(id).copied().unwrap_or(0.0);
        for (split, _) in token.char_indices().skip(1) {
            let (left, right) = token.split_at(split);
            if let Some(&l) = index.get(left) {
                if let Some(&r) = index.get(right) {
                    merges.push((score, id as u32, l, r));
                }
            }
        }
    }
    merges.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    merges.into_iter().map(|(_, _, l, r)| (tokens[l as usize].clone(), tokens[r as usize].clone())).collect()
}

/// FxHash (rustc's hasher): the merge derivation does millions of short-string lookups, where SipHash's DoS
/// resistance buys nothing (the keys come from the model file) and its rounds outweigh the lookups' other work.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }
    fn write_u8(&mut self, b: u8) {
        self.write(&[b]);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxBuild = std::hash::BuildHasherDefault<FxHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_follow_scores() {
        let tokens: Vec<String> = ["a", "b", "c", "ab", "bc", "abc"].iter().map(|s| s.to_string()).collect();
        let scores = [0.0, 0.0, 0.0, -1.0, -0.5, -2.0];
        let merges = merges_from_scores(&tokens, &scores, |_| true);
        let names: Vec<String> = merges.iter().map(|(a, b)| format!("{a}+{b}")).collect();
        // bc (-0.5) before ab (-1.0) before the two ways to make abc (-2.0), split points in order.
        assert_eq!(names, ["b+c", "a+b", "a+bc", "ab+c"]);
    }

    #[test]
    fn merges_skip_pieces_that_are_not_mergeable() {
        let tokens: Vec<String> = ["▁", "x", "▁x", "<0x41>", "<ctl>", "▁<ctl>"].iter().map(|s| s.to_string()).collect();
        let scores = [0.0, 0.0, -1.0, 0.0, 0.0, 5.0];
        // Only normal pieces (0, 1, 2) take part: no merge builds the control-like piece 5 from piece 4.
        let merges = merges_from_scores(&tokens, &scores, |id| id <= 2);
        assert_eq!(merges, [("▁".to_string(), "x".to_string())]);
    }

    #[test]
    fn merges_split_on_characters_not_bytes() {
        let tokens: Vec<String> = ["é", "t", "ét", "▁", "▁ét"].iter().map(|s| s.to_string()).collect();
        let scores = [0.0, 0.0, -1.0, 0.0, -2.0];
        let names: Vec<String> =
            merges_from_scores(&tokens, &scores, |_| true).iter().map(|(a, b)| format!("{a}+{b}")).collect();
        assert_eq!(names, ["é+t", "▁+ét"]);
    }
}
