//! Equations in one unknown for the `calculator` tool: `3*x + 7 = 34` gives 9.
//!
//! Why the calculator solves them: planners write the goal's equation as the calculator's expression ("the sum of
//! two consecutive integers is 41" becomes `x + (x + 1) = 41`), and an unknown name used to fail the step and send
//! the goal back to a planner that wrote the same again. Solving it is what the step asked for.
//!
//! A linear equation (the sides' difference changes by the same amount per unit of the unknown) is solved exactly:
//! integers stay integers, `x = -f(0) / slope` with the calculator's own division. Anything else is solved
//! numerically (Newton's method from a few starting points, checked by putting the root back in), and a result
//! within rounding of an integer is that integer.

use super::arithmetic::{binary, evaluate_tokens, tokenize, Number, Token, MAX_LEN};

/// Starting points for Newton's method on an equation that is not linear.
const STARTS: [f64; 7] = [1.0, 0.0, -1.0, 10.0, -10.0, 100.0, 1000.0];

/// Newton steps from one starting point.
const NEWTON_STEPS: usize = 100;

/// Whether `text` is an equation (it has an `=`), which `solve` takes rather than `evaluate`.
pub fn is_equation(text: &str) -> bool {
    text.contains('=')
}

/// The unknowns of `equation` (names that are neither functions nor constants), in order of first use; `None`
/// where it is not one equation of two sides.
pub fn unknowns_of(equation: &str) -> Option<Vec<String>> {
    let (left, right) = sides(equation).ok()?;
    Some(unknown_names(&[&left, &right]))
}

/// Solves `equation` for its one unknown; returns the unknown's name and value, or a sentence saying why not.
pub fn solve(equation: &str) -> Result<(String, Number), String> {
    if equation.chars().count() > MAX_LEN {
        return Err(format!("the equation is longer than {MAX_LEN} characters"));
    }
    let (left, right) = sides(equation)?;
    let name = unknown_name([&left, &right])?;
    let difference = |value: Number| -> Result<Number, String> {
        let at = |tokens: &[Token]| evaluate_tokens(tokens, Some(&[(name.as_str(), value)][..]));
        binary("-", at(&left)?, at(&right)?)
    };
    let value = match linear(&difference)? {
        Some(value) => value,
        None => newton(&difference)?,
    };
    Ok((name, integral(value)))
}

/// The one name on either side that is neither a function (followed by `(`) nor a constant.
fn unknown_name(sides: [&[Token]; 2]) -> Result<String, String> {
    let names = unknown_names(&sides);
    match names.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err("the equation has no unknown to solve for (write it as a name, e.g. 3*x + 7 = 34)".into()),
        many => Err(format!(
            "the equation has several unknowns ({}): underdetermined: 1 equation, {} unknowns; give one equation \
             per unknown, separated by ';' (x + y = 100; x - y = 20)",
            many.join(", "),
            many.len()
        )),
    }
}

/// The names in `sides` that are neither functions (followed by `(`) nor constants, in order of first use.
pub(super) fn unknown_names(sides: &[&[Token]]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for side in sides {
        for (i, token) in side.iter().enumerate() {
            let Token::Ident(name) = token else { continue };
            let called = side.get(i + 1) == Some(&Token::LParen);
            if called || name == "pi" || name == "e" || names.contains(name) {
                continue;
            }
            names.push(name.clone());
        }
    }
    names
}

/// An equation's two sides, tokenized: `==` is read as `=` (models write both).
pub(super) fn sides(equation: &str) -> Result<(Vec<Token>, Vec<Token>), String> {
    let normalized = equation.replace("==", "=");
    let sides: Vec<&str> = normalized.split('=').collect();
    let [left, right] = sides.as_slice() else {
        return Err(format!("an equation has one '=' between two sides; this one has {}", sides.len() - 1));
    };
    let (left, right) = (tokenize(left)?, tokenize(right)?);
    if left.is_empty() || right.is_empty() {
        return Err("an equation needs an expression on each side of '='".into());
    }
    Ok((left, right))
}

/// The solution when the sides' difference is linear in the unknown (checked at four points), exact where the
/// coefficients are integers; None when it is not linear.
fn linear(difference: &impl Fn(Number) -> Result<Number, String>) -> Result<Option<Number>, String> {
    // Points where the difference is defined (`1/x = 2` is not at 0): the first three in a row that are.
    let mut first_error = None;
    for start in [0i128, 1, 2, 3, 7] {
        let points = [start, start + 1, start + 2, start + 10];
        let values: Result<Vec<Number>, String> = points.iter().map(|&p| difference(Number::Int(p))).collect();
        let values = match values {
            Ok(values) => values,
            Err(e) => {
                first_error.get_or_insert(e);
                continue;
            }
        };
        let slope = binary("-", values[1], values[0])?;
        let same_slope = close(binary("-", values[2], values[1])?, slope);
        let far = binary("+", values[0], binary("*", slope, Number::Int(10))?)?;
        if !(same_slope && close(values[3], far)) {
            return Ok(None);
        }
        if is_zero(slope) {
            return Err(if is_zero(values[0]) {
                "every value of the unknown solves this equation: the sides are the same".into()
            } else {
                "no value of the unknown solves this equation: it cancels out and the sides still differ".into()
            });
        }
        // f(x) = f(start) + slope·(x − start) = 0.
        let step = binary("/", values[0], slope)?;
        return binary("-", Number::Int(start), step).map(Some);
    }
    Err(first_error.unwrap_or_else(|| "the equation could not be evaluated".into()))
}

/// A root by Newton's method with a numeric derivative, from the first starting point that converges.
fn newton(difference: &impl Fn(Number) -> Result<Number, String>) -> Result<Number, String> {
    let f = |x: f64| difference(Number::Float(x)).ok().map(|v| v.as_f64());
    for start in STARTS {
        let mut x = start;
        for _ in 0..NEWTON_STEPS {
            let Some(y) = f(x) else { break };
            if y == 0.0 {
                break;
            }
            let h = 1e-7 * x.abs().max(1.0);
            let Some(slope) = f(x + h).map(|y2| (y2 - y) / h) else { break };
            if slope == 0.0 || !slope.is_finite() {
                break;
            }
            let next = x - y / slope;
            if !next.is_finite() {
                break;
            }
            let settled = (next - x).abs() <= 1e-12 * next.abs().max(1.0);
            x = next;
            if settled {
                break;
            }
        }
        // Put the root back in: the difference must vanish relative to the sides' size.
        if let Some(y) = f(x) {
            if y.abs() <= 1e-9 * x.abs().max(1.0) {
                return Ok(Number::Float(x));
            }
        }
    }
    Err("no solution found: the equation is not linear and Newton's method did not settle on a root".into())
}

/// `value` as an integer when it is one up to rounding (a float root such as 49.99999999999 is 50).
pub(super) fn integral(value: Number) -> Number {
    match value {
        Number::Float(x) => {
            let rounded = x.round();
            if (x - rounded).abs() <= 1e-9 * x.abs().max(1.0) && rounded.abs() < 1e18 {
                Number::Int(rounded as i128)
            } else {
                value
            }
        }
        int => int,
    }
}

/// Equal up to float rounding (exactly, for integers).
pub(super) fn close(a: Number, b: Number) -> bool {
    match (a, b) {
        (Number::Int(a), Number::Int(b)) => a == b,
        _ => {
            let (a, b) = (a.as_f64(), b.as_f64());
            (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
        }
    }
}

fn is_zero(value: Number) -> bool {
    close(value, Number::Int(0))
}
