//! `tandem serve` reads files off its HTTP workers: benchmark results that do not finish reading (named pipes no
//! one has written yet, standing for a slow disk or a 64 MiB file) are asked for on more requests than the runtime
//! has workers (two), and another client's request is still answered while every one of those reads waits; then
//! the reads finish and are answered too. A handler that read on its worker would hold both workers: the third
//! read would never start and `/health` would not be answered until the pipes were written, which this test only
//! does after.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::serve::{call, Server, KEY};

/// More stalled reads than the runtime's two workers.
const READS: usize = 4;

/// Opens the pipe's writing end without blocking once the server has opened it to read (`ENXIO` before then);
/// `None` if it has not within `wait`.
fn writer_once_read(pipe: &Path, wait: Duration) -> Option<File> {
    let deadline = Instant::now() + wait;
    loop {
        match OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(pipe) {
            Ok(file) => return Some(file),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => return None,
        }
    }
}

#[test]
fn serve_answers_other_clients_while_files_are_read() {
    use std::io::Write;
    let scratch = tempfile::tempdir().unwrap();
    let results = scratch.path().join("bench-results");
    let mut pipes = Vec::new();
    for i in 0..READS {
        let run = results.join(format!("run-{i}"));
        std::fs::create_dir_all(&run).unwrap();
        let pipe = run.join("summary.json");
        let made = Command::new("mkfifo").arg(&pipe).status().expect("run mkfifo");
        assert!(made.success(), "mkfifo {}", pipe.display());
        pipes.push(pipe);
    }
    let server = Server::start(&["--api-key", KEY, "--bench-results", results.to_str().unwrap()]);

    let (done, finished) = mpsc::channel();
    for i in 0..READS {
        let (url, done) = (server.url(&format!("/v1/bench/run-{i}")), done.clone());
        std::thread::spawn(move || {
            let _ = done.send((i, call("GET", &url, Some(KEY), None)));
        });
    }
    // Every read is under way at once (its pipe opened by the server), and none has anything to read yet.
    let mut writers = Vec::new();
    for pipe in &pipes {
        let writer = writer_once_read(pipe, Duration::from_secs(60));
        assert!(
            writer.is_some(),
            "the server never started reading {} while {} other reads waited: reads hold the HTTP workers\n{}",
            pipe.display(),
            writers.len(),
            server.log.lock().unwrap()
        );
        writers.push(writer.unwrap());
    }
    // Another client is answered while all of them wait (a handler reading on its worker would hold it until the
    // pipes are written below, so this call would wait: its timeout, far past an answer's milliseconds, fails it).
    let quick = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
    let health = quick.get(&server.url("/health")).call();
    let health: Value = match health {
        Ok(response) => response.into_json().unwrap(),
        Err(e) => panic!("/health was not answered while {READS} file reads waited: {e}"),
    };
    assert_eq!(health["status"], "ok", "{health}");
    assert!(finished.try_recv().is_err(), "a read finished before its pipe was written");

    for (i, mut writer) in writers.into_iter().enumerate() {
        writer.write_all(json!({"suite": "tasks", "run": i}).to_string().as_bytes()).unwrap();
    }
    for _ in 0..READS {
        let (i, (status, answer)) = finished.recv_timeout(Duration::from_secs(60)).expect("a read answered");
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["summary"], json!({"suite": "tasks", "run": i}), "{answer}");
        assert_eq!(answer["markdown"], Value::Null);
    }
}
