//! Mends references with one reading: a generic name for a step's output (`$s1.result$`) where its tool has
//! exactly one output field, and a whole-output reference inside longer text to such a tool.

use crate::agent::plan::Plan;
use crate::agent::refs::{rewrite_references, Reference};
use crate::tools::ToolRegistry;

/// Names planners give a step's output when they do not know its field.
const GENERIC_NAMES: &[&str] = &["result", "results", "output", "outputs", "value", "answer", "response", "return"];

/// Rewrites the plan's references that have one reading; returns one line per mend (`s2: $s1.result$ →
/// $s1.text$`), empty when nothing changed.
pub fn mend_references(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
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
    let mut mends = Vec::new();
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
