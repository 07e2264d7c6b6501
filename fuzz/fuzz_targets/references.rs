//! Reference resolution: any text (or JSON value) is scanned for `$step.field$` references and resolved against
//! outputs of several shapes; errors are fine, panics are not. A reference found reads back from its own text.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use tandem::agent::plan::refs::{references_in, resolve_value};
use tandem::agent::parse_reference;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let outputs = HashMap::from([
        ("s1".to_string(), json!({"result": 42, "text": "a $s2$ b", "items": [1, {"x": [2, 3]}], "": null})),
        ("s2".to_string(), json!("plain")),
        ("s3".to_string(), json!([{"a": 1.5}, "x"])),
    ]);
    if let Some(reference) = parse_reference(text) {
        assert_eq!(parse_reference(&reference.to_string()), Some(reference));
    }
    let value = serde_json::from_str::<Value>(text).unwrap_or_else(|_| Value::from(text));
    for reference in references_in(&value) {
        assert_eq!(parse_reference(&reference.to_string()), Some(reference));
    }
    let _ = resolve_value("s9", &value, &outputs);
    let _ = resolve_value("s9", &Value::from(text), &outputs);
});
