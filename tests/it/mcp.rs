//! MCP servers as tool sources: the protocol against a small server the tests ship (tests/fixtures/mcp/server.py:
//! list, call, isError, a crash mid-call, a hang, a flood, a server that never answers, clashing names), the
//! `tools list` command, and the real `mcp-server-time` (installed by scripts/install-mcp-test-servers.sh). HTTP
//! servers are tested in tests/it/mcp_http.rs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tandem::agent::RunSettings;
use tandem::tools::mcp::{parse_config, register_servers, McpLimits, Transport};
use tandem::tools::{ToolContext, ToolError, ToolRegistry, Workspace};
use tempfile::TempDir;

fn fixture_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/server.py")
}

/// A real server's program, installed on first use by scripts/install-mcp-test-servers.sh (pinned versions under
/// target/mcp-servers; idempotent, so once per test process is cheap), as the real-model tests pull their models.
/// A server that cannot be installed fails the test that needs it, saying why.
pub(crate) fn installed_program(relative: &str) -> PathBuf {
    static INSTALL: OnceLock<Result<(), String>> = OnceLock::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let installed = INSTALL.get_or_init(|| {
        let output = Command::new(root.join("scripts/install-mcp-test-servers.sh"))
            .output()
            .map_err(|e| format!("could not run scripts/install-mcp-test-servers.sh: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "scripts/install-mcp-test-servers.sh failed ({}):\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    });
    if let Err(why) = installed {
        panic!("{why}");
    }
    let program = root.join("target/mcp-servers").join(relative);
    assert!(
        program.exists(),
        "{} is missing after scripts/install-mcp-test-servers.sh ran (npm servers need npm on PATH)",
        program.display()
    );
    program
}

/// A config of fixture servers: (server name, mode) each.
fn fixture_config(dir: &Path, servers: &[(&str, &str)]) -> PathBuf {
    let mut entries = serde_json::Map::new();
    for (name, mode) in servers {
        entries.insert(
            name.to_string(),
            json!({"command": "python3", "args": [fixture_server(), mode],
                   "env": {"MCP_FIXTURE_PID_FILE": dir.join(format!("{name}.pid"))}}),
        );
    }
    let path = dir.join("mcp.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json!({"mcpServers": entries})).unwrap()).unwrap();
    path
}

struct Setup {
    dir: TempDir,
    ctx: ToolContext,
    registry: ToolRegistry,
    notes: Vec<String>,
}

fn setup(servers: &[(&str, &str)], timeout: Duration) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let mut registry = ToolRegistry::builtins(&ctx);
    let config = fixture_config(dir.path(), servers);
    let notes = register_servers(&mut registry, &config, McpLimits::with_timeout(timeout))
        .unwrap_or_else(|e| panic!("starting the fixture servers: {e}"));
    Setup { dir, ctx, registry, notes }
}

fn pid_of(dir: &Path, server: &str) -> u32 {
    std::fs::read_to_string(dir.join(format!("{server}.pid"))).unwrap().trim().parse().unwrap()
}

#[cfg(target_os = "linux")]
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(not(target_os = "linux"))]
fn alive(_pid: u32) -> bool {
    false
}

#[test]
fn mcp_tools_are_registered_with_their_schemas_and_called() {
    let s = setup(&[("fixture", "normal")], Duration::from_secs(20));
    let names = s.registry.names();
    for name in ["calculator", "math.add", "echo", "fail"] {
        assert!(names.contains(&name), "{name} missing from {names:?} (notes: {:?})", s.notes);
    }
    assert!(s.notes.is_empty(), "{:?}", s.notes);
    let add = s.registry.spec("math.add").unwrap();
    assert_eq!(add.description, "Add two numbers. Returns their sum.");
    assert_eq!(add.args_schema["properties"]["a"], json!({"type": "number"}));
    assert_eq!(add.args_schema["required"], json!(["a", "b"]));
    assert_eq!(add.output_schema.as_ref().unwrap()["properties"]["sum"], json!({"type": "number"}));
    assert_eq!(s.registry.call("math.add", &json!({"a": 2, "b": 3.5}), &s.ctx).unwrap(), json!({"sum": 5.5}));
    assert_eq!(s.registry.call("echo", &json!({"message": "héllo"}), &s.ctx).unwrap(), json!({"text": "héllo"}));
    // The registry checks arguments against the server's schema before anything is sent.
    let bad = s.registry.call("math.add", &json!({"a": 2}), &s.ctx).unwrap_err();
    assert!(matches!(bad, ToolError::InvalidArgs { .. }), "{bad}");
    // Calls from several threads at once share the connection.
    let (registry, ctx) = (&s.registry, &s.ctx);
    std::thread::scope(|scope| {
        let handles: Vec<_> =
            (0..4).map(|i| scope.spawn(move || registry.call("math.add", &json!({"a": i, "b": 1}), ctx))).collect();
        for (i, handle) in handles.into_iter().enumerate() {
            assert_eq!(handle.join().unwrap().unwrap(), json!({"sum": i + 1}));
        }
    });
}

#[test]
fn an_is_error_result_is_a_tool_error_with_the_tools_message() {
    let s = setup(&[("fixture", "normal")], Duration::from_secs(20));
    let error = s.registry.call("fail", &json!({}), &s.ctx).unwrap_err();
    assert!(matches!(error, ToolError::Reported { .. }), "{error:?}");
    assert_eq!(error.to_string(), "tool 'fail' reported an error: the fail tool always fails: nothing to do");
    // The server is still there for the next call.
    assert_eq!(s.registry.call("echo", &json!({"message": "still"}), &s.ctx).unwrap(), json!({"text": "still"}));
}

#[test]
fn a_server_that_dies_mid_call_is_a_clear_error_not_a_hang() {
    let s = setup(&[("crashy", "crash")], Duration::from_secs(20));
    let started = Instant::now();
    let error = s.registry.call("crash", &json!({}), &s.ctx).unwrap_err().to_string();
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert!(
        error.starts_with("MCP server 'crashy': calling tool 'crash': the connection to the server closed"),
        "{error}"
    );
    assert!(error.contains("exit code 3"), "{error}");
    assert!(error.contains("giving up on purpose"), "the end of its stderr: {error}");
    // A later call fails at once too.
    let again = s.registry.call("crash", &json!({}), &s.ctx).unwrap_err().to_string();
    assert!(again.contains("MCP server 'crashy'"), "{again}");
}

#[test]
fn a_hanging_call_times_out_and_the_server_is_stopped_with_the_registry() {
    let s = setup(&[("stuck", "hang")], Duration::from_secs(2));
    let pid = pid_of(s.dir.path(), "stuck");
    assert!(alive(pid) || !cfg!(target_os = "linux"));
    let started = Instant::now();
    let error = s.registry.call("hang", &json!({}), &s.ctx).unwrap_err().to_string();
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(6), "took {took:?}");
    assert!(error.contains("MCP server 'stuck': tool 'hang' did not answer within 2.0 s"), "{error}");
    assert!(error.contains("--mcp-timeout"), "{error}");
    let Setup { dir, registry, .. } = s;
    let started = Instant::now();
    drop(registry);
    assert!(started.elapsed() < Duration::from_secs(5), "stopping took {:?}", started.elapsed());
    assert!(!alive(pid), "server process {pid} outlived its registry");
    drop(dir);
}

#[test]
fn a_flooding_tool_is_stopped_at_the_output_cap() {
    let s = setup(&[("loud", "flood")], Duration::from_secs(20));
    let error = s.registry.call("flood", &json!({}), &s.ctx).unwrap_err();
    assert!(matches!(error, ToolError::OutputTooLarge { limit: 262_144, .. }), "{error:?}");
    assert!(error.to_string().contains("loud") || error.to_string().contains("flood"), "{error}");
}

#[test]
fn clashing_names_are_namespaced_by_server() {
    let s = setup(&[("first", "normal"), ("second", "clash")], Duration::from_secs(20));
    let names = s.registry.names();
    for name in ["first.echo", "second.echo", "second.read_file", "read_file", "math.add"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert!(!names.contains(&"echo"), "{names:?}");
    assert!(s.notes.iter().any(|n| n.contains("'first', 'second' all offer a tool 'echo'")), "{:?}", s.notes);
    assert!(s.notes.iter().any(|n| n.contains("registered as 'second.read_file'")), "{:?}", s.notes);
    assert_eq!(
        s.registry.call("second.echo", &json!({"message": "hi"}), &s.ctx).unwrap(),
        json!({"text": "other: hi"})
    );
    assert_eq!(s.registry.call("first.echo", &json!({"message": "hi"}), &s.ctx).unwrap(), json!({"text": "hi"}));
}

#[test]
fn servers_that_cannot_start_or_never_answer_are_errors_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let missing = dir.path().join("missing.json");
    std::fs::write(&missing, r#"{"mcpServers": {"ghost": {"command": "no-such-mcp-server-here", "args": []}}}"#)
        .unwrap();
    let mut registry = ToolRegistry::builtins(&ctx);
    let error = register_servers(&mut registry, &missing, McpLimits::with_timeout(Duration::from_secs(5)))
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("MCP server 'ghost': cannot start 'no-such-mcp-server-here'"), "{error}");
    assert!(error.contains("\"command\""), "says what to check: {error}");

    let silent = fixture_config(dir.path(), &[("mute", "silent")]);
    let started = Instant::now();
    let error = register_servers(&mut registry, &silent, McpLimits::with_timeout(Duration::from_secs(1)))
        .unwrap_err()
        .to_string();
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(error.starts_with("MCP server 'mute': did not answer `initialize` within 1.0 s"), "{error}");
    assert!(error.contains("fixture MCP server started (silent)"), "carries its stderr: {error}");
    let pid = pid_of(dir.path(), "mute");
    assert!(!alive(pid), "a server that failed to start is stopped");
    // Nothing was registered from either file.
    assert_eq!(registry.len(), ToolRegistry::builtins(&ctx).len());
}

#[test]
fn the_config_file_is_read_as_other_mcp_clients_write_it() {
    let file = Path::new("/configs/mcp.json");
    let config = parse_config(
        r#"{"mcpServers": {
            "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC", "DEBUG": 1}, "autoApprove": []},
            "local": {"command": "./bin/server", "cwd": "work"},
            "remote": {"url": "https://example.invalid/mcp", "type": "http"},
            "off": {"command": "x", "disabled": true}
        }}"#,
        file,
    )
    .unwrap();
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    let stdio = |name: &str| match &config.servers.iter().find(|s| s.name == name).unwrap().transport {
        Transport::Stdio(stdio) => stdio.clone(),
        other => panic!("{name}: {other:?}"),
    };
    let time = stdio("time");
    assert_eq!((time.command.as_str(), time.args.clone()), ("uvx", vec!["mcp-server-time".to_string()]));
    assert_eq!(time.env.get("DEBUG").map(String::as_str), Some("1"));
    let local = stdio("local");
    assert!(local.command.ends_with("/bin/server") && Path::new(&local.command).is_absolute(), "{}", local.command);
    assert!(local.cwd.as_ref().unwrap().ends_with("work"));
    let remote = config.servers.iter().find(|s| s.name == "remote").unwrap();
    assert!(matches!(&remote.transport, Transport::Http(http) if http.url == "https://example.invalid/mcp"));
    assert_eq!(config.notes.len(), 1, "{:?}", config.notes);
    assert!(config.notes.iter().any(|n| n.contains("'off' is disabled")), "{:?}", config.notes);

    let error = parse_config(r#"{"servers_typo": {}}"#, file).unwrap_err().to_string();
    assert!(error.contains("/configs/mcp.json") && error.contains("mcpServers"), "{error}");
    let error = parse_config(r#"{"mcpServers": {"x": {"args": []}}}"#, file).unwrap_err().to_string();
    assert!(error.contains("server 'x' has no \"command\"") && error.contains("no \"url\""), "{error}");
    let error = parse_config("{not json", file).unwrap_err().to_string();
    assert!(error.contains("/configs/mcp.json:1"), "{error}");
}

#[test]
fn run_settings_record_the_mcp_file_and_old_logs_still_read() {
    let old = json!({
        "planner": "p", "executor": "e", "mode": "plan-ahead", "workspace": "/w", "allow_write": false,
        "allow_shell": [], "shell_timeout_s": 10, "tools_file": null, "max_replans": 1, "max_steps": 9,
        "max_tokens": 100, "max_seconds": 60, "plan_tokens": 50, "executor_tokens": 20, "seed": 0, "approve": "none"
    });
    let settings: RunSettings = serde_json::from_value(old).unwrap();
    assert_eq!(settings.mcp_config, None);
    assert_eq!(settings.tool_settings().mcp_timeout_s, tandem::settings::MCP_TIMEOUT_S);
    let mut with = settings.clone();
    with.mcp_config = Some(PathBuf::from("/etc/mcp.json"));
    with.mcp_timeout_s = 7;
    let line = serde_json::to_value(&with).unwrap();
    assert_eq!(line["mcp_config"], json!("/etc/mcp.json"));
    let back: RunSettings = serde_json::from_value(line).unwrap();
    assert_eq!(back.tool_settings().mcp_config, Some(PathBuf::from("/etc/mcp.json")));
    assert_eq!(back.tool_settings().mcp_timeout_s, 7);
}

fn tandem(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tandem")).args(args).env_remove("TANDEM_MCP").output().expect("run tandem")
}

#[test]
fn tools_list_shows_what_the_planner_sees() {
    let dir = tempfile::tempdir().unwrap();
    let config = fixture_config(dir.path(), &[("fixture", "normal")]);
    let workspace = dir.path().to_str().unwrap();
    let output = tandem(&["tools", "list", "--workspace", workspace, "--mcp", config.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.lines().any(|l| l == "math.add"), "{stdout}");
    assert!(stdout.contains("Add two numbers. Returns their sum."), "{stdout}");
    assert!(stdout.contains(r#""sum":{"type":"number"}"#), "the output schema: {stdout}");
    assert!(stdout.lines().any(|l| l == "calculator"), "{stdout}");
    assert!(!stdout.lines().any(|l| l == "write_file"), "writes are off: {stdout}");

    let output = tandem(&[
        "tools",
        "list",
        "--workspace",
        workspace,
        "--allow-write",
        "--mcp",
        config.to_str().unwrap(),
        "--json",
    ]);
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = listed["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names.first(), Some(&"calculator"));
    for name in ["write_file", "math.add", "echo", "fail"] {
        assert!(names.contains(&name), "{name}: {names:?}");
    }
    let add = listed["tools"].as_array().unwrap().iter().find(|t| t["name"] == "math.add").unwrap();
    assert_eq!(add["args_schema"]["additionalProperties"], json!(false), "the schema as the plan holds it");
    assert!(listed["warnings"].is_array());

    let output = tandem(&["tools", "list", "--workspace", workspace, "--mcp", "/no/such/mcp.json"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("/no/such/mcp.json") && stderr.contains("cannot read"), "{stderr}");
}

#[test]
fn without_mcp_the_default_config_file_is_read_where_it_exists() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().to_str().unwrap();
    let list = |xdg: Option<&Path>, home: &Path| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tandem"));
        command.args(["tools", "list", "--workspace", workspace]).env_remove("TANDEM_MCP").env("HOME", home);
        match xdg {
            Some(xdg) => command.env("XDG_CONFIG_HOME", xdg),
            None => command.env_remove("XDG_CONFIG_HOME"),
        };
        let output = command.output().expect("run tandem");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).lines().map(str::to_string).collect::<Vec<_>>()
    };
    // No file: the built-ins only.
    let home = dir.path().join("home");
    let names = list(None, &home);
    assert!(names.contains(&"calculator".to_string()) && !names.contains(&"math.add".to_string()), "{names:?}");
    // ~/.config/tandem/mcp.json.
    let config = fixture_config(dir.path(), &[("fixture", "normal")]);
    std::fs::create_dir_all(home.join(".config/tandem")).unwrap();
    std::fs::copy(&config, home.join(".config/tandem/mcp.json")).unwrap();
    assert!(list(None, &home).contains(&"math.add".to_string()));
    // $XDG_CONFIG_HOME takes the place of ~/.config: an empty one there means no servers.
    let xdg = dir.path().join("xdg");
    assert!(!list(Some(&xdg), &home).contains(&"math.add".to_string()));
    std::fs::create_dir_all(xdg.join("tandem")).unwrap();
    std::fs::copy(&config, xdg.join("tandem/mcp.json")).unwrap();
    assert!(list(Some(&xdg), &home).contains(&"math.add".to_string()));
}

/// The real `mcp-server-time`.
#[test]
fn the_real_time_server_lists_and_converts() {
    let program = installed_program("venv/bin/mcp-server-time");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"time": {"command": program, "args": ["--local-timezone", "Etc/UTC"]}}}).to_string(),
    )
    .unwrap();
    let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let mut registry = ToolRegistry::builtins(&ctx);
    let notes = register_servers(&mut registry, &config, McpLimits::with_timeout(Duration::from_secs(60))).unwrap();
    assert!(
        registry.contains("get_current_time") && registry.contains("convert_time"),
        "{:?} {notes:?}",
        registry.names()
    );
    let fields: Vec<String> =
        registry.spec("convert_time").unwrap().output_fields().unwrap().into_iter().map(|f| f.name).collect();
    assert!(fields.contains(&"target".to_string()) && fields.contains(&"time_difference".to_string()), "{fields:?}");

    let converted = registry
        .call(
            "convert_time",
            &json!({"source_timezone": "Etc/UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
            &ctx,
        )
        .unwrap();
    assert_eq!(converted["time_difference"], json!("+9.0h"), "{converted}");
    let target = converted["target"]["datetime"].as_str().unwrap();
    assert!(target.ends_with("T21:00:00+09:00"), "{converted}");

    let now = registry.call("get_current_time", &json!({"timezone": "Etc/UTC"}), &ctx).unwrap();
    assert_eq!(now["timezone"], json!("Etc/UTC"), "{now}");
    assert!(now["datetime"].as_str().unwrap().ends_with("+00:00"), "{now}");

    let error = registry.call("get_current_time", &json!({"timezone": "Mars/Olympus"}), &ctx).unwrap_err();
    assert!(matches!(error, ToolError::Reported { .. }), "{error:?}");
    assert!(error.to_string().contains("Mars/Olympus"), "{error}");
}

/// A registry with the real server of that config entry.
fn real_server(program: &Path, name: &str, args: Vec<String>, dir: &Path) -> (ToolContext, ToolRegistry, Vec<String>) {
    let config = dir.join("mcp.json");
    std::fs::write(&config, json!({"mcpServers": {name: {"command": program, "args": args}}}).to_string()).unwrap();
    let ctx = ToolContext::new(Workspace::new(dir).unwrap());
    let mut registry = ToolRegistry::builtins(&ctx);
    let notes = register_servers(&mut registry, &config, McpLimits::with_timeout(Duration::from_secs(60)))
        .unwrap_or_else(|e| panic!("starting the real {name} server: {e}"));
    (ctx, registry, notes)
}

/// The real `mcp-server-git` on a repository the test creates.
#[test]
fn the_real_git_server_reports_a_repositorys_status() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(["-c", "user.email=t@example.com", "-c", "user.name=Tandem Test"])
            .args(args)
            .current_dir(&repo)
            .output()
            .expect("git runs");
        assert!(status.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&status.stderr));
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("notes.txt"), "first\n").unwrap();
    git(&["add", "notes.txt"]);
    git(&["commit", "-q", "-m", "Add the notes"]);
    std::fs::write(repo.join("notes.txt"), "first\nsecond\n").unwrap();
    let program = installed_program("venv/bin/mcp-server-git");
    let (ctx, registry, _) = real_server(&program, "git", vec![], dir.path());
    let repo_path = repo.to_str().unwrap();
    let status = registry.call("git_status", &json!({"repo_path": repo_path}), &ctx).unwrap();
    let text = status["text"].as_str().unwrap();
    assert!(text.contains("modified:") && text.contains("notes.txt"), "{status}");
    let log = registry.call("git_log", &json!({"repo_path": repo_path}), &ctx).unwrap();
    assert!(log["text"].as_str().unwrap().contains("Add the notes"), "{log}");
}

/// The real `@modelcontextprotocol/server-filesystem`, confined to a temporary directory; its `read_file` and
/// `write_file` clash with the built-ins and are namespaced.
#[test]
fn the_real_filesystem_server_reads_inside_its_root_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("note.txt"), "hello from the filesystem server\n").unwrap();
    let program = installed_program("npm/node_modules/.bin/mcp-server-filesystem");
    let root_arg = std::fs::canonicalize(&root).unwrap().to_string_lossy().into_owned();
    let (ctx, registry, notes) = real_server(&program, "files", vec![root_arg.clone()], dir.path());
    assert!(registry.contains("files.read_file") && registry.contains("read_text_file"), "{:?}", registry.names());
    assert!(notes.iter().any(|n| n.contains("registered as 'files.read_file'")), "{notes:?}");
    let read = registry.call("read_text_file", &json!({"path": format!("{root_arg}/note.txt")}), &ctx).unwrap();
    assert_eq!(read, json!({"content": "hello from the filesystem server\n"}));
    let error = registry.call("read_text_file", &json!({"path": "/etc/hostname"}), &ctx).unwrap_err();
    assert!(matches!(error, ToolError::Reported { .. }), "{error:?}");
    assert!(error.to_string().contains("outside allowed directories"), "{error}");
}
