//! What can be wrong with a plan: the errors of reading and resolving one ([`PlanError`]) and the problems
//! validation finds ([`PlanIssue`]). At the bottom of the plan modules, so `refs`, `plan` and `validate` all use it
//! and none of them imports another in a circle.

/// Errors from reading, checking or resolving a plan.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The text is not a plan document.
    #[error("the plan is not a valid plan document: {0}")]
    Parse(#[from] serde_json::Error),
    /// Validation found problems (all of them are listed).
    #[error("the plan has {} problem(s): {}", .0.len(), join_issues(.0))]
    Invalid(Vec<PlanIssue>),
    /// A reference names a step with no output (yet).
    #[error("step '{step}' uses {reference}, but that step has no output yet")]
    MissingOutput {
        /// The step whose arguments hold the reference.
        step: String,
        /// The reference as written.
        reference: String,
    },
    /// A reference names a field the output lacks.
    #[error("step '{step}' uses {reference}, but the output has no such field (output: {output})")]
    MissingField {
        /// The step whose arguments hold the reference.
        step: String,
        /// The reference as written.
        reference: String,
        /// The referenced step's output (shortened), so the planner sees what there is.
        output: String,
    },
}

fn join_issues(issues: &[PlanIssue]) -> String {
    issues.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// One problem with a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanIssue {
    /// The plan has no steps.
    #[error("the plan has no steps")]
    NoSteps,
    /// A step has an empty id.
    #[error("step number {position} has an empty id")]
    EmptyId {
        /// 1-based position of the step.
        position: usize,
    },
    /// Two steps share an id.
    #[error("step id '{id}' is used more than once")]
    DuplicateId {
        /// The id.
        id: String,
    },
    /// `depends_on` names no step.
    #[error("step '{step}' depends on '{dependency}', which is not a step in the plan")]
    UnknownDependency {
        /// The step.
        step: String,
        /// The missing id.
        dependency: String,
    },
    /// `depends_on` names a later step.
    #[error("step '{step}' depends on '{dependency}', which comes later; dependencies must point to earlier steps")]
    LaterDependency {
        /// The step.
        step: String,
        /// The later step.
        dependency: String,
    },
    /// Dependencies (explicit or through references) form a cycle.
    #[error("{}", cycle_sentence(steps))]
    Cycle {
        /// The steps on the cycle, each depending on the next, the last on the first.
        steps: Vec<String>,
    },
    /// The tool is not registered.
    #[error("step '{step}' uses tool '{tool}', which does not exist (tools: {known})")]
    UnknownTool {
        /// The step.
        step: String,
        /// The unknown name.
        tool: String,
        /// The registered names.
        known: String,
    },
    /// The arguments do not fit the tool's schema.
    #[error("step '{step}' has invalid arguments for '{tool}': {message}")]
    InvalidArgs {
        /// The step.
        step: String,
        /// The tool.
        tool: String,
        /// Every schema problem, `;`-separated.
        message: String,
    },
    /// A reference names no earlier step.
    #[error("step '{step}' uses {reference}, but '{target}' {reason}")]
    DanglingReference {
        /// The step.
        step: String,
        /// The reference as written.
        reference: String,
        /// The step id it names.
        target: String,
        /// Why it cannot be used ("is not a step in the plan", "comes later").
        reason: String,
    },
    /// A reference names a field the target's tool does not declare.
    #[error("step '{step}' uses {reference}, but tool '{tool}' (step '{target}') outputs only: {fields}")]
    UnknownOutputField {
        /// The step.
        step: String,
        /// The reference as written.
        reference: String,
        /// The referenced step.
        target: String,
        /// The referenced step's tool.
        tool: String,
        /// The declared fields.
        fields: String,
    },
    /// A whole-argument reference brings a type the argument does not accept.
    #[error("step '{step}' puts {reference} (a {found}) into argument '{argument}', which must be {expected}")]
    ReferenceTypeMismatch {
        /// The step.
        step: String,
        /// The argument (`append`; nested: `items.0`).
        argument: String,
        /// The reference as written.
        reference: String,
        /// Types the argument accepts.
        expected: String,
        /// The referenced field's declared type.
        found: String,
    },
}

/// The kind of a [`PlanIssue`], without its details (for tests and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IssueKind {
    /// See [`PlanIssue::NoSteps`].
    NoSteps,
    /// See [`PlanIssue::EmptyId`].
    EmptyId,
    /// See [`PlanIssue::DuplicateId`].
    DuplicateId,
    /// See [`PlanIssue::UnknownDependency`].
    UnknownDependency,
    /// See [`PlanIssue::LaterDependency`].
    LaterDependency,
    /// See [`PlanIssue::Cycle`].
    Cycle,
    /// See [`PlanIssue::UnknownTool`].
    UnknownTool,
    /// See [`PlanIssue::InvalidArgs`].
    InvalidArgs,
    /// See [`PlanIssue::DanglingReference`].
    DanglingReference,
    /// See [`PlanIssue::UnknownOutputField`].
    UnknownOutputField,
    /// See [`PlanIssue::ReferenceTypeMismatch`].
    ReferenceTypeMismatch,
}

impl PlanIssue {
    /// The kind of problem.
    pub fn kind(&self) -> IssueKind {
        match self {
            PlanIssue::NoSteps => IssueKind::NoSteps,
            PlanIssue::EmptyId { .. } => IssueKind::EmptyId,
            PlanIssue::DuplicateId { .. } => IssueKind::DuplicateId,
            PlanIssue::UnknownDependency { .. } => IssueKind::UnknownDependency,
            PlanIssue::LaterDependency { .. } => IssueKind::LaterDependency,
            PlanIssue::Cycle { .. } => IssueKind::Cycle,
            PlanIssue::UnknownTool { .. } => IssueKind::UnknownTool,
            PlanIssue::InvalidArgs { .. } => IssueKind::InvalidArgs,
            PlanIssue::DanglingReference { .. } => IssueKind::DanglingReference,
            PlanIssue::UnknownOutputField { .. } => IssueKind::UnknownOutputField,
            PlanIssue::ReferenceTypeMismatch { .. } => IssueKind::ReferenceTypeMismatch,
        }
    }

    /// The step the problem is about, when it is about one.
    pub fn step(&self) -> Option<&str> {
        match self {
            PlanIssue::NoSteps | PlanIssue::EmptyId { .. } => None,
            PlanIssue::DuplicateId { id } => Some(id),
            PlanIssue::Cycle { steps } => steps.first().map(String::as_str),
            PlanIssue::UnknownDependency { step, .. }
            | PlanIssue::LaterDependency { step, .. }
            | PlanIssue::UnknownTool { step, .. }
            | PlanIssue::InvalidArgs { step, .. }
            | PlanIssue::DanglingReference { step, .. }
            | PlanIssue::UnknownOutputField { step, .. }
            | PlanIssue::ReferenceTypeMismatch { step, .. } => Some(step),
        }
    }
}

fn cycle_sentence(steps: &[String]) -> String {
    match steps {
        [one] => format!("step '{one}' depends on itself"),
        _ => {
            let first = steps.first().cloned().unwrap_or_default();
            format!("steps {} depend on each other in a cycle ({} → {first})", steps.join(", "), steps.join(" → "))
        }
    }
}
