//! NESTFUL's four scores, computed the way IBM's scorer computes them.
//!
//! Implemented after IBM's scorer, read (not copied) from the NESTFUL code release as mirrored in
//! `github.com/romitjain/NESTFUL`: `src/scorer.py` (`calculate_scores`), `src/output_parsers.py`
//! (`ground_seq_nested_repsonse`) and `src/utils.py` (`compute_score_sklearn`, `post_process_api_with_args`).
//! (`github.com/IBM/NESTFUL` itself holds only the data.)
//!
//! 1. **`var_result` and labels (grounding).** Calls named `var_result` are dropped from gold and prediction (it
//!    names the answer; it is no call). Every other label is then replaced, inside references, by the name of the
//!    function that carries it in the same sequence: `$var1.distance$` becomes `$calculate_route.distance$`. So a
//!    prediction that numbers its labels differently from gold (`var7` for `var1`, or our step ids `s1`, `s2`) but
//!    wires the same functions' outputs into the same arguments scores exactly as if it used gold's labels, and
//!    one that wires another call's output in does not. As in the scorer, a reference is grounded when it is a whole
//!    string argument, or a string directly inside a list argument, that starts with `$` and has a `.`; `$var1$`,
//!    references inside longer text and inside objects are compared as written. Two deliberate differences: the
//!    scorer only grounds labels starting with `var` (it tests `startswith("$var")`), we ground any label defined
//!    in the sequence, so plans with step ids `s1`… can be scored at all; and the scorer replaces the label text
//!    everywhere in the string (`str.replace`), we replace only the label segment, so a field whose name contains
//!    the label is not mangled. For `var…` labels and ordinary field names the results are identical.
//! 2. **Prediction clean-up.** A predicted top-level string argument that starts with `$` but does not end with
//!    one gets the missing `$` (the scorer's repair of `$var1.x`). Third difference: we repair only when the part
//!    before the first `.` is a label of the sequence, i.e. a truncated reference. The scorer repairs every such
//!    string, which also rewrites literal text: gold's price ranges `$100-$200` (samples 147, 150, 162) would get a
//!    `$` appended, so there the gold sequence itself would not score 1 against itself.
//! 3. **Slots.** An argument becomes the text `name = value`, the value written as Python's `str` writes the
//!    parsed JSON (strings bare, `True`, `None`, `['a', 'b']`, `2.0`), so `"5"` and `5` give the same slot, as in
//!    the scorer.
//! 4. **F1 of function names** (`f1_intent`): one row per sample, the set of grounded function names; **F1 of
//!    parameters** (`f1_slot`): one row per sample and function name occurring in gold or prediction, the set of
//!    that function's slots (when a sequence calls a function twice, its last call's slots stand, as in the
//!    scorer's dict). Both are sklearn's macro F1 over `MultiLabelBinarizer` classes fitted on the gold rows: per
//!    class `F1 = 2·TP / (2·TP + FP + FN)` counted over rows, then the unweighted mean over classes. Predicted
//!    names or slots that occur in no gold row are not classes and so cost nothing (sklearn ignores unknown labels).
//!    These are corpus-level figures, not means of per-sample values: [`summarize`] computes them over all
//!    samples at once. Precision and recall are macro averages the same way (0 for a class never predicted).
//! 5. **Partial sequence accuracy** (`accuracy_combined`): each grounded call becomes
//!    `name(k1 = v1, k2 = v2)` with the slots sorted; if gold and prediction have equal length they are compared
//!    position by position, otherwise first aligned by function name greedily (walk both; equal names pair up, else
//!    the gold call pairs with a gap while gold lasts, then the remaining predicted calls with gaps). The score is
//!    the fraction of aligned positions whose strings are equal; the summary gives the mean over samples.
//! 6. **Full sequence accuracy**: the fraction of samples whose partial sequence accuracy is exactly 1.
//!
//! A prediction that could not be parsed is scored as an empty sequence (the scorer's parse failure leaves it
//! empty too). The win rate (executing the calls) needs the executable split and is not computed here.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::data::{Call, VAR_RESULT};

/// Per-sample results, with the rows the corpus-level F1 scores are computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleScore {
    /// Gold function names after grounding (one row of the F1-of-functions computation).
    pub gold_functions: Vec<String>,
    /// Predicted function names after grounding.
    pub predicted_functions: Vec<String>,
    /// Gold `name = value` slots, one row per function name in gold or prediction.
    pub gold_parameters: Vec<Vec<String>>,
    /// Predicted slots, rows parallel to `gold_parameters`.
    pub predicted_parameters: Vec<Vec<String>>,
    /// Gold calls as `name(k = v, …)`, aligned with the prediction (`""` marks a gap).
    pub aligned_gold: Vec<String>,
    /// Predicted calls, aligned with gold.
    pub aligned_predicted: Vec<String>,
    /// The fraction of aligned positions that agree.
    pub partial_sequence_accuracy: f64,
    /// Whether every aligned position agrees.
    pub full_sequence_match: bool,
}

/// Macro-averaged precision, recall and F1 (sklearn `average="macro"`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct MacroScores {
    /// Mean per-class precision.
    pub precision: f64,
    /// Mean per-class recall.
    pub recall: f64,
    /// Mean per-class F1.
    pub f1: f64,
}

/// The four NESTFUL scores over a set of samples.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct NestfulSummary {
    /// Samples scored.
    pub samples: usize,
    /// F1 of function names (and its precision and recall), corpus-level macro average.
    pub functions: MacroScores,
    /// F1 of parameters (name = value slots), corpus-level macro average.
    pub parameters: MacroScores,
    /// Mean partial sequence accuracy.
    pub partial_sequence_accuracy: f64,
    /// Fraction of samples predicted exactly.
    pub full_sequence_accuracy: f64,
}

/// A call after grounding: its name and its `key = value` slots in argument order.
struct Grounded {
    name: String,
    slots: Vec<String>,
}

/// Scores one prediction against the gold sequence (both as written, `var_result` and labels included).
pub fn score_sample(gold: &[Call], predicted: &[Call]) -> SampleScore {
    let gold = ground(gold, false);
    let predicted = ground(predicted, true);
    let (gold_parameters, predicted_parameters) = slot_rows(&gold, &predicted);
    let (aligned_gold, aligned_predicted) =
        align(gold.iter().map(canonical).collect(), predicted.iter().map(canonical).collect());
    let agreeing = aligned_gold.iter().zip(&aligned_predicted).filter(|(g, p)| g == p).count();
    // Both empty cannot happen with real gold; sklearn would not give a number there, the scorer then records 0.
    let partial = if aligned_gold.is_empty() { 0.0 } else { agreeing as f64 / aligned_gold.len() as f64 };
    SampleScore {
        gold_functions: gold.iter().map(|c| c.name.clone()).collect(),
        predicted_functions: predicted.iter().map(|c| c.name.clone()).collect(),
        gold_parameters,
        predicted_parameters,
        aligned_gold,
        aligned_predicted,
        partial_sequence_accuracy: partial,
        full_sequence_match: partial == 1.0,
    }
}

/// The summary over scored samples: corpus-level macro F1s, mean sequence accuracies (all 0 for no samples).
pub fn summarize(scores: &[SampleScore]) -> NestfulSummary {
    if scores.is_empty() {
        return NestfulSummary::default();
    }
    let n = scores.len() as f64;
    let gold_functions: Vec<Vec<String>> = scores.iter().map(|s| s.gold_functions.clone()).collect();
    let predicted_functions: Vec<Vec<String>> = scores.iter().map(|s| s.predicted_functions.clone()).collect();
    let gold_parameters: Vec<Vec<String>> = scores.iter().flat_map(|s| s.gold_parameters.clone()).collect();
    let predicted_parameters: Vec<Vec<String>> = scores.iter().flat_map(|s| s.predicted_parameters.clone()).collect();
    NestfulSummary {
        samples: scores.len(),
        functions: macro_scores(&gold_functions, &predicted_functions),
        parameters: macro_scores(&gold_parameters, &predicted_parameters),
        partial_sequence_accuracy: scores.iter().map(|s| s.partial_sequence_accuracy).sum::<f64>() / n,
        full_sequence_accuracy: scores.iter().filter(|s| s.full_sequence_match).count() as f64 / n,
    }
}

#[derive(Default, Clone, Copy)]
struct Counts {
    tp: usize,
    fp: usize,
    fn_: usize,
}

/// sklearn's macro precision/recall/F1 of multi-label rows, with the label set fitted on `gold` (labels only
/// predicted are ignored). Rows are sets: repeats within a row count once. 0 when gold has no labels.
pub fn macro_scores(gold: &[Vec<String>], predicted: &[Vec<String>]) -> MacroScores {
    let mut counts: BTreeMap<&str, Counts> =
        gold.iter().flatten().map(|label| (label.as_str(), Counts::default())).collect();
    if counts.is_empty() {
        return MacroScores::default();
    }
    let empty = Vec::new();
    for (i, gold_row) in gold.iter().enumerate() {
        let gold_set: BTreeSet<&str> = gold_row.iter().map(String::as_str).collect();
        let predicted_set: BTreeSet<&str> = predicted.get(i).unwrap_or(&empty).iter().map(String::as_str).collect();
        for label in gold_set.union(&predicted_set) {
            let Some(c) = counts.get_mut(label) else {
                continue;
            };
            match (gold_set.contains(label), predicted_set.contains(label)) {
                (true, true) => c.tp += 1,
                (true, false) => c.fn_ += 1,
                (false, true) => c.fp += 1,
                (false, false) => {}
            }
        }
    }
    let ratio = |num: usize, den: usize| {
        if den == 0 {
            0.0
        } else {
            num as f64 / den as f64
        }
    };
    let classes = counts.len() as f64;
    let mean = |f: &dyn Fn(&Counts) -> f64| counts.values().map(f).sum::<f64>() / classes;
    MacroScores {
        precision: mean(&|c| ratio(c.tp, c.tp + c.fp)),
        recall: mean(&|c| ratio(c.tp, c.tp + c.fn_)),
        f1: mean(&|c| ratio(2 * c.tp, 2 * c.tp + c.fp + c.fn_)),
    }
}

/// Drops `var_result`, grounds labels to function names, writes the slots (see the module docs, steps 1–3).
fn ground(calls: &[Call], prediction: bool) -> Vec<Grounded> {
    let labels = label_functions(calls);
    calls
        .iter()
        .filter(|c| c.name != VAR_RESULT)
        .map(|call| Grounded {
            name: call.name.clone(),
            slots: call
                .arguments
                .iter()
                .map(|(key, value)| {
                    let mut value = value.clone();
                    if prediction {
                        close_reference(&mut value, &labels);
                    }
                    format!("{key} = {}", py_str(&ground_value(&value, &labels)))
                })
                .collect(),
        })
        .collect()
}

/// Label (without `$`) → the function that carries it; a later call wins, as in the scorer's dict.
fn label_functions(calls: &[Call]) -> HashMap<String, &str> {
    calls
        .iter()
        .filter(|c| c.name != VAR_RESULT && c.name != "varResult")
        .filter_map(|c| Some((c.label.as_deref()?.replace('$', ""), c.name.as_str())))
        .collect()
}

fn ground_value(value: &Value, labels: &HashMap<String, &str>) -> Value {
    match value {
        Value::String(s) => Value::String(ground_string(s, labels)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| match item {
                    Value::String(s) => Value::String(ground_string(s, labels)),
                    other => other.clone(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `$var1.distance$` → `$calculate_route.distance$` when `var1` labels a `calculate_route` call.
fn ground_string(text: &str, labels: &HashMap<String, &str>) -> String {
    let grounded = text
        .strip_prefix('$')
        .and_then(|_| text.split_once('.'))
        .and_then(|(head, rest)| labels.get(&head.replace('$', "")).map(|name| format!("${name}.{rest}")));
    grounded.unwrap_or_else(|| text.to_string())
}

/// Adds the closing `$` to a truncated reference (`$var1.distance`): a string that starts with `$`, does not end
/// with one, and whose part before the first `.` names a label of the sequence.
fn close_reference(value: &mut Value, labels: &HashMap<String, &str>) {
    if let Value::String(s) = value {
        let head = s.split_once('.').map(|(head, _)| head.replace('$', ""));
        if s.starts_with('$') && !s.ends_with('$') && head.is_some_and(|h| labels.contains_key(&h)) {
            s.push('$');
        }
    }
}

/// Function name → the slots of its last call, for gold and prediction, as parallel rows over the union of names.
fn slot_rows(gold: &[Grounded], predicted: &[Grounded]) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let last_slots = |calls: &[Grounded]| -> BTreeMap<String, Vec<String>> {
        calls.iter().map(|c| (c.name.clone(), c.slots.clone())).collect()
    };
    let (gold, predicted) = (last_slots(gold), last_slots(predicted));
    let names: BTreeSet<&String> = gold.keys().chain(predicted.keys()).collect();
    names
        .into_iter()
        .map(|name| (gold.get(name).cloned().unwrap_or_default(), predicted.get(name).cloned().unwrap_or_default()))
        .unzip()
}

/// `name(k1 = v1, k2 = v2)` with the slots sorted.
fn canonical(call: &Grounded) -> String {
    let mut slots = call.slots.clone();
    slots.sort();
    format!("{}({})", call.name, slots.join(", "))
}

fn call_name(canonical: &str) -> &str {
    canonical.split_once('(').map_or(canonical, |(name, _)| name)
}

/// The scorer's alignment: unchanged when the lengths agree, else a greedy walk by function name in which a gold
/// call without a partner pairs with a gap (`""`) while gold lasts, then the rest of the prediction with gaps.
fn align(gold: Vec<String>, predicted: Vec<String>) -> (Vec<String>, Vec<String>) {
    if gold.len() == predicted.len() {
        return (gold, predicted);
    }
    let (mut i, mut j) = (0, 0);
    let (mut aligned_gold, mut aligned_predicted) = (Vec::new(), Vec::new());
    while i < gold.len() || j < predicted.len() {
        if i < gold.len() && j < predicted.len() && call_name(&gold[i]) == call_name(&predicted[j]) {
            aligned_gold.push(gold[i].clone());
            aligned_predicted.push(predicted[j].clone());
            i += 1;
            j += 1;
        } else if i < gold.len() {
            aligned_gold.push(gold[i].clone());
            aligned_predicted.push(String::new());
            i += 1;
        } else {
            aligned_gold.push(String::new());
            aligned_predicted.push(predicted[j].clone());
            j += 1;
        }
    }
    (aligned_gold, aligned_predicted)
}

/// Python's `str()` of a value parsed from JSON: a string as it is, anything else as `repr()`.
fn py_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

/// Python's `repr()` of a value parsed from JSON (dicts keep their key order, as Python's do).
fn py_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (None, Some(u), _) => u.to_string(),
            (None, None, Some(f)) => py_float(f),
            _ => n.to_string(),
        },
        Value::String(s) => py_string_repr(s),
        Value::Array(items) => format!("[{}]", items.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(map) => {
            let entries: Vec<String> =
                map.iter().map(|(k, v)| format!("{}: {}", py_string_repr(k), py_repr(v))).collect();
            format!("{{{}}}", entries.join(", "))
        }
    }
}

/// Python's float `repr`: the shortest round-trip digits, positional for exponents −4..16 (always with a decimal
/// point, `2.0`), else scientific with a signed two-digit exponent (`1e-05`, `1.5e+16`).
fn py_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "nan".into()
        } else if f > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    // Rust's `{:e}` also prints the shortest round-trip digits: `-1.2345e3`.
    let sci = format!("{f:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = mantissa.strip_prefix('-').map_or(("", mantissa), |m| ("-", m));
    if !(-4..16).contains(&exponent) {
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{mantissa}e{exp_sign}{:02}", exponent.abs());
    }
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if exponent < 0 {
        return format!("{sign}0.{}{digits}", "0".repeat((-exponent - 1) as usize));
    }
    let point = exponent as usize + 1;
    let padded = format!("{digits:0<point$}");
    let (int_part, frac_part) = padded.split_at(point);
    format!("{sign}{int_part}.{}", if frac_part.is_empty() { "0" } else { frac_part })
}

/// Python's `repr` of a string: single quotes unless the text has a single quote and no double quote.
fn py_string_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}
