//! Log-probabilities of chosen tokens, for APIs that report them: the log-softmax of the logits a token was chosen
//! from (after the grammar's mask where a grammar constrains; temperature and nucleus not applied), with the most
//! likely alternatives.

/// One chosen token's log-probability and the most likely tokens at its position.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    /// The chosen token.
    pub token: u32,
    /// Its natural-log probability.
    pub logprob: f32,
    /// The most likely tokens at its position, most likely first, with their log-probabilities.
    pub top: Vec<(u32, f32)>,
}

/// What a generation tells a caller that watches it (`generate_observing`): how much of the prompt the cache
/// held, and each token's log-probabilities when asked.
pub trait GenerationObserver {
    /// Some(alternatives per position) to be told each token's log-probabilities; `None` for none.
    fn logprobs(&self) -> Option<usize> {
        None
    }
    /// After the prefill: the leading prompt tokens reused from the cache or the prefix store.
    fn on_prefill(&mut self, _reused: usize) {}
    /// Each new token's log-probabilities, before its text is emitted (only when `logprobs` is `Some`).
    fn on_token(&mut self, _logprob: TokenLogprob) {}
}

/// The log-probability of `token` under `logits` and the `top` most likely tokens. −inf logits (masked by a
/// grammar) have probability 0 and are never among the alternatives.
pub fn token_logprob(logits: &[f32], token: u32, top: usize) -> TokenLogprob {
    let max = logits.iter().copied().filter(|l| l.is_finite()).fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return TokenLogprob { token, logprob: 0.0, top: vec![(token, 0.0)] };
    }
    let sum: f64 = logits.iter().filter(|l| l.is_finite()).map(|&l| f64::from(l - max).exp()).sum();
    let log_norm = max + sum.ln() as f32;
    let at = |id: u32| logits.get(id as usize).map_or(f32::NEG_INFINITY, |&l| l - log_norm);
    let mut best: Vec<(u32, f32)> = Vec::new();
    if top > 0 {
        let mut finite: Vec<(u32, f32)> =
            logits.iter().enumerate().filter(|(_, l)| l.is_finite()).map(|(i, &l)| (i as u32, l)).collect();
        let by_desc = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if finite.len() > top {
            finite.select_nth_unstable_by(top - 1, by_desc);
            finite.truncate(top);
        }
        finite.sort_by(by_desc);
        best = finite.into_iter().map(|(id, l)| (id, l - log_norm)).collect();
    }
    TokenLogprob { token, logprob: at(token), top: best }
}

/// A token the grammar forced: the only one allowed, so probability 1.
pub fn forced(token: u32, top: usize) -> TokenLogprob {
    TokenLogprob { token, logprob: 0.0, top: if top > 0 { vec![(token, 0.0)] } else { Vec::new() } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logprobs_are_a_log_softmax_and_the_top_ones_come_first() {
        let logits = [0.0f32, 3f32.ln(), f32::NEG_INFINITY, 0.0];
        let lp = token_logprob(&logits, 1, 3);
        assert!((lp.logprob - 0.6f32.ln()).abs() < 1e-5, "{lp:?}");
        assert_eq!(lp.top.len(), 3, "the masked token is no alternative");
        assert_eq!(lp.top[0].0, 1);
        assert!((lp.top[1].1 - 0.2f32.ln()).abs() < 1e-5);
        let total: f32 = lp.top.iter().map(|(_, l)| l.exp()).sum();
        assert!((total - 1.0).abs() < 1e-5);
        assert_eq!(token_logprob(&logits, 2, 0).logprob, f32::NEG_INFINITY);
        assert!(token_logprob(&logits, 0, 0).top.is_empty());
    }
}
