//! A level's figures from its requests (requests/s, time to first token p50/p99, generated tokens/s, errors),
//! medians over repetitions, the ratios of Tandem to llama-server, and the Markdown table.

use super::client::LevelOutcome;
use super::servers::ServerKind;
use crate::bench::median;

/// One level on one server, one repetition.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LevelFigures {
    pub server: ServerKind,
    pub clients: usize,
    pub requests: usize,
    pub errors: usize,
    pub wall_s: f64,
    /// Answered requests a second over the level's wall time.
    pub requests_per_s: f64,
    /// Time to first token over the answered requests: median and 99th percentile (nearest rank), seconds.
    pub ttft_p50_s: f64,
    pub ttft_p99_s: f64,
    /// Generated tokens (the usage's `completion_tokens`, summed) a second over the level's wall time.
    pub tokens_per_s: f64,
    /// Generated tokens over the level.
    pub completion_tokens: usize,
    /// Answers that were tool calls.
    pub tool_call_answers: usize,
}

impl LevelFigures {
    /// The figures of one level's outcome.
    pub fn of(server: ServerKind, clients: usize, outcome: &LevelOutcome) -> LevelFigures {
        let ok: Vec<_> = outcome.requests.iter().filter(|r| r.error.is_none()).collect();
        let ttfts: Vec<f64> = ok.iter().map(|r| r.ttft_s.unwrap_or(r.total_s)).collect();
        let completion_tokens: usize = ok.iter().map(|r| r.completion_tokens).sum();
        let wall = outcome.wall_s.max(1e-9);
        LevelFigures {
            server,
            clients,
            requests: outcome.requests.len(),
            errors: outcome.requests.len() - ok.len(),
            wall_s: outcome.wall_s,
            requests_per_s: ok.len() as f64 / wall,
            ttft_p50_s: median(&ttfts),
            ttft_p99_s: percentile(&ttfts, 0.99),
            tokens_per_s: completion_tokens as f64 / wall,
            completion_tokens,
            tool_call_answers: ok.iter().filter(|r| r.tool_calls > 0).count(),
        }
    }

    /// The medians of several repetitions of one level on one server (errors and counts summed).
    pub fn median_of(runs: &[LevelFigures]) -> Option<LevelFigures> {
        let first = runs.first()?;
        let of = |f: fn(&LevelFigures) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        Some(LevelFigures {
            server: first.server,
            clients: first.clients,
            requests: runs.iter().map(|r| r.requests).sum(),
            errors: runs.iter().map(|r| r.errors).sum(),
            wall_s: of(|r| r.wall_s),
            requests_per_s: of(|r| r.requests_per_s),
            ttft_p50_s: of(|r| r.ttft_p50_s),
            ttft_p99_s: of(|r| r.ttft_p99_s),
            tokens_per_s: of(|r| r.tokens_per_s),
            completion_tokens: runs.iter().map(|r| r.completion_tokens).sum(),
            tool_call_answers: runs.iter().map(|r| r.tool_call_answers).sum(),
        })
    }
}

/// Tandem ÷ llama-server for each figure of one level (above 1 is better for rates, below 1 for times).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Ratios {
    pub clients: usize,
    pub requests_per_s: f64,
    pub ttft_p50: f64,
    pub ttft_p99: f64,
    pub tokens_per_s: f64,
}

impl Ratios {
    /// Ours over theirs.
    pub fn of(ours: &LevelFigures, theirs: &LevelFigures) -> Ratios {
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
        Ratios {
            clients: ours.clients,
            requests_per_s: ratio(ours.requests_per_s, theirs.requests_per_s),
            ttft_p50: ratio(ours.ttft_p50_s, theirs.ttft_p50_s),
            ttft_p99: ratio(ours.ttft_p99_s, theirs.ttft_p99_s),
            tokens_per_s: ratio(ours.tokens_per_s, theirs.tokens_per_s),
        }
    }
}

/// The `q` quantile by nearest rank (0 for no values).
pub fn percentile(values: &[f64], q: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// The Markdown report: one row per level and server, then the ratios when there is a peer.
pub fn markdown(levels: &[LevelFigures], ratios: &[Ratios], heading: &str) -> String {
    let mut out = format!("{heading}\n\n");
    out.push_str("| clients | server | requests | errors | requests/s | TTFT p50 s | TTFT p99 s | generated tok/s | tool-call answers |\n");
    out.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for l in levels {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.2} | {:.3} | {:.3} | {:.1} | {} |\n",
            l.clients,
            l.server.name(),
            l.requests,
            l.errors,
            l.requests_per_s,
            l.ttft_p50_s,
            l.ttft_p99_s,
            l.tokens_per_s,
            l.tool_call_answers
        ));
    }
    if !ratios.is_empty() {
        out.push_str("\ntandem ÷ llama-server (rates: above 1 is faster; times: below 1 is sooner)\n\n");
        out.push_str("| clients | requests/s | TTFT p50 | TTFT p99 | generated tok/s |\n");
        out.push_str("| --- | --- | --- | --- | --- |\n");
        for r in ratios {
            out.push_str(&format!(
                "| {} | {:.2}× | {:.2}× | {:.2}× | {:.2}× |\n",
                r.clients, r.requests_per_s, r.ttft_p50, r.ttft_p99, r.tokens_per_s
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::client::RequestOutcome;
    use super::*;

    fn request(ttft: Option<f64>, tokens: usize, error: bool) -> RequestOutcome {
        RequestOutcome {
            client: 0,
            request: 0,
            ttft_s: ttft,
            total_s: 2.0,
            completion_tokens: tokens,
            prompt_tokens: 100,
            finish_reason: Some("stop".into()),
            tool_calls: 0,
            answer: String::new(),
            error: error.then(|| "HTTP 503".to_string()),
        }
    }

    #[test]
    fn figures_count_only_answered_requests_and_errors_apart() {
        let outcome = LevelOutcome {
            wall_s: 4.0,
            requests: vec![request(Some(0.5), 10, false), request(Some(1.5), 30, false), request(None, 0, true)],
        };
        let f = LevelFigures::of(ServerKind::Tandem, 2, &outcome);
        assert_eq!((f.requests, f.errors), (3, 1));
        assert_eq!(f.requests_per_s, 0.5);
        assert_eq!(f.tokens_per_s, 10.0);
        assert_eq!(f.ttft_p50_s, 1.0);
        assert_eq!(f.ttft_p99_s, 1.5);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&[3.0], 0.99), 3.0);
        assert_eq!(percentile(&[], 0.99), 0.0);
    }
}
