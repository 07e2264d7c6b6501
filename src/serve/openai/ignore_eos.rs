//! `ignore_eos`: a constraint that never lets the model choose one of its end-of-text tokens, so a plain-text
//! answer runs to its `max_tokens` (as llama.cpp's `ignore_eos`, which biases those tokens to −∞). Benchmarks use
//! it to make answers of one length on every server.

use crate::decode::token_constraint::TokenConstraint;
use crate::Result;

/// Allows every token but the given stop tokens.
pub struct NoStopTokens {
    stops: Vec<u32>,
}

impl NoStopTokens {
    /// Bans `stops` (the tokenizer's end-of-text tokens).
    pub fn new(stops: Vec<u32>) -> NoStopTokens {
        NoStopTokens { stops }
    }
}

impl TokenConstraint for NoStopTokens {
    fn validate(&mut self, token: u32) -> bool {
        !self.stops.contains(&token)
    }

    fn mask_logits(&mut self, logits: &mut [f32]) -> Result<()> {
        for &stop in &self.stops {
            if let Some(logit) = logits.get_mut(stop as usize) {
                *logit = f32::NEG_INFINITY;
            }
        }
        Ok(())
    }

    fn commit(&mut self, _token: u32) -> Result<()> {
        Ok(())
    }

    fn forced_tokens(&mut self) -> Result<Vec<u32>> {
        Ok(Vec::new())
    }

    fn is_accepting(&mut self) -> bool {
        true
    }

    fn is_finished(&self) -> bool {
        false
    }

    // Drafts stay on (speculative decoding) up to the first stop token in them.
    fn valid_prefix(&mut self, tokens: &[u32]) -> usize {
        tokens.iter().position(|t| self.stops.contains(t)).unwrap_or(tokens.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_tokens_are_masked_and_refused_and_drafts_end_before_them() {
        let mut ban = NoStopTokens::new(vec![2, 5]);
        let mut logits = vec![0.0f32; 4];
        ban.mask_logits(&mut logits).unwrap();
        assert_eq!(logits, [0.0, 0.0, f32::NEG_INFINITY, 0.0], "a stop token past the logits is skipped");
        assert!(ban.validate(1) && !ban.validate(2) && !ban.validate(5));
        assert_eq!(ban.valid_prefix(&[1, 3, 5, 1]), 2);
        assert_eq!(ban.valid_prefix(&[1, 3]), 2);
        assert!(ban.is_accepting() && !ban.is_finished());
    }
}
