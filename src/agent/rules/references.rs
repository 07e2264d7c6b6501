//! Mends references with one reading: a field a step's tool does not declare (`$s1.result$`) where it declares
//! exactly one and no step's tool declares that name, a whole-output reference inside longer text to such a tool, a list of one reference
//! to a field that is a list already, a reference to an earlier step written as text (`$$s2.joke$$`,
//! `$s1.results`), and, in a model's prompt, a field the tool does not declare (the whole output is read instead).
//! At run time, a field missing from a result takes its one field, or its one list where the reference reads a
//! list (an index follows, or a model's prompt reads it; applied where references
//! resolve: `agent::plan::refs::Resolution::one_field`, logged by the orchestrator).
//!
//! Rule `references`, profile `general`: it follows from the output fields the tool's schema declares.

use serde_json::Value;

use super::only_output_field;
use crate::agent::plan::refs::{parse_reference, rewrite_references, Reference};
use crate::agent::plan::{Plan, Step};
use crate::tools::ToolRegistry;

/// Rewrites the plan's references that have one reading; returns one line per mend (`s2: $s1.result$ →
/// $s1.text$`), empty when nothing changed.
pub fn mend_references(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    let mut mends = close_references(plan);
    mends.extend(unwrap_listed_lists(plan, registry));
    mends.extend(prompts_read_whole_outputs(plan, registry));
    // Each step's only output field, where its tool declares exactly one.
    let only_field: Vec<(String, String)> = plan
        .steps
        .iter()
        .filter_map(|step| Some((step.id.clone(), only_output_field(registry, &step.tool)?.name)))
        .collect();
    let declared = declared_fields(plan, registry);
    for step in &mut plan.steps {
        let id = step.id.clone();
        rewrite_step_references(step, &mut mends, |reference, whole| {
            let (_, field) = only_field.iter().find(|(target, _)| *target == reference.step)?;
            let mended = match reference.top_field() {
                // A whole output as an argument's value is meant; inside text it is its JSON.
                None if whole => return None,
                None => Reference { step: reference.step.clone(), field: Some(field.clone()) },
                Some(top) if top == field => return None,
                // A path below a field that does not exist has no reading.
                Some(_) if reference.field.as_deref() != reference.top_field() => return None,
                // A field the tool does not declare, where it declares one and no other step before this one
                // declares this one (`$s1.result$` of a tool whose one field is `text`): that field.
                Some(top) if !declared_before(&declared, &id, &reference.step, top) => {
                    Reference { step: reference.step.clone(), field: Some(field.clone()) }
                }
                Some(_) => return None,
            };
            Some((format!("{id}: {reference} → {mended}"), mended))
        });
    }
    mends
}

/// Each step's id and the output fields its tool declares (none: empty), in the plan's order.
fn declared_fields(plan: &Plan, registry: &ToolRegistry) -> Vec<(String, Vec<String>)> {
    plan.steps
        .iter()
        .map(|step| {
            let fields = registry.spec(&step.tool).and_then(|spec| spec.output_fields()).unwrap_or_default();
            (step.id.clone(), fields.into_iter().map(|f| f.name).collect())
        })
        .collect()
}

/// Whether a step before `reader`, other than the `referenced` one, declares `field`: a reference can name only an
/// earlier step, so such a step is the one other reading of a field the referenced step lacks.
fn declared_before(declared: &[(String, Vec<String>)], reader: &str, referenced: &str, field: &str) -> bool {
    declared
        .iter()
        .take_while(|(id, _)| id != reader)
        .any(|(id, fields)| id != referenced && fields.iter().any(|f| f == field))
}

/// Rewrites the references in `step`'s arguments that `mend` (given each reference and whether it is a whole
/// value) gives a line and a replacement for, adding each line to `mends` once (the same reference twice in a
/// step is one mend).
fn rewrite_step_references(
    step: &mut Step,
    mends: &mut Vec<String>,
    mut mend: impl FnMut(&Reference, bool) -> Option<(String, Reference)>,
) {
    let mut change = |reference: &Reference, whole: bool| {
        let (line, mended) = mend(reference, whole)?;
        if !mends.contains(&line) {
            mends.push(line);
        }
        Some(mended)
    };
    for value in step.args.values_mut() {
        rewrite_references(value, &mut change);
    }
}

/// In the arguments of a step its tool runs on a model (`llm`'s prompt), rewrites a reference to a field the
/// referenced tool does not declare, where it declares several (`$s1.content$` of `list_dir`, which gives
/// `entries`, `path`, `truncated`), into a reference to its whole output, and where it declares one (`$s2.content$`
/// of `llm`, which gives `text`, where no other step of the plan declares `content`), into that field: a model reads
/// text, and whatever the planner wanted from that step is in it. Why: the 1.5B wrote `$s1.content$` of a listing, then `$s2.content$` of a model step, in every
/// replan of a run, each sent back as invalid, until the replan budget was spent (tasks-mcp `mem-moved`). A tool's
/// argument (not a prompt) keeps its field, as validation reports, unless [`mend_references`] gives it one reading.
fn prompts_read_whole_outputs(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    let declared = declared_fields(plan, registry);
    let mut mends = Vec::new();
    for step in &mut plan.steps {
        if !registry.spec(&step.tool).is_some_and(|spec| spec.needs_model) {
            continue;
        }
        let id = step.id.clone();
        rewrite_step_references(step, &mut mends, |reference, _| {
            let top = reference.top_field()?;
            let (_, fields) =
                declared.iter().find(|(target, fields)| *target == reference.step && !fields.is_empty())?;
            if fields.iter().any(|f| f == top) {
                return None;
            }
            if let [only] = fields.as_slice() {
                // A path below the missing field, or a field another step before this one declares (the planner
                // may have meant that step), has more than one reading: validation reports it.
                if reference.field.as_deref() != Some(top) || declared_before(&declared, &id, &reference.step, top) {
                    return None;
                }
                let mended = Reference { step: reference.step.clone(), field: Some(only.clone()) };
                return Some((
                    format!("{id}: {reference} → {mended} (a prompt reads the only field; no field {top})"),
                    mended,
                ));
            }
            let mended = Reference { step: reference.step.clone(), field: None };
            Some((format!("{id}: {reference} → {mended} (a prompt reads the whole output; no field {top})"), mended))
        });
    }
    mends
}

/// Rewrites each top-level argument that is a list of one whole reference to a field its tool declares as a list
/// (`keywords: ["$s1.results$"]`) into the reference itself: the field is the list, and wrapped it would be a list
/// of lists. Why: the 1.5B wrapped a search's results so for a tool that takes keywords (one NESTFUL goal); a
/// field of another type (`["$s1.age$"]` for a program's arguments) is left as written.
fn unwrap_listed_lists(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    let list_fields: Vec<(String, String)> = plan
        .steps
        .iter()
        .flat_map(|step| {
            let fields = registry.spec(&step.tool).and_then(|spec| spec.output_fields()).unwrap_or_default();
            fields
                .into_iter()
                .filter(|f| f.json_type.as_deref() == Some("array"))
                .map(|f| (step.id.clone(), f.name))
                .collect::<Vec<_>>()
        })
        .collect();
    let mut mends = Vec::new();
    for step in &mut plan.steps {
        for (name, value) in step.args.iter_mut() {
            let Value::Array(items) = value else { continue };
            let [Value::String(text)] = items.as_slice() else { continue };
            let Some(reference) = parse_reference(text) else { continue };
            let Some(field) = reference.field.as_deref() else { continue };
            if list_fields.iter().any(|(id, f)| *id == reference.step && f == field) {
                mends.push(format!("{}: {name} {value} → {reference} ({field} is a list already)", step.id));
                *value = Value::String(reference.to_string());
            }
        }
    }
    mends
}

/// Rewrites each text that is a reference to an earlier step written with its dollars escaped (`"$$s2.joke$$"`,
/// which reads as the literal text `$s2.joke$`) or without its closing dollar (`"$s1.results"`) into the reference.
/// Why: as written the tool would get the text of a reference, and no text of that form is a value a goal gives.
/// The 1.5B leaves such a reference open where the grammar lets it through (`items: ["$s1.results"]`, where the
/// list's items have no declared type). An escaped reference to a later step, which no plan may reference (the
/// grammar admits references to earlier steps only), stays text. Plans written without the grammar or edited
/// by hand may escape an earlier one.
fn close_references(plan: &mut Plan) -> Vec<String> {
    let mut mends = Vec::new();
    let mut earlier: Vec<String> = Vec::new();
    for step in &mut plan.steps {
        for (name, value) in step.args.iter_mut() {
            let before = value.clone();
            close_in(value, &earlier);
            if *value != before {
                mends.push(format!("{}: {name} {before} → {value} (a reference, written as text)", step.id));
            }
        }
        earlier.push(step.id.clone());
    }
    mends
}

fn close_in(value: &mut Value, earlier: &[String]) {
    match value {
        Value::String(text) => {
            if let Some(joined) = path_written_apart(text) {
                if parse_reference(&joined).is_some_and(|r| earlier.contains(&r.step)) {
                    *text = joined;
                }
                return;
            }
            let inner = match text.strip_prefix("$$").and_then(|t| t.strip_suffix("$$")) {
                Some(escaped) => escaped,
                None => match text.strip_prefix('$') {
                    Some(open) if !open.contains('$') => open,
                    _ => return,
                },
            };
            let closed = format!("${inner}$");
            if parse_reference(&closed).is_some_and(|r| r.field.is_some() && earlier.contains(&r.step)) {
                *text = closed;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| close_in(item, earlier)),
        Value::Object(map) => map.values_mut().for_each(|item| close_in(item, earlier)),
        _ => {}
    }
}

/// A path into a result written after the reference or inside it in the index form of JSON paths
/// (`$s2.todos$[0].id`, `$s2.todos[0].id$`), as the one reference it means (`$s2.todos.0.id$`); `None` for any other
/// text (`$s1.result$ dollars`, a plain reference).
fn path_written_apart(text: &str) -> Option<String> {
    let rest = text.strip_prefix('$')?;
    let end = rest.find('$')?;
    let (inner, after) = (&rest[..end], &rest[end + 1..]);
    if !(after.starts_with(['[', '.']) || after.is_empty() && inner.contains('[')) {
        return None;
    }
    let mut path = String::new();
    let mut index: Option<String> = None;
    for c in inner.chars().chain(after.chars()) {
        match (c, index.as_mut()) {
            ('[', None) => index = Some(String::new()),
            (']', Some(digits)) if !digits.is_empty() => {
                path.push('.');
                path.push_str(digits);
                index = None;
            }
            (c, Some(digits)) if c.is_ascii_digit() => digits.push(c),
            (c, None) if c.is_alphanumeric() || "._-".contains(c) => path.push(c),
            _ => return None,
        }
    }
    (index.is_none() && !path.contains("..")).then(|| format!("${path}$"))
}

/// Rule `references` (mend, general).
pub struct References;

impl super::Rule for References {
    fn about(&self) -> super::About {
        super::About {
            name: "references",
            stage: super::Stage::Mend,
            profile: super::Profile::General,
            keys_on: "a reference to an output field the tool does not declare where it declares one field, or (at run time) its result has one, or one list the reference reads as a list (and lists of one reference to a list field): that field",
        }
    }

    fn mend(&self, plan: &mut Plan, tools: &ToolRegistry, _seen: &str) -> Vec<String> {
        mend_references(plan, tools)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_written_beside_or_inside_a_reference_joins_it() {
        assert_eq!(path_written_apart("$s2.todos$[0].id").as_deref(), Some("$s2.todos.0.id$"));
        assert_eq!(path_written_apart("$s2.todos[0].id$").as_deref(), Some("$s2.todos.0.id$"));
        assert_eq!(path_written_apart("$s2$.rows[12]").as_deref(), Some("$s2.rows.12$"));
        for other in ["$s2.todos$", "$s1.result$ dollars", "$s1.rows$[x]", "$s1.rows$[]", "$s1$[0", "total: $s1$[0]"] {
            assert_eq!(path_written_apart(other), None, "{other}");
        }
    }

    #[test]
    fn a_field_the_tool_lacks_is_its_one_field_unless_another_step_declares_it() {
        let dir = std::env::temp_dir();
        let context = crate::tools::ToolContext::new(crate::tools::Workspace::new(&dir).unwrap()).with_write(true);
        let registry = ToolRegistry::builtins(&context);
        let plan = |reference: &str| {
            Plan::for_goal(
                "Summarize the folder into notes.txt",
                serde_json::json!([
                    {"id": "s1", "tool": "list_dir", "args": {"path": "."}},
                    {"id": "s2", "tool": "llm", "args": {"prompt": "Summarize: $s1$"}},
                    {"id": "s3", "tool": "write_file", "args": {"path": "notes.txt", "content": reference}}
                ]),
            )
        };
        // `llm` declares one field, `text`: a name no step's tool declares (no word list decides it) reads it.
        let mut summary = plan("$s2.summary$");
        assert_eq!(mend_references(&mut summary, &registry), ["s3: $s2.summary$ → $s2.text$"]);
        assert_eq!(summary.steps[2].args["content"], "$s2.text$");
        // `path` is a field of `list_dir` (s1): the planner may have meant that step, so it is left for validation.
        let mut path = plan("$s2.path$");
        assert!(mend_references(&mut path, &registry).is_empty());
        assert_eq!(path.steps[2].args["content"], "$s2.path$");
    }
}
