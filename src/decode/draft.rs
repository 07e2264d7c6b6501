//! Drafts for speculative decoding by prompt lookup: guess the next tokens by finding the latest n-gram of the
//! text so far earlier in the prompt or output, and proposing what followed it there.
//!
//! Agent prompts suit this well: plans and tool calls copy tool names, argument names, file names and numbers
//! from the goal, the tool list and the examples. A draft costs no model call; the model checks all of its tokens
//! in one batched pass and the generation loop keeps only those the model would have chosen anyway. On our CPU
//! kernels a batched pass gives each position the logits a one-token pass gives, so the output is plain
//! decoding's bit for bit (`LanguageModel::exact_batches`); elsewhere batched rounding can tip a near-tie.

/// How the generation loop drafts tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Speculation {
    /// One forward pass per chosen token (plus the grammar's forced tokens).
    Off,
    /// Prompt lookup: match the last `max_ngram` … `min_ngram` tokens, draft up to `max_draft` tokens.
    PromptLookup { min_ngram: usize, max_ngram: usize, max_draft: usize },
}

impl Default for Speculation {
    /// Off for a bare request; a loaded model picks its own (`decode::Model::load_with`: on where exact).
    fn default() -> Self {
        Speculation::Off
    }
}

impl Speculation {
    /// The drafting mode a user's setting asks for; `None` leaves it to the model (drafts where exact).
    pub fn from_setting(drafting: crate::settings::Drafting) -> Option<Self> {
        match drafting {
            crate::settings::Drafting::WhereExact => None,
            crate::settings::Drafting::Always => Some(Speculation::prompt_lookup()),
            crate::settings::Drafting::Never => Some(Speculation::Off),
        }
    }

    /// Prompt lookup with the settings that paid on the planner's plans (`tandem bench drafts`): one drafted token
    /// a pass. A pass of two tokens costs little more than one, but every further token adds a good share of a
    /// pass, and fewer of them are kept, so two drafted tokens gained less than one and three or more lost to plain
    /// decoding (docs/performance.md, "Speculative decoding", 1.5B on 2 CPU cores).
    pub fn prompt_lookup() -> Self {
        Speculation::PromptLookup { min_ngram: 2, max_ngram: 4, max_draft: 1 }
    }

    /// Up to `limit` drafted tokens to follow `context` (prompt then output so far); empty when nothing matches.
    pub fn draft(&self, context: &[u32], limit: usize) -> Vec<u32> {
        match *self {
            Speculation::Off => Vec::new(),
            Speculation::PromptLookup { min_ngram, max_ngram, max_draft } => {
                prompt_lookup(context, min_ngram.max(1), max_ngram, max_draft.min(limit))
            }
        }
    }
}

/// Longest n-gram first (a longer match predicts better); within one length, the latest earlier occurrence (the
/// most recent context is the likeliest to repeat).
fn prompt_lookup(context: &[u32], min_ngram: usize, max_ngram: usize, max_draft: usize) -> Vec<u32> {
    if max_draft == 0 {
        return Vec::new();
    }
    for n in (min_ngram..=max_ngram).rev() {
        if n >= context.len() {
            continue;
        }
        let key = &context[context.len() - n..];
        // Occurrences that end before the key itself starts to overlap its final position.
        let found = (0..context.len() - n).rev().find(|&start| &context[start..start + n] == key);
        if let Some(start) = found {
            let from = start + n;
            let to = (from + max_draft).min(context.len());
            return context[from..to].to_vec();
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(context: &[u32], max_draft: usize) -> Vec<u32> {
        Speculation::PromptLookup { min_ngram: 2, max_ngram: 3, max_draft }.draft(context, usize::MAX)
    }

    #[test]
    fn proposes_what_followed_the_last_ngram_earlier() {
        // "… 5 6 7 8 9 … 5 6" → "7 8 9"
        assert_eq!(lookup(&[1, 5, 6, 7, 8, 9, 2, 5, 6], 3), vec![7, 8, 9]);
        assert_eq!(lookup(&[1, 5, 6, 7, 8, 9, 2, 5, 6], 2), vec![7, 8]);
    }

    #[test]
    fn prefers_the_longest_match_then_the_latest() {
        // The 3-gram "4 5 6" occurs once (→ 7); the 2-gram "5 6" occurs later too (→ 9), but the longer wins.
        assert_eq!(lookup(&[4, 5, 6, 7, 0, 5, 6, 9, 0, 4, 5, 6], 1), vec![7]);
        // Two occurrences of the same 2-gram: the later one.
        assert_eq!(lookup(&[5, 6, 1, 5, 6, 2, 0, 5, 6], 1), vec![2]);
    }

    #[test]
    fn no_match_or_no_room_means_no_draft() {
        assert!(lookup(&[1, 2, 3, 4], 4).is_empty());
        assert!(lookup(&[1, 2, 1, 2], 0).is_empty());
        assert!(lookup(&[7], 4).is_empty());
        assert!(Speculation::default().draft(&[1, 2, 1, 2], 4).is_empty());
        // The overall limit caps the draft too.
        assert_eq!(Speculation::prompt_lookup().draft(&[1, 2, 3, 4, 1, 2], 1), vec![3]);
    }

    #[test]
    fn a_draft_may_run_up_to_the_end_of_the_context() {
        // "1 2" at the start is followed by "1 2 1 2": a repeating pattern drafts itself.
        assert_eq!(lookup(&[1, 2, 1, 2], 8), vec![1, 2]);
    }
}
