//! Tool retrieval: with a large catalogue the planner sees only the few tools that matter for the goal.
//!
//! Each tool is a document of its name (split on `_ . - /`, spaces and camelCase; counted twice, since the name is
//! the tool's most telling text), its description, and its arguments' names and descriptions. A goal is scored
//! against every tool with Okapi BM25 (k1 = 1.2, b = 0.75); [`select`] returns the best `k` names, ties broken by
//! registration order, so a selection is deterministic. Words are lower-cased, a few English stop words are
//! dropped, and a light suffix stripper folds plurals and verb forms (`calculates`, `calculated`, `calculating`
//! and `calculation` all count as `calculat`).

use std::collections::HashMap;

use serde_json::Value;

use super::{ToolRegistry, ToolResult, ToolSpec};

/// BM25's term-frequency saturation.
const K1: f64 = 1.2;
/// BM25's length normalisation.
const B: f64 = 0.75;
/// How many times a tool's name counts in its document.
const NAME_WEIGHT: usize = 2;

/// Words too common to tell tools apart.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "given", "has", "have", "i", "in", "into", "is",
    "it", "its", "me", "my", "of", "on", "or", "that", "the", "then", "this", "to", "was", "what", "which", "with",
    "you", "your", "after", "also", "based", "can", "please", "will", "using", "use",
];

/// The words of a text: split on anything but letters and digits, at camelCase and letter–digit boundaries;
/// lower-cased, stop words dropped, suffixes stripped.
pub fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            flush(&mut current, &mut words);
            continue;
        }
        if let Some(&prev) = i.checked_sub(1).and_then(|p| chars.get(p)) {
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = (prev.is_lowercase() && c.is_uppercase())
                // The end of an acronym: `HTTPServer` → `HTTP`, `Server`.
                || (prev.is_uppercase() && c.is_uppercase() && next_lower)
                || (prev.is_alphabetic() && c.is_numeric())
                || (prev.is_numeric() && c.is_alphabetic());
            if boundary && prev.is_alphanumeric() {
                flush(&mut current, &mut words);
            }
        }
        current.extend(c.to_lowercase());
    }
    flush(&mut current, &mut words);
    words
}

fn flush(current: &mut String, words: &mut Vec<String>) {
    if current.is_empty() {
        return;
    }
    let word = std::mem::take(current);
    if !STOP_WORDS.contains(&word.as_str()) {
        words.push(stem(&word));
    }
}

/// A light suffix stripper (after Porter's first steps): enough to fold `searches`/`search`,
/// `converted`/`convert`, `shipping`/`ship`, `calculation`/`calculate`, `countries`/`country`. Words of three
/// letters or fewer, and words with letters beyond ASCII, are kept as they are.
fn stem(word: &str) -> String {
    if word.len() <= 3 || !word.is_ascii() {
        return word.to_string();
    }
    let has_vowel = |s: &str| s.chars().any(|c| "aeiouy".contains(c));
    let mut w = word.to_string();
    if let Some(s) = w.strip_suffix("sses") {
        w = format!("{s}ss");
    } else if let Some(s) = w.strip_suffix("ies") {
        w = format!("{s}i");
    } else if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") {
        w.pop();
    }
    for suffix in ["ing", "ed"] {
        if let Some(s) = w.strip_suffix(suffix).filter(|s| s.len() >= 3 && has_vowel(s)) {
            w = s.to_string();
            let bytes = w.as_bytes();
            let n = bytes.len();
            if n >= 4 && bytes[n - 1] == bytes[n - 2] && !b"aeiouylsz".contains(&bytes[n - 1]) {
                w.pop();
            }
            break;
        }
    }
    if let Some(s) = w.strip_suffix("ation").filter(|s| s.len() >= 3) {
        w = format!("{s}at");
    }
    if w.len() >= 5 && w.ends_with('e') {
        w.pop();
    }
    if w.len() > 3 && w.ends_with('y') && !w[..w.len() - 1].ends_with(|c: char| "aeiou".contains(c)) {
        w.pop();
        w.push('i');
    }
    w
}

/// The text a tool is found by, with its name repeated [`NAME_WEIGHT`] times.
fn document(spec: &ToolSpec) -> Vec<String> {
    let mut terms = Vec::new();
    for _ in 0..NAME_WEIGHT {
        terms.extend(words(&spec.name));
    }
    terms.extend(words(&spec.description));
    if let Some(properties) = spec.args_schema.get("properties").and_then(Value::as_object) {
        for (name, schema) in properties {
            terms.extend(words(name));
            if let Some(description) = schema.get("description").and_then(Value::as_str) {
                terms.extend(words(description));
            }
        }
    }
    terms
}

/// A BM25 index over tool specs.
#[derive(Debug, Clone)]
pub struct ToolIndex {
    names: Vec<String>,
    docs: Vec<HashMap<String, usize>>,
    lengths: Vec<usize>,
    document_frequency: HashMap<String, usize>,
    average_length: f64,
}

impl ToolIndex {
    /// Indexes the tools, in the order given (the order that breaks ties).
    pub fn new<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>) -> Self {
        let mut names = Vec::new();
        let mut docs = Vec::new();
        let mut lengths = Vec::new();
        let mut document_frequency: HashMap<String, usize> = HashMap::new();
        for spec in specs {
            let terms = document(spec);
            let mut counts: HashMap<String, usize> = HashMap::new();
            for term in &terms {
                *counts.entry(term.clone()).or_default() += 1;
            }
            for term in counts.keys() {
                *document_frequency.entry(term.clone()).or_default() += 1;
            }
            names.push(spec.name.clone());
            lengths.push(terms.len());
            docs.push(counts);
        }
        let average_length =
            if lengths.is_empty() { 1.0 } else { lengths.iter().sum::<usize>() as f64 / lengths.len() as f64 };
        Self { names, docs, lengths, document_frequency, average_length: average_length.max(1.0) }
    }

    /// Number of tools indexed.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Each tool's BM25 score for the query, in index order (0 for a tool sharing no word with it).
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let mut terms = words(query);
        terms.sort();
        terms.dedup();
        let n = self.names.len() as f64;
        let mut scores = vec![0.0; self.names.len()];
        for term in &terms {
            let Some(&df) = self.document_frequency.get(term) else {
                continue;
            };
            let idf = (1.0 + (n - df as f64 + 0.5) / (df as f64 + 0.5)).ln();
            for (i, doc) in self.docs.iter().enumerate() {
                if let Some(&tf) = doc.get(term) {
                    let tf = tf as f64;
                    let norm = K1 * (1.0 - B + B * self.lengths[i] as f64 / self.average_length);
                    scores[i] += idf * tf * (K1 + 1.0) / (tf + norm);
                }
            }
        }
        scores
    }

    /// The names of the `k` best tools for the query, best first; ties keep index order. `k` at least the
    /// number of tools gives every tool.
    pub fn top(&self, query: &str, k: usize) -> Vec<String> {
        let scores = self.scores(query);
        let mut order: Vec<usize> = (0..self.names.len()).collect();
        // A stable sort: equal scores keep index order.
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
        order.into_iter().take(k).map(|i| self.names[i].clone()).collect()
    }
}

/// The names of the `k` tools of the registry that best match the goal, best first (ties by registration order).
pub fn select(goal: &str, registry: &ToolRegistry, k: usize) -> Vec<String> {
    ToolIndex::new(registry.specs()).top(goal, k)
}

/// What the planner is shown for a goal when retrieval is on.
pub struct Selection {
    /// The tools chosen, best first; model tools (`llm`) kept beyond the `k` come last.
    pub tools: Vec<String>,
    /// A registry of just those tools, in the full registry's registration order.
    pub registry: ToolRegistry,
}

/// The registry the planner plans with when it may see only `k` tools: `None` when `k` is 0 (retrieval off) or the
/// registry holds no more than `k` tools. Tools that run on the model (`llm`) are always kept: they are how a
/// plan writes or answers in text, which no word of a goal reliably asks for.
pub fn planning_selection(goal: &str, registry: &ToolRegistry, k: usize) -> ToolResult<Option<Selection>> {
    if k == 0 || registry.len() <= k {
        return Ok(None);
    }
    let mut tools = select(goal, registry, k);
    for spec in registry.specs().filter(|s| s.needs_model) {
        if !tools.contains(&spec.name) {
            tools.push(spec.name.clone());
        }
    }
    Ok(Some(Selection { registry: restrict(registry, &tools)?, tools }))
}

/// A registry of the named tools only, in the registry's order (names it lacks are ignored).
pub fn restrict(registry: &ToolRegistry, names: &[String]) -> ToolResult<ToolRegistry> {
    let mut restricted = ToolRegistry::new();
    for tool in registry.iter() {
        if names.iter().any(|n| n == tool.name()) {
            restricted.register_arc(tool.clone())?;
        }
    }
    Ok(restricted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_names_every_way() {
        assert_eq!(words("Hotels.SearchHouse"), ["hotel", "search", "hous"]);
        assert_eq!(words("get_weather-now/v2"), ["get", "weather", "now", "v", "2"]);
        assert_eq!(words("HTTPServer"), ["http", "server"]);
        assert!(words("the of and").is_empty());
    }

    #[test]
    fn stems_fold_common_forms() {
        assert_eq!(stem("calculates"), stem("calculate"));
        assert_eq!(stem("calculated"), stem("calculating"));
        assert_eq!(stem("searches"), stem("search"));
        assert_eq!(stem("calculation"), stem("calculate"));
        assert_eq!(stem("countries"), stem("country"));
        assert_eq!(stem("shipping"), stem("ship"));
        assert_eq!(stem("notes"), stem("note"));
        assert_eq!(stem("class"), "class");
    }
}
