//! The `tasks` suite: end-to-end goals (`benches/tasks.toml`) run by the real agent, each in a fixture
//! workspace, each checked against its expected answer or file. Every run's audit log is kept beside the records.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::agent::log::events::{EventLog, RunSettings, StopReason};
use crate::agent::{Agent, AutoApprove, ModelSource, NoObserver, RunOutcome, RunParts};
use crate::bench::task_servers;
use crate::settings::PairSettings;
use crate::tools::{ToolContext, ToolRegistry, Workspace};
use crate::{Error, Result};

/// The built-in suite.
pub const BUILTIN_TASKS: &str = include_str!("../../benches/tasks.toml");

/// One goal with a check.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// Unique id.
    pub id: String,
    /// arithmetic, units, files, text, replan, distractors.
    pub category: String,
    /// The goal given to `tandem run`.
    pub goal: String,
    /// Fixture files: path in the workspace → content.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Offer `write_file`.
    #[serde(default)]
    pub allow_write: bool,
    /// Offer `shell`, allowed to run these programs (as `--allow-shell`).
    #[serde(default)]
    pub allow_shell: Vec<String>,
    /// User tools (a `--tools` file's text; `{ws}` is the workspace path).
    #[serde(default)]
    pub tools: Option<String>,
    /// The answer must contain one of these (normalised).
    #[serde(default)]
    pub answer_any: Vec<String>,
    /// The answer must contain every one of these (goals with several parts).
    #[serde(default)]
    pub answer_all: Vec<String>,
    /// The answer must contain none of these (normalised): what a wrong answer says, where the right one's words
    /// can stand in it too ("yes" in "Yes, you haven't paid it").
    #[serde(default)]
    pub answer_none: Vec<String>,
    /// A file the run must leave in the workspace.
    #[serde(default)]
    pub file: Option<String>,
    /// That file must contain one of these (normalised).
    #[serde(default)]
    pub file_any: Vec<String>,
    /// That file must contain every one of these (normalised): what a change must keep, beside what it adds.
    #[serde(default)]
    pub file_all: Vec<String>,
    /// Commands run (`sh -c`) in the workspace after the run, each of which must exit 0: checks of state a file
    /// check cannot read (a database's rows, a spreadsheet's cells). What one prints is the reason it failed.
    #[serde(default)]
    pub verify: Vec<String>,
    /// MCP servers of the suite's `[servers]` whose tools this task is offered, started in its workspace.
    #[serde(default)]
    pub mcp: Vec<String>,
    /// Commands run (`sh -c`) in the workspace after its files are written, before the run (e.g. `git init`).
    #[serde(default)]
    pub setup: Vec<String>,
}

/// A tasks file: its tasks and what the suite starts for them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSuite {
    /// The goals.
    pub task: Vec<Task>,
    /// MCP servers by name, as entries of an `mcpServers` file (`command`, `args`, `env`); `{ws}` in their strings is
    /// the task's workspace, `{web}` the address of the suite's web server.
    #[serde(default)]
    pub servers: BTreeMap<String, Value>,
    /// Pages (path = content) a local web server serves while the suite runs; `{web}` in goals and tools is its
    /// address (`http://127.0.0.1:PORT`).
    #[serde(default)]
    pub pages: BTreeMap<String, String>,
    /// The port the pages are served on (`pages_port = 8471`): the address is in the goals' text, so a fixed port
    /// keeps the goals, and a greedy planner's plans, the same from run to run. Absent: a port the system picks.
    #[serde(default)]
    pub pages_port: Option<u16>,
}

/// Parses a tasks file; `origin` names it in errors (which carry the line).
pub fn parse_tasks(text: &str, origin: &Path) -> Result<Vec<Task>> {
    Ok(parse_suite(text, origin)?.task)
}

/// Parses a tasks file with its servers and pages; `origin` names it in errors (which carry the line).
pub fn parse_suite(text: &str, origin: &Path) -> Result<TaskSuite> {
    let file: TaskSuite =
        toml::from_str(text).map_err(|e| Error::InvalidInput { path: origin.to_path_buf(), message: e.to_string() })?;
    let mut seen = std::collections::HashSet::new();
    for task in &file.task {
        if !seen.insert(task.id.clone()) {
            return Err(Error::InvalidInput {
                path: origin.to_path_buf(),
                message: format!("task id '{}' appears twice", task.id),
            });
        }
        if let Some(unknown) = task.mcp.iter().find(|name| !file.servers.contains_key(*name)) {
            return Err(Error::InvalidInput {
                path: origin.to_path_buf(),
                message: format!(
                    "task '{}' names the MCP server '{unknown}', which [servers] does not define (it defines {:?})",
                    task.id,
                    file.servers.keys().collect::<Vec<_>>()
                ),
            });
        }
        if file.pages.is_empty() && task.goal.contains("{web}") {
            return Err(Error::InvalidInput {
                path: origin.to_path_buf(),
                message: format!("task '{}' uses {{web}}, but the suite has no [pages] to serve", task.id),
            });
        }
        if task.answer_any.is_empty() && task.answer_all.is_empty() && task.file.is_none() && task.verify.is_empty() {
            return Err(Error::InvalidInput {
                path: origin.to_path_buf(),
                message: format!("task '{}' has no check (answer_any, answer_all, file or verify)", task.id),
            });
        }
        if task.file.is_none() && !(task.file_any.is_empty() && task.file_all.is_empty()) {
            return Err(Error::InvalidInput {
                path: origin.to_path_buf(),
                message: format!("task '{}' has file_any or file_all but no file to read them in", task.id),
            });
        }
    }
    Ok(file)
}

/// The built-in tasks.
pub fn builtin_tasks() -> Vec<Task> {
    parse_tasks(BUILTIN_TASKS, Path::new("benches/tasks.toml")).expect("the built-in tasks parse (tested)")
}

/// Lower case, thousands separators and surrounding space removed: how answers and expectations are compared.
pub fn normalise(text: &str) -> String {
    text.to_lowercase().replace(',', "").trim().to_string()
}

/// Whether `text` (normalised) mentions `want` (normalised). A number must stand alone: `9` is not found in `19`,
/// `-9`, `9.5` or `95`, but is in `9.0`, `9 km` and `9th` (a wrong sign or a longer number is a wrong answer, not a lucky match).
pub fn mentions(text: &str, want: &str) -> bool {
    let numeric_start = want.starts_with(|c: char| c.is_ascii_digit());
    let numeric_end = want.ends_with(|c: char| c.is_ascii_digit());
    text.match_indices(want).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = &text[at + want.len()..];
        let clean_before = !numeric_start || !before.is_some_and(|c| c.is_ascii_digit() || c == '.' || c == '-');
        let clean_after = !numeric_end || {
            let rest = after.strip_prefix('.').map(|r| r.trim_start_matches('0')).unwrap_or(after);
            let zeros_only = after.starts_with('.') && !rest.starts_with(|c: char| c.is_ascii_digit());
            zeros_only || !after.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        };
        clean_before && clean_after
    })
}

/// Whether the run passed the task's checks, with the reason when it did not.
pub fn check(task: &Task, answer: Option<&str>, workspace: &Path) -> (bool, String) {
    let got = normalise(answer.unwrap_or_default());
    if !task.answer_any.is_empty() && !task.answer_any.iter().any(|want| mentions(&got, &normalise(want))) {
        return (false, format!("answer {:?} contains none of {:?}", answer.unwrap_or_default(), task.answer_any));
    }
    let missing: Vec<&String> = task.answer_all.iter().filter(|want| !mentions(&got, &normalise(want))).collect();
    if !missing.is_empty() {
        return (false, format!("answer {:?} lacks {missing:?}", answer.unwrap_or_default()));
    }
    let wrong: Vec<&String> = task.answer_none.iter().filter(|said| mentions(&got, &normalise(said))).collect();
    if !wrong.is_empty() {
        return (false, format!("answer {:?} says {wrong:?}", answer.unwrap_or_default()));
    }
    if let Some(file) = &task.file {
        let content = std::fs::read_to_string(workspace.join(file)).unwrap_or_default();
        let got = normalise(&content);
        if !task.file_any.is_empty() && !task.file_any.iter().any(|want| mentions(&got, &normalise(want))) {
            return (false, format!("{file} holds {content:?}, which contains none of {:?}", task.file_any));
        }
        let lost: Vec<&String> = task.file_all.iter().filter(|want| !mentions(&got, &normalise(want))).collect();
        if !lost.is_empty() {
            return (false, format!("{file} holds {content:?}, which lacks {lost:?}"));
        }
    }
    for command in &task.verify {
        let output = std::process::Command::new("sh").arg("-c").arg(command).current_dir(workspace).output();
        match output {
            Ok(output) if output.status.success() => {}
            Ok(output) => {
                let said = String::from_utf8_lossy(&output.stdout).trim().to_string()
                    + String::from_utf8_lossy(&output.stderr).trim();
                return (false, format!("check `{command}` failed: {}", said.chars().take(400).collect::<String>()));
            }
            Err(e) => return (false, format!("check `{command}` could not run: {e}")),
        }
    }
    (true, String::new())
}

/// Where one task runs: its workspace and its run log under the benchmark directory.
pub struct TaskSetup<'a> {
    /// The benchmark run's directory.
    pub bench_dir: &'a Path,
    /// The pair and how it works (its model ids are recorded; the models come from `models`).
    pub pair: PairSettings,
    /// The planner sees only this many tools, chosen by retrieval (0: all).
    pub tools_top_k: usize,
    /// The suite's MCP servers, by name.
    pub servers: &'a BTreeMap<String, Value>,
    /// The address of the suite's web server, when it has pages.
    pub web: Option<&'a str>,
}

/// Runs one task with the agent and returns its record.
pub fn run_task(task: &Task, setup: &TaskSetup, models: &mut dyn ModelSource) -> Result<Value> {
    let workspace = setup.bench_dir.join("workspaces").join(&task.id);
    if workspace.exists() {
        // A resumed benchmark reruns an unfinished task from a clean workspace.
        std::fs::remove_dir_all(&workspace).map_err(|e| Error::io(format!("clearing {}", workspace.display()), e))?;
    }
    for (path, content) in &task.files {
        let target = workspace.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
        }
        std::fs::write(&target, content).map_err(|e| Error::io(format!("writing {}", target.display()), e))?;
    }
    std::fs::create_dir_all(&workspace).map_err(|e| Error::io(format!("creating {}", workspace.display()), e))?;
    task_servers::run_setup(&task.setup, &workspace, &task.id)?;
    let context =
        ToolContext::new(Workspace::new(&workspace)?).with_write(task.allow_write).with_shell(task.allow_shell.clone());
    let mut registry = ToolRegistry::builtins(&context);
    if let Some(tools) = &task.tools {
        let path = setup.bench_dir.join("workspaces").join(format!("{}.tools.toml", task.id));
        let text = task_servers::fill_text(tools, &workspace, setup.web);
        std::fs::write(&path, text).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        registry.load_file(&path)?;
    }
    let mcp_file = setup.bench_dir.join("workspaces").join(format!("{}.mcp.json", task.id));
    if !task.mcp.is_empty() {
        task_servers::start_mcp(&mut registry, &task.mcp, setup.servers, &workspace, setup.web, &mcp_file)?;
    }
    let goal = task_servers::fill_text(&task.goal, &workspace, setup.web);
    let run_dir = setup.bench_dir.join("runs").join(&task.id);
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir).map_err(|e| Error::io(format!("clearing {}", run_dir.display()), e))?;
    }
    std::fs::create_dir_all(&run_dir).map_err(|e| Error::io(format!("creating {}", run_dir.display()), e))?;
    let mut settings = RunSettings::new(&setup.pair.planner, &setup.pair.executor, &workspace);
    settings.pair = setup.pair.clone();
    settings.allow_write = task.allow_write;
    settings.allow_shell = task.allow_shell.clone();
    settings.tools_top_k = setup.tools_top_k;
    settings.budgets.max_seconds = 300;
    if !task.mcp.is_empty() {
        settings.mcp_config = Some(mcp_file);
    }
    let started = Instant::now();
    let mut approver = AutoApprove;
    let agent = Agent::start(
        &goal,
        settings,
        EventLog::create(&run_dir)?,
        RunParts { registry: &registry, context: &context, models, approver: &mut approver, observer: &NoObserver },
    )?;
    let outcome: RunOutcome = agent.run(None)?;
    let (passed, why) = check(task, outcome.answer.as_deref(), &workspace);
    let state = &outcome.state;
    Ok(json!({
        "sample": task.id,
        "category": task.category,
        "input": goal,
        "prediction": outcome.answer,
        "gold": {"answer_any": task.answer_any, "answer_all": task.answer_all, "answer_none": task.answer_none, "file": task.file,
            "file_any": task.file_any, "file_all": task.file_all, "verify": task.verify},
        "score": {"success": passed && outcome.stop == StopReason::Done, "why": why},
        "stop": outcome.stop,
        "detail": outcome.detail,
        "steps": state.steps_run,
        "plan_tools": state.plan.as_ref().map(|p| p.steps.iter().map(|s| s.tool.clone()).collect::<Vec<_>>()),
        "replans": state.replans,
        "planner": state.planner,
        "executor": state.executor,
        "ms": started.elapsed().as_millis() as u64,
        "run_log": run_dir.join(EventLog::FILE),
    }))
}

/// Success rate and means over task records.
pub fn summarise(records: &[Value]) -> Value {
    let n = records.len().max(1) as f64;
    let sum = |f: &dyn Fn(&Value) -> f64| records.iter().map(f).sum::<f64>();
    let success = sum(&|r| f64::from(u8::from(r["score"]["success"].as_bool().unwrap_or(false))));
    let mut by_category: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for r in records {
        let entry = by_category.entry(r["category"].as_str().unwrap_or("?").to_string()).or_default();
        entry.0 += 1;
        entry.1 += usize::from(r["score"]["success"].as_bool().unwrap_or(false));
    }
    let mut ms: Vec<f64> = records.iter().map(|r| r["ms"].as_f64().unwrap_or(0.0)).collect();
    ms.sort_by(f64::total_cmp);
    json!({
        "samples": records.len(),
        "success_rate": success / n,
        "mean_steps": sum(&|r| r["steps"].as_f64().unwrap_or(0.0)) / n,
        "mean_replans": sum(&|r| r["replans"].as_f64().unwrap_or(0.0)) / n,
        "mean_planner_tokens": sum(&|r| r["planner"]["tokens_out"].as_f64().unwrap_or(0.0)) / n,
        "mean_executor_tokens": sum(&|r| r["executor"]["tokens_out"].as_f64().unwrap_or(0.0)) / n,
        "median_seconds": super::median(&ms) / 1000.0,
        "by_category": by_category.iter().map(|(k, (n, ok))| (k.clone(), json!({"samples": n, "success": ok}))).collect::<serde_json::Map<_, _>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(extra: &str) -> Task {
        let text = format!("[[task]]\nid = \"t\"\ncategory = \"c\"\ngoal = \"g\"\n{extra}\n");
        parse_tasks(&text, Path::new("t.toml")).unwrap().remove(0)
    }

    #[test]
    fn an_answer_that_says_what_answer_none_lists_fails_though_it_has_the_right_word() {
        let dir = tempfile::tempdir().unwrap();
        let paid = task("answer_any = [\"yes\"]\nanswer_none = [\"not\", \"n't\"]");
        assert!(check(&paid, Some("Yes, it was paid on 2026-11-28."), dir.path()).0);
        let (passed, why) = check(&paid, Some("Yes, I haven't paid my electricity bill."), dir.path());
        assert!(!passed && why.contains("n't"), "{why}");
    }

    #[test]
    fn a_change_must_keep_every_line_file_all_names_and_pass_every_verify_command() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("todo.txt"), "call the bank\nbuy milk\n").unwrap();
        let kept = task("file = \"todo.txt\"\nfile_any = [\"milk\"]\nfile_all = [\"call the bank\", \"buy milk\"]");
        assert_eq!(check(&kept, None, dir.path()), (true, String::new()));
        let lost = task("file = \"todo.txt\"\nfile_all = [\"pay rent\", \"buy milk\"]");
        let (passed, why) = check(&lost, None, dir.path());
        assert!(!passed && why.contains("pay rent") && !why.contains("\"buy milk\"]"), "{why}");
        let verified = task("verify = [\"grep -q milk todo.txt\", \"echo rows: 2; test 2 -eq 3\"]");
        let (passed, why) = check(&verified, None, dir.path());
        assert!(!passed && why.contains("test 2 -eq 3") && why.contains("rows: 2"), "the second check failed: {why}");
        assert!(check(&task("verify = [\"grep -q milk todo.txt\"]"), None, dir.path()).0);
    }

    #[test]
    fn file_checks_without_a_file_and_tasks_without_checks_are_refused() {
        let text = "[[task]]\nid = \"t\"\ncategory = \"c\"\ngoal = \"g\"\nanswer_any = [\"1\"]\nfile_all = [\"x\"]\n";
        let error = parse_tasks(text, Path::new("t.toml")).unwrap_err().to_string();
        assert!(error.contains("no file"), "{error}");
        let error = parse_tasks("[[task]]\nid = \"t\"\ncategory = \"c\"\ngoal = \"g\"\n", Path::new("t.toml"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("verify"), "{error}");
    }
}
