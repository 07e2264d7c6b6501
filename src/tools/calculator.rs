//! The `calculator` tool: arithmetic with exact integers ([`super::arithmetic`]), an equation in one unknown
//! ([`super::equation`]) or a system of linear equations ([`super::linear_system`]).

use serde_json::{json, Value};

use super::arithmetic::foreign_names;
pub use super::arithmetic::{evaluate, Number, ARITHMETIC_PATTERN};
use super::equation::{is_equation, solve};
use super::error::{ToolError, ToolResult};
use super::linear_system::{solve_system, split_equations};
use super::{Tool, ToolContext};

/// Evaluates `{"expression": "12*4+5"}` to `{"result": 53, "text": "53"}`. `text` is the exact decimal (it
/// matters for integers beyond 64 bits, which JSON numbers cannot hold exactly). An equation in one unknown adds
/// `unknown` (its name). A system (`x + y = 100; x - y = 20`) gives `{"result": 60, "values": {"x": 60, "y": 40},
/// "text": "x = 60, y = 40", "unknowns": ["x", "y"]}`: `result` stays a number (the first unknown's value, in
/// the order the equations name them), because the plan grammar admits references to a declared field only
/// (`$s1.result$`, never `$s1.result.y$`) and types them by its declared type; `text` names every value, which is
/// what the answer reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct Calculator;

impl Calculator {
    /// The tool's name in plans.
    pub const NAME: &'static str = "calculator";
}

impl Tool for Calculator {
    fn changes_things(&self) -> Option<bool> {
        Some(false)
    }
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        "Evaluate an arithmetic expression exactly (+ - * / // % ** parentheses, sqrt, min, max, round, ...), \
         solve an equation in one unknown (3*x + 7 = 34 gives 9), or solve linear equations in several unknowns \
         together, one equation per unknown separated by ';' (x + y = 100; x - y = 20 gives x = 60, y = 40)."
    }

    fn args_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. 12*4+5, or x + y = 100; x - y = 20", "minLength": 1, "maxLength": 200}},
            "required": ["expression"],
            "additionalProperties": false
        })
    }

    fn output_schema(&self) -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": {"result": {"type": "number"}, "text": {"type": "string"}},
            "required": ["result", "text"]
        }))
    }

    fn repeat_safe(&self, _args: &Value) -> bool {
        true
    }

    fn call(&self, args: &Value, _ctx: &ToolContext) -> ToolResult<Value> {
        let expression = args.get("expression").and_then(Value::as_str).ok_or_else(|| ToolError::InvalidArgs {
            tool: Self::NAME.into(),
            message: "'expression' must be a string".into(),
        })?;
        let calculation_error = |message: String| ToolError::Calculation {
            expression: expression.to_string(),
            message: with_names_advice(expression, message),
        };
        if is_equation(expression) {
            let equations = split_equations(expression);
            if equations.len() > 1 {
                let solved = solve_system(&equations).map_err(calculation_error)?;
                let text: Vec<String> = solved.iter().map(|(name, value)| format!("{name} = {value}")).collect();
                let values: serde_json::Map<String, Value> =
                    solved.iter().map(|(name, value)| (name.clone(), value.to_json())).collect();
                let unknowns: Vec<&str> = solved.iter().map(|(name, _)| name.as_str()).collect();
                return Ok(json!({"result": solved[0].1.to_json(), "values": values, "text": text.join(", "),
                                 "unknowns": unknowns}));
            }
            let (unknown, value) = solve(expression).map_err(calculation_error)?;
            return Ok(json!({"result": value.to_json(), "text": value.to_string(), "unknown": unknown}));
        }
        let value = match evaluate(expression) {
            Ok(value) => value,
            Err(error) => match lone_quantity(expression) {
                // A tool's result passed on with its unit (`+4.0h`, a time difference): the number is the value.
                Some((number, unit)) => {
                    let value = evaluate(number).map_err(calculation_error)?;
                    return Ok(json!({"result": value.to_json(), "text": value.to_string(), "unit": unit}));
                }
                None => return Err(calculation_error(error)),
            },
        };
        Ok(json!({"result": value.to_json(), "text": value.to_string()}))
    }
}

/// An error's message, with advice where the expression holds quotes or names that are neither a function, a
/// constant nor an equation's unknown (a plain expression's names; an equation's dotted names): a query or a table's
/// column written into the calculator (`max(orders.price)`, `SELECT * FROM customers`) fails on a character, and
/// the planner, told only "bad number '.'", wrote it again.
fn with_names_advice(expression: &str, message: String) -> String {
    let mut names = foreign_names(expression);
    if is_equation(expression) {
        names.retain(|name| name.contains('.'));
    }
    let quoted = expression.contains(['\'', '"']);
    if names.is_empty() && !quoted {
        return message;
    }
    let what = if names.is_empty() {
        "quoted text is not a number".to_string()
    } else {
        let listed: Vec<String> = names.iter().take(4).map(|n| format!("'{n}'")).collect();
        format!("{} {} a name, not a number", listed.join(", "), if names.len() == 1 { "is" } else { "are" })
    };
    format!(
        "{message}. {what}: the calculator computes only with numbers written out or taken from an earlier step's \
         result (a reference such as $s1.result$); values kept in a table, a list or a file come from the tool \
         that holds them, called first"
    )
}

/// A whole expression that is one signed number followed by a unit of letters (`+4.0h`, `-3 km`, `12.5kg`): the
/// number and the unit. Anything more (`3h + 20min`) is not one quantity, and its units cannot simply be dropped.
fn lone_quantity(expression: &str) -> Option<(&str, &str)> {
    let trimmed = expression.trim();
    let number_end = trimmed.trim_end_matches(|c: char| c.is_ascii_alphabetic()).len();
    let (number, unit) = trimmed.split_at(number_end);
    let number = number.trim_end();
    let digits = number.strip_prefix(['+', '-']).unwrap_or(number);
    let plain = !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
        && digits.chars().filter(|c| *c == '.').count() <= 1
        && digits.chars().any(|c| c.is_ascii_digit());
    // One letter is a unit only as a time, length, mass or volume symbol: `2x` is more likely an unknown.
    let unit_like = unit.len() > 1 && unit.len() <= 12 || matches!(unit, "h" | "m" | "s" | "g" | "l");
    (plain && unit_like).then_some((number, unit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_quantity_with_its_unit_evaluates_to_its_number_and_nothing_else_does() {
        let context = ToolContext::new(crate::tools::Workspace::new(std::env::temp_dir()).unwrap());
        let calc = |e: &str| Calculator.call(&json!({"expression": e}), &context);
        let out = calc("+4.0h").unwrap();
        assert_eq!((out["result"].as_f64(), out["unit"].as_str()), (Some(4.0), Some("h")), "{out}");
        assert_eq!(calc("-3 km").unwrap()["result"].as_f64(), Some(-3.0));
        assert!(calc("3h + 20min").is_err(), "two quantities: units are not dropped");
        assert!(calc("4.0.1h").is_err());
        assert!(calc("h").is_err());
        assert!(calc("2*x").is_err(), "an unknown is not a unit");
        assert!(calc("2x").is_err(), "nor is a one-letter name that no unit has");
        assert_eq!(calc("12*4+5").unwrap()["text"], "53");
    }

    fn error_of(expression: &str) -> String {
        let context = ToolContext::new(crate::tools::Workspace::new(std::env::temp_dir()).unwrap());
        Calculator.call(&json!({ "expression": expression }), &context).unwrap_err().to_string()
    }

    #[test]
    fn names_a_calculator_cannot_compute_with_are_named_in_its_error() {
        let error = error_of("max(orders.price)");
        assert!(error.contains("'orders.price' is a name, not a number") && error.contains("called first"), "{error}");
        let error = error_of("SELECT * FROM customers WHERE city = 'Leeds'");
        assert!(error.contains("quoted text") || error.contains("is a name"), "{error}");
        // Functions, constants and an equation's unknowns are the calculator's own: no advice.
        assert!(!error_of("sqrt(-1) + pi").contains("not a number"));
        assert!(!error_of("x + y = 10").contains("not a number"), "{}", error_of("x + y = 10"));
        assert_eq!(foreign_names("round(total_cost * 1.2, 2) + e"), ["total_cost"]);
    }

    #[test]
    fn every_listed_function_is_one_the_calculator_evaluates() {
        // `FUNCTIONS` lists what `arithmetic::function` evaluates; a name missing there would be "unknown".
        for name in super::super::arithmetic::FUNCTIONS {
            let one = evaluate(&format!("{name}(1)"));
            let two = evaluate(&format!("{name}(1, 1)"));
            assert!(one.is_ok() || two.is_ok(), "{name}: {one:?} {two:?}");
        }
        assert!(evaluate("nosuch(1)").unwrap_err().contains("unknown function"));
    }
}
