//! Mends references with one reading: a generic name for a step's output (`$s1.result$`) where its tool has
//! exactly one output field, a whole-output reference inside longer text to such a tool, and a reference written
//! with escaped dollars (`"$$s2.joke$$"`, the literal text `$s2.joke$`) as a whole argument.

use serde_json::Value;

use crate::agent::plan::Plan;
use crate::agent::refs::{parse_reference, rewrite_references, Reference};
use crate::tools::ToolRegistry;

/// Names planners give a step's output when they do not know its field.
const GENERIC_NAMES: &[&str] = &["result", "results", "output", "outputs", "value", "answer", "response", "return"];

/// Rewrites the plan's references that have one reading; returns one line per mend (`s2: $s1.result$ →
/// $s1.text$`), empty when nothing changed.
pub fn mend_references(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    let mut mends = unescape_references(plan);
    // Each step's only output field, where its tool declares exactly one.
    let only_field: Vec<(String, String)> = plan
        .steps
        .iter()
        .filter_map(|step| {
            let fields = registry.spec(&step.tool)?.output_fields()?;
            match fields.as_slice() {
                [one] => Some((step.id.clone(), one.name.clone())),
                _ => None,
            }
        })
        .collect();
    for step in &mut plan.steps {
        let id = step.id.clone();
        let mut change = |reference: &Reference, whole: bool| {
            let (_, field) = only_field.iter().find(|(target, _)| *target == reference.step)?;
            let mended = match reference.top_field() {
                // A whole output as an argument's value is meant; inside text it is its JSON.
                None if whole => return None,
                None => Reference { step: reference.step.clone(), field: Some(field.clone()) },
                Some(top) if top == field => return None,
                // A path below a field that does not exist has no reading.
                Some(_) if reference.field.as_deref() != reference.top_field() => return None,
                Some(top) if GENERIC_NAMES.contains(&top.to_ascii_lowercase().as_str()) => {
                    Reference { step: reference.step.clone(), field: Some(field.clone()) }
                }
                Some(_) => return None,
            };
            let line = format!("{id}: {reference} → {mended}");
            // The same reference twice in a step is one mend.
            if !mends.contains(&line) {
                mends.push(line);
            }
            Some(mended)
        };
        for value in step.args.values_mut() {
            rewrite_references(value, &mut change);
        }
    }
    mends
}

/// Rewrites each argument, at any depth, whose whole text is a reference to an earlier step with its dollars
/// escaped (`"$$s2.joke$$"`) into that reference. Why: the grammar admits a literal dollar only as `$$`, and the
/// 1.5B wrote `$$s2.joke$$` for the joke itself (three NESTFUL goals), which as written passes the text
/// "$s2.joke$" on; no goal asks for that text.
fn unescape_references(plan: &mut Plan) -> Vec<String> {
    let mut mends = Vec::new();
    let mut earlier: Vec<String> = Vec::new();
    for step in &mut plan.steps {
        for value in step.args.values_mut() {
            unescape_in(value, &earlier, &step.id, &mut mends);
        }
        earlier.push(step.id.clone());
    }
    mends
}

fn unescape_in(value: &mut Value, earlier: &[String], id: &str, mends: &mut Vec<String>) {
    match value {
        Value::String(text) => {
            let Some(inner) = text.trim().strip_prefix("$$").and_then(|t| t.strip_suffix("$$")) else { return };
            let Some(reference) = parse_reference(&format!("${inner}$")) else { return };
            if earlier.contains(&reference.step) {
                mends.push(format!("{id}: {text:?} → {reference} (a literal that spells a reference)"));
                *text = reference.to_string();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| unescape_in(v, earlier, id, mends)),
        Value::Object(map) => map.values_mut().for_each(|v| unescape_in(v, earlier, id, mends)),
        _ => {}
    }
}
