//! Runs killed with SIGKILL at every event boundary of a plan with side effects (a file write, an allowlisted
//! `shell` command, a command tool that appends to a file, an appending `write_file`), then resumed: the run
//! finishes with the uninterrupted run's answer, every side effect happened exactly once, and the log parses
//! whole. And in the window between a tool's effect and its logged result, where no log can know whether the
//! effect happened: calls safe to repeat run again, the others are refused with the step named.
//!
//! The crash comes from the process itself (`TANDEM_FAULT_KILL`, read only by these tests): SIGKILL right after
//! event N is synced, or right after step S's tool returned.

use std::path::PathBuf;

use crate::common::runs::{read_or_empty, shell_tool, Scratch};
use serde_json::Value;
use tandem::agent::log::events::read_log;

/// A scratch directory with the side-effecting plan and its tools written.
struct Setup {
    scratch: Scratch,
    plan: PathBuf,
    tools: PathBuf,
}

/// s1 computes, s2 writes a file, s3 runs `mkdir` (a second run would fail: the directory exists), s4 appends a
/// line to `count.log` through a command tool, s5 appends to a file with `write_file`, s6 computes the answer.
/// A chain, so the events come in one order.
fn setup() -> Setup {
    let scratch = Scratch::new();
    // In the workspace: tool programs may write only there.
    let counter = scratch.workspace().join("count.log");
    let tools = shell_tool(
        "log_line",
        "Append a line to the log.",
        "{}",
        &format!("echo line >> '{}'; echo '{{\"logged\": 1}}'", counter.display()),
    );
    let tools = scratch.write("tools.toml", &tools);
    let plan = scratch.write(
        "plan.json",
        r#"{"goal": "write, mkdir, log, journal, add", "steps": [
            {"id": "s1", "tool": "calculator", "args": {"expression": "6*7"}},
            {"id": "s2", "tool": "write_file", "args": {"path": "out.txt", "content": "$s1.result$"}, "depends_on": ["s1"]},
            {"id": "s3", "tool": "shell", "args": {"command": "mkdir made"}, "depends_on": ["s2"]},
            {"id": "s4", "tool": "log_line", "args": {}, "depends_on": ["s3"]},
            {"id": "s5", "tool": "write_file", "args": {"path": "journal.txt", "content": "entry\n", "append": true}, "depends_on": ["s4"]},
            {"id": "s6", "tool": "calculator", "args": {"expression": "$s1.result$ + 1"}, "depends_on": ["s5"]}]}"#,
    );
    Setup { scratch, plan, tools }
}

impl Setup {
    /// `tandem run` of the plan, with `TANDEM_FAULT_KILL` set to `kill` when given.
    fn run(&self, kill: Option<&str>) -> std::process::Output {
        let workspace = self.scratch.workspace();
        let mut command = self.scratch.command(&[
            "run",
            "--plan",
            self.plan.to_str().unwrap(),
            "--tools",
            self.tools.to_str().unwrap(),
            "--workspace",
            workspace.to_str().unwrap(),
            "--allow-write",
            "--allow-shell",
            "mkdir",
            "--max-replans",
            "0",
            "--json",
        ]);
        if let Some(kill) = kill {
            command.env("TANDEM_FAULT_KILL", kill);
        }
        command.output().unwrap()
    }

    fn resume(&self, extra: &[&str]) -> std::process::Output {
        let mut args = vec!["resume", "latest", "--json"];
        args.extend_from_slice(extra);
        self.scratch.tandem(&args)
    }

    /// How many times each side effect happened: (out.txt written, `made` exists, lines logged, journal entries).
    fn effects(&self) -> (bool, bool, usize, usize) {
        let ws = self.scratch.workspace();
        (
            read_or_empty(&ws.join("out.txt")) == "42",
            ws.join("made").is_dir(),
            read_or_empty(&ws.join("count.log")).lines().count(),
            read_or_empty(&ws.join("journal.txt")).matches("entry").count(),
        )
    }

    fn log(&self) -> tandem::agent::log::events::LogContents {
        let runs = self.scratch.path("runs");
        let run = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap().path();
        read_log(&run.join("events.jsonl")).unwrap()
    }
}

fn stdout_json(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn killed(output: &std::process::Output) -> bool {
    use std::os::unix::process::ExitStatusExt;
    output.status.signal() == Some(9)
}

/// Steps that finished successfully, by id, counted over the whole log.
fn successes(log: &tandem::agent::log::events::LogContents, step: &str) -> usize {
    log.records
        .iter()
        .filter(
            |r| matches!(&r.event, tandem::agent::Event::StepFinished { step: s, output: Some(_), .. } if s == step),
        )
        .count()
}

#[test]
fn killed_at_every_event_boundary_then_resumed_finishes_once() {
    let reference = setup();
    let output = reference.run(None);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let answer = stdout_json(&output)["answer"].clone();
    assert_eq!(answer, "43");
    assert_eq!(reference.effects(), (true, true, 1, 1));
    let events = reference.log().records.len() as u64;
    assert!(events >= 20, "{events} events");

    let mut in_doubt_refusals = 0;
    for boundary in 0..events {
        let case = setup();
        let crashed = case.run(Some(&format!("event:{boundary}")));
        assert!(killed(&crashed), "event {boundary}: not killed: {:?}", crashed.status);
        let mut resumed = case.resume(&[]);
        if boundary + 1 == events {
            // Killed after its last event: the run had finished, and says so.
            assert_eq!(resumed.status.code(), Some(1));
            assert!(String::from_utf8_lossy(&resumed.stderr).contains("already finished"));
        } else {
            let stderr = String::from_utf8_lossy(&resumed.stderr).into_owned();
            if stderr.contains("--rerun-in-doubt") {
                // The kill came right after a call of a tool not safe to repeat was logged; at an event boundary
                // the tool had not run yet: the user checks that (here: the effects so far) and says so.
                in_doubt_refusals += 1;
                assert_eq!(resumed.status.code(), Some(1), "event {boundary}: {stderr}");
                let (_, made, lines, entries) = case.effects();
                assert!(made as usize + lines + entries < 3, "event {boundary}: every effect is already there");
                let before = case.effects();
                resumed = case.resume(&["--rerun-in-doubt"]);
                assert_ne!(case.effects(), before, "event {boundary}: the rerun had no effect");
            }
            assert!(resumed.status.success(), "event {boundary}: {}", String::from_utf8_lossy(&resumed.stderr));
            assert_eq!(stdout_json(&resumed)["answer"], answer, "event {boundary}");
        }
        assert_eq!(case.effects(), (true, true, 1, 1), "event {boundary}: each side effect once");
        let log = case.log();
        assert!(log.bad_lines.is_empty(), "event {boundary}: {:?}", log.bad_lines);
        for step in ["s1", "s2", "s3", "s4", "s5", "s6"] {
            assert_eq!(successes(&log, step), 1, "event {boundary}: step {step}");
        }
    }
    // s3, s4 and s5 are not safe to repeat: a kill right after each one's call was logged asks the user.
    assert_eq!(in_doubt_refusals, 3);
    eprintln!("crash sweep: {events} boundaries, {in_doubt_refusals} asked the user");
}

#[test]
fn killed_between_effect_and_result_reruns_only_what_is_safe_to_repeat() {
    // s2 overwrites a file with the same content: run again on its own, the result is the same.
    let case = setup();
    assert!(killed(&case.run(Some("tool:s2"))));
    let resumed = case.resume(&[]);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(stdout_json(&resumed)["answer"], "43");
    assert_eq!(case.effects(), (true, true, 1, 1));
    let log = case.log();
    let rerun = log.records.iter().find_map(|r| match &r.event {
        tandem::agent::Event::Resumed { rerun, .. } => Some(rerun.clone()),
        _ => None,
    });
    assert_eq!(rerun, Some(vec!["s2".to_string()]));

    // s3 (mkdir), s4 (a command tool not declared idempotent) and s5 (an append) took effect; a rerun would do
    // it twice, so resume refuses, names the step, and changes nothing.
    for (step, effects) in [("s3", (true, true, 0, 0)), ("s4", (true, true, 1, 0)), ("s5", (true, true, 1, 1))] {
        let case = setup();
        assert!(killed(&case.run(Some(&format!("tool:{step}")))), "{step}");
        assert_eq!(case.effects(), effects, "{step}: the effect happened before the kill");
        let events = case.log().records.len();
        let refused = case.resume(&[]);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{step}: {stderr}");
        assert!(stderr.contains(&format!("calling {step} (")) && stderr.contains("--rerun-in-doubt"), "{stderr}");
        assert_eq!(case.effects(), effects, "{step}: nothing ran again");
        assert_eq!(case.log().records.len(), events, "{step}: nothing was logged");
    }
}

#[test]
fn a_run_holds_its_lock_so_resuming_it_meanwhile_is_refused() {
    let scratch = Scratch::new();
    let block = scratch.write("block", "");
    let tools = shell_tool(
        "gate",
        "Wait until the gate opens.",
        "{}",
        &format!("while [ -e '{}' ]; do sleep 0.05; done; echo '{{\"open\": true}}'", block.display()),
    );
    let tools_path = scratch.write("tools.toml", &tools);
    let plan = scratch.write("plan.json", r#"{"goal": "wait", "steps": [{"id": "s1", "tool": "gate", "args": {}}]}"#);
    let mut run = scratch
        .command(&["run", "--plan", plan.to_str().unwrap(), "--tools", tools_path.to_str().unwrap()])
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !read_or_empty(&latest_log(&scratch)).contains("tool_call") {
        assert!(started.elapsed().as_secs() < 30, "the run never called the gate");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let resume = scratch.tandem(&["resume", "latest"]);
    std::fs::remove_file(&block).unwrap();
    let finished = run.wait().unwrap();
    assert_eq!(resume.status.code(), Some(1), "{}", String::from_utf8_lossy(&resume.stderr));
    assert!(String::from_utf8_lossy(&resume.stderr).contains("another process"));
    assert!(finished.success());
}

fn latest_log(scratch: &Scratch) -> PathBuf {
    std::fs::read_dir(scratch.path("runs"))
        .ok()
        .and_then(|mut entries| entries.next())
        .and_then(|entry| entry.ok())
        .map(|entry| entry.path().join("events.jsonl"))
        .unwrap_or_default()
}
