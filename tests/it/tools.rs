//! Tools on real files and real processes: exact calculator results, workspace confinement, the shell policy,
//! time limits and output caps, and user tools from TOML.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rstest::rstest;
use serde_json::{json, Value};
use tandem::tools::calculator::{evaluate, Number};
use tandem::tools::shell::split_command;
use tandem::tools::{load_tool_file, ToolContext, ToolError, ToolRegistry, Workspace};
use tempfile::TempDir;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent")
}

/// A workspace with `notes.txt` and `sub/inner.txt`, next to a `secret.txt` outside it.
struct Sandbox {
    _outer: TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn sandbox() -> Sandbox {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("ws");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("notes.txt"), "alpha beta\ngamma\n").unwrap();
    std::fs::write(root.join("sub/inner.txt"), "inner").unwrap();
    let outside = outer.path().join("secret.txt");
    std::fs::write(&outside, "top secret").unwrap();
    Sandbox { root, outside, _outer: outer }
}

fn ctx(sandbox: &Sandbox) -> ToolContext {
    ToolContext::new(Workspace::new(&sandbox.root).unwrap())
}

fn call(ctx: &ToolContext, tool: &str, args: Value) -> Result<Value, ToolError> {
    let mut registry = ToolRegistry::builtins(&ctx.clone().with_write(true).with_shell(["echo"]));
    registry.load_file(&fixtures().join("tools.toml")).unwrap();
    registry.call(tool, &args, ctx)
}

#[rstest]
#[case("12*4+5", json!(53))]
#[case("2**62 + 1", json!(4_611_686_018_427_387_905_i64))]
#[case("2^10", json!(1024))]
#[case("3 * (4 + 5) - 6 / 2", json!(24))]
#[case("7 / 2", json!(3.5))]
#[case("12 / 4", json!(3))]
#[case("-7 // 2", json!(-4))]
#[case("17 % 5", json!(2))]
#[case("1.5 * 4", json!(6.0))]
#[case("max(2, 7) - abs(-3)", json!(4))]
fn calculator_is_exact(#[case] expression: &str, #[case] expected: Value) {
    let ctx = ctx(&sandbox());
    let out = call(&ctx, "calculator", json!({"expression": expression})).unwrap();
    assert_eq!(out["result"], expected, "{expression}");
    // Integers come back as JSON integers, not floats.
    assert_eq!(out["result"].is_i64() || out["result"].is_u64(), expected.is_i64(), "{expression}: {out}");
}

#[test]
fn calculator_precedence_and_associativity() {
    assert_eq!(evaluate("12*4+5"), Ok(Number::Int(53)));
    assert_eq!(evaluate("2**3**2"), Ok(Number::Int(512)));
    assert_eq!(evaluate("-2**2"), Ok(Number::Int(-4)));
    assert_eq!(evaluate("2^-1"), Ok(Number::Float(0.5)));
    assert_eq!(evaluate("-7%3"), Ok(Number::Int(2)));
    assert_eq!(evaluate("max(1, 2.5, 2)"), Ok(Number::Float(2.5)));
    assert_eq!(evaluate("sqrt(144)"), Ok(Number::Int(12)));
    assert_eq!(evaluate("round(2.6) + floor(-0.5)"), Ok(Number::Int(2)));
    assert_eq!(evaluate("1_000 × 3 − 1"), Ok(Number::Int(2999)));
    assert_eq!(evaluate("2e3"), Ok(Number::Float(2000.0)));
}

#[test]
fn calculator_big_integers_are_exact_or_refused() {
    assert_eq!(evaluate("2**100"), Ok(Number::Int(1_267_650_600_228_229_401_496_703_205_376)));
    assert_eq!(evaluate("99999999999 * 99999999999"), Ok(Number::Int(9_999_999_999_800_000_000_001)));
    let ctx = ctx(&sandbox());
    let out = call(&ctx, "calculator", json!({"expression": "2**100"})).unwrap();
    assert_eq!(out["text"], "1267650600228229401496703205376");
    let overflow = evaluate("2**127 * 2").unwrap_err();
    assert!(overflow.contains("overflow"), "{overflow}");
}

#[rstest]
#[case("")]
#[case("12 *")]
#[case("(1 + 2")]
#[case("1 / 0")]
#[case("rm -rf /")]
#[case("2 3")]
#[case("foo(1)")]
#[case("1 > 0")]
fn calculator_rejects_garbage(#[case] expression: &str) {
    let ctx = ctx(&sandbox());
    let err = call(&ctx, "calculator", json!({"expression": expression})).unwrap_err();
    // The empty string fails the argument schema (minLength), the rest fail evaluation.
    assert!(matches!(err, ToolError::Calculation { .. } | ToolError::InvalidArgs { .. }), "{expression}: {err}");
}

/// An expression with `=` is an equation in one unknown, solved for it: exactly where it is linear, by Newton's
/// method where not, an integer where the root is one.
#[rstest]
#[case("3*x + 7 = 34", "x", json!(9))]
#[case("If: 5x - 12 = 3x + 8", "", json!(null))]
#[case("5x - 12 = 3x + 8", "x", json!(10))]
#[case("n + (n + 1) = 41", "n", json!(20))]
#[case("2(y + 1) == 10", "y", json!(4))]
#[case("x/2 - 7 = 18", "x", json!(50))]
#[case("0.15 * price = 30", "price", json!(200))]
#[case("3x = 10", "x", json!(10.0 / 3.0))]
#[case("x**2 = 144", "x", json!(12))]
#[case("sqrt(x) + 1 = 6", "x", json!(25))]
#[case("100 / x = 4", "x", json!(25))]
fn calculator_solves_an_equation_in_one_unknown(#[case] equation: &str, #[case] unknown: &str, #[case] value: Value) {
    let ctx = ctx(&sandbox());
    let out = call(&ctx, "calculator", json!({"expression": equation}));
    if value.is_null() {
        assert!(matches!(out, Err(ToolError::Calculation { .. })), "{equation}: {out:?}");
        return;
    }
    let out = out.unwrap_or_else(|e| panic!("{equation}: {e}"));
    assert_eq!(out["unknown"], json!(unknown), "{equation}: {out}");
    match (value.as_i64(), out["result"].as_i64()) {
        (Some(want), Some(got)) => assert_eq!(got, want, "{equation}: {out}"),
        _ => {
            let (want, got) = (value.as_f64().unwrap(), out["result"].as_f64().unwrap());
            assert!((want - got).abs() < 1e-9 && value.is_f64(), "{equation}: {out}, want {want}");
        }
    }
}

/// Equations that have no single answer, or not one unknown, say so.
#[rstest]
#[case("x + 1 = x + 2", "no value")]
#[case("2x = x + x", "every value")]
#[case("x + y = 3", "underdetermined: 1 equation, 2 unknowns")]
#[case("3 + 4 = 7", "no unknown")]
#[case("x = 1 = 2", "one '='")]
#[case("= 5", "each side")]
#[case("x**2 = -1", "no solution")]
fn calculator_says_why_an_equation_has_no_answer(#[case] equation: &str, #[case] why: &str) {
    let ctx = ctx(&sandbox());
    let err = call(&ctx, "calculator", json!({"expression": equation})).unwrap_err();
    assert!(err.to_string().contains(why), "{equation}: {err}");
}

/// Equations separated by `;` (or a line break, or commas between equations) are a linear system, solved
/// together: every unknown is named in `values` and `text`, and `result` is the first one's value.
#[rstest]
#[case("x + y = 100; x - y = 20", json!({"x": 60, "y": 40}), "x = 60, y = 40")]
#[case("ann + ben = 100\nann = ben + 20", json!({"ann": 60, "ben": 40}), "ann = 60, ben = 40")]
#[case("a + b + c = 10, a - b = 1, 2c = b + 3", json!({"a": 4, "b": 3, "c": 3}), "a = 4, b = 3, c = 3")]
#[case("2x + 3y = 12; x = y + 1", json!({"x": 3, "y": 2}), "x = 3, y = 2")]
fn calculator_solves_a_linear_system(#[case] system: &str, #[case] values: Value, #[case] text: &str) {
    let ctx = ctx(&sandbox());
    let out = call(&ctx, "calculator", json!({"expression": system})).unwrap_or_else(|e| panic!("{system}: {e}"));
    assert_eq!(out["values"], values, "{system}: {out}");
    assert_eq!(out["text"], json!(text), "{system}: {out}");
    let first = out["unknowns"][0].as_str().unwrap();
    assert_eq!(out["result"], values[first], "{system}: {out}");
}

/// A system with no solution, infinitely many, or a term that is not linear says which.
#[rstest]
#[case("x + y = 10; x + y = 12", "inconsistent")]
#[case("x + y = 10; 3x + 3y = 30", "underdetermined: the equations are dependent")]
#[case("x + y + z = 10; x - y = 2", "underdetermined: 2 equations, 3 unknowns")]
#[case("x * y = 24; x - y = 2", "not linear")]
fn calculator_says_why_a_system_has_no_single_answer(#[case] system: &str, #[case] why: &str) {
    let ctx = ctx(&sandbox());
    let err = call(&ctx, "calculator", json!({"expression": system})).unwrap_err();
    assert!(matches!(err, ToolError::Calculation { .. }) && err.to_string().contains(why), "{system}: {err}");
}

/// Outside an equation a name, or a product without its `*`, is still an error.
#[test]
fn calculator_expressions_take_no_unknowns() {
    assert!(evaluate("3x").is_err());
    assert!(evaluate("2(3)").is_err());
    let err = evaluate("x + 1").unwrap_err();
    assert!(err.contains("unknown name 'x'") && err.contains("equation"), "{err}");
}

#[test]
fn calculator_refuses_division_by_either_zero() {
    for expression in ["1/0", "1/0.0", "1/-0.0", "5//0.0", "5%-0.0"] {
        assert_eq!(evaluate(expression), Err("division by zero".into()), "{expression}");
    }
}

#[test]
fn calculator_nesting_is_bounded() {
    let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
    assert!(evaluate(&deep).is_err());
}

#[test]
fn files_inside_the_workspace_can_be_read_and_listed() {
    let sb = sandbox();
    let ctx = ctx(&sb);
    let out = call(&ctx, "read_file", json!({"path": "notes.txt"})).unwrap();
    assert_eq!(out["content"], "alpha beta\ngamma\n");
    let out = call(&ctx, "read_file", json!({"path": "./sub/inner.txt"})).unwrap();
    assert_eq!(out["content"], "inner");
    let out = call(&ctx, "list_dir", json!({"path": "."})).unwrap();
    let names: Vec<&str> = out["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["notes.txt", "sub"]);
}

#[test]
fn a_recursive_listing_names_the_subfolders_files_and_does_not_enter_hidden_ones_or_links() {
    let sb = sandbox();
    std::fs::create_dir_all(sb.root.join("sub/deeper")).unwrap();
    std::fs::write(sb.root.join("sub/deeper/faq.md"), "# FAQ").unwrap();
    std::fs::create_dir_all(sb.root.join(".git/objects")).unwrap();
    std::fs::write(sb.root.join(".git/objects/blob"), "x").unwrap();
    std::os::unix::fs::symlink(sb.outside.parent().unwrap(), sb.root.join("dir_out")).unwrap();
    let ctx = ctx(&sb);
    let names = |out: &Value| -> Vec<String> {
        let mut names: Vec<String> =
            out["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()).collect();
        names.sort();
        names
    };
    let out = call(&ctx, "list_dir", json!({"path": ".", "recursive": true})).unwrap();
    assert_eq!(
        names(&out),
        [".git", "dir_out", "notes.txt", "sub", "sub/deeper", "sub/deeper/faq.md", "sub/inner.txt"]
    );
    // Not asked: the folder alone, as before.
    let out = call(&ctx, "list_dir", json!({"path": ".", "recursive": false})).unwrap();
    assert_eq!(names(&out), [".git", "dir_out", "notes.txt", "sub"]);
    let out = call(&ctx, "list_dir", json!({"path": "sub", "recursive": true})).unwrap();
    assert_eq!(names(&out), ["deeper", "deeper/faq.md", "inner.txt"]);
}

#[rstest]
#[case::parent("../secret.txt")]
#[case::parent_inside("sub/../../secret.txt")]
#[case::absolute("/etc/passwd")]
#[case::symlink_out("link_out")]
#[case::relative_symlink_out("sub/rel_out")]
#[case::symlinked_dir("dir_out/secret.txt")]
#[case::chained_symlinks("hop")]
fn reads_that_escape_the_workspace_are_refused(#[case] path: &str) {
    let sb = sandbox();
    std::os::unix::fs::symlink(&sb.outside, sb.root.join("link_out")).unwrap();
    std::os::unix::fs::symlink("../../secret.txt", sb.root.join("sub/rel_out")).unwrap();
    std::os::unix::fs::symlink(sb.outside.parent().unwrap(), sb.root.join("dir_out")).unwrap();
    // A link inside the workspace that leads to one that leaves it.
    std::os::unix::fs::symlink("sub/rel_out", sb.root.join("hop")).unwrap();
    let ctx = ctx(&sb);
    for tool in ["read_file", "list_dir"] {
        let err = call(&ctx, tool, json!({"path": path})).unwrap_err();
        assert!(matches!(err, ToolError::OutsideWorkspace { .. }), "{tool} {path}: {err}");
        // The message says why, as it did when these were path checks.
        let reason = err.to_string();
        assert!(["'..'", "absolute", "through a symlink"].iter().any(|why| reason.contains(why)), "{reason}");
    }
}

#[test]
fn a_symlink_that_stays_inside_is_fine() {
    let sb = sandbox();
    std::os::unix::fs::symlink(sb.root.join("notes.txt"), sb.root.join("alias.txt")).unwrap();
    let out = call(&ctx(&sb), "read_file", json!({"path": "alias.txt"})).unwrap();
    assert_eq!(out["content"], "alpha beta\ngamma\n");
}

#[test]
fn writes_are_refused_unless_allowed() {
    let sb = sandbox();
    let args = json!({"path": "out/report.txt", "content": "53"});
    let err = call(&ctx(&sb), "write_file", args.clone()).unwrap_err();
    assert!(matches!(err, ToolError::Refused { .. }), "{err}");
    assert!(err.to_string().contains("--allow-write"), "{err}");
    assert!(!sb.root.join("out").exists(), "a refused write must not create anything");
    // Without permission the tool is not even offered to the planner.
    assert!(!ToolRegistry::builtins(&ctx(&sb)).contains("write_file"));

    let allowed = ctx(&sb).with_write(true);
    let out = call(&allowed, "write_file", args).unwrap();
    assert_eq!(out["bytes_written"], 2);
    assert_eq!(std::fs::read_to_string(sb.root.join("out/report.txt")).unwrap(), "53");
    call(&allowed, "write_file", json!({"path": "out/report.txt", "content": "!", "append": true})).unwrap();
    assert_eq!(std::fs::read_to_string(sb.root.join("out/report.txt")).unwrap(), "53!");
}

#[rstest]
#[case::parent("../evil.txt")]
#[case::absolute("/tmp/tandem-evil.txt")]
#[case::symlink_out("link_out")]
#[case::dangling_symlink("dangling")]
#[case::symlinked_dir("dir_out/evil.txt")]
#[case::new_dir_under_symlinked_dir("dir_out/new/evil.txt")]
#[case::relative_symlinked_dir("sub/up/evil.txt")]
fn writes_that_escape_the_workspace_are_refused(#[case] path: &str) {
    let sb = sandbox();
    std::os::unix::fs::symlink("../..", sb.root.join("sub/up")).unwrap();
    std::os::unix::fs::symlink(&sb.outside, sb.root.join("link_out")).unwrap();
    std::os::unix::fs::symlink(sb.outside.parent().unwrap().join("nowhere.txt"), sb.root.join("dangling")).unwrap();
    std::os::unix::fs::symlink(sb.outside.parent().unwrap(), sb.root.join("dir_out")).unwrap();
    let ctx = ctx(&sb).with_write(true);
    let err = call(&ctx, "write_file", json!({"path": path, "content": "pwned"})).unwrap_err();
    assert!(matches!(err, ToolError::OutsideWorkspace { .. }), "{path}: {err}");
    assert_eq!(std::fs::read_to_string(&sb.outside).unwrap(), "top secret");
    assert!(!sb.outside.parent().unwrap().join("nowhere.txt").exists());
    assert!(!sb.outside.parent().unwrap().join("evil.txt").exists());
    assert!(!sb.outside.parent().unwrap().join("new").exists());
}

#[test]
fn a_symlink_inside_that_leads_inside_is_written_through() {
    let sb = sandbox();
    std::os::unix::fs::symlink("sub", sb.root.join("alias")).unwrap();
    std::os::unix::fs::symlink("inner.txt", sb.root.join("sub/inner_link")).unwrap();
    let ctx = ctx(&sb).with_write(true);
    call(&ctx, "write_file", json!({"path": "alias/new/deep.txt", "content": "1"})).unwrap();
    call(&ctx, "write_file", json!({"path": "sub/inner_link", "content": "2"})).unwrap();
    assert_eq!(std::fs::read_to_string(sb.root.join("sub/new/deep.txt")).unwrap(), "1");
    assert_eq!(std::fs::read_to_string(sb.root.join("sub/inner.txt")).unwrap(), "2");
}

/// Swaps `ws/sub` (a real directory) with `ws/evil` (a symlink to a directory outside) with `RENAME_EXCHANGE`,
/// over and over, while the file tools read, list and write under `sub/`. Path checks followed by a separate open
/// lose this race now and then; opening beneath the workspace's handle must never read, list or write outside.
#[cfg(target_os = "linux")]
#[test]
fn a_symlink_swapped_in_during_calls_never_leads_outside() {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    const CALLS: usize = 4_000;
    let sb = sandbox();
    let secrets = sb.outside.parent().unwrap().join("secrets");
    std::fs::create_dir(&secrets).unwrap();
    std::fs::write(secrets.join("inner.txt"), "top secret").unwrap();
    std::fs::write(secrets.join("only_outside.txt"), "x").unwrap();
    std::os::unix::fs::symlink(&secrets, sb.root.join("evil")).unwrap();
    let ctx = ctx(&sb).with_write(true);

    let path = |name: &str| CString::new(sb.root.join(name).as_os_str().as_bytes()).unwrap();
    let (sub, evil) = (path("sub"), path("evil"));
    let stop = AtomicBool::new(false);
    let swaps = AtomicUsize::new(0);
    let (mut read_ok, mut refused) = (0, 0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // Bounded, and stopped as soon as the calls are done.
            for _ in 0..1_000_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                // SAFETY: both paths are valid NUL-terminated strings that outlive the call.
                let exchanged = unsafe {
                    libc::renameat2(libc::AT_FDCWD, sub.as_ptr(), libc::AT_FDCWD, evil.as_ptr(), libc::RENAME_EXCHANGE)
                };
                assert_eq!(exchanged, 0, "renameat2: {}", std::io::Error::last_os_error());
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        });
        for i in 0..CALLS {
            match call(&ctx, "read_file", json!({"path": "sub/inner.txt"})) {
                Ok(out) => {
                    assert_eq!(out["content"], "inner", "call {i} read outside the workspace");
                    read_ok += 1;
                }
                Err(ToolError::OutsideWorkspace { .. }) => refused += 1,
                Err(other) => panic!("call {i}: {other}"),
            }
            if let Ok(out) = call(&ctx, "list_dir", json!({"path": "sub"})) {
                assert!(!out.to_string().contains("only_outside"), "call {i} listed outside the workspace: {out}");
            }
            let _ = call(&ctx, "write_file", json!({"path": "sub/written.txt", "content": "pwned"}));
            let _ = call(&ctx, "write_file", json!({"path": "sub/made/written.txt", "content": "pwned"}));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let swaps = swaps.load(Ordering::Relaxed);
    println!("{CALLS} rounds of calls against {swaps} swaps: {read_ok} reads inside, {refused} refused as outside");
    assert!(swaps > 100, "the swapper barely ran ({swaps} swaps)");
    assert!(read_ok > 0 && refused > 0, "both states were seen: {read_ok} inside, {refused} refused");
    assert_eq!(std::fs::read_to_string(secrets.join("inner.txt")).unwrap(), "top secret");
    let mut outside: Vec<_> = std::fs::read_dir(&secrets).unwrap().map(|e| e.unwrap().file_name()).collect();
    outside.sort();
    assert_eq!(outside, ["inner.txt", "only_outside.txt"], "something was written outside the workspace");
}

#[test]
fn the_shell_is_off_without_an_allowlist_and_refuses_other_programs() {
    let sb = sandbox();
    let off = ctx(&sb);
    assert!(!ToolRegistry::builtins(&off).contains("shell"));
    let err = call(&off, "shell", json!({"command": "echo hi"})).unwrap_err();
    assert!(matches!(err, ToolError::Refused { .. }) && err.to_string().contains("--allow-shell"), "{err}");

    let on = ctx(&sb).with_shell(["echo", "wc"]);
    for command in ["rm -rf sub", "/bin/echo hi", "sh -c 'echo hi'"] {
        let err = call(&on, "shell", json!({"command": command})).unwrap_err();
        assert!(matches!(err, ToolError::Refused { .. }), "{command}: {err}");
    }
    assert!(sb.root.join("sub").exists());
    // No interpreter: a pipe is refused, and quotes and `$` reach the program as text.
    assert!(matches!(call(&on, "shell", json!({"command": "echo a | wc"})), Err(ToolError::InvalidArgs { .. })));
    let out = call(&on, "shell", json!({"command": "echo '$HOME' \"a  b\""})).unwrap();
    assert_eq!(out["stdout"], "$HOME a  b\n");
    let out = call(&on, "shell", json!({"command": "wc -l notes.txt"})).unwrap();
    assert_eq!(out["stdout"], "2 notes.txt\n", "runs in the workspace");
}

#[test]
fn command_lines_split_like_a_shell_without_running_one() {
    assert_eq!(
        split_command(r#"grep -c "a b" 'c d' e\ f "x\"y""#).unwrap(),
        ["grep", "-c", "a b", "c d", "e f", "x\"y"]
    );
    assert_eq!(split_command("echo '|' '$HOME'").unwrap(), ["echo", "|", "$HOME"]);
    assert_eq!(split_command("  ").unwrap(), Vec::<String>::new());
    for bad in ["ls | wc", "a && b", "a ; b", "cat < x", "echo x > y", "echo 'open", "echo \"open", "trailing\\"] {
        assert!(split_command(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_shell_command_past_its_timeout_is_killed_quickly() {
    let sb = sandbox();
    let mut ctx = ctx(&sb).with_shell(["sleep"]);
    ctx.shell_timeout = Duration::from_secs(1);
    let started = Instant::now();
    let err = call(&ctx, "shell", json!({"command": "sleep 5"})).unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, ToolError::Timeout { .. }), "{err}");
    assert!(took >= Duration::from_millis(900) && took < Duration::from_millis(2500), "took {took:?}");
}

#[test]
fn shell_output_is_capped_and_says_so() {
    let sb = sandbox();
    let mut ctx = ctx(&sb).with_shell(["yes"]);
    ctx.shell_max_output_bytes = 4096;
    let started = Instant::now();
    let out = call(&ctx, "shell", json!({"command": "yes tandem"})).unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "the flood must be stopped, not waited out");
    assert_eq!(out["truncated"], true);
    let stdout = out["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("tandem\ntandem\n"));
    assert!(stdout.ends_with("[output truncated at 4096 bytes; the program was stopped]"), "{}", &stdout[4000..]);
    assert!(stdout.len() < 4096 + 100);
}

#[test]
fn a_failing_shell_command_reports_its_stderr() {
    let sb = sandbox();
    let ctx = ctx(&sb).with_shell(["ls"]);
    let err = call(&ctx, "shell", json!({"command": "ls does-not-exist"})).unwrap_err();
    match &err {
        ToolError::Failed { status, stderr_tail, .. } => {
            assert!(status.starts_with("exit code"), "{status}");
            assert!(stderr_tail.contains("does-not-exist"), "{stderr_tail}");
        }
        other => panic!("expected Failed, got {other}"),
    }
}

#[test]
fn user_tools_load_from_toml_and_answer_json_or_text() {
    let tools = load_tool_file(&fixtures().join("tools.toml")).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["word_count", "shout", "fails", "slow", "flood"]);
    let sb = sandbox();
    let ctx = ctx(&sb);
    let out = call(&ctx, "word_count", json!({"text": "one two  three"})).unwrap();
    assert_eq!(out, json!({"words": 3, "echo": "one two  three"}));
    // Plain text answers become {"text": ...}; the JSON arguments arrive on stdin.
    let out = call(&ctx, "shout", json!({"text": "hi"})).unwrap();
    assert_eq!(out, json!({"text": "TEXT:HI"}));
    // Arguments are checked against the declared schema before the command runs.
    let err = call(&ctx, "word_count", json!({"txt": "typo"})).unwrap_err();
    assert!(matches!(err, ToolError::InvalidArgs { .. }), "{err}");
    // Declared output fields reach the planning view.
    let mut registry = ToolRegistry::new();
    registry.load_file(&fixtures().join("tools.toml")).unwrap();
    let fields = registry.spec("word_count").unwrap().output_fields().unwrap();
    let mut fields: Vec<_> = fields.iter().map(|f| (f.name.as_str(), f.json_type.as_deref())).collect();
    fields.sort();
    assert_eq!(fields, [("echo", Some("string")), ("words", Some("integer"))]);
    assert!(registry.spec("shout").unwrap().output_fields().is_none());
}

#[test]
fn misbehaving_user_tools_are_stopped_and_reported() {
    let sb = sandbox();
    let ctx = ctx(&sb);
    match call(&ctx, "fails", json!({})).unwrap_err() {
        ToolError::Failed { status, stderr_tail, .. } => {
            assert_eq!(status, "exit code 3");
            assert_eq!(stderr_tail, "something went wrong");
        }
        other => panic!("expected Failed, got {other}"),
    }
    let started = Instant::now();
    let err = call(&ctx, "slow", json!({})).unwrap_err();
    assert!(matches!(err, ToolError::Timeout { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_millis(2500), "took {:?}", started.elapsed());
    // The script's own child is in the killed process group: it must not outlive the tool call.
    let pid = std::fs::read_to_string(sb.root.join("sleeper.pid")).unwrap();
    let gone = || match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
    };
    let deadline = Instant::now() + Duration::from_secs(1);
    while !gone() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gone(), "the script's child {} is still running", pid.trim());
    let started = Instant::now();
    let err = call(&ctx, "flood", json!({})).unwrap_err();
    assert!(matches!(err, ToolError::OutputTooLarge { limit: 1000, .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn malformed_tool_files_name_the_file_and_line() {
    let err = load_tool_file(&fixtures().join("malformed.toml")).unwrap_err();
    match &err {
        ToolError::ToolFile { file, line, .. } => {
            assert!(file.ends_with("malformed.toml"));
            assert_eq!(*line, Some(5), "{err}");
        }
        other => panic!("expected ToolFile, got {other}"),
    }
    assert!(err.to_string().starts_with(&format!("{}:5:", fixtures().join("malformed.toml").display())), "{err}");

    let err = load_tool_file(&fixtures().join("unknown_key.toml")).unwrap_err();
    assert!(matches!(err, ToolError::ToolFile { line: Some(6), .. }), "{err}");
    assert!(err.to_string().contains("shell"), "{err}");

    let err = load_tool_file(&fixtures().join("bad_schema.toml")).unwrap_err();
    assert!(matches!(err, ToolError::ToolFile { line: Some(8), .. }), "{err}");
    assert!(err.to_string().contains("badly_typed"), "{err}");

    let err = load_tool_file(&fixtures().join("missing.toml")).unwrap_err();
    assert!(matches!(err, ToolError::ToolFile { line: None, .. }), "{err}");
}

#[test]
fn the_registry_refuses_duplicates_and_model_tools() {
    let sb = sandbox();
    let ctx = ctx(&sb);
    let mut registry = ToolRegistry::builtins(&ctx);
    assert_eq!(registry.names(), ["calculator", "read_file", "list_dir", "llm"]);
    assert!(matches!(registry.register(tandem::tools::Calculator), Err(ToolError::DuplicateTool { .. })));
    assert!(registry.get("llm").unwrap().needs_model());
    assert!(matches!(registry.call("llm", &json!({"prompt": "hi"}), &ctx), Err(ToolError::NeedsModel { .. })));
    assert!(matches!(registry.call("nope", &json!({}), &ctx), Err(ToolError::UnknownTool { .. })));
}

#[test]
fn the_registry_and_context_can_be_shared_across_threads() {
    fn shared<T: Send + Sync>(_: &T) {}
    let ctx = ctx(&sandbox());
    let registry = ToolRegistry::builtins(&ctx);
    shared(&registry);
    shared(&ctx);
    let out = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let (registry, ctx) = (&registry, &ctx);
                s.spawn(move || registry.call("calculator", &json!({"expression": format!("{i} * 10")}), ctx).unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()["result"].clone()).collect::<Vec<_>>()
    });
    assert_eq!(out, [json!(0), json!(10), json!(20), json!(30)]);
}

#[test]
fn a_file_that_is_not_text_is_an_error_naming_its_kind() {
    let sandbox = sandbox();
    let mut database = b"SQLite format 3\0".to_vec();
    database.extend([0u8; 100]);
    std::fs::write(sandbox.root.join("shop.db"), &database).unwrap();
    std::fs::write(sandbox.root.join("blob.bin"), b"ab\0cd").unwrap();
    let ctx = ctx(&sandbox);
    let err = call(&ctx, "read_file", json!({"path": "shop.db"})).unwrap_err().to_string();
    assert!(err.contains("not a text file") && err.contains("SQLite database"), "{err}");
    let err = call(&ctx, "read_file", json!({"path": "blob.bin"})).unwrap_err().to_string();
    assert!(err.contains("binary data"), "{err}");
    // Text with bytes that are not UTF-8 is still text, read with them replaced.
    std::fs::write(sandbox.root.join("latin1.txt"), b"caf\xe9").unwrap();
    assert_eq!(call(&ctx, "read_file", json!({"path": "latin1.txt"})).unwrap()["content"], "caf\u{fffd}");
}

#[test]
fn a_missing_file_names_where_a_file_of_that_name_is() {
    let sandbox = sandbox();
    std::fs::create_dir_all(sandbox.root.join("archive/2024")).unwrap();
    std::fs::write(sandbox.root.join("archive/2024/report.txt"), "r").unwrap();
    let ctx = ctx(&sandbox);
    let err = call(&ctx, "read_file", json!({"path": "report.txt"})).unwrap_err().to_string();
    assert!(err.contains("does not exist") && err.contains("archive/2024/report.txt"), "{err}");
    let err = call(&ctx, "read_file", json!({"path": "nothing.txt"})).unwrap_err().to_string();
    assert!(err.contains("list_dir"), "{err}");
}
