//! Plan validation: every problem at once, each a sentence the planner can act on when the plan goes back.
//!
//! Rules: at least one step; ids non-empty and unique; dependencies exist, come earlier and form no cycle;
//! the tool exists; the arguments fit the tool's schema (closed: no extra arguments); references name an earlier
//! step (a reference is a dependency), a field that step's tool declares (when it declares any), and a value
//! type the argument accepts (when both sides declare types). An argument holding a reference is checked by its
//! reference, not as the literal string.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

pub use crate::agent::plan::issues::{IssueKind, PlanIssue};
use crate::agent::plan::refs::{parse_reference, reference_fits, references_in, schema_types, visit_strings};
use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// Cycles in a graph given as `edges[i]` = the nodes `i` depends on. Finds at least one cycle in every tangle
/// (enough to report; a fixed plan is validated again). Iterative, linear time.
fn find_cycles(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = edges.len();
    // Peel off everything that is not on or behind a cycle (Kahn's algorithm on the dependency order).
    let mut pending: Vec<usize> = edges.iter().map(Vec::len).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (node, deps) in edges.iter().enumerate() {
        for &dep in deps {
            dependents[dep].push(node);
        }
    }
    let mut queue: Vec<usize> = (0..n).filter(|&i| pending[i] == 0).collect();
    let mut resolved = vec![false; n];
    while let Some(node) = queue.pop() {
        resolved[node] = true;
        for &dependent in &dependents[node] {
            pending[dependent] -= 1;
            if pending[dependent] == 0 {
                queue.push(dependent);
            }
        }
    }
    // Every unresolved node has an unresolved dependency: walking them must close a loop.
    let mut walk_of = vec![usize::MAX; n];
    let mut cycles = Vec::new();
    for start in 0..n {
        if resolved[start] || walk_of[start] != usize::MAX {
            continue;
        }
        let mut path = Vec::new();
        let mut node = start;
        loop {
            if walk_of[node] == start {
                let from = path.iter().position(|&p| p == node).unwrap_or(0);
                cycles.push(path[from..].to_vec());
                break;
            }
            if walk_of[node] != usize::MAX {
                break;
            }
            walk_of[node] = start;
            path.push(node);
            match edges[node].iter().find(|&&d| !resolved[d]) {
                Some(&next) => node = next,
                None => break,
            }
        }
    }
    cycles
}

/// The sub-schema for a JSON pointer into an instance, following `properties` and `items`.
fn schema_at<'a>(schema: &'a Value, pointer: &str) -> Option<&'a Value> {
    let mut current = schema;
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        current = match current.get("properties").and_then(|p| p.get(&segment)) {
            Some(sub) => sub,
            None => current.get("items").filter(|items| items.is_object())?,
        };
    }
    Some(current)
}

impl Plan {
    /// Every problem with the plan against the registry's tools; empty when it can run.
    pub fn validate(&self, registry: &ToolRegistry) -> Vec<PlanIssue> {
        let mut issues = Vec::new();
        if self.steps.is_empty() {
            issues.push(PlanIssue::NoSteps);
        }
        let mut position: HashMap<&str, usize> = HashMap::new();
        for (index, step) in self.steps.iter().enumerate() {
            if step.id.trim().is_empty() {
                issues.push(PlanIssue::EmptyId { position: index + 1 });
            } else if position.contains_key(step.id.as_str()) {
                if !issues.iter().any(|i| matches!(i, PlanIssue::DuplicateId { id } if id == &step.id)) {
                    issues.push(PlanIssue::DuplicateId { id: step.id.clone() });
                }
            } else {
                position.insert(&step.id, index);
            }
        }

        // The dependency graph: `depends_on` plus references, to steps that exist.
        let edges: Vec<Vec<usize>> = self
            .steps
            .iter()
            .map(|s| s.dependencies().iter().filter_map(|d| position.get(d.as_str()).copied()).collect())
            .collect();
        let mut cycle_of: HashMap<usize, usize> = HashMap::new();
        for (number, cycle) in find_cycles(&edges).into_iter().enumerate() {
            for &node in &cycle {
                cycle_of.insert(node, number);
            }
            issues.push(PlanIssue::Cycle { steps: cycle.iter().map(|&i| self.steps[i].id.clone()).collect() });
        }
        let same_cycle = |a: usize, b: usize| cycle_of.get(&a).is_some_and(|c| cycle_of.get(&b) == Some(c));

        let known_tools = registry.names().join(", ");
        for (index, step) in self.steps.iter().enumerate() {
            for dep in &step.depends_on {
                match position.get(dep.as_str()) {
                    None => {
                        issues.push(PlanIssue::UnknownDependency { step: step.id.clone(), dependency: dep.clone() })
                    }
                    Some(&at) if at > index && !same_cycle(at, index) => {
                        issues.push(PlanIssue::LaterDependency { step: step.id.clone(), dependency: dep.clone() })
                    }
                    Some(_) => {}
                }
            }

            let spec = registry.spec(&step.tool);
            if spec.is_none() {
                issues.push(PlanIssue::UnknownTool {
                    step: step.id.clone(),
                    tool: step.tool.clone(),
                    known: known_tools.clone(),
                });
            }

            // References, with where they sit (strings holding references are exempt from the literal check).
            let args = Value::Object(step.args.clone());
            let mut referencing: HashSet<String> = HashSet::new();
            let mut whole: Vec<(String, String)> = Vec::new();
            visit_strings(&args, String::new(), &mut |pointer, text| {
                if !references_in(&Value::String(text.to_string())).is_empty() {
                    referencing.insert(pointer.to_string());
                    if parse_reference(text).is_some() {
                        whole.push((pointer.to_string(), text.to_string()));
                    }
                }
            });
            let mut reported: HashSet<String> = HashSet::new();
            for reference in references_in(&args) {
                let shown = reference.to_string();
                if !reported.insert(shown.clone()) {
                    continue;
                }
                let dangling = |reason: &str| PlanIssue::DanglingReference {
                    step: step.id.clone(),
                    reference: shown.clone(),
                    target: reference.step.clone(),
                    reason: reason.to_string(),
                };
                let target_index = match position.get(reference.step.as_str()) {
                    None => {
                        issues.push(dangling("is not a step in the plan"));
                        continue;
                    }
                    Some(&at) if at == index || same_cycle(at, index) => continue, // reported as a cycle
                    Some(&at) if at > index => {
                        issues.push(dangling("comes later; a step can only use results of earlier steps"));
                        continue;
                    }
                    Some(&at) => at,
                };
                let target = &self.steps[target_index];
                let Some(fields) = registry.spec(&target.tool).and_then(|t| t.output_fields()) else {
                    continue;
                };
                let Some(field) = reference.top_field() else {
                    continue;
                };
                let Some(declared) = fields.iter().find(|f| f.name == field) else {
                    issues.push(PlanIssue::UnknownOutputField {
                        step: step.id.clone(),
                        reference: shown.clone(),
                        target: target.id.clone(),
                        tool: target.tool.clone(),
                        fields: fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", "),
                    });
                    continue;
                };
                // Type check only where the reference is the whole argument and the path stops at the field.
                let (Some(spec), Some(found)) = (spec, declared.json_type.as_deref()) else {
                    continue;
                };
                if reference.field.as_deref() != Some(field) {
                    continue;
                }
                for (pointer, _) in whole.iter().filter(|(_, text)| text == &shown) {
                    let expected = schema_at(&spec.args_schema, pointer).map(schema_types).unwrap_or_default();
                    if !reference_fits(&expected, Some(found)) {
                        issues.push(PlanIssue::ReferenceTypeMismatch {
                            step: step.id.clone(),
                            argument: pointer.trim_start_matches('/').replace('/', "."),
                            reference: shown.clone(),
                            expected: expected.join(" or "),
                            found: found.to_string(),
                        });
                    }
                }
            }

            if spec.is_some() {
                if let Ok(errors) = registry.arg_errors(&step.tool, &args) {
                    let kept: Vec<String> =
                        errors.iter().filter(|e| !referencing.contains(&e.pointer)).map(ToString::to_string).collect();
                    if !kept.is_empty() {
                        issues.push(PlanIssue::InvalidArgs {
                            step: step.id.clone(),
                            tool: step.tool.clone(),
                            message: kept.join("; "),
                        });
                    }
                }
            }
        }
        issues
    }
}
