//! Benchmarks run by `tandem bench`: inference speed and grammar cost, and the quality suites (NESTFUL planning,
//! BFCL single calls, end-to-end tasks) with their records, scorers and reports; and `serve`, the load test of an
//! OpenAI-compatible server beside llama.cpp's.

pub mod bfcl;
pub mod chart;
pub mod drafting;
pub mod grammar;
pub mod llamacpp;
pub mod merge;
pub mod nestful;
pub mod records;
pub mod serve;
pub mod speed;
pub mod suites;
pub mod task_servers;
pub mod tasks;

/// Peak resident set size of this process in bytes (Linux `VmHWM`), if the platform reports it.
pub fn peak_rss_bytes() -> Option<u64> {
    process_peak_rss_bytes("self")
}

/// Peak resident set size of process `pid` (a number, or `self`) in bytes, if the platform reports it.
pub fn process_peak_rss_bytes(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Median of a non-empty list (the mean of the middle two for even lengths); 0 for an empty one.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn peak_rss_is_reported_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(peak_rss_bytes().is_some_and(|b| b > 1024 * 1024));
        }
    }
}
