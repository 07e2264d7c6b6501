//! Kernel confinement of the programs tools start: allowlisted `touch`, `cp`, `find` and `python3 -c`, and a
//! command tool, each trying to write outside the workspace, fail where Landlock is in force; writing inside
//! still works. Where the kernel has no Landlock the test checks the other half of the promise: Tandem says so,
//! and the write indeed goes through (it never claims more than is in force).

use crate::common::runs::Scratch;
use serde_json::json;
use tandem::tools::confine::{confinement, Confinement};
use tandem::tools::{parse_tool_file, ToolContext, ToolRegistry, Workspace};

#[test]
fn allowlisted_programs_cannot_write_outside_the_workspace() {
    let scratch = Scratch::new();
    let workspace = scratch.workspace();
    std::fs::write(workspace.join("notes.txt"), "inside").unwrap();
    std::fs::write(scratch.path("secret.txt"), "outside").unwrap();
    let context =
        ToolContext::new(Workspace::new(&workspace).unwrap()).with_shell(["touch", "cp", "find", "python3", "cat"]);
    let mut registry = ToolRegistry::builtins(&context);
    let tools = format!(
        "[[tool]]\nname = \"drop\"\ndescription = \"Writes a file beside the workspace.\"\n\
         command = [\"sh\", \"-c\", \"cat >/dev/null; echo x > '{}'; echo done\"]\nargs_schema = {{ type = \"object\" }}\n",
        scratch.path("dropped.txt").display()
    );
    for tool in parse_tool_file(&tools, &scratch.path("tools.toml")).unwrap() {
        registry.register(tool).unwrap();
    }
    let shell = |command: &str| registry.call("shell", &json!({ "command": command }), &context);
    let escapes = [
        ("touch ../touched.txt", "touched.txt"),
        ("cp notes.txt ../copied.txt", "copied.txt"),
        ("find . -name notes.txt -fprint ../found.txt", "found.txt"),
        ("python3 -c \"open('../py.txt', 'w').write('x')\"", "py.txt"),
    ];
    let confined = matches!(confinement(), Confinement::Landlock(_));
    eprintln!("tool programs on this machine: {}", confinement());
    for (command, file) in escapes {
        let result = shell(command);
        let escaped = scratch.path(file).exists();
        if confined {
            let error = result.expect_err(command).to_string();
            assert!(error.contains("exit code"), "{command}: {error}");
            assert!(!escaped, "{command} wrote {file} outside the workspace");
        } else {
            assert!(escaped, "{command}: unconfined, the write should have gone through: {result:?}");
        }
    }
    let dropped = registry.call("drop", &json!({}), &context);
    assert_eq!(scratch.path("dropped.txt").exists(), !confined, "command tool: {dropped:?}");
    // Inside the workspace everything still works; reading outside is not confined.
    shell("touch made.txt").unwrap();
    shell("cp notes.txt copy.txt").unwrap();
    assert!(workspace.join("made.txt").exists() && workspace.join("copy.txt").exists());
    assert_eq!(shell("cat ../secret.txt").unwrap()["stdout"], "outside");
}

#[test]
fn tandem_run_says_what_confines_tool_programs() {
    let scratch = Scratch::new();
    let workspace = scratch.workspace();
    let plan = scratch.write(
        "plan.json",
        r#"{"goal": "escape", "steps": [{"id": "s1", "tool": "shell", "args": {"command": "touch ../escaped.txt"}}]}"#,
    );
    let output = scratch.tandem(&[
        "run",
        "--plan",
        plan.to_str().unwrap(),
        "--workspace",
        workspace.to_str().unwrap(),
        "--allow-shell",
        "touch",
        "--max-replans",
        "0",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let said = format!("programs run by tools are {}", confinement());
    assert!(stderr.contains(&said), "{stderr}");
    let confined = matches!(confinement(), Confinement::Landlock(_));
    assert_eq!(scratch.path("escaped.txt").exists(), !confined, "{stderr}");
    assert_eq!(output.status.code(), Some(if confined { 3 } else { 0 }), "{stderr}");
}
