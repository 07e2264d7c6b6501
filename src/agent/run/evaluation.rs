//! Step evaluation: after a plan's steps ran, a model checks each calculator step by working it out again on
//! its own — it writes the expression the step is meant to compute, from the goal, the step's purpose and the
//! earlier results, without seeing the step's own expression — and the calculator evaluates it. A step whose
//! result differs from the check's is doubted, and the run goes back to the planner with both (once a run; see
//! the orchestrator's `judging`).
//!
//! The checks the orchestrator already makes (empty output, output off the tool's schema, a failed call) catch
//! steps that break; this one is for steps that run and give a wrong result: a sign flipped, an operand swapped,
//! a number the goal never gave.
//!
//! Why a recomputation and not a yes/no verdict: asked whether a call does what its step was meant to do, both
//! default models passed `84-15` for "add the 15 dollar tip to 84" when asked about all steps at once, and the
//! 1.5B, asked about one step at a time, said no to right and wrong calls alike, doubting most right goals
//! (docs/benchmarks.md, "Step evaluation"). Writing an expression is what the models do well; comparing numbers
//! is what code does well. Steps of other tools are not judged: there is nothing to recompute them with.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::model_call::timed_chat_call;
use crate::agent::run::joiner::{known_numbers, shown_output, unsupported_numbers, StepResult};
use crate::agent::usage::ModelUsage;
use crate::decode::constraint::ConstraintSpec;
use crate::decode::Model;
use crate::llm::ChatMessage;
use crate::tools::calculator::{evaluate as calculate, ARITHMETIC_PATTERN};
use crate::tools::Calculator;
use crate::Result;

/// The checker's instructions; the goal follows them.
const SYSTEM: &str = "You check one step of a plan by working it out yourself. Write the arithmetic expression \
that the step is meant to compute, using the numbers in the user's goal and the earlier results you are given. \
Write only numbers, operators (+ - * / ^ %) and parentheses.";

/// Relative difference under which two results are the same (the calculator's floats, written back and forth).
const SAME: f64 = 1e-6;

/// The check of one calculator step, as logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgment {
    /// Step id.
    pub step: String,
    /// Whether the step's result agrees with the check (or the check could not be worked out).
    pub ok: bool,
    /// The expression the checker wrote.
    pub check: String,
    /// What the check evaluates to, or why it cannot be evaluated.
    pub check_result: Value,
}

/// Whether a check can recompute the step: a calculator step with a numeric result (an equation's unknown is
/// left alone).
pub fn checkable(r: &StepResult) -> bool {
    checked_result(r).is_some()
}

/// The result a check is compared with, for a step it can recompute.
fn checked_result(r: &StepResult) -> Option<f64> {
    let expression = r.args.get("expression")?.as_str()?;
    if r.tool != Calculator::NAME || expression.contains('=') {
        return None;
    }
    r.output.get("result")?.as_f64()
}

/// The question about one step (`id`, what it is `meant` to do): the earlier results it may use and its purpose.
fn question(id: &str, meant: &str, earlier: &[StepResult]) -> String {
    let mut text = String::new();
    if !earlier.is_empty() {
        text.push_str("Earlier results:\n");
        for e in earlier {
            let what = if e.description.is_empty() { String::new() } else { format!(" ({})", e.description) };
            text.push_str(&format!("- {}{what}: {}\n", e.id, shown_output(&e.output)));
        }
    }
    let meant = if meant.is_empty() { format!("step {id}") } else { meant.to_string() };
    text.push_str(&format!("This step is meant to: {meant}.\nWrite its expression."));
    text
}

/// The numbers of a worked-out `expression` that is a bare number neither the goal nor an `earlier` result gives: a
/// value made up, not arithmetic worked out (a broken `$s2.text$ = 'Thursday'`, for "fix the day in invite.txt",
/// was worked out as `2`, which the plan's next step wrote over the user's file). Empty for an expression with an
/// operator, or a number the goal or a result gives.
pub fn invented_number(expression: &str, goal: &str, earlier: &[StepResult]) -> Vec<String> {
    let expression = expression.trim();
    if expression.parse::<f64>().is_err() {
        return Vec::new();
    }
    unsupported_numbers(expression, &known_numbers(goal, earlier))
}

/// Has `model` write the arithmetic expression of calculator step `id`, meant to do `meant`, from the goal and
/// the `earlier` results alone: the check of a finished step, and the executor's expression for a step whose
/// planned one broke on an earlier step's text.
pub fn work_out(
    model: &mut Model,
    goal: &str,
    id: &str,
    meant: &str,
    earlier: &[StepResult],
) -> Result<(String, ModelUsage)> {
    let grammar = ConstraintSpec::Regex(ARITHMETIC_PATTERN.into());
    // The goal sits in the system message: the steps of one goal share its computed opening (the prefix store).
    let messages = [
        ChatMessage::system(format!("{SYSTEM}\nThe user's goal: {goal}")),
        ChatMessage::user(question(id, meant, earlier)),
    ];
    let (text, usage) = timed_chat_call(model, "evaluation", &messages, Some(&grammar), 64)?;
    Ok((text.trim().to_string(), usage))
}

/// Checks each calculator step of `results` on `model`, one call each; returns the judgments in plan order and
/// what the calls cost together. Steps of other tools get no judgment.
pub fn evaluate(model: &mut Model, goal: &str, results: &[StepResult]) -> Result<(Vec<Judgment>, ModelUsage)> {
    let started = Instant::now();
    let mut usage = ModelUsage { tokens_in: 0, tokens_out: 0, ms: 0 };
    let mut judgments = Vec::new();
    for (i, r) in results.iter().enumerate() {
        let Some(result) = checked_result(r) else { continue };
        let (check, call) = work_out(model, goal, &r.id, &r.description, &results[..i])?;
        usage.tokens_in += call.tokens_in;
        usage.tokens_out += call.tokens_out;
        judgments.push(judge(r, result, &check));
    }
    usage.ms = started.elapsed().as_millis() as u64;
    Ok((judgments, usage))
}

/// Compares a step's result with the check's; a check that cannot be evaluated doubts nothing.
fn judge(r: &StepResult, result: f64, check: &str) -> Judgment {
    let (ok, check_result) = match calculate(check) {
        Ok(value) => {
            let value = value.as_f64();
            let same = (value - result).abs() <= SAME * value.abs().max(result.abs()).max(1.0);
            (same, serde_json::json!(value))
        }
        Err(e) => (true, Value::String(format!("cannot evaluate: {e}"))),
    };
    Judgment { step: r.id.clone(), ok, check: check.to_string(), check_result }
}

/// The planner's feedback when some step was doubted: each doubted step's call and result beside the check's.
/// `None` when no step was doubted.
pub fn doubts(judgments: &[Judgment], results: &[StepResult]) -> Option<String> {
    let lines: Vec<String> = judgments
        .iter()
        .filter(|j| !j.ok)
        .filter_map(|j| {
            let r = results.iter().find(|r| r.id == j.step)?;
            let meant =
                if r.description.is_empty() { String::new() } else { format!(" (meant to: {})", r.description) };
            Some(format!(
                "- {}{meant}: {} with {} gave {}, but working the step out again from the goal gives {} = {}",
                r.id,
                r.tool,
                r.args,
                shown_output(&r.output),
                j.check,
                j.check_result
            ))
        })
        .collect();
    (!lines.is_empty()).then(|| {
        format!(
            "Every step ran, but a check of the results disagrees with these steps:\n{}\nCheck each value and \
             operation against the goal's words, and write a corrected plan.",
            lines.join("\n")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(id: &str, expression: &str, result: f64) -> StepResult {
        StepResult {
            id: id.into(),
            tool: "calculator".into(),
            description: format!("step {id}'s purpose"),
            args: json!({"expression": expression}),
            output: json!({"result": result, "text": result.to_string()}),
        }
    }

    #[test]
    fn a_check_that_agrees_passes_and_one_that_differs_is_doubted_with_both_numbers() {
        let wrong = step("s1", "84-15", 69.0);
        assert!(judge(&wrong, 69.0, "84 - 15").ok);
        assert!(judge(&step("s2", "10/3", 10.0 / 3.0), 10.0 / 3.0, "10 / 3").ok, "the same float");
        let doubted = judge(&wrong, 69.0, "84+15");
        assert!(!doubted.ok);
        assert_eq!(doubted.check_result, json!(99.0));
        let feedback = doubts(&[doubted], &[wrong]).expect("a doubt");
        assert!(
            feedback.contains(r#"s1 (meant to: step s1's purpose): calculator with {"expression":"84-15"} gave"#),
            "{feedback}"
        );
        assert!(feedback.contains("gives 84+15 = 99"), "{feedback}");
    }

    #[test]
    fn a_bare_number_nothing_gives_is_made_up() {
        let earlier = [step("s1", "84+15", 99.0)];
        assert_eq!(invented_number(" 2 ", "Fix the day in invite.txt.", &earlier), ["2"]);
        assert!(invented_number("99", "Fix it.", &earlier).is_empty(), "an earlier result");
        assert!(invented_number("7", "Split 7 apples.", &[]).is_empty(), "the goal's");
        assert!(invented_number("99/4", "Fix it.", &earlier).is_empty(), "arithmetic is checked elsewhere");
    }

    #[test]
    fn a_check_that_cannot_be_evaluated_doubts_nothing() {
        let j = judge(&step("s1", "2+2", 4.0), 4.0, "(2+");
        assert!(j.ok);
        assert!(j.check_result.as_str().unwrap().starts_with("cannot evaluate"), "{j:?}");
        assert_eq!(doubts(&[j], &[step("s1", "2+2", 4.0)]), None);
    }

    #[test]
    fn only_calculator_steps_with_a_result_are_checked_and_the_check_never_sees_the_expression() {
        assert_eq!(checked_result(&step("s1", "2+2", 4.0)), Some(4.0));
        assert!(!checkable(&step("s1", "4*n - 9 = 27", 9.0)), "an equation");
        let mut text = step("s2", "x", 1.0);
        text.tool = "llm".into();
        assert!(!checkable(&text));
        let earlier = step("s1", "84+15", 99.0);
        let s2 = step("s2", "99/4", 24.75);
        let q = question(&s2.id, &s2.description, std::slice::from_ref(&earlier));
        assert!(
            q.contains("- s1 (step s1's purpose): ") && q.contains("This step is meant to: step s2's purpose."),
            "{q}"
        );
        assert!(!q.contains("99/4") && !q.contains("84+15"), "the check must work the step out on its own: {q}");
    }
}
