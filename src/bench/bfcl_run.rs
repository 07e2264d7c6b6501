//! Running the BFCL suite: the executor model writes one call under a grammar whose only choices are the
//! question's functions with their parameter schemas; BFCL's AST rules check it.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::bfcl::{check_call, load_answers, load_questions, Accepted, Question};
use super::nestful_run::data_dir;
use super::records::{run_samples, BenchRecorder};
use crate::agent::model_call::chat_call;
use crate::agent::ModelSource;
use crate::cli::SuiteArgs;
use crate::decode::constraint::ConstraintSpec;
use crate::llm::ChatMessage;
use crate::progress::Reporter;
use crate::{Error, Result};

/// Token budget of one call.
const CALL_TOKENS: usize = 256;

/// The categories this harness knows.
pub const CATEGORIES: [&str; 2] = ["simple_python", "multiple"];

/// The grammar of a call: one of the question's functions with its parameters.
pub fn call_schema(question: &Question) -> Value {
    let shapes: Vec<Value> = question
        .functions
        .iter()
        .map(|f| {
            json!({"type": "object", "properties": {"name": {"const": f.name}, "arguments": f.parameters},
                   "required": ["name", "arguments"], "additionalProperties": false})
        })
        .collect();
    json!({"anyOf": shapes})
}

fn system_prompt(question: &Question) -> String {
    let docs: Vec<Value> = question
        .functions
        .iter()
        .map(|f| json!({"name": f.name, "description": f.description, "parameters": f.parameters}))
        .collect();
    format!(
        "You call functions. Answer the user's request with one function call as JSON: \
         {{\"name\": <function>, \"arguments\": {{...}}}}. Use the values the request gives.\nFunctions:\n{}",
        serde_json::to_string(&docs).unwrap_or_default()
    )
}

/// Runs the suite; returns every record.
pub fn run(
    args: &SuiteArgs,
    recorder: &mut BenchRecorder,
    reporter: &dyn Reporter,
    models: &mut dyn ModelSource,
) -> Result<Vec<Value>> {
    let dir = data_dir(args.data.as_deref(), "bfcl")?;
    let mut chosen: Vec<(Value, (String, Question, Accepted))> = Vec::new();
    for category in &args.categories {
        if !CATEGORIES.contains(&category.as_str()) {
            return Err(Error::Usage(format!(
                "unknown BFCL category '{category}' (known: {})",
                CATEGORIES.join(", ")
            )));
        }
        let questions = load_questions(&dir.join(format!("BFCL_v4_{category}.json")))?;
        let (answers, skipped) = load_answers(
            &dir.join("possible_answer")
                .join(format!("BFCL_v4_{category}.json")),
        )?;
        for line in questions.skipped.iter().chain(&skipped) {
            reporter.message(&format!("skipped: {line}"));
        }
        for question in questions
            .items
            .into_iter()
            .take(args.limit.unwrap_or(usize::MAX))
        {
            match answers.get(&question.id) {
                Some(accepted) => chosen.push((
                    json!(question.id),
                    (category.clone(), question.clone(), accepted.clone()),
                )),
                None => {
                    reporter.message(&format!("skipped: {} has no accepted answer", question.id))
                }
            }
        }
    }
    run_samples(
        &chosen,
        recorder,
        reporter,
        "bfcl",
        |(category, question, accepted)| {
            let started = Instant::now();
            let model = models.executor()?;
            let messages = [
                ChatMessage::system(system_prompt(question)),
                ChatMessage::user(&question.text),
            ];
            let spec = ConstraintSpec::JsonSchema(call_schema(question));
            let (text, timings) =
                chat_call(model, "executor", &messages, Some(&spec), CALL_TOKENS)?;
            let prediction: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let mut record = json!({
                "sample": question.id, "category": category, "input": question.text, "prediction": prediction, "raw": text,
                "gold": accepted, "functions": question.functions.iter().map(|f| json!({"name": f.name, "parameters": f.parameters})).collect::<Vec<_>>(),
                "tokens_in": timings.prompt_tokens, "tokens_out": timings.generated_tokens,
                "ms": started.elapsed().as_millis() as u64,
            });
            record["score"] = score(&record);
            Ok(record)
        },
    )
}

/// The AST check of a record's prediction.
fn score(record: &Value) -> Value {
    let name = record["prediction"]["name"].as_str().unwrap_or_default();
    let arguments = record["prediction"]["arguments"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let accepted: Accepted = record["gold"].as_object().cloned().unwrap_or_default();
    let function = record["functions"].as_array().and_then(|fs| {
        fs.iter()
            .find(|f| f["name"] == name)
            .map(|f| super::bfcl::Function {
                name: name.to_string(),
                description: String::new(),
                parameters: f["parameters"].clone(),
            })
    });
    match check_call(name, &arguments, function.as_ref(), &accepted) {
        Ok(()) => json!({"correct": true}),
        Err(why) => json!({"correct": false, "why": why}),
    }
}

/// A record's verdict recomputed.
pub fn rescore(mut record: Value) -> Value {
    if record.get("gold").is_some() {
        record["score"] = score(&record);
    }
    record
}

/// Accuracy overall and per category.
pub fn summarise(records: &[Value]) -> Value {
    let correct = |r: &Value| r["score"]["correct"].as_bool().unwrap_or(false);
    let mut by_category: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for r in records {
        let entry = by_category
            .entry(r["category"].as_str().unwrap_or("?").to_string())
            .or_default();
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
        summary.insert(
            format!("accuracy_{category}"),
            json!(*ok as f64 / (*n).max(1) as f64),
        );
    }
    let mut ms: Vec<f64> = records
        .iter()
        .map(|r| r["ms"].as_f64().unwrap_or(0.0))
        .collect();
    ms.sort_by(f64::total_cmp);
    summary.insert("median_seconds".into(), json!(super::median(&ms) / 1000.0));
    Value::Object(summary)
}
