//! Running the NESTFUL suite: each sample's catalogue becomes a tool registry, the planner plans under the plan
//! grammar (or freely with `--no-grammar`), the plan becomes a call sequence and is scored against gold.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use super::{
    distractor_catalogue, load, plan_to_calls, retrieval_recall, score_sample, summarize, Call, Distractors,
    NestfulSample, NestfulTool, RecallAtK, SampleScore,
};
use crate::agent::model_call::chat_call;
use crate::agent::plan::pipeline::PlanPipeline;
use crate::agent::plan::planner::{read_written_plan, system_prompt};
use crate::agent::plan::search::step_keys;
use crate::agent::rules::RuleSet;
use crate::agent::{ModelSource, Plan};
use crate::bench::records::{run_samples, BenchRecorder};
use crate::llm::ChatMessage;
use crate::progress::Reporter;
use crate::settings::SuiteSettings;
use crate::tools::{DeclaredTool, ToolRegistry};
use crate::{Error, Result};

/// Token budget of one plan.
const PLAN_TOKENS: usize = 768;

/// The data directory: `--data`, else `../shared/data/<name>` beside the working directory or the crate.
pub fn data_dir(given: Option<&Path>, name: &str) -> Result<PathBuf> {
    if let Some(dir) = given {
        return Ok(dir.to_path_buf());
    }
    let candidates = [
        PathBuf::from("../shared/data").join(name),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data").join(name),
    ];
    candidates.iter().find(|d| d.is_dir()).cloned().ok_or_else(|| {
        Error::Bench(format!("no {name} data found at ../shared/data/{name}; give its directory with --data DIR"))
    })
}

/// `all` → the whole catalogue; `gold+K` → gold tools and K distractors.
pub fn parse_catalogue_option(text: &str) -> Result<Distractors> {
    if text == "all" {
        return Ok(Distractors::WholeCatalogue);
    }
    text.strip_prefix("gold+")
        .and_then(|k| k.parse().ok())
        .map(Distractors::Count)
        .ok_or_else(|| Error::Usage(format!("--tools takes 'all' or 'gold+K' (e.g. gold+5), not '{text}'")))
}

/// A registry of the catalogue's tools.
pub fn registry_of(tools: &[NestfulTool]) -> Result<ToolRegistry> {
    let mut registry = ToolRegistry::new();
    for tool in tools {
        let spec = tool.tool_spec();
        registry.register_arc(Arc::new(DeclaredTool {
            name: spec.name,
            description: spec.description,
            args_schema: spec.args_schema,
            output_schema: spec.output_schema,
        }))?;
    }
    Ok(registry)
}

/// The first JSON value in free text (models wrap JSON in prose or code fences without a grammar).
fn first_json(text: &str) -> Option<Value> {
    let start = text.find('{')?;
    serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>().next()?.ok()
}

/// Tool retrieval's gold-tool recall at each K over the data's `--tools` catalogues (the first `--limit` samples).
pub fn recall(args: &SuiteSettings, ks: &[usize], reporter: &dyn Reporter) -> Result<Vec<RecallAtK>> {
    let dir = data_dir(args.data.as_deref(), "nestful")?;
    let data = load(&dir).map_err(|e| Error::Bench(e.to_string()))?;
    for issue in data.skipped.iter().chain(&data.warnings) {
        reporter.message(&format!("data: {issue}"));
    }
    let distractors = parse_catalogue_option(&args.tools)?;
    let samples: Vec<NestfulSample> = data.samples.into_iter().take(args.limit.unwrap_or(usize::MAX)).collect();
    retrieval_recall(&samples, &data.tools, distractors, args.seed, ks).map_err(|e| Error::Bench(e.to_string()))
}

/// Runs the suite; returns every record.
pub fn run(
    args: &SuiteSettings,
    recorder: &mut BenchRecorder,
    reporter: &dyn Reporter,
    models: &mut dyn ModelSource,
) -> Result<Vec<Value>> {
    let dir = data_dir(args.data.as_deref(), "nestful")?;
    let data = load(&dir).map_err(|e| Error::Bench(e.to_string()))?;
    for issue in data.skipped.iter().chain(&data.warnings) {
        reporter.message(&format!("data: {issue}"));
    }
    let distractors = parse_catalogue_option(&args.tools)?;
    let chosen: Vec<(Value, _)> =
        data.samples.into_iter().take(args.limit.unwrap_or(usize::MAX)).map(|s| (json!(s.index), s)).collect();
    let tools = data.tools;
    run_samples(&chosen, recorder, reporter, "nestful", |sample| {
        let catalogue =
            distractor_catalogue(sample, &tools, distractors, args.seed).map_err(|e| Error::Bench(e.to_string()))?;
        let names: Vec<String> = catalogue.iter().map(|t| t.name.clone()).collect();
        let started = Instant::now();
        let mut base = json!({"sample": sample.index, "input": sample.input, "catalogue": names,
                              "grammar": !args.no_grammar, "gold": sample.calls});
        if args.tools_top_k > 0 {
            base["tools_top_k"] = json!(args.tools_top_k);
        }
        let mut record = match plan_sample(sample, &catalogue, args, models) {
            Ok(planned) => planned,
            // A sample the planner fails on scores as an empty prediction: it counts, it is not dropped.
            Err(e) => json!({"prediction": Value::Null, "valid_plan": false, "error": e.to_string(),
                             "score": score_sample(&sample.calls, &[])}),
        };
        merge(&mut record, base);
        record["ms"] = json!(started.elapsed().as_millis() as u64);
        Ok(record)
    })
}

fn merge(record: &mut Value, extra: Value) {
    if let (Some(target), Value::Object(fields)) = (record.as_object_mut(), extra) {
        target.extend(fields);
    }
}

/// Plans one sample and scores it.
fn plan_sample(
    sample: &NestfulSample,
    catalogue: &[NestfulTool],
    args: &SuiteSettings,
    models: &mut dyn ModelSource,
) -> Result<Value> {
    let (no_grammar, top_k) = (args.no_grammar, args.tools_top_k);
    let rules = RuleSet::from_log(args.pair.mend, &args.pair.rules_off);
    let registry = registry_of(catalogue)?;
    // The planner sees what a run would show it: with --tools-top-k only the tools retrieval picks. The plan is
    // still checked against all.
    let pipeline = PlanPipeline::new(&sample.input, &registry, top_k, rules)?;
    let planning = pipeline.shown();
    let model = models.planner()?;
    let (mut search, mut candidates, mut mended) = (None, Vec::new(), Vec::new());
    let (plan, text, usage) = if no_grammar {
        let messages = [ChatMessage::system(system_prompt(planning)?), ChatMessage::user(&sample.input)];
        let (text, timings) = chat_call(model, "planner", &messages, None, PLAN_TOKENS)?;
        let plan = first_json(&text).and_then(|v| serde_json::from_value::<Plan>(v).ok());
        (plan, text, timings)
    } else {
        let outcome = pipeline.write(model, &sample.input, &[], PLAN_TOKENS, args.pair.plans)?;
        search = outcome.search;
        mended = outcome.mended;
        // Each candidate scored as if kept, so that selection rules can be compared on the same candidates.
        candidates = outcome
            .candidates
            .iter()
            .map(|plan| match plan {
                Some(plan) => json!({"valid": plan.validate(&registry).is_empty(), "steps": step_keys(plan),
                                     "score": score_sample(&sample.calls, &plan_to_calls(plan))}),
                None => Value::Null,
            })
            .collect();
        (Some(outcome.plan), outcome.text, outcome.timings)
    };
    let retrieved = pipeline.selected().map(<[String]>::to_vec);
    let valid = plan.as_ref().is_some_and(|p| p.validate(&registry).is_empty());
    let predicted: Vec<Call> = plan.as_ref().map(plan_to_calls).unwrap_or_default();
    Ok(json!({
        "prediction": plan.as_ref().map(|_| &predicted),
        "raw": text,
        "valid_plan": valid,
        "score": score_sample(&sample.calls, &predicted),
        "tokens_in": usage.prompt_tokens,
        "tokens_out": usage.generated_tokens,
        "planner_timings": usage,
        "retrieved": retrieved,
        "search": search,
        "candidates": candidates,
        "mended": mended,
        "mend": rules.mend(),
        "rules_off": rules.off_names(),
    }))
}

/// A record's plan read again from the planner's own text (`raw`) through today's plan mends of `rules` (`bench
/// rescore --mend` defaults to `nestful`, which every NESTFUL run before the profiles used), then scored: what
/// the mends make of the same plans, without the model (`bench rescore --mend`; the planner is greedy, so a new
/// run would write the same text). `tools` is the NESTFUL catalogue; the record's `catalogue` names the tools the
/// plan was written for. A record with no plan text to read (an error, a run without the grammar) is only
/// rescored.
pub fn remend(mut record: Value, tools: &[NestfulTool], rules: RuleSet) -> Value {
    if record["grammar"] == json!(false) {
        return rescore(record);
    }
    let names: Vec<&str> = record["catalogue"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let catalogue: Vec<NestfulTool> = tools.iter().filter(|t| names.contains(&t.name.as_str())).cloned().collect();
    let goal = record["input"].as_str().unwrap_or_default();
    let read = match (record["raw"].as_str(), registry_of(&catalogue)) {
        (Some(raw), Ok(registry)) => read_written_plan(raw, goal, "", &registry, rules).ok(),
        _ => None,
    };
    let Some((plan, mended, issues)) = read else { return rescore(record) };
    record["valid_plan"] = json!(issues.is_empty());
    record["prediction"] = json!(plan_to_calls(&plan));
    record["mended"] = json!(mended.lines);
    record["mend"] = json!(rules.mend());
    record["rules_off"] = json!(rules.off_names());
    rescore(record)
}

/// A record's score recomputed from its prediction and gold.
pub fn rescore(mut record: Value) -> Value {
    let calls = |v: &Value| serde_json::from_value::<Vec<Call>>(v.clone()).unwrap_or_default();
    let score = score_sample(&calls(&record["gold"]), &calls(&record["prediction"]));
    record["score"] = json!(score);
    record
}

/// The four NESTFUL metrics, the plan-validity rate and timing over records (a record without a score counts as
/// an empty prediction).
pub fn summarise(records: &[Value]) -> Value {
    let scores: Vec<SampleScore> = records
        .iter()
        .map(|r| serde_json::from_value(r["score"].clone()).unwrap_or_else(|_| score_sample(&gold_of(r), &[])))
        .collect();
    let m = summarize(&scores);
    let n = records.len().max(1) as f64;
    let valid = records.iter().filter(|r| r["valid_plan"].as_bool().unwrap_or(false)).count() as f64;
    let mut ms: Vec<f64> = records.iter().map(|r| r["ms"].as_f64().unwrap_or(0.0)).collect();
    ms.sort_by(f64::total_cmp);
    json!({
        "samples": records.len(),
        "f1_functions": m.functions.f1,
        "f1_params": m.parameters.f1,
        "partial_sequence_accuracy": m.partial_sequence_accuracy,
        "full_sequence_accuracy": m.full_sequence_accuracy,
        "valid_plan_rate": valid / n,
        "errors": records.iter().filter(|r| r.get("error").is_some()).count(),
        "median_seconds": crate::bench::median(&ms) / 1000.0,
    })
}

fn gold_of(record: &Value) -> Vec<Call> {
    serde_json::from_value(record["gold"].clone()).unwrap_or_default()
}
