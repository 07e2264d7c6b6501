//! Choosing the next token from logits: greedy, or temperature with top-k / top-p, seeded.
//!
//! Works on a logits slice rather than candle's `LogitsProcessor` so that a grammar can mask the logits with
//! −inf first (candle's processor sees probabilities, and skips its hook for argmax).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How tokens are chosen.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Sampling {
    /// Always the most likely token (deterministic).
    Greedy,
    /// Sample from softmax(logits / temperature), optionally cut to the top k tokens and to the nucleus p.
    Random { temperature: f64, top_k: Option<usize>, top_p: Option<f64> },
}

impl Sampling {
    /// Greedy for temperature ≤ 0, sampling otherwise.
    pub fn from_temperature(temperature: f64, top_k: Option<usize>, top_p: Option<f64>) -> Self {
        if temperature <= 0.0 {
            Sampling::Greedy
        } else {
            Sampling::Random { temperature, top_k, top_p }
        }
    }
}

/// A seeded sampler. Reuses its scratch buffer across tokens.
pub struct Sampler {
    sampling: Sampling,
    rng: StdRng,
    candidates: Vec<(u32, f32)>,
}

impl Sampler {
    /// A sampler whose random choices are fixed by `seed`.
    pub fn new(sampling: Sampling, seed: u64) -> Self {
        Self { sampling, rng: StdRng::seed_from_u64(seed), candidates: Vec::new() }
    }

    /// The configuration.
    pub fn sampling(&self) -> Sampling {
        self.sampling
    }

    /// Picks a token. −inf logits are never picked unless every logit is −inf (then 0 is returned and the caller's
    /// grammar check rejects it).
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        match self.sampling {
            Sampling::Greedy => argmax(logits),
            Sampling::Random { temperature, top_k, top_p } => self.sample_random(logits, temperature, top_k, top_p),
        }
    }

    fn sample_random(&mut self, logits: &[f32], temperature: f64, top_k: Option<usize>, top_p: Option<f64>) -> u32 {
        let candidates = &mut self.candidates;
        candidates.clear();
        candidates.extend(logits.iter().enumerate().filter(|(_, l)| l.is_finite()).map(|(i, &l)| (i as u32, l)));
        if candidates.is_empty() {
            return argmax(logits);
        }
        let by_logit_desc = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1);
        if let Some(k) = top_k.filter(|&k| k > 0 && k < candidates.len()) {
            candidates.select_nth_unstable_by(k - 1, by_logit_desc);
            candidates.truncate(k);
        }
        let max = candidates.iter().map(|c| c.1).fold(f32::NEG_INFINITY, f32::max);
        let inv_t = (1.0 / temperature) as f32;
        let mut total = 0.0f32;
        for c in candidates.iter_mut() {
            c.1 = ((c.1 - max) * inv_t).exp();
            total += c.1;
        }
        if let Some(p) = top_p.filter(|&p| p > 0.0 && p < 1.0) {
            candidates.sort_unstable_by(by_logit_desc);
            let limit = p as f32 * total;
            let mut cumulative = 0.0;
            let mut keep = candidates.len();
            for (i, c) in candidates.iter().enumerate() {
                cumulative += c.1;
                if cumulative >= limit {
                    keep = i + 1;
                    break;
                }
            }
            candidates.truncate(keep);
            total = cumulative.min(total);
        }
        let mut target = self.rng.random::<f32>() * total;
        for &(id, weight) in candidates.iter() {
            if target < weight {
                return id;
            }
            target -= weight;
        }
        candidates.last().map_or(0, |c| c.0)
    }
}

/// Index of the largest logit (the first on ties). Scans in chunks of 8 lanes so the compiler vectorises the
/// max; a plain `iter().max_by` compares one float at a time, several times slower over a vocabulary's logits.
pub fn argmax(logits: &[f32]) -> u32 {
    const LANES: usize = 8;
    let chunks = logits.chunks_exact(LANES);
    let tail = chunks.remainder();
    let mut lane_max = [f32::NEG_INFINITY; LANES];
    for chunk in chunks {
        for (m, &x) in lane_max.iter_mut().zip(chunk) {
            *m = if x > *m { x } else { *m };
        }
    }
    let mut best = lane_max.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for &x in tail {
        best = best.max(x);
    }
    logits.iter().position(|&x| x == best).unwrap_or(0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_matches_naive_scan() {
        let mut rng = StdRng::seed_from_u64(7);
        for len in [1usize, 7, 8, 9, 100, 151_936] {
            let logits: Vec<f32> = (0..len).map(|_| rng.random::<f32>() * 10.0 - 5.0).collect();
            let naive = logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i as u32).unwrap();
            assert_eq!(argmax(&logits), naive, "len {len}");
        }
    }

    #[test]
    fn argmax_skips_negative_infinity_and_takes_first_tie() {
        assert_eq!(argmax(&[f32::NEG_INFINITY, 1.0, 3.0, 3.0, f32::NEG_INFINITY]), 2);
    }

    #[test]
    fn random_sampling_never_picks_masked_tokens() {
        let mut sampler = Sampler::new(Sampling::Random { temperature: 1.5, top_k: None, top_p: None }, 1);
        let mut logits = vec![f32::NEG_INFINITY; 1000];
        logits[10] = 0.0;
        logits[500] = 0.5;
        for _ in 0..200 {
            let t = sampler.sample(&logits);
            assert!(t == 10 || t == 500, "picked masked token {t}");
        }
    }

    #[test]
    fn top_k_one_is_greedy() {
        let mut sampler = Sampler::new(Sampling::Random { temperature: 1.0, top_k: Some(1), top_p: None }, 3);
        let logits = [0.1, 2.0, 1.9, -1.0];
        for _ in 0..50 {
            assert_eq!(sampler.sample(&logits), 1);
        }
    }

    #[test]
    fn top_p_cuts_the_tail() {
        // Probabilities ≈ [0.87, 0.12, 0.0002]: p = 0.5 keeps only the first.
        let mut sampler = Sampler::new(Sampling::Random { temperature: 1.0, top_k: None, top_p: Some(0.5) }, 5);
        let logits = [4.0, 2.0, -4.0];
        for _ in 0..100 {
            assert_eq!(sampler.sample(&logits), 0);
        }
    }

    #[test]
    fn same_seed_same_choices() {
        let logits: Vec<f32> = (0..50).map(|i| (i as f32).sin()).collect();
        let sampling = Sampling::Random { temperature: 1.0, top_k: Some(20), top_p: Some(0.9) };
        let run = |seed| {
            let mut s = Sampler::new(sampling, seed);
            (0..30).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        assert_eq!(run(9), run(9));
        assert_ne!(run(9), run(10));
    }

    #[test]
    fn sampling_follows_the_distribution() {
        // logits ln(1), ln(3): expect ≈ 25 % / 75 %.
        let mut sampler = Sampler::new(Sampling::Random { temperature: 1.0, top_k: None, top_p: None }, 11);
        let logits = [0.0f32, 3f32.ln()];
        let ones = (0..4000).filter(|_| sampler.sample(&logits) == 1).count();
        assert!((2800..3200).contains(&ones), "{ones} of 4000");
    }
}
