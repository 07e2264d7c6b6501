//! Panics caught at a boundary (a dependency's assertion on bad input) turned into text for an error.

/// The text a caught panic carried (a dependency's assertion on bad input), for an error that says what happened.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}
