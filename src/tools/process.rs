//! Running a command for a tool: no shell interpreter, stdin fed from memory, stdout capped, stderr tail kept,
//! a time limit enforced by killing the whole process group (so children of a script die too), and writes
//! confined to the workspace by the kernel where it can (`confine`).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::error::{ToolError, ToolResult};

/// How much of standard error is kept (its end).
const STDERR_KEEP: usize = 8 * 1024;
/// How long to wait for the output pipes to close after the process exits.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// What a finished command left.
pub(crate) struct Captured {
    /// Exit status; `None` when we killed it for flooding its output.
    pub status: Option<ExitStatus>,
    /// Standard output, at most the cap.
    pub stdout: Vec<u8>,
    /// The end of standard error.
    pub stderr_tail: Vec<u8>,
    /// Whether standard output went past the cap (the process was then killed).
    pub overflowed: bool,
}

impl Captured {
    /// The end of standard error as text, for error messages.
    pub fn stderr_text(&self) -> String {
        let text = String::from_utf8_lossy(&self.stderr_tail);
        let trimmed = text.trim();
        if trimmed.is_empty() {
            "(nothing)".into()
        } else {
            trimmed.chars().rev().take(1000).collect::<Vec<_>>().into_iter().rev().collect()
        }
    }
}

/// Describes an exit status in words.
pub(crate) fn describe_status(status: &ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit code {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("killed by signal {signal}");
        }
    }
    "abnormal exit".into()
}

enum Stream {
    Out,
    Err,
}

enum Event {
    Overflow,
    Done(Stream, Vec<u8>, bool),
}

fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    {
        if let Ok(pid) = i32::try_from(child.id()) {
            // SAFETY: kill(2) with a negative pid signals the process group we created for this child
            // (`process_group(0)` makes its pid the group id); it touches no memory.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
    let _ = child.kill();
}

/// Runs `argv` in `cwd`, feeding `stdin`, for at most `timeout`, keeping at most `max_stdout` bytes of output.
pub(crate) fn run(
    tool: &str,
    argv: &[String],
    cwd: &Path,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
    max_stdout: usize,
) -> ToolResult<Captured> {
    let Some((program, rest)) = argv.split_first() else {
        return Err(ToolError::InvalidArgs { tool: tool.to_string(), message: "the command is empty".into() });
    };
    let mut command = Command::new(program);
    command
        .args(rest)
        .current_dir(cwd)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    // The program may write only inside its working directory, the workspace, where the kernel can enforce it.
    super::confine::confine(&mut command, cwd).map_err(|source| ToolError::Spawn {
        tool: tool.to_string(),
        program: program.clone(),
        source,
    })?;
    let started = Instant::now();
    let mut child = command.spawn().map_err(|source| ToolError::Spawn {
        tool: tool.to_string(),
        program: program.clone(),
        source,
    })?;

    if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A child that never reads its input must not block us: write from a thread, ignore a closed pipe.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&data);
        });
    }
    let (events, inbox) = mpsc::channel::<Event>();
    if let Some(mut out) = child.stdout.take() {
        let events = events.clone();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 8192];
            let mut overflowed = false;
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let room = max_stdout.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                if n > room {
                    overflowed = true;
                    let _ = events.send(Event::Overflow);
                    break;
                }
            }
            let _ = events.send(Event::Done(Stream::Out, kept, overflowed));
        });
    }
    if let Some(mut err) = child.stderr.take() {
        let events = events.clone();
        std::thread::spawn(move || {
            let mut tail = Vec::new();
            let mut buf = [0u8; 8192];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > 2 * STDERR_KEEP {
                    tail.drain(..tail.len() - STDERR_KEEP);
                }
            }
            if tail.len() > STDERR_KEEP {
                tail.drain(..tail.len() - STDERR_KEEP);
            }
            let _ = events.send(Event::Done(Stream::Err, tail, false));
        });
    }
    drop(events);

    let mut stdout = None;
    let mut stderr = None;
    let mut overflowed = false;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(_) => {
                kill_group(&mut child);
                break child.wait().ok();
            }
        }
        if overflowed {
            kill_group(&mut child);
            let _ = child.wait();
            break None;
        }
        let now = Instant::now();
        let deadline = started + timeout;
        if now >= deadline {
            kill_group(&mut child);
            let _ = child.wait();
            timed_out = true;
            break None;
        }
        match inbox.recv_timeout((deadline - now).min(Duration::from_millis(10))) {
            Ok(Event::Overflow) => overflowed = true,
            Ok(Event::Done(Stream::Out, data, over)) => {
                overflowed |= over;
                stdout = Some(data);
            }
            Ok(Event::Done(Stream::Err, data, _)) => stderr = Some(data),
            Err(_) => {}
        }
    };
    if timed_out {
        return Err(ToolError::Timeout { tool: tool.to_string(), limit: timeout });
    }
    // Collect what the readers hold. A grandchild may keep a pipe open after the child exits: give it a grace
    // period, then kill the group, then give up on that stream.
    let mut killed_stragglers = false;
    let mut wait_until = Instant::now() + DRAIN_GRACE;
    while stdout.is_none() || stderr.is_none() {
        let now = Instant::now();
        if now >= wait_until {
            if killed_stragglers {
                break;
            }
            kill_group(&mut child);
            killed_stragglers = true;
            wait_until = now + DRAIN_GRACE;
            continue;
        }
        match inbox.recv_timeout(wait_until - now) {
            Ok(Event::Overflow) => overflowed = true,
            Ok(Event::Done(Stream::Out, data, over)) => {
                overflowed |= over;
                stdout = Some(data);
            }
            Ok(Event::Done(Stream::Err, data, _)) => stderr = Some(data),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    Ok(Captured {
        status: if overflowed { None } else { status },
        stdout: stdout.unwrap_or_default(),
        stderr_tail: stderr.unwrap_or_default(),
        overflowed,
    })
}
