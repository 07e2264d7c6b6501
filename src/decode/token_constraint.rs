//! The generation loop's view of a grammar, apart from both: the loop drives any `TokenConstraint`, and the
//! grammar engine implements it, so neither depends on the other.

use crate::Result;

/// What the generation loop needs from a grammar. Implemented by `constraint::ConstraintMatcher`; a trait so
/// that the loop does not depend on the grammar engine and tests can plug in simple constraints.
pub trait TokenConstraint {
    /// Cheap check: would the grammar accept `token` next?
    fn validate(&mut self, token: u32) -> bool;
    /// Sets every token the grammar forbids next to −inf.
    fn mask_logits(&mut self, logits: &mut [f32]) -> Result<()>;
    /// Advances the grammar by `token`.
    fn commit(&mut self, token: u32) -> Result<()>;
    /// Tokens the grammar now forces, already committed (fast-forward).
    fn forced_tokens(&mut self) -> Result<Vec<u32>>;
    /// Whether the output so far is a complete match.
    fn is_accepting(&mut self) -> bool;
    /// Whether the grammar can take no further token (stop without another model call).
    fn is_finished(&self) -> bool;
    /// How many leading `tokens` the grammar would accept in a row, without committing (checks a draft).
    /// The default, 0, turns drafting off under this constraint.
    fn valid_prefix(&mut self, _tokens: &[u32]) -> usize {
        0
    }
    /// The token ids the grammar allows next (ascending), when there are at most `limit` of them. The default,
    /// `None`, computes every logit at every step.
    fn allowed_if_few(&mut self, _limit: usize) -> Option<Vec<u32>> {
        None
    }
}
