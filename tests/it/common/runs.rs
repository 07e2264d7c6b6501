//! Helpers for agent tests: a scratch directory with a workspace, user tools written as shell scripts, and the
//! `tandem` binary run on it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// A scratch directory: `ws/` (the workspace), `runs/` (run logs), tool files and plans beside them.
pub struct Scratch {
    /// Keeps the directory alive.
    pub dir: tempfile::TempDir,
}

impl Scratch {
    /// A fresh scratch directory with an empty workspace.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("ws")).expect("workspace");
        Self { dir }
    }

    /// A path inside the scratch directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The workspace.
    pub fn workspace(&self) -> PathBuf {
        self.path("ws")
    }

    /// Writes a file (relative to the scratch directory) and returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).expect("write scratch file");
        path
    }

    /// `tandem ARGS` with this scratch's runs directory, stdin closed; returns the output.
    pub fn tandem(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run tandem")
    }

    /// The command for `tandem ARGS` (not started).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tandem"));
        command
            .args(args)
            .env("TANDEM_RUNS_DIR", self.path("runs"))
            // No MCP servers from the user's default config file (~/.config/tandem/mcp.json).
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env_remove("TANDEM_MCP")
            // No settings from a configuration file named in the test's own environment.
            .env_remove("TANDEM_CONFIG")
            // Tests of given plans check the steps, and loading the planner to write an answer would slow each one
            // down; the joiner's own tests turn it back on (`--joiner planner`).
            .env("TANDEM_JOINER", "off")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// `tandem ARGS --json`, parsed; panics with stderr when stdout is not JSON.
    pub fn tandem_json(&self, args: &[&str]) -> (Value, Output) {
        let mut all: Vec<&str> = args.to_vec();
        all.push("--json");
        let output = self.tandem(&all);
        let json = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "tandem {args:?} did not print JSON ({e}).\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
        (json, output)
    }

    /// The events of the newest run, as JSON values.
    pub fn latest_events(&self) -> Vec<Value> {
        let runs = self.path("runs");
        let mut ids: Vec<PathBuf> = std::fs::read_dir(&runs).expect("runs dir").map(|e| e.unwrap().path()).collect();
        ids.sort();
        let log = std::fs::read_to_string(ids.last().expect("a run").join("events.jsonl")).expect("events.jsonl");
        log.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("event JSON")).collect()
    }
}

/// Names of the events, in order.
pub fn event_names(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| e["event"].as_str().unwrap_or_default().to_string()).collect()
}

/// A `[[tool]]` entry running `script` with `sh -c` (stdin, the JSON arguments, is read and dropped).
pub fn shell_tool(name: &str, description: &str, properties: &str, script: &str) -> String {
    format!(
        "[[tool]]\nname = \"{name}\"\ndescription = \"{description}\"\ncommand = [\"sh\", \"-c\", '''cat >/dev/null; {script}''']\n\
         timeout_secs = 60\nargs_schema = '{{\"type\": \"object\", \"properties\": {properties}}}'\n\n"
    )
}

/// Text of a file, or empty when it does not exist.
pub fn read_or_empty(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
