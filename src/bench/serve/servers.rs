//! The servers under load, as child processes: `tandem serve` (this same binary) and llama.cpp's `llama-server`
//! on the same GGUF file, threads and number of slots; each ready once `/health` answers 200, killed when
//! dropped. Their standard error is kept, so a server that will not start says why.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// Which server a figure is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerKind {
    /// `tandem serve`.
    Tandem,
    /// llama.cpp's `llama-server`.
    LlamaServer,
}

impl ServerKind {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Tandem => "tandem",
            ServerKind::LlamaServer => "llama-server",
        }
    }
}

/// How a server is started for one level.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The GGUF file both serve.
    pub model: PathBuf,
    /// The name requests use (`--alias` for llama-server; tandem serves a file under its stem).
    pub model_name: String,
    /// Compute threads.
    pub threads: usize,
    /// Generation slots (`--parallel`, llama-server's `-np`): the level's number of clients.
    pub slots: usize,
}

/// Context each llama-server slot gets: the longest prompt (a `long` request, about 2,000 tokens) and its answer.
/// llama-server splits `-c` among its slots; left at the model's own, 16 slots of a 32k model would get 2,048
/// each, too few for a `long` request.
const SLOT_CONTEXT: usize = 4096;

/// How long a server may take to load its model and answer `/health`.
const START_TIMEOUT: Duration = Duration::from_secs(300);

/// A started server, killed when dropped.
pub struct RunningServer {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    log: Arc<Mutex<String>>,
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RunningServer {
    /// `tandem serve` (the binary `tandem`, normally this process's own) with one model as planner and executor,
    /// as it runs by default otherwise (its prompt-prefix store on: that is how its slots share a system prompt).
    pub fn tandem(tandem: &Path, launch: &Launch) -> Result<RunningServer> {
        let model = launch.model.to_string_lossy().into_owned();
        let mut command = Command::new(tandem);
        command
            .args(["serve", "--quiet", "--host", "127.0.0.1", "--port", "0"])
            .args(["--planner", &model, "--executor", &model])
            .args(["--threads", &launch.threads.to_string(), "--parallel", &launch.slots.to_string()])
            .args(["--queue", &(launch.slots * 4).max(64).to_string()])
            .env_remove("TANDEM_API_KEY");
        let (mut child, log) = spawn(command, tandem)?;
        // `--port 0`: the server prints the address it bound.
        let deadline = Instant::now() + START_TIMEOUT;
        let base = loop {
            if let Some(base) = log.lock().unwrap_or_else(|p| p.into_inner()).lines().find_map(|line| {
                line.split("listening on ").nth(1).and_then(|rest| rest.split_whitespace().next()).map(String::from)
            }) {
                break base;
            }
            check_alive(&mut child, &log, "tandem serve", deadline)?;
            std::thread::sleep(Duration::from_millis(50));
        };
        let server = RunningServer { child, base, log };
        server.wait_healthy("tandem serve", deadline)?;
        Ok(server)
    }

    /// llama.cpp's `llama-server` at `bin` on the same file, as a user starts it: `-np` slots with a context
    /// big enough for each, the same threads for prompt and generation, all layers on the CPU, and `--jinja` so it
    /// takes tools (its own template handling and call parsing); everything else, prompt caching included, at its
    /// defaults.
    pub fn llama_server(bin: &Path, launch: &Launch) -> Result<RunningServer> {
        let port = free_port()?;
        let mut command = Command::new(bin);
        command
            .arg("-m")
            .arg(&launch.model)
            .args(["--alias", &launch.model_name, "--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-t", &launch.threads.to_string(), "-tb", &launch.threads.to_string(), "-ngl", "0"])
            .args(["-np", &launch.slots.to_string(), "-c", &(launch.slots * SLOT_CONTEXT).to_string()])
            .arg("--jinja");
        let (child, log) = spawn(command, bin)?;
        let server = RunningServer { child, base: format!("http://127.0.0.1:{port}"), log };
        server.wait_healthy("llama-server", Instant::now() + START_TIMEOUT)?;
        Ok(server)
    }

    /// The end of the server's log (for errors).
    pub fn log_tail(&self) -> String {
        tail(&self.log.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Waits until `GET /health` answers 200 (llama-server answers 503 while it loads).
    fn wait_healthy(&self, name: &str, deadline: Instant) -> Result<()> {
        let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(5)).build();
        let url = format!("{}/health", self.base);
        loop {
            if let Ok(response) = agent.get(&url).call() {
                if response.status() == 200 {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(Error::Bench(format!(
                    "{name} did not answer {url} within {START_TIMEOUT:?}; its log ends:\n{}",
                    self.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Starts `command` with its standard error collected on a thread (so the pipe never fills).
fn spawn(mut command: Command, bin: &Path) -> Result<(Child, Arc<Mutex<String>>)> {
    // `Drop` kills the server when the benchmark ends or fails; a benchmark killed outright runs no `Drop`, and a
    // server left behind would hold its port and the cores the next measurement needs.
    crate::children::die_with_parent(&mut command);
    let mut child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().map_err(|e| {
        Error::Bench(format!(
            "could not run {}: {e} (llama-server: build it with scripts/build-llama-server.sh, which prints its path)",
            bin.display()
        ))
    })?;
    let log = Arc::new(Mutex::new(String::new()));
    let stderr = child.stderr.take().expect("piped");
    let sink = log.clone();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut line = Vec::new();
        // Lines as bytes: a server may print something that is not UTF-8.
        while reader.by_ref().take(1 << 16).read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            let mut log = sink.lock().unwrap_or_else(|p| p.into_inner());
            log.push_str(&String::from_utf8_lossy(&line));
            // Keep the start (where the address is printed) and a bounded tail.
            if log.len() > 1 << 20 {
                let cut = log.len() - (1 << 19);
                let cut = (cut..log.len()).find(|&i| log.is_char_boundary(i)).unwrap_or(log.len());
                log.replace_range(4096.min(cut)..cut, "\n…\n");
            }
            line.clear();
        }
    });
    Ok((child, log))
}

/// An error when the child has exited or the deadline has passed.
fn check_alive(child: &mut Child, log: &Mutex<String>, name: &str, deadline: Instant) -> Result<()> {
    let log_tail = || tail(&log.lock().unwrap_or_else(|p| p.into_inner()));
    if let Ok(Some(status)) = child.try_wait() {
        return Err(Error::Bench(format!(
            "{name} exited ({status}) before it listened; its log ends:\n{}",
            log_tail()
        )));
    }
    if Instant::now() >= deadline {
        return Err(Error::Bench(format!(
            "{name} did not listen within {START_TIMEOUT:?}; its log ends:\n{}",
            log_tail()
        )));
    }
    Ok(())
}

/// The last lines of a log.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().rev().take(15).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// A port free now on 127.0.0.1 (for llama-server, which cannot take port 0 and print what it bound).
fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| Error::io("finding a free port", e))?;
    Ok(listener.local_addr().map_err(|e| Error::io("finding a free port", e))?.port())
}
