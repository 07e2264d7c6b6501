//! Applying an allowed-token bitmap to a logits row as a −inf bias, in place and fast.
//!
//! A naive loop (one branch per id, 151,936 of them for Qwen) costs more than computing the mask. Grammar
//! masks are mostly long runs of forbidden ids, so we walk the bitmap a word at a time: runs of all-forbidden
//! words become one `fill` (memset speed), fully allowed words are skipped, and mixed words clear only their
//! forbidden bits.

/// Sets `logits[i]` to −inf for every id `i` whose bit is clear in `allowed` (bit `i % 32` of word `i / 32`,
/// llguidance's `SimpleVob` layout) and for every logit past the end of the bitmap. Bits past the end of
/// `logits` are ignored.
pub fn apply_allowed_mask(allowed: &[u32], logits: &mut [f32]) {
    let n = logits.len();
    // Start of the current run of forbidden words, flushed with one fill.
    let mut run_start: Option<usize> = None;
    for (index, &word) in allowed.iter().enumerate() {
        let base = index * 32;
        if base >= n {
            break;
        }
        if word == 0 {
            run_start.get_or_insert(base);
            continue;
        }
        if let Some(start) = run_start.take() {
            logits[start..base].fill(f32::NEG_INFINITY);
        }
        let mut forbidden = !word;
        while forbidden != 0 {
            let i = base + forbidden.trailing_zeros() as usize;
            if i >= n {
                break;
            }
            logits[i] = f32::NEG_INFINITY;
            forbidden &= forbidden - 1;
        }
    }
    let covered = allowed.len().saturating_mul(32).min(n);
    let tail = run_start.unwrap_or(covered);
    logits[tail..].fill(f32::NEG_INFINITY);
}
