//! Running the BFCL suite: the executor model answers each question under a grammar whose only choices are the
//! question's functions with their parameter schemas (one call, a list of calls, or a list that may be empty, by
//! category: [`super::call`]); BFCL's rules for the category check it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::call::{call_schema, messages, predicted_calls, token_budget};
use super::category::CallShape;
use super::{check, load, BfclCase, BfclCategory};
use crate::agent::asks::{asks_note, exactly, list_asks};
use crate::agent::model_call::chat_call;
use crate::agent::ModelSource;
use crate::bench::nestful::runner::data_dir;
use crate::bench::records::{run_samples, BenchRecorder};
use crate::decode::constraint::ConstraintSpec;
use crate::decode::{Model, Timings};
use crate::llm::ChatMessage;
use crate::progress::Reporter;
use crate::settings::{Asks, SuiteSettings};
use crate::{Error, Result};

/// The categories `names` asks for: BFCL names, or `all` for every category whose question file is in `dir`.
pub fn categories(names: &[String], dir: &Path) -> Result<Vec<BfclCategory>> {
    if names.iter().any(|n| n == "all") {
        let found: Vec<BfclCategory> =
            BfclCategory::ALL.into_iter().filter(|c| dir.join(c.file_name()).is_file()).collect();
        if found.is_empty() {
            return Err(Error::Bench(format!("no BFCL_v4_<category>.json files in {}", dir.display())));
        }
        return Ok(found);
    }
    names
        .iter()
        .map(|name| {
            BfclCategory::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = BfclCategory::ALL.iter().map(|c| c.name()).collect();
                Error::Usage(format!("unknown BFCL category '{name}' (known: {}, or all)", known.join(", ")))
            })
        })
        .collect()
}

/// Runs the suite; returns every record.
pub fn run(
    args: &SuiteSettings,
    recorder: &mut BenchRecorder,
    reporter: &dyn Reporter,
    models: &mut dyn ModelSource,
) -> Result<Vec<Value>> {
    let dir = data_dir(args.data.as_deref(), "bfcl")?;
    let mut chosen: Vec<(Value, BfclCase)> = Vec::new();
    for category in categories(&args.bfcl_categories(), &dir)? {
        let set = load(&dir, category).map_err(|e| Error::Bench(e.to_string()))?;
        for issue in &set.skipped {
            reporter.message(&format!("skipped: {issue}"));
        }
        chosen.extend(set.cases.into_iter().take(args.limit.unwrap_or(usize::MAX)).map(|c| (json!(c.question.id), c)));
    }
    run_samples(&chosen, recorder, reporter, "bfcl", |case| {
        let started = Instant::now();
        let question = &case.question;
        let prompt = question.user_prompt().unwrap_or_default();
        let shape = case.category.call_shape();
        let mut messages = messages(question, shape);
        // Several calls asked: the actions listed first fix how many calls the grammar takes (`agent::asks`).
        let functions: Vec<(String, String)> =
            question.functions.iter().map(|f| (f.name.clone(), f.description.clone())).collect();
        let (asks, listing) = match (shape, args.asks) {
            (CallShape::Several, Asks::Executor) => list_asks(models.executor()?, "executor", &messages, &functions)?,
            (CallShape::Several, Asks::Planner) => list_asks(models.planner()?, "planner", &messages, &functions)?,
            _ => (Vec::new(), Timings::default()),
        };
        let model = models.executor()?;
        let mut schema = call_schema(question, shape);
        if !asks.is_empty() {
            messages[0].content.push_str(&format!("\n\n{}", asks_note(&asks)));
            schema = exactly(schema, asks.len());
        }
        let (text, timings) = answer(model, &messages, &schema, shape)?;
        let prediction: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let mut record = json!({
            "sample": question.id, "category": case.category.name(), "input": prompt, "prediction": prediction,
            "raw": text, "case": case, "tokens_in": timings.prompt_tokens + listing.prompt_tokens,
            "tokens_out": timings.generated_tokens + listing.generated_tokens,
            "ms": started.elapsed().as_millis() as u64,
        });
        if !asks.is_empty() {
            record["asks"] = json!(asks);
        }
        record["score"] = score(&record);
        Ok(record)
    })
}

/// The executor's calls for `messages` under the call grammar `schema`.
fn answer(model: &mut Model, messages: &[ChatMessage], schema: &Value, shape: CallShape) -> Result<(String, Timings)> {
    let spec = ConstraintSpec::JsonSchema(schema.clone());
    chat_call(model, "executor", messages, Some(&spec), token_budget(shape))
}

/// The AST check of a record's prediction against its case.
fn score(record: &Value) -> Value {
    let Ok(case) = serde_json::from_value::<BfclCase>(record["case"].clone()) else {
        return json!({"correct": false, "why": "the record holds no case"});
    };
    let verdict = check(&case, &predicted_calls(&record["prediction"]));
    match verdict.failure {
        None => json!({"correct": true}),
        Some(failure) => json!({"correct": false, "error_type": failure.kind.error_type(), "why": failure.reason}),
    }
}

/// A record's verdict recomputed.
pub fn rescore(mut record: Value) -> Value {
    if record.get("case").is_some() {
        record["score"] = score(&record);
    }
    record
}

/// A record's category; a failed sample's record has only its id (`simple_python_335`, `live_simple_3-1-0`),
/// whose prefix names it.
fn category_of(record: &Value) -> String {
    if let Some(category) = record["category"].as_str() {
        return category.to_string();
    }
    let id = record["sample"].as_str().unwrap_or("?");
    id.rsplit_once('_').map_or(id, |(prefix, _)| prefix).to_string()
}

/// Accuracy overall and per category.
pub fn summarise(records: &[Value]) -> Value {
    let correct = |r: &Value| r["score"]["correct"].as_bool().unwrap_or(false);
    let mut by_category: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for r in records {
        let entry = by_category.entry(category_of(r)).or_default();
        entry.0 += 1;
        entry.1 += usize::from(correct(r));
    }
    let mut summary = Map::new();
    summary.insert("samples".into(), json!(records.len()));
    summary.insert(
        "accuracy".into(),
        json!(records.iter().filter(|r| correct(r)).count() as f64 / records.len().max(1) as f64),
    );
    for (category, (n, ok)) in &by_category {
        summary.insert(format!("accuracy_{category}"), json!(*ok as f64 / (*n).max(1) as f64));
    }
    let mut ms: Vec<f64> = records.iter().map(|r| r["ms"].as_f64().unwrap_or(0.0)).collect();
    ms.sort_by(f64::total_cmp);
    summary.insert("median_seconds".into(), json!(crate::bench::median(&ms) / 1000.0));
    Value::Object(summary)
}
