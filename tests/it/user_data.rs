//! The user's data on a real database server (`mcp-server-sqlite`, installed on first use as in tests/it/mcp.rs):
//! a call that would put a name nothing gave into the user's database is not made (rule `contents-not-made-up`'s
//! run-time part), and `--rules-off` lets it through, so the test can fail.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::common::runs::Scratch;
use crate::mcp::installed_program;

/// A shop's customers, as the tasks-apps suite's database holds them (fewer rows).
const SHOP: &str = "import sqlite3, sys\n\
c = sqlite3.connect(sys.argv[1])\n\
c.executescript('''CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT);\n\
INSERT INTO customers VALUES (1,'Ana Souza','Lisbon'),(2,'Ben Carter','Leeds'),(3,'Dev Patel','Leeds');''')\n\
c.commit()\n";

/// The names in the database's customers table, read with Python's sqlite3.
fn customers(db: &Path) -> Vec<String> {
    let python = installed_program("venv/bin/python3");
    let read =
        "import sqlite3, sys\nfor (n,) in sqlite3.connect(sys.argv[1]).execute('select name from customers'): print(n)";
    let output = Command::new(python).args(["-c", read, db.to_str().unwrap()]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).lines().map(str::to_string).collect()
}

/// Runs a given plan that inserts a customer nobody named, then reads the city's customers, against a fresh copy of
/// the shop; returns the run's JSON, its events and the customers left in the database.
fn run_invented_insert(extra: &[&str]) -> (Value, Vec<Value>, Vec<String>) {
    let scratch = Scratch::new();
    let workspace = scratch.workspace();
    std::fs::create_dir_all(&workspace).unwrap();
    let db = workspace.join("shop.db");
    let python = installed_program("venv/bin/python3");
    let made = Command::new(&python).args(["-c", SHOP, db.to_str().unwrap()]).output().unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let server = installed_program("venv/bin/mcp-server-sqlite");
    let config = json!({"mcpServers": {"db": {"command": server, "args": ["--db-path", db]}}});
    let config = scratch.write("mcp.json", &config.to_string());
    let plan = scratch.write(
        "plan.json",
        r#"{"goal": "leeds", "steps": [
            {"id": "s1", "description": "add a customer", "tool": "write_query",
             "args": {"query": "INSERT INTO customers (name, city) VALUES ('John Doe', 'Leeds')"}},
            {"id": "s2", "description": "the city's customers", "tool": "read_query",
             "args": {"query": "SELECT name FROM customers WHERE city = 'Leeds'"}, "depends_on": ["s1"]}]}"#,
    );
    let mut args = vec![
        "run",
        "--workspace",
        workspace.to_str().unwrap(),
        "--mcp",
        config.to_str().unwrap(),
        "--mcp-timeout",
        "60",
        "--plan",
        plan.to_str().unwrap(),
        "--max-replans",
        "0",
        "--joiner",
        "off",
    ];
    args.extend_from_slice(extra);
    args.push("Which of our customers live in Leeds?");
    let (json, _) = scratch.tandem_json(&args);
    (json, scratch.latest_events(), customers(&db))
}

#[test]
fn a_name_nothing_gave_never_reaches_the_users_database() {
    let (json, events, names) = run_invented_insert(&[]);
    assert_eq!(names, ["Ana Souza", "Ben Carter", "Dev Patel"], "the database changed: {json}");
    let refused = events
        .iter()
        .find(|e| e["event"] == "step_finished" && e["step"] == "s1")
        .unwrap_or_else(|| panic!("s1 did not finish: {events:?}"));
    let error = refused["error"].as_str().unwrap_or_default();
    assert!(error.starts_with(tandem::agent::rules::MADE_UP) && error.contains("John Doe"), "{refused}");
    assert!(
        !events.iter().any(|e| e["event"] == "tool_call" && e["tool"] == "write_query"),
        "the insert was sent to the server: {events:?}"
    );
    // With the rule off, the same plan writes the made-up customer: the check above is what kept it out.
    let (_, _, names) = run_invented_insert(&["--rules-off", "contents-not-made-up"]);
    assert!(names.iter().any(|n| n == "John Doe"), "{names:?}");
}
