//! Systems of linear equations for the `calculator` tool: `x + y = 100; x - y = 20` gives x = 60, y = 40.
//!
//! Why the calculator solves them: a goal that splits an amount ("Ann and Ben share 100 dollars; Ann gets 20 more
//! than Ben") has two unknowns, and one equation in two unknowns has no single answer. The expression holds the
//! goal's equations separated by `;` or a line break (or by `,` outside parentheses, where every piece is an
//! equation); each is read as the one-unknown solver reads one (`3x`, `==`), and the unknowns are the names that
//! are neither functions nor constants, in order of first use.
//!
//! Each equation must be linear: its sides' difference `f` is read as `c + Σ aᵢ·xᵢ` from its values at the origin
//! and the unit points, and checked at three more points, so a product, power or function of an unknown is an
//! error. The system is solved by Gaussian elimination with partial pivoting in the calculator's own arithmetic:
//! integer coefficients stay exact as long as the divisions are, and a value within rounding of an integer is that
//! integer. A system with no solution is "inconsistent", one with infinitely many "underdetermined"; both say so.

use super::arithmetic::{binary, evaluate_tokens, Number, Token, MAX_LEN};
use super::equation::{close, integral, sides, unknown_names};

/// Most equations (and unknowns) in one system: more is not a goal's arithmetic but a model's runaway text.
pub const MAX_EQUATIONS: usize = 6;

/// Points the linearity of each equation is checked at (each cut to the number of unknowns).
const PROBES: [[i128; MAX_EQUATIONS]; 3] = [[2, 3, 5, 7, 11, 13], [-3, 4, -1, 6, -5, 2], [10, -7, 3, -2, 8, 5]];

/// The equations in `text`: pieces separated by `;` or a line break, and a piece split further at its commas
/// outside parentheses where every part is an equation (so `min(x, 3) = 2` and `x + y = 1,000` stay whole).
/// Empty pieces are dropped.
pub fn split_equations(text: &str) -> Vec<&str> {
    let mut equations = Vec::new();
    for piece in text.split([';', '\n']).map(str::trim).filter(|p| !p.is_empty()) {
        let parts = split_top_level_commas(piece);
        if parts.len() > 1 && parts.iter().all(|p| p.contains('=')) {
            equations.extend(parts);
        } else {
            equations.push(piece);
        }
    }
    equations
}

/// `text` split at the commas outside parentheses, each part trimmed, empty parts dropped.
fn split_top_level_commas(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    parts.retain(|p| !p.is_empty());
    parts
}

/// Solves the linear system `equations` for its unknowns; returns each unknown's name and value in order of first
/// use, or a sentence saying why not.
pub fn solve_system(equations: &[&str]) -> Result<Vec<(String, Number)>, String> {
    let m = equations.len();
    if m > MAX_EQUATIONS {
        return Err(format!("the system has {m} equations; at most {MAX_EQUATIONS} are solved together"));
    }
    if equations.iter().map(|e| e.chars().count()).sum::<usize>() > MAX_LEN {
        return Err(format!("the equations are longer than {MAX_LEN} characters"));
    }
    let at = |i: usize, message: String| format!("equation {} ({}): {message}", i + 1, equations[i].trim());
    let parsed = equations
        .iter()
        .enumerate()
        .map(|(i, e)| sides(e).map_err(|message| at(i, message)))
        .collect::<Result<Vec<_>, String>>()?;
    let all_sides: Vec<&[Token]> = parsed.iter().flat_map(|(l, r)| [l.as_slice(), r.as_slice()]).collect();
    let names = unknown_names(&all_sides);
    let n = names.len();
    if n == 0 {
        return Err("the equations have no unknown to solve for (write them as names, e.g. x + y = 100)".into());
    }
    if n > MAX_EQUATIONS {
        return Err(format!("the system has {n} unknowns; at most {MAX_EQUATIONS} are solved together"));
    }
    if m < n {
        return Err(format!(
            "underdetermined: {m} equation{}, {n} unknowns ({}); one equation per unknown gives one answer",
            if m == 1 { "" } else { "s" },
            names.join(", ")
        ));
    }
    let mut rows = Vec::with_capacity(m);
    for (i, (left, right)) in parsed.iter().enumerate() {
        let difference = |point: &[Number]| -> Result<Number, String> {
            let bound: Vec<(&str, Number)> = names.iter().map(String::as_str).zip(point.iter().copied()).collect();
            binary("-", evaluate_tokens(left, Some(&bound))?, evaluate_tokens(right, Some(&bound))?)
        };
        rows.push(linear_row(&difference, n).map_err(|message| at(i, message))?);
    }
    let values = eliminate(rows, &names)?;
    Ok(names.into_iter().zip(values.into_iter().map(integral)).collect())
}

/// One equation as coefficients and right-hand side (`a·x = b`), read from its sides' difference `f`: `b = −f(0)`,
/// `aⱼ = f(eⱼ) − f(0)`; an error where `f` is not that linear function at every probe point.
fn linear_row(f: &impl Fn(&[Number]) -> Result<Number, String>, n: usize) -> Result<(Vec<Number>, Number), String> {
    let not_linear = |why: String| {
        format!(
            "it is not linear in the unknowns ({why}); only equations that add numbers times unknowns are solved \
             together"
        )
    };
    let zero = vec![Number::Int(0); n];
    let constant = f(&zero).map_err(|e| not_linear(format!("at 0 for every unknown: {e}")))?;
    let mut coefficients = Vec::with_capacity(n);
    for j in 0..n {
        let mut unit = zero.clone();
        unit[j] = Number::Int(1);
        let value = f(&unit).map_err(|e| not_linear(e.to_string()))?;
        coefficients.push(binary("-", value, constant)?);
    }
    for probe in PROBES {
        let point: Vec<Number> = probe[..n].iter().map(|&v| Number::Int(v)).collect();
        let value = f(&point).map_err(|e| not_linear(e.to_string()))?;
        let mut expected = constant;
        for (a, x) in coefficients.iter().zip(&point) {
            expected = binary("+", expected, binary("*", *a, *x)?)?;
        }
        if !close(value, expected) {
            return Err(not_linear("a product, power or function of an unknown".into()));
        }
    }
    Ok((coefficients, binary("-", Number::Int(0), constant)?))
}

/// Gauss–Jordan elimination with partial pivoting (the largest remaining coefficient of each column is the
/// pivot) on `rows` (`a·x = b`); the unknowns' values, or why there is no single solution.
fn eliminate(mut rows: Vec<(Vec<Number>, Number)>, names: &[String]) -> Result<Vec<Number>, String> {
    let (m, n) = (rows.len(), names.len());
    // What counts as zero: exactly 0 for integers, a rounding error relative to the system's size for floats.
    let scale = rows.iter().flat_map(|(a, b)| a.iter().chain([b])).map(|v| v.as_f64().abs()).fold(0.0, f64::max);
    let is_zero = |v: Number| match v {
        Number::Int(i) => i == 0,
        Number::Float(x) => x.abs() <= 1e-9 * scale.max(f64::MIN_POSITIVE),
    };
    let mut pivots = Vec::with_capacity(n);
    for column in 0..n {
        let rank = pivots.len();
        let magnitude = |r: usize| rows[r].0[column].as_f64().abs();
        let Some(best) = (rank..m).max_by(|&a, &b| magnitude(a).total_cmp(&magnitude(b))) else { break };
        if is_zero(rows[best].0[column]) {
            continue;
        }
        rows.swap(rank, best);
        let (pivot_row, pivot_b) = rows[rank].clone();
        for (r, (a, b)) in rows.iter_mut().enumerate() {
            if r == rank || is_zero(a[column]) {
                continue;
            }
            let factor = binary("/", a[column], pivot_row[column])?;
            for k in column..n {
                a[k] = binary("-", a[k], binary("*", factor, pivot_row[k])?)?;
            }
            *b = binary("-", *b, binary("*", factor, pivot_b)?)?;
            a[column] = Number::Int(0);
        }
        pivots.push(column);
    }
    let rank = pivots.len();
    if rows[rank..].iter().any(|(_, b)| !is_zero(*b)) {
        return Err(format!(
            "inconsistent: no values of {} satisfy every equation (the equations contradict each other)",
            names.join(", ")
        ));
    }
    if rank < n {
        return Err(format!(
            "underdetermined: the equations are dependent ({m} equations, {rank} independent, {n} unknowns: {}), \
             so infinitely many values solve them",
            names.join(", ")
        ));
    }
    let mut values = vec![Number::Int(0); n];
    for (row, &column) in pivots.iter().enumerate() {
        values[column] = binary("/", rows[row].1, rows[row].0[column])?;
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solved(text: &str) -> Vec<(String, Number)> {
        solve_system(&split_equations(text)).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn error(text: &str) -> String {
        solve_system(&split_equations(text)).expect_err(text)
    }

    #[test]
    fn two_and_three_unknowns_are_solved_exactly() {
        let int = Number::Int;
        assert_eq!(solved("x + y = 100; x - y = 20"), vec![("x".into(), int(60)), ("y".into(), int(40))]);
        assert_eq!(solved("ann + ben = 100\nann = ben + 20"), vec![("ann".into(), int(60)), ("ben".into(), int(40))]);
        assert_eq!(
            solved("x + y + z = 6, 2x - y + z = 3, x + 2y - z = 2"),
            vec![("x".into(), int(1)), ("y".into(), int(2)), ("z".into(), int(3))]
        );
        // A first column whose first coefficient is 0 needs the pivot from another row.
        assert_eq!(solved("0*a + b = 2; a + b = 5"), vec![("a".into(), int(3)), ("b".into(), int(2))]);
        let thirds = solved("3x + 0*y = 1; y = 2");
        assert!(matches!(thirds[0].1, Number::Float(v) if (v - 1.0 / 3.0).abs() < 1e-12), "{thirds:?}");
        assert_eq!(solved("0.5*p + 0.25*q = 10; p - q = 5")[0].1, int(15));
    }

    #[test]
    fn more_equations_than_unknowns_are_solved_when_they_agree() {
        assert_eq!(solved("x + y = 3; x - y = 1; 2x + 2y = 6")[1].1, Number::Int(1));
        assert!(error("x + y = 3; x - y = 1; x = 5").starts_with("inconsistent"));
    }

    #[test]
    fn no_single_solution_says_which() {
        assert!(error("x + y = 1; x + y = 2").starts_with("inconsistent"), "{}", error("x + y = 1; x + y = 2"));
        let dependent = error("x + y = 1; 2x + 2y = 2");
        assert!(dependent.starts_with("underdetermined") && dependent.contains("dependent"), "{dependent}");
        let short = error("x + y + z = 1; x - y = 0");
        assert!(short.contains("underdetermined: 2 equations, 3 unknowns"), "{short}");
        assert!(error("x*y = 6; x + y = 5").contains("not linear"), "{}", error("x*y = 6; x + y = 5"));
        assert!(error("x**2 + y = 6; x - y = 0").contains("not linear"));
        assert!(error("1/x + y = 1; x + y = 2").contains("not linear"));
        assert!(error("x + y = 1; x - = 2").starts_with("equation 2 (x - = 2)"));
        assert!(error("3 = 3; 4 = 4").contains("no unknown"));
        assert!(error(&["x = 1"; 7].join(";")).contains("at most 6"));
    }

    #[test]
    fn commas_split_only_between_equations() {
        assert_eq!(split_equations("x + y = 1,000"), vec!["x + y = 1,000"]);
        assert_eq!(split_equations("min(x, 3) = 2; y = 1"), vec!["min(x, 3) = 2", "y = 1"]);
        assert_eq!(split_equations("x = 1, y = 2;\n"), vec!["x = 1", "y = 2"]);
    }
}
