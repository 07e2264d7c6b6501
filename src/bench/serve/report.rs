//! A level's figures from its requests (requests/s, time to first token p50/p99, completion tokens/s, tokens an
//! answer, prompt tokens evaluated, errors), medians over repetitions, the ratios of Tandem to llama-server, and the Markdown
//! tables: the measured (warm) phase, the warm-up (cold) phase apart, the ratios.

use super::client::LevelOutcome;
use super::servers::ServerKind;
use super::workload::{Kind, Sampling};
use crate::bench::median;

/// Which phase of a level figures are of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The warm-up: one request a slot, all at once, on a fresh server.
    Cold,
    /// The measured requests, after the warm-up.
    Warm,
}

/// Which row of the report figures are of: workload, sampling, phase, server and clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub workload: Kind,
    pub sampling: Sampling,
    pub phase: Phase,
    pub server: ServerKind,
    pub clients: usize,
}

/// One level on one server, one phase, one repetition.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LevelFigures {
    pub workload: Kind,
    pub sampling: Sampling,
    pub phase: Phase,
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
    /// Completion tokens (the usage's `completion_tokens`, summed) a second over the level's wall time.
    pub tokens_per_s: f64,
    /// Completion tokens over the level, and a median answer's (how long each server's answers are: a call
    /// written compactly costs fewer tokens).
    pub completion_tokens: usize,
    pub tokens_per_answer: f64,
    /// Prompt tokens over the level, and of those the ones the server computed rather than reused (`None`
    /// when the server reported no cached or evaluated count).
    pub prompt_tokens: usize,
    pub prompt_evaluated: Option<usize>,
    /// Answers that were tool calls.
    pub tool_call_answers: usize,
}

impl LevelFigures {
    /// Which row these are.
    pub fn row(&self) -> Row {
        Row {
            workload: self.workload,
            sampling: self.sampling,
            phase: self.phase,
            server: self.server,
            clients: self.clients,
        }
    }

    /// The figures of one level's outcome.
    pub fn of(level: Row, outcome: &LevelOutcome) -> LevelFigures {
        let Row { workload, sampling, phase, server, clients } = level;
        let ok: Vec<_> = outcome.requests.iter().filter(|r| r.error.is_none()).collect();
        let ttfts: Vec<f64> = ok.iter().map(|r| r.ttft_s.unwrap_or(r.total_s)).collect();
        let completion_tokens: usize = ok.iter().map(|r| r.completion_tokens).sum();
        let evaluated: Vec<usize> = ok.iter().filter_map(|r| r.prompt_evaluated).collect();
        let wall = outcome.wall_s.max(1e-9);
        let lengths: Vec<f64> = ok.iter().map(|r| r.completion_tokens as f64).collect();
        LevelFigures {
            workload,
            sampling,
            phase,
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
            tokens_per_answer: median(&lengths),
            prompt_tokens: ok.iter().map(|r| r.prompt_tokens).sum(),
            prompt_evaluated: (!evaluated.is_empty()).then(|| evaluated.iter().sum()),
            tool_call_answers: ok.iter().filter(|r| r.tool_calls > 0).count(),
        }
    }

    /// The medians of several repetitions of one level on one server (errors and counts summed).
    pub fn median_of(runs: &[LevelFigures]) -> Option<LevelFigures> {
        let first = runs.first()?;
        let of = |f: fn(&LevelFigures) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        let evaluated: Vec<usize> = runs.iter().filter_map(|r| r.prompt_evaluated).collect();
        Some(LevelFigures {
            workload: first.workload,
            sampling: first.sampling,
            phase: first.phase,
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
            tokens_per_answer: of(|r| r.tokens_per_answer),
            prompt_tokens: runs.iter().map(|r| r.prompt_tokens).sum(),
            prompt_evaluated: (!evaluated.is_empty()).then(|| evaluated.iter().sum()),
            tool_call_answers: runs.iter().map(|r| r.tool_call_answers).sum(),
        })
    }
}

/// Tandem ÷ llama-server for each figure of one level (above 1 is better for rates, below 1 for times).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Ratios {
    pub workload: Kind,
    pub sampling: Sampling,
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
            workload: ours.workload,
            sampling: ours.sampling,
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

/// Evaluated prompt tokens a request, or `?` when the server reported none.
fn evaluated_per_request(l: &LevelFigures) -> String {
    let answered = (l.requests - l.errors).max(1);
    l.prompt_evaluated.map_or("?".into(), |n| format!("{:.0}", n as f64 / answered as f64))
}

/// The Markdown report: the measured (warm) phase, one row per workload, sampling, level and server; the warm-up
/// (cold) phase apart; then the ratios when there is a peer.
pub fn markdown(levels: &[LevelFigures], ratios: &[Ratios], heading: &str) -> String {
    let mut out = format!("{heading}\n\nMeasured (warm) phase:\n\n");
    out.push_str("| workload | sampling | clients | server | requests | errors | requests/s | TTFT p50 s | TTFT p99 s | completion tok/s | tokens / answer | prompt tokens evaluated / request | tool-call answers |\n");
    out.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for l in levels.iter().filter(|l| l.phase == Phase::Warm) {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.2} | {:.3} | {:.3} | {:.1} | {:.0} | {} | {} |\n",
            l.workload.name(),
            l.sampling.name(),
            l.clients,
            l.server.name(),
            l.requests,
            l.errors,
            l.requests_per_s,
            l.ttft_p50_s,
            l.ttft_p99_s,
            l.tokens_per_s,
            l.tokens_per_answer,
            evaluated_per_request(l),
            l.tool_call_answers
        ));
    }
    out.push_str("\nWarm-up (cold) phase, one request a slot at once, not in the figures above:\n\n");
    out.push_str("| workload | sampling | clients | server | requests | errors | TTFT p50 s | wall s | prompt tokens evaluated / request |\n");
    out.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for l in levels.iter().filter(|l| l.phase == Phase::Cold) {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.3} | {:.2} | {} |\n",
            l.workload.name(),
            l.sampling.name(),
            l.clients,
            l.server.name(),
            l.requests,
            l.errors,
            l.ttft_p50_s,
            l.wall_s,
            evaluated_per_request(l)
        ));
    }
    if !ratios.is_empty() {
        out.push_str(
            "\ntandem ÷ llama-server, measured phase (rates: above 1 is faster; times: below 1 is sooner)\n\n",
        );
        out.push_str("| workload | sampling | clients | requests/s | TTFT p50 | TTFT p99 | completion tok/s |\n");
        out.push_str("| --- | --- | --- | --- | --- | --- | --- |\n");
        for r in ratios {
            out.push_str(&format!(
                "| {} | {} | {} | {:.2}× | {:.2}× | {:.2}× | {:.2}× |\n",
                r.workload.name(),
                r.sampling.name(),
                r.clients,
                r.requests_per_s,
                r.ttft_p50,
                r.ttft_p99,
                r.tokens_per_s
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::client::RequestOutcome;
    use super::*;

    fn row(workload: Kind, phase: Phase, server: ServerKind, clients: usize) -> Row {
        Row { workload, sampling: Sampling::Sampled, phase, server, clients }
    }

    fn request(ttft: Option<f64>, tokens: usize, error: bool) -> RequestOutcome {
        RequestOutcome {
            client: 0,
            request: 0,
            prompt: 0,
            ttft_s: ttft,
            total_s: 2.0,
            completion_tokens: tokens,
            reasoning_tokens: 0,
            prompt_tokens: 100,
            prompt_evaluated: Some(20),
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
        let f = LevelFigures::of(row(Kind::Text, Phase::Warm, ServerKind::Tandem, 2), &outcome);
        assert_eq!((f.requests, f.errors), (3, 1));
        // Prompt tokens and evaluated ones of the answered requests only.
        assert_eq!((f.prompt_tokens, f.prompt_evaluated), (200, Some(40)));
        assert_eq!(f.requests_per_s, 0.5);
        assert_eq!(f.tokens_per_s, 10.0);
        assert_eq!(f.tokens_per_answer, 20.0, "the median answer's length");
        assert_eq!(f.ttft_p50_s, 1.0);
        assert_eq!(f.ttft_p99_s, 1.5);
    }

    #[test]
    fn the_table_keeps_cold_and_warm_apart_and_says_what_each_request_evaluated() {
        let warm = LevelOutcome { wall_s: 2.0, requests: vec![request(Some(0.5), 10, false)] };
        let cold_requests = vec![RequestOutcome { prompt_evaluated: Some(450), ..request(Some(3.0), 10, false) }];
        let cold = LevelOutcome { wall_s: 3.0, requests: cold_requests };
        let mut unknown = LevelFigures::of(row(Kind::Tools, Phase::Warm, ServerKind::LlamaServer, 1), &warm);
        unknown.prompt_evaluated = None;
        let levels = vec![
            LevelFigures::of(row(Kind::Tools, Phase::Warm, ServerKind::Tandem, 1), &warm),
            unknown.clone(),
            LevelFigures::of(row(Kind::Tools, Phase::Cold, ServerKind::Tandem, 1), &cold),
        ];
        let ratios = vec![Ratios::of(&levels[0], &unknown)];
        let table = markdown(&levels, &ratios, "heading");
        let (measured, rest) = table.split_once("Warm-up (cold)").unwrap();
        let tandem = "| tools | sampled | 1 | tandem | 1 | 0 | 0.50 | 0.500 | 0.500 | 5.0 | 10 | 20 | 0 |";
        assert!(measured.contains(tandem), "{table}");
        assert!(measured
            .contains("| tools | sampled | 1 | llama-server | 1 | 0 | 0.50 | 0.500 | 0.500 | 5.0 | 10 | ? | 0 |"));
        assert!(!measured.contains("450"), "the warm-up is not in the measured rows: {table}");
        assert!(rest.contains("| tools | sampled | 1 | tandem | 1 | 0 | 3.000 | 3.00 | 450 |"), "{table}");
        assert!(rest.contains("| tools | sampled | 1 | 1.00× |"), "{table}");
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
