//! How a run looks on a terminal: each event as a line (the `runs show` timeline, and the live view without a
//! terminal), live spinners per step on a terminal, and the approval prompts.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Map, Value};

use crate::agent::log::events::{Event, Record};
use crate::agent::{Approval, Approver, Observer, Pause, Plan, PlanDecision, Step};
use crate::progress::clip;
use crate::{Error, Result};

/// A plan as a numbered list, one step per line plus its description.
pub fn format_plan(plan: &Plan) -> String {
    let mut lines = Vec::new();
    for (i, step) in plan.steps.iter().enumerate() {
        let args = Value::Object(step.args.clone());
        let after = if step.depends_on.is_empty() {
            String::new()
        } else {
            format!("  (after {})", step.depends_on.join(", "))
        };
        lines.push(format!("{:>3}. [{}] {} {}{}", i + 1, step.id, step.tool, clip(&args.to_string(), 160), after));
        if !step.description.is_empty() {
            lines.push(format!("       {}", step.description));
        }
    }
    lines.join("\n")
}

/// One event in words (several lines for a plan); `None` for events the timeline leaves out.
pub fn describe(event: &Event) -> Option<String> {
    Some(match event {
        Event::RunStarted { goal, settings, .. } => format!(
            "run started: \"{goal}\" (planner {}, executor {}, mode {}, workspace {})",
            settings.pair.planner,
            settings.pair.executor,
            settings.pair.mode.name(),
            settings.workspace.display()
        ),
        Event::ToolsSelected { top_k, offered, tools, left_out } => {
            let retrieval = if *top_k > 0 { format!(" (--tools-top-k {top_k})") } else { String::new() };
            let mut text = format!("planner sees {} of {offered} tools{retrieval}: {}", tools.len(), tools.join(", "));
            if !left_out.is_empty() {
                text.push_str(&format!("; left out for the goal: {}", left_out.join(", ")));
            }
            text
        }
        Event::ModelLoaded { role, id, sha256, ms, .. } => {
            let sha = sha256.as_deref().map(|s| format!(", sha256 {}…", &s[..s.len().min(12)])).unwrap_or_default();
            format!("loaded {role} {id} in {:.1} s{sha}", *ms as f64 / 1000.0)
        }
        Event::PlanWritten { version, origin, plan, issues, usage, reason, mends, thinking, .. } => {
            let cost = usage
                .map(|u| format!(" [{} tokens in, {} out, {:.1} s]", u.tokens_in, u.tokens_out, u.ms as f64 / 1000.0))
                .unwrap_or_default();
            let origin =
                serde_json::to_value(origin).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
            let mut text = format!("plan v{version} ({origin}: {}){cost}:\n{}", clip(reason, 100), format_plan(plan));
            if let Some(thought) = thinking {
                text.push_str(&format!("\n     thought: {}", clip(thought, 300)));
            }
            for mend in mends {
                text.push_str(&format!("\n     ~ mended {mend}"));
            }
            for issue in issues {
                text.push_str(&format!("\n     ! {issue}"));
            }
            text
        }
        Event::PlanApproval { version, decision, by } => format!("plan v{version} {decision} by {by}"),
        Event::StepApproval { step, decision, .. } => format!("{step}: tool call {decision}"),
        Event::StepStarted { .. } => return None,
        Event::ExecutorCall { step, purpose, role, usage, .. } => format!(
            "{step}: {} wrote {purpose} [{} tokens in, {} out, {:.1} s]",
            role.as_deref().unwrap_or("executor"),
            usage.tokens_in,
            usage.tokens_out,
            usage.ms as f64 / 1000.0
        ),
        Event::ToolCall { step, tool, args, .. } => {
            format!("{step}: call {tool} {}", clip(&Value::Object(args.clone()).to_string(), 160))
        }
        Event::StepFinished { step, tool, output, error, ms, via, .. } => match (output, error) {
            (Some(output), _) => format!("✓ {step} {tool} → {} ({ms} ms, {via})", clip(&output.to_string(), 160)),
            (None, error) => {
                format!("✗ {step} {tool} failed: {} ({ms} ms)", clip(error.as_deref().unwrap_or("?"), 300))
            }
        },
        Event::Replan { from_version, reason } => format!("replanning after v{from_version}: {}", clip(reason, 300)),
        Event::Joined { verdict, text, role, usage, .. } => match verdict.as_str() {
            "answer" => format!("joined by the {role} ({} ms): answer checked", usage.ms),
            "not_met" => format!("joined by the {role} ({} ms): goal not met: {}", usage.ms, clip(text, 300)),
            _ => format!("joined by the {role} ({} ms): no checked answer, answering from the steps", usage.ms),
        },
        Event::StepsEvaluated { role, judgments, sent_back, usage, .. } => {
            let doubted: Vec<String> = judgments.iter().filter(|j| !j.ok).map(|j| j.step.clone()).collect();
            let seconds = usage.ms as f64 / 1000.0;
            match doubted.as_slice() {
                [] => format!("steps checked by the {role} ({seconds:.1} s): all {} look right", judgments.len()),
                _ => format!(
                    "steps checked by the {role} ({seconds:.1} s): doubted {}{}",
                    clip(&doubted.join("; "), 300),
                    if *sent_back { "; back to the planner" } else { "" }
                ),
            }
        }
        Event::Answer { text } => format!("answer: {text}"),
        Event::RunFinished { stop, detail } => format!("finished ({stop}): {detail}"),
        Event::RuleApplied { rule, step, detail } => match step.is_empty() {
            true => format!("rule {rule}: {}", clip(detail, 300)),
            false => format!("{step}: rule {rule}: {}", clip(detail, 300)),
        },
        Event::Resumed { completed, rerun } => {
            let mut text = format!(
                "resumed; already done: {}",
                if completed.is_empty() { "none".into() } else { completed.join(", ") }
            );
            if !rerun.is_empty() {
                text.push_str(&format!(
                    "; run again (interrupted before their result was logged): {}",
                    rerun.join(", ")
                ));
            }
            text
        }
    })
}

/// The live view: spinners per step on a terminal, else one line per event on stderr.
pub struct TerminalObserver {
    quiet: bool,
    interactive: bool,
    multi: MultiProgress,
    bars: RefCell<HashMap<String, ProgressBar>>,
    planning: RefCell<Option<ProgressBar>>,
}

impl TerminalObserver {
    /// `quiet` shows nothing.
    pub fn new(quiet: bool) -> Self {
        let interactive = std::io::stderr().is_terminal();
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        Self { quiet, interactive, multi, bars: RefCell::default(), planning: RefCell::default() }
    }

    fn spinner(&self, message: String) -> ProgressBar {
        let bar = self.multi.add(ProgressBar::new_spinner());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
            bar.set_style(style);
        }
        bar.set_message(message);
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    }

    fn println(&self, text: &str) {
        if self.interactive {
            let _ = self.multi.println(text);
        } else {
            eprintln!("{text}");
        }
    }
}

impl Observer for TerminalObserver {
    fn on_event(&self, record: &Record) {
        if self.quiet {
            return;
        }
        let event = &record.event;
        if self.interactive {
            match event {
                Event::RunStarted { .. } | Event::Replan { .. } => {
                    *self.planning.borrow_mut() = Some(self.spinner("planning".into()));
                }
                Event::PlanWritten { .. } => {
                    if let Some(bar) = self.planning.borrow_mut().take() {
                        bar.finish_and_clear();
                    }
                }
                Event::StepStarted { step, tool, .. } => {
                    let bar = self.spinner(format!("{step} {tool}"));
                    self.bars.borrow_mut().insert(step.clone(), bar);
                    return;
                }
                Event::StepFinished { step, .. } => {
                    if let Some(bar) = self.bars.borrow_mut().remove(step) {
                        bar.finish_and_clear();
                    }
                }
                Event::ToolCall { .. } => return,
                _ => {}
            }
        }
        if matches!(event, Event::Answer { .. }) {
            return; // printed last, on stdout
        }
        if let Some(text) = describe(event) {
            self.println(&text);
        }
    }
}

/// Asks on the terminal: approve / edit / reject a plan, yes / no for a tool call.
pub struct TerminalApprover {
    /// Where the plan is written for `$EDITOR`.
    pub edit_file: PathBuf,
    /// What the run asks about (a call asked about because its tool is destructive says so).
    pub approve: Approval,
}

fn ask(question: &str) -> Result<String> {
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).map_err(|e| Error::io("reading the answer from the terminal", e))?;
    Ok(line.trim().to_lowercase())
}

impl TerminalApprover {
    fn edit(&self, plan: &Plan) -> Result<Option<Plan>> {
        let text = serde_json::to_string_pretty(plan).map_err(Error::encode("the plan"))?;
        std::fs::write(&self.edit_file, text)
            .map_err(|e| Error::io(format!("writing {}", self.edit_file.display()), e))?;
        let editor = crate::settings::env::editor();
        loop {
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("{editor} \"$1\""))
                .arg("sh")
                .arg(&self.edit_file)
                .status()
                .map_err(|e| Error::io(format!("starting the editor '{editor}' (set $EDITOR)"), e))?;
            if !status.success() {
                eprintln!("the editor exited with {status}; the plan is unchanged");
                return Ok(None);
            }
            let edited = std::fs::read_to_string(&self.edit_file)
                .map_err(|e| Error::io(format!("reading {}", self.edit_file.display()), e))?;
            match Plan::from_json(&edited) {
                Ok(plan) => return Ok(Some(plan)),
                Err(e) => {
                    eprintln!("the edited plan is not valid: {e}");
                    if ask("edit again? [Y/n] ")?.starts_with('n') {
                        return Ok(None);
                    }
                }
            }
        }
    }
}

impl Approver for TerminalApprover {
    fn review_plan(&mut self, plan: &Plan) -> Result<PlanDecision> {
        eprintln!("Plan v{} for: {}\n{}", plan.version, plan.goal, format_plan(plan));
        loop {
            match ask("[a]pprove, [e]dit, or [r]eject? ")?.as_str() {
                "a" | "approve" | "y" | "yes" => return Ok(PlanDecision::Approve),
                "r" | "reject" | "n" | "no" => return Ok(PlanDecision::Reject),
                "e" | "edit" => {
                    if let Some(edited) = self.edit(plan)? {
                        return Ok(PlanDecision::Edit(edited));
                    }
                }
                "" => return Ok(PlanDecision::Reject), // end of input: run nothing
                other => eprintln!("'{other}' is not one of a / e / r"),
            }
        }
    }

    fn review_step(&mut self, step: &Step, args: &Map<String, Value>) -> Result<bool> {
        let args = clip(&Value::Object(args.clone()).to_string(), 200);
        // Under the default `--approve destructive` only such calls are asked about: the user is told why.
        let why = if self.approve == Approval::Destructive {
            format!(
                "{} may change or delete data (its server marks it destructive; --yes approves such calls)\n",
                step.tool
            )
        } else {
            String::new()
        };
        let question = format!("{why}run {} {} {args}? [y/N] ", step.id, step.tool);
        Ok(matches!(ask(&question)?.as_str(), "y" | "yes"))
    }

    fn name(&self) -> &str {
        "user"
    }
}

/// Approval with no one to ask (stdin is not a terminal, and no `--yes`): a call that needs approval pauses the
/// run instead of refusing it. The log is closed before anything else happens, so the run is left unfinished and
/// `tandem resume ID --yes` (or `tandem resume ID` in a terminal) goes on from that call.
pub struct PausingApprover {
    /// The pause, and what the run waits for once it paused.
    pub pause: Pause,
}

impl Approver for PausingApprover {
    fn review_plan(&mut self, plan: &Plan) -> Result<PlanDecision> {
        Err(self.pause.pause(format!("plan v{}", plan.version)))
    }

    fn review_step(&mut self, step: &Step, args: &Map<String, Value>) -> Result<bool> {
        let args = clip(&Value::Object(args.clone()).to_string(), 200);
        Err(self.pause.pause(format!("step {}, a call of {} {args},", step.id, step.tool)))
    }

    fn name(&self) -> &str {
        "user"
    }
}
