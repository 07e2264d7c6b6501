//! Running the BFCL suite: the executor model writes one call under a grammar whose only choices are the
//! question's functions with their parameter schemas; BFCL's AST rules check it.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::{check, load, BfclCall, BfclCase, BfclCategory, BfclQuestion};
use crate::agent::model_call::chat_call;
use crate::agent::ModelSource;
use crate::bench::nestful::runner::data_dir;
use crate::bench::records::{run_samples, BenchRecorder};
use crate::decode::constraint::ConstraintSpec;
use crate::llm::ChatMessage;
use crate::progress::Reporter;
use crate::settings::SuiteSettings;
use crate::tools::schema_fit::fit;
use crate::{Error, Result};

/// Token budget of one call.
const CALL_TOKENS: usize = 256;

/// The categories this harness knows.
pub const CATEGORIES: [BfclCategory; 2] = [BfclCategory::SimplePython, BfclCategory::Multiple];

/// The grammar of a call: one of the question's functions with its parameters (closed objects). Parameter docs
/// are taken as real functions ship them: what admits no value is loosened (`tools::schema_fit`), and keywords the
/// grammar engine does not support are ignored (`lenient`; a schema it supports compiles the same either way), so
/// one odd function does not abort its question.
pub fn call_schema(question: &BfclQuestion) -> Value {
    let shapes: Vec<Value> = question
        .functions
        .iter()
        .map(|f| {
            let (arguments, _notes) = fit(&f.tool_spec().args_schema);
            json!({"type": "object", "properties": {"name": {"const": f.name}, "arguments": arguments},
                   "required": ["name", "arguments"], "additionalProperties": false})
        })
        .collect();
    json!({"anyOf": shapes, "x-guidance": {"whitespace_flexible": false, "lenient": true}})
}

fn system_prompt(question: &BfclQuestion) -> String {
    let docs: Vec<Value> = question
        .functions
        .iter()
        .map(|f| json!({"name": f.name, "description": f.description, "parameters": f.json_schema()}))
        .collect();
    format!(
        "You call functions. Answer the user's request with one function call as JSON: \
         {{\"name\": <function>, \"arguments\": {{...}}}}. Use the values the request gives.\nFunctions:\n{}",
        serde_json::to_string(&docs).unwrap_or_default()
    )
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
    for name in &args.categories {
        let category = CATEGORIES.into_iter().find(|c| c.name() == name).ok_or_else(|| {
            let known: Vec<&str> = CATEGORIES.iter().map(|c| c.name()).collect();
            Error::Usage(format!("unknown BFCL category '{name}' (known: {})", known.join(", ")))
        })?;
        let set = load(&dir, category).map_err(|e| Error::Bench(e.to_string()))?;
        for issue in &set.skipped {
            reporter.message(&format!("skipped: {issue}"));
        }
        chosen.extend(set.cases.into_iter().take(args.limit.unwrap_or(usize::MAX)).map(|c| (json!(c.question.id), c)));
    }
    run_samples(&chosen, recorder, reporter, "bfcl", |case| {
        let started = Instant::now();
        let question = &case.question;
        let model = models.executor()?;
        let prompt = question.user_prompt().unwrap_or_default();
        let messages = [ChatMessage::system(system_prompt(question)), ChatMessage::user(prompt)];
        let spec = ConstraintSpec::JsonSchema(call_schema(question));
        let (text, timings) = chat_call(model, "executor", &messages, Some(&spec), CALL_TOKENS)?;
        let prediction: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let mut record = json!({
            "sample": question.id, "category": case.category.name(), "input": prompt, "prediction": prediction,
            "raw": text, "case": case, "tokens_in": timings.prompt_tokens, "tokens_out": timings.generated_tokens,
            "ms": started.elapsed().as_millis() as u64,
        });
        record["score"] = score(&record);
        Ok(record)
    })
}

/// The AST check of a record's prediction against its case.
fn score(record: &Value) -> Value {
    let Ok(case) = serde_json::from_value::<BfclCase>(record["case"].clone()) else {
        return json!({"correct": false, "why": "the record holds no case"});
    };
    let predicted: Vec<BfclCall> = serde_json::from_value(record["prediction"].clone()).into_iter().collect();
    let verdict = check(&case, &predicted);
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

/// A record's category; a failed sample's record has only its id (`simple_python_335`), whose prefix names it.
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
