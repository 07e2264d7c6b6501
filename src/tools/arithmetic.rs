//! The calculator's arithmetic: a tokenizer and a recursive-descent evaluator with exact integers, shared by the
//! `calculator` tool and the equation solvers (`equation`, `linear_system`), which evaluate the same expressions
//! with their unknowns standing for values. It depends on no other tool module, so the solvers and the tool
//! depend only downward on it.
//!
//! Integers are `i128` and stay exact: `+ - * // % **` on integers give integers, and overflow is an error rather
//! than a silently rounded float. `/` gives an integer when the division is exact (`12/4` → `3`) and a float
//! otherwise (`7/2` → `3.5`). Anything involving a float is a float. `^` is a power like `**` (models write both);
//! `//` and `%` round toward negative infinity, as in Python. Functions: `abs sqrt cbrt exp ln log (base 10) log2
//! sin cos tan asin acos atan floor ceil round trunc min max pow`; constants `pi`, `e`.
//!
//! Why our own small evaluator rather than a crate: `evalexpr` ≥ 12 is AGPL-3.0 (this crate is Apache-2.0), and
//! it, like `exmex`, truncates integer division (`7/2` → `3`); `meval` and `fasteval` are `f64`-only, so
//! `2**62 + 1` would come back rounded.

use serde_json::Value;

/// Longest expression accepted (characters).
pub(super) const MAX_LEN: usize = 4096;
/// Deepest nesting of parentheses and unary operators accepted.
const MAX_DEPTH: usize = 64;

/// A calculator result: an exact integer or a float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    /// Exact integer.
    Int(i128),
    /// Floating point (never NaN or infinite).
    Float(f64),
}

impl Number {
    /// The value as a float.
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }

    /// The value as JSON: an integer when it fits JSON's 64-bit integers, else a float.
    pub fn to_json(self) -> Value {
        match self {
            Number::Int(i) => {
                if let Ok(small) = i64::try_from(i) {
                    Value::from(small)
                } else if let Ok(big) = u64::try_from(i) {
                    Value::from(big)
                } else {
                    Value::from(i as f64)
                }
            }
            Number::Float(f) => Value::from(f),
        }
    }
}

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Number::Int(i) => write!(f, "{i}"),
            Number::Float(x) => write!(f, "{x}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Token {
    Num(Number),
    Ident(String),
    Op(&'static str),
    LParen,
    RParen,
    Comma,
}

pub(super) fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            _ if c.is_whitespace() => i += 1,
            '0'..='9' | '.' => {
                let start = i;
                let mut is_float = false;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.' || chars[i] == '_') {
                    is_float |= chars[i] == '.';
                    i += 1;
                }
                if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                    let mut j = i + 1;
                    if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                        j += 1;
                    }
                    if j < chars.len() && chars[j].is_ascii_digit() {
                        is_float = true;
                        i = j;
                        while i < chars.len() && chars[i].is_ascii_digit() {
                            i += 1;
                        }
                    }
                }
                let literal: String = chars[start..i].iter().filter(|&&c| c != '_').collect();
                let number = if is_float {
                    literal.parse::<f64>().map(Number::Float).map_err(|_| format!("bad number '{literal}'"))?
                } else {
                    literal.parse::<i128>().map(Number::Int).map_err(|_| format!("integer '{literal}' is too large"))?
                };
                tokens.push(Token::Num(number));
            }
            'a'..='z' | 'A'..='Z' | '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                tokens.push(Token::Ident(chars[start..i].iter().collect::<String>().to_ascii_lowercase()));
            }
            '*' if next == Some('*') => {
                tokens.push(Token::Op("**"));
                i += 2;
            }
            '/' if next == Some('/') => {
                tokens.push(Token::Op("//"));
                i += 2;
            }
            '+' => {
                tokens.push(Token::Op("+"));
                i += 1;
            }
            '-' | '−' => {
                tokens.push(Token::Op("-"));
                i += 1;
            }
            '*' | '×' | '·' => {
                tokens.push(Token::Op("*"));
                i += 1;
            }
            '/' | '÷' => {
                tokens.push(Token::Op("/"));
                i += 1;
            }
            '%' => {
                tokens.push(Token::Op("%"));
                i += 1;
            }
            '^' => {
                tokens.push(Token::Op("**"));
                i += 1;
            }
            '(' => {
                tokens.push(Token::LParen);
                i += 1;
            }
            ')' => {
                tokens.push(Token::RParen);
                i += 1;
            }
            ',' => {
                tokens.push(Token::Comma);
                i += 1;
            }
            other => return Err(format!("unexpected character '{other}'")),
        }
    }
    Ok(tokens)
}

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    depth: usize,
    /// In an equation: the unknowns' names and the values they stand for in this evaluation. It also lets a
    /// product be written without `*` (`3x`, `2(x + 1)`), as equations are.
    unknowns: Option<&'a [(&'a str, Number)]>,
}

fn float(x: f64) -> Result<Number, String> {
    if x.is_finite() {
        Ok(Number::Float(x))
    } else {
        Err("the result is not a finite number".into())
    }
}

fn overflow(op: &str) -> String {
    format!("integer overflow in '{op}' (exact integers are limited to 128 bits)")
}

pub(super) fn binary(op: &str, a: Number, b: Number) -> Result<Number, String> {
    use Number::{Float, Int};
    match (op, a, b) {
        ("+", Int(x), Int(y)) => x.checked_add(y).map(Int).ok_or_else(|| overflow(op)),
        ("-", Int(x), Int(y)) => x.checked_sub(y).map(Int).ok_or_else(|| overflow(op)),
        ("*", Int(x), Int(y)) => x.checked_mul(y).map(Int).ok_or_else(|| overflow(op)),
        ("/" | "//" | "%", _, Int(0)) => Err("division by zero".into()),
        ("/" | "//" | "%", _, Float(0.0)) => Err("division by zero".into()), // −0.0 matches too
        ("/", Int(x), Int(y)) => match x.checked_rem(y) {
            Some(0) => x.checked_div(y).map(Int).ok_or_else(|| overflow(op)),
            Some(_) => float(x as f64 / y as f64),
            None => Err(overflow(op)),
        },
        ("//", Int(x), Int(y)) => {
            let q = x.checked_div(y).ok_or_else(|| overflow(op))?;
            Ok(Int(if (x % y != 0) && ((x < 0) != (y < 0)) { q - 1 } else { q }))
        }
        ("%", Int(x), Int(y)) => {
            let r = x.checked_rem(y).ok_or_else(|| overflow(op))?;
            Ok(Int(if r != 0 && ((r < 0) != (y < 0)) { r + y } else { r }))
        }
        ("**", Int(x), Int(y)) if y >= 0 => {
            let exp = u32::try_from(y).map_err(|_| overflow(op))?;
            x.checked_pow(exp).map(Int).ok_or_else(|| overflow(op))
        }
        _ => {
            let (x, y) = (a.as_f64(), b.as_f64());
            float(match op {
                "+" => x + y,
                "-" => x - y,
                "*" => x * y,
                "/" => x / y,
                "//" => (x / y).floor(),
                "%" => x - y * (x / y).floor(),
                _ => x.powf(y),
            })
        }
    }
}

fn function(name: &str, args: &[Number]) -> Result<Number, String> {
    use Number::{Float, Int};
    let one = |f: fn(f64) -> f64| -> Result<Number, String> {
        match args {
            [x] => float(f(x.as_f64())),
            _ => Err(format!("{name}() takes one argument")),
        }
    };
    match name {
        "abs" => match args {
            [Int(x)] => x.checked_abs().map(Int).ok_or_else(|| overflow("abs")),
            _ => one(f64::abs),
        },
        "floor" | "ceil" | "round" | "trunc" => match args {
            [Int(x)] => Ok(Int(*x)),
            [Float(x)] => {
                let r = match name {
                    "floor" => x.floor(),
                    "ceil" => x.ceil(),
                    "round" => x.round(),
                    _ => x.trunc(),
                };
                if r.abs() < 1e18 {
                    Ok(Int(r as i128))
                } else {
                    float(r)
                }
            }
            _ => Err(format!("{name}() takes one argument")),
        },
        "sqrt" => match args {
            [x] if x.as_f64() < 0.0 => Err("square root of a negative number".into()),
            [Int(x)] => {
                let root = (*x as f64).sqrt().round() as i128;
                // Exact roots of perfect squares stay integers.
                if root.checked_mul(root) == Some(*x) {
                    Ok(Int(root))
                } else {
                    float((*x as f64).sqrt())
                }
            }
            _ => one(f64::sqrt),
        },
        "cbrt" => one(f64::cbrt),
        "exp" => one(f64::exp),
        "ln" => one(f64::ln),
        "log" | "log10" => one(f64::log10),
        "log2" => one(f64::log2),
        "sin" => one(f64::sin),
        "cos" => one(f64::cos),
        "tan" => one(f64::tan),
        "asin" => one(f64::asin),
        "acos" => one(f64::acos),
        "atan" => one(f64::atan),
        "pow" => match args {
            [a, b] => binary("**", *a, *b),
            _ => Err("pow() takes two arguments".into()),
        },
        "min" | "max" => {
            let mut best = *args.first().ok_or_else(|| format!("{name}() needs at least one argument"))?;
            for &x in &args[1..] {
                let better = if name == "min" { x.as_f64() < best.as_f64() } else { x.as_f64() > best.as_f64() };
                if better {
                    best = x;
                }
            }
            Ok(best)
        }
        _ => Err(format!("unknown function '{name}'")),
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        token
    }

    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err("the expression is nested too deeply".into())
        } else {
            Ok(())
        }
    }

    fn expression(&mut self) -> Result<Number, String> {
        let mut value = self.term()?;
        while let Some(Token::Op(op @ ("+" | "-"))) = self.peek() {
            let op = *op;
            self.pos += 1;
            value = binary(op, value, self.term()?)?;
        }
        Ok(value)
    }

    fn term(&mut self) -> Result<Number, String> {
        let mut value = self.unary()?;
        loop {
            match self.peek() {
                Some(Token::Op(op @ ("*" | "/" | "//" | "%"))) => {
                    let op = *op;
                    self.pos += 1;
                    value = binary(op, value, self.unary()?)?;
                }
                // `3x`, `2(x + 1)`: a product without its sign, in an equation only (in an expression it stays
                // an error, so that a typo is not taken for a product).
                Some(Token::Ident(_) | Token::LParen) if self.unknowns.is_some() => {
                    value = binary("*", value, self.unary()?)?;
                }
                _ => return Ok(value),
            }
        }
    }

    /// Unary signs bind looser than `**`: `-2**2` is `-4`.
    fn unary(&mut self) -> Result<Number, String> {
        match self.peek() {
            Some(Token::Op(op @ ("-" | "+"))) => {
                let negate = *op == "-";
                self.pos += 1;
                self.enter()?;
                let value = self.unary()?;
                self.depth -= 1;
                if negate {
                    binary("-", Number::Int(0), value)
                } else {
                    Ok(value)
                }
            }
            _ => self.power(),
        }
    }

    fn power(&mut self) -> Result<Number, String> {
        let base = self.primary()?;
        if let Some(Token::Op("**")) = self.peek() {
            self.pos += 1;
            self.enter()?;
            let exponent = self.unary()?;
            self.depth -= 1;
            return binary("**", base, exponent);
        }
        Ok(base)
    }

    fn primary(&mut self) -> Result<Number, String> {
        match self.next() {
            Some(Token::Num(n)) => Ok(n),
            Some(Token::LParen) => {
                self.enter()?;
                let value = self.expression()?;
                self.depth -= 1;
                match self.next() {
                    Some(Token::RParen) => Ok(value),
                    _ => Err("missing ')'".into()),
                }
            }
            Some(Token::Ident(name)) => {
                if self.peek() == Some(&Token::LParen) {
                    self.pos += 1;
                    self.enter()?;
                    let mut args = Vec::new();
                    if self.peek() != Some(&Token::RParen) {
                        loop {
                            args.push(self.expression()?);
                            match self.next() {
                                Some(Token::Comma) => continue,
                                Some(Token::RParen) => break,
                                _ => return Err(format!("missing ')' after the arguments of {name}()")),
                            }
                        }
                    } else {
                        self.pos += 1;
                    }
                    self.depth -= 1;
                    function(&name, &args)
                } else {
                    match name.as_str() {
                        "pi" => Ok(Number::Float(std::f64::consts::PI)),
                        "e" => Ok(Number::Float(std::f64::consts::E)),
                        _ => match self.unknowns.and_then(|u| u.iter().find(|(unknown, _)| *unknown == name)) {
                            Some((_, value)) => Ok(*value),
                            None => Err(format!(
                                "unknown name '{name}' (an equation in one unknown, such as 3*{name} + 7 = 34, is \
                                 solved for it)"
                            )),
                        },
                    }
                }
            }
            Some(Token::RParen) => Err("unexpected ')'".into()),
            Some(Token::Comma) => Err("unexpected ','".into()),
            Some(Token::Op(op)) => Err(format!("unexpected operator '{op}'")),
            None => Err("the expression ends too early".into()),
        }
    }
}

/// The functions an expression may call (what `function` evaluates), beside the constants `pi` and `e`.
pub const FUNCTIONS: &[&str] = &[
    "abs", "acos", "asin", "atan", "cbrt", "ceil", "cos", "exp", "floor", "ln", "log", "log10", "log2", "max", "min",
    "pow", "round", "sin", "sqrt", "tan", "trunc",
];

/// The names `expression` writes that are neither a function it may call nor a constant (`orders.price`,
/// `customers`, `SELECT`), each once, as written; a name joined by dots (`orders.price`) is one.
pub fn foreign_names(expression: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let chars: Vec<char> = expression.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let opens = chars[i].is_ascii_alphabetic() && (i == 0 || !(chars[i - 1].is_ascii_alphanumeric()));
        if !opens {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | '.')) {
            i += 1;
        }
        let name: String = chars[start..i].iter().collect::<String>().trim_end_matches('.').to_string();
        let lower = name.to_ascii_lowercase();
        if !FUNCTIONS.contains(&lower.as_str()) && lower != "pi" && lower != "e" && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// A regular expression for plain arithmetic: numbers, operators and parentheses, no names. Models that write an
/// expression from text (the executor filling a failed step, the step evaluation's check) are held to it. It
/// starts with a digit or a parenthesis: both models otherwise often opened with a stray `-` (`- (25 - 18)` for
/// a difference), which no goal in the dev suites needed.
pub const ARITHMETIC_PATTERN: &str = r"^[0-9(][0-9.+*/()^% -]{0,159}$";

/// Evaluates an arithmetic expression; the error is a sentence saying what is wrong.
pub fn evaluate(expression: &str) -> Result<Number, String> {
    if expression.chars().count() > MAX_LEN {
        return Err(format!("the expression is longer than {MAX_LEN} characters"));
    }
    let tokens = tokenize(expression)?;
    if tokens.is_empty() {
        return Err("the expression is empty".into());
    }
    evaluate_tokens(&tokens, None)
}

/// The value of a whole token list, with each of `unknowns` standing for its value where given (an equation's
/// side; `Some(&[])` still reads `3x` as a product).
pub(super) fn evaluate_tokens(tokens: &[Token], unknowns: Option<&[(&str, Number)]>) -> Result<Number, String> {
    let mut parser = Parser { tokens, pos: 0, depth: 0, unknowns };
    let value = parser.expression()?;
    match parser.peek() {
        None => Ok(value),
        Some(token) => Err(format!("unexpected {} after a complete expression", describe(token))),
    }
}

fn describe(token: &Token) -> String {
    match token {
        Token::Num(n) => format!("number {n}"),
        Token::Ident(name) => format!("name '{name}'"),
        Token::Op(op) => format!("operator '{op}'"),
        Token::LParen => "'('".into(),
        Token::RParen => "')'".into(),
        Token::Comma => "','".into(),
    }
}
