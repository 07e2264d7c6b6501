//! Plan search: the planner writes several candidate plans for one goal (the first greedy, the others sampled,
//! decoded side by side from one prefill), and the valid plan that shares the most calls with the others is kept
//! (self-consistency over the plans' calls).
//!
//! Agreement is judged on the calls, not on executed results: a plan's steps may write files or send messages,
//! and running several candidates would do that several times.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::plan::Plan;
use crate::decode::Sampling;

/// Temperature of the sampled candidates: enough to vary a small planner's argument values and references
/// without leaving its most likely plans.
pub const TEMPERATURE: f64 = 0.7;
/// Nucleus of the sampled candidates.
pub const TOP_P: f64 = 0.95;

/// What one search saw, kept in the plan's log event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchReport {
    /// Candidates written.
    pub candidates: usize,
    /// Candidates that parsed and validated.
    pub valid: usize,
    /// Valid candidates with the same calls as the chosen one (itself included).
    pub agreeing: usize,
    /// The chosen candidate (0 is the greedy one).
    pub chosen: usize,
}

/// Token choice and seed of each of `n` candidates: the first greedy (what a search of one writes), the others
/// sampled with seeds 1, 2, …
pub fn samplings(n: usize) -> Vec<(Sampling, u64)> {
    (0..n.max(1))
        .map(|i| match i {
            0 => (Sampling::Greedy, 0),
            _ => (Sampling::Random { temperature: TEMPERATURE, top_k: None, top_p: Some(TOP_P) }, i as u64),
        })
        .collect()
}

/// The candidate to keep, from each candidate's plan if it parsed and whether it validated: the valid plan that
/// shares the most calls with the other valid plans (each pair counts the calls, in [`step_keys`]' form, that both
/// make), ties to the earliest candidate, the greedy one first. Where plans agree whole this is majority voting;
/// where all differ it is the plan closest to the others, not a lone outlier. Without a valid plan, the first
/// plan that parsed (its problems go to replanning). `None` when no candidate parsed.
pub fn choose(candidates: &[Option<(&Plan, bool)>]) -> Option<SearchReport> {
    let valid: Vec<(usize, Vec<String>)> = candidates
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.filter(|(_, ok)| *ok).map(|(plan, _)| (i, step_keys(plan))))
        .collect();
    let shared = |a: &[String], b: &[String]| {
        let mut rest: Vec<&String> = b.iter().collect();
        a.iter().filter(|key| rest.iter().position(|k| k == key).map(|at| rest.swap_remove(at)).is_some()).count()
    };
    let mut best: Option<(usize, usize, usize)> = None; // (candidate, shared calls, identical plans)
    for (i, keys) in &valid {
        let others = valid.iter().filter(|(j, _)| j != i);
        let score = others.clone().map(|(_, other)| shared(keys, other)).sum::<usize>();
        let identical = 1 + others.filter(|(_, other)| other == keys).count();
        if best.is_none_or(|(_, top, _)| score > top) {
            best = Some((*i, score, identical));
        }
    }
    let (chosen, agreeing) = match best {
        Some((i, _, identical)) => (i, identical),
        None => (candidates.iter().position(Option::is_some)?, 0),
    };
    Some(SearchReport { candidates: candidates.len(), valid: valid.len(), agreeing, chosen })
}

/// A plan's calls in a form equal for plans that do the same: one string per step, each the step's tool,
/// arguments (object keys sorted) and dependencies, with step ids replaced by their positions; descriptions left
/// out.
pub fn step_keys(plan: &Plan) -> Vec<String> {
    let ids: Vec<(&str, usize)> = plan.steps.iter().enumerate().map(|(i, s)| (s.id.as_str(), i)).collect();
    let position = |id: &str| ids.iter().find(|(known, _)| *known == id).map(|&(_, i)| i);
    plan.steps
        .iter()
        .map(|step| {
            let mut deps: Vec<Option<usize>> = step.dependencies().iter().map(|d| position(d)).collect();
            deps.sort_unstable();
            deps.dedup();
            let args = Value::Object(step.args.clone());
            serde_json::json!([step.tool, canonical(&args, &ids), deps]).to_string()
        })
        .collect()
}

/// `value` with object keys sorted and step references rewritten to step positions (`$s2.x$` → `$#1.x$`).
fn canonical(value: &Value, ids: &[(&str, usize)]) -> Value {
    match value {
        Value::String(text) => {
            let mut text = text.clone();
            for (id, i) in ids {
                text = text
                    .replace(&format!("${id}."), &format!("$#{i}."))
                    .replace(&format!("${id}$"), &format!("$#{i}$"));
            }
            Value::String(text)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| canonical(v, ids)).collect()),
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            // serde_json keeps insertion order here, so inserting in sorted order sorts the text.
            Value::Object(keys.into_iter().map(|k| (k.clone(), canonical(&fields[k], ids))).collect())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(json: &str) -> Plan {
        Plan::from_json(json).expect("test plan parses")
    }

    fn calls_key(plan: &Plan) -> String {
        step_keys(plan).join("\n")
    }

    #[test]
    fn plans_with_the_same_calls_agree_whatever_their_ids_key_order_and_descriptions() {
        let a = plan(
            r#"{"steps":[{"id":"s1","description":"add","tool":"calculator","args":{"expression":"2+3"}},
               {"id":"s2","tool":"convert","args":{"value":"$s1.result$","unit":"km"}}]}"#,
        );
        let b = plan(
            r#"{"steps":[{"id":"a","description":"sum first","tool":"calculator","args":{"expression":"2+3"}},
               {"id":"b","tool":"convert","args":{"unit":"km","value":"$a.result$"},"depends_on":["a"]}]}"#,
        );
        assert_eq!(calls_key(&a), calls_key(&b));
        let c = plan(
            r#"{"steps":[{"id":"s1","tool":"calculator","args":{"expression":"2+3"}},
               {"id":"s2","tool":"convert","args":{"value":"$s1.result$","unit":"mi"}}]}"#,
        );
        assert_ne!(calls_key(&a), calls_key(&c));
    }

    #[test]
    fn references_to_ids_that_share_a_start_stay_apart() {
        let steps: Vec<String> = (1..=12)
            .map(|i| format!(r#"{{"id":"s{i}","tool":"t","args":{{"x":"$s{}.r$"}}}}"#, if i == 12 { 1 } else { i - 1 }))
            .collect();
        let mut other = steps.clone();
        other[11] = r#"{"id":"s12","tool":"t","args":{"x":"$s11.r$"}}"#.into();
        let key = calls_key(&plan(&format!(r#"{{"steps":[{}]}}"#, steps.join(","))));
        let other_key = calls_key(&plan(&format!(r#"{{"steps":[{}]}}"#, other.join(","))));
        assert!(key.contains("$#0.r$"), "{key}");
        assert_ne!(key, other_key);
    }

    #[test]
    fn the_plan_closest_to_the_others_wins_over_a_lone_greedy_outlier() {
        let step = |n: u32| format!(r#"{{"id":"s{n}","tool":"calculator","args":{{"expression":"{n}+{n}"}}}}"#);
        let plan_of = |steps: &[String]| plan(&format!(r#"{{"steps":[{}]}}"#, steps.join(",")));
        let (s1, s2, s3, s4) = (step(1), step(2), step(3), step(4));
        let odd = r#"{"id":"s2","tool":"calculator","args":{"expression":"9"}}"#.to_string();
        let other = r#"{"id":"s3","tool":"calculator","args":{"expression":"7"}}"#.to_string();
        // Greedy shares one call with each sampled plan; the sampled two share three calls with each other: all
        // differ, and the second is closest to the rest.
        let greedy = plan_of(&[s1.clone(), odd.clone(), other.clone()]);
        let b = plan_of(&[s1.clone(), s2.clone(), s3.clone()]);
        let c = plan_of(&[s1.clone(), s2.clone(), s3.clone(), s4.clone()]);
        let report = choose(&[Some((&greedy, true)), Some((&b, true)), Some((&c, true))]).unwrap();
        assert_eq!(report, SearchReport { candidates: 3, valid: 3, agreeing: 1, chosen: 1 });
    }

    #[test]
    fn the_largest_valid_group_wins_and_ties_go_to_the_earliest() {
        let x = plan(r#"{"steps":[{"id":"s1","tool":"calculator","args":{"expression":"1+1"}}]}"#);
        let y = plan(r#"{"steps":[{"id":"s1","tool":"calculator","args":{"expression":"2+2"}}]}"#);
        // Greedy x, then y twice: the majority wins over the greedy candidate.
        let report = choose(&[Some((&x, true)), Some((&y, true)), None, Some((&y, true))]).unwrap();
        assert_eq!(report, SearchReport { candidates: 4, valid: 3, agreeing: 2, chosen: 1 });
        // One each: the greedy one.
        let report = choose(&[Some((&x, true)), Some((&y, true))]).unwrap();
        assert_eq!((report.chosen, report.agreeing), (0, 1));
        // An invalid plan never counts, however many agree with it.
        let report = choose(&[Some((&y, false)), Some((&y, false)), Some((&x, true))]).unwrap();
        assert_eq!((report.chosen, report.valid, report.agreeing), (2, 1, 1));
    }

    #[test]
    fn without_a_valid_plan_the_first_that_parsed_is_kept_and_without_any_none() {
        let x = plan(r#"{"steps":[{"id":"s1","tool":"nope","args":{}}]}"#);
        let report = choose(&[None, Some((&x, false))]).unwrap();
        assert_eq!(report, SearchReport { candidates: 2, valid: 0, agreeing: 0, chosen: 1 });
        assert_eq!(choose(&[None, None]), None);
    }

    #[test]
    fn the_first_candidate_is_greedy_and_the_others_sampled_with_their_own_seeds() {
        let s = samplings(3);
        assert_eq!(s[0], (Sampling::Greedy, 0));
        assert!(matches!(s[1].0, Sampling::Random { .. }));
        assert_ne!(s[1].1, s[2].1);
        assert_eq!(samplings(0).len(), 1);
    }
}
