//! The web page `tandem serve` serves at `/`, in a real browser: Debian's chromium driven by Playwright for Python
//! (both installed by scripts/install-browser-test.sh on first use), against the real server and the real 0.5B
//! model as planner and executor. The driver (tests/web/drive.py) starts runs with plan approval, edits and
//! approves a plan, follows the timeline to the answer, reloads a run's link, rejects a plan, filters the runs list
//! and checks that a wrong key is refused on the page; tests/web/lan.py loads the page under an `--allow-host`
//! name (mapped to loopback in the browser) and starts and approves a run from it. Here: the page's headers (a
//! strict CSP, no CORS) and the routes it uses.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use crate::serve::{agent, call, Server, KEY};

/// The browser and the pinned Playwright package, installed on first use (under target/browser-test).
fn browser_python() -> std::path::PathBuf {
    static INSTALL: OnceLock<Result<(), String>> = OnceLock::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let installed = INSTALL.get_or_init(|| {
        let output = Command::new(root.join("scripts/install-browser-test.sh"))
            .output()
            .map_err(|e| format!("could not run scripts/install-browser-test.sh: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "scripts/install-browser-test.sh failed ({}):\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    });
    if let Err(why) = installed {
        panic!("{why}");
    }
    root.join("target/browser-test/venv/bin/python")
}

/// A benchmark results directory with one run in the files `tandem bench` writes (a summary, records, a chart).
fn bench_results(scratch: &Path) -> std::path::PathBuf {
    let root = scratch.join("bench-results");
    let run = root.join("tasks-q0-20261128-101010");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("summary.json"), r#"{"suite": "tasks", "samples": 2, "success": 0.5}"#).unwrap();
    std::fs::write(
        run.join("summary.md"),
        "| suite | samples | success |\n| --- | --- | --- |\n| tasks | 2 | 0.500 |\n",
    )
    .unwrap();
    let records = [
        r#"{"sample": "arith-1", "input": "What is 2+2?", "prediction": "4", "gold": "4", "score": {"success": true}}"#,
        r#"{"sample": "arith-2", "input": "What is 3*3?", "prediction": "6", "gold": "9", "score": {"success": false}}"#,
    ];
    std::fs::write(run.join("samples.jsonl"), records.join("\n") + "\n").unwrap();
    std::fs::write(
        run.join("chart.svg"),
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100"><circle cx="50" cy="50" r="20"/></svg>"#,
    )
    .unwrap();
    root
}

/// The server the page talks to: agent runs turned on, its own runs directory, workspace and benchmark results, a
/// key.
fn web_server(scratch: &Path) -> Server {
    let (runs, workspace, bench) = (scratch.join("runs"), scratch.join("ws"), bench_results(scratch));
    std::fs::create_dir_all(&workspace).unwrap();
    Server::start(&[
        "--allow-runs",
        "--runs-dir",
        runs.to_str().unwrap(),
        "--workspace",
        workspace.to_str().unwrap(),
        "--bench-results",
        bench.to_str().unwrap(),
        "--api-key",
        KEY,
    ])
}

#[test]
fn the_page_is_served_with_a_strict_policy_and_its_routes_need_the_key() {
    let scratch = tempfile::tempdir().unwrap();
    let server = web_server(scratch.path());
    for (path, kind) in
        [("/", "text/html"), ("/app.js", "text/javascript"), ("/style.css", "text/css"), ("/icon.svg", "image/svg+xml")]
    {
        let response = agent()
            .get(&server.url(path))
            .set("Origin", &server.base)
            .call()
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        assert_eq!(response.status(), 200, "{path}");
        assert!(response.header("content-type").unwrap_or_default().starts_with(kind), "{path}");
        let policy = response.header("content-security-policy").unwrap_or_default().to_string();
        assert!(policy.contains("default-src 'none'") && policy.contains("script-src 'self'"), "{path}: {policy}");
        assert!(!policy.contains("unsafe-inline"), "{policy}");
        assert_eq!(response.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(
            response.header("access-control-allow-origin"),
            None,
            "{path} must not be shared with other origins"
        );
        let body = response.into_string().unwrap();
        if path == "/" {
            // No inline script: the module comes from its own file.
            assert!(body.contains(r#"<script type="module" src="/app.js"></script>"#), "{body}");
            assert_eq!(body.matches("<script").count(), 1, "{body}");
        }
    }
    // The page's API routes sit behind the key like every /v1 route.
    let (status, error) = call("GET", &server.url("/v1/runs/options"), None, None);
    assert_eq!((status, &error["error"]["code"]), (401, &serde_json::json!("invalid_api_key")), "{error}");
    let (status, options) = call("GET", &server.url("/v1/runs/options"), Some(KEY), None);
    assert_eq!(status, 200, "{options}");
    assert_eq!(options["approve"], serde_json::json!(["none", "plan"]));
    assert!(options["budgets"]["max_steps"].as_u64().unwrap() > 0, "{options}");
    let (status, error) = call("POST", &server.url("/v1/runs/no-such-run/check"), Some(KEY), Some(r#"{"plan": {}}"#));
    assert_eq!((status, &error["error"]["code"]), (404, &serde_json::json!("run_not_found")), "{error}");
    // Benchmark results: listed, shown, paged; names only, never paths.
    let (status, list) = call("GET", &server.url("/v1/bench"), Some(KEY), None);
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["data"][0]["name"], "tasks-q0-20261128-101010", "{list}");
    assert_eq!(list["data"][0]["suite"], "tasks", "{list}");
    let (status, run) = call("GET", &server.url("/v1/bench/tasks-q0-20261128-101010"), Some(KEY), None);
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["summary"]["success"], 0.5, "{run}");
    assert!(run["chart"].as_str().unwrap().starts_with("<svg"), "{run}");
    let url = server.url("/v1/bench/tasks-q0-20261128-101010/samples?offset=1&limit=1");
    let (status, page) = call("GET", &url, Some(KEY), None);
    assert_eq!((status, page["total"].as_u64(), page["data"][0]["sample"].as_str()), (200, Some(2), Some("arith-2")));
    for bad in ["..", "..%2Fruns", ".hidden", "no-such-run"] {
        let (status, error) = call("GET", &server.url(&format!("/v1/bench/{bad}")), Some(KEY), None);
        assert_eq!(status, 404, "{bad}: {error}");
    }
}

#[test]
fn the_page_starts_edits_approves_rejects_and_lists_runs_in_a_real_browser() {
    let python = browser_python();
    let scratch = tempfile::tempdir().unwrap();
    let server = web_server(scratch.path());
    let shots = scratch.path().join("shots");
    std::fs::create_dir(&shots).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web/drive.py");
    let output = Command::new(python)
        .arg(script)
        .args([server.base.as_str(), KEY, shots.to_str().unwrap()])
        .output()
        .expect("run the browser driver");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("all checks passed"),
        "browser checks failed:\n{stdout}\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&output.stderr),
        server.log.lock().unwrap()
    );
    for name in ["plan-approval.png", "run.png", "runs.png", "run-narrow.png", "bench.png"] {
        let png = std::fs::read(shots.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(png.starts_with(b"\x89PNG"), "{name} is not a PNG");
    }
}

#[test]
fn the_page_starts_and_approves_a_run_under_an_allow_host_name_in_a_real_browser() {
    let python = browser_python();
    let scratch = tempfile::tempdir().unwrap();
    let (runs, workspace) = (scratch.path().join("runs"), scratch.path().join("ws"));
    std::fs::create_dir_all(&workspace).unwrap();
    let server = Server::start(&[
        "--host",
        "127.0.0.1",
        "--allow-host",
        "box.lan",
        "--allow-runs",
        "--runs-dir",
        runs.to_str().unwrap(),
        "--workspace",
        workspace.to_str().unwrap(),
        "--api-key",
        KEY,
    ]);
    let port = server.base.rsplit(':').next().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web/lan.py");
    let output = Command::new(python)
        .arg(script)
        .args([format!("http://box.lan:{port}").as_str(), KEY])
        .output()
        .expect("run the browser driver");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("all checks passed"),
        "browser checks under --allow-host failed:\n{stdout}\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&output.stderr),
        server.log.lock().unwrap()
    );
}
