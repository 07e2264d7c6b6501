//! The user's data on a real database server (`mcp-server-sqlite`, installed on first use as in tests/it/mcp.rs):
//! a call that would put a name nothing gave into the user's database is not made (rule `contents-not-made-up`'s
//! run-time part), and `--rules-off` lets it through, so the test can fail; the server's error answered as text
//! ("Database error: no such column") is a failed step, not a result a reading answers from (`errors-in-results`).

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
    let plan = r#"{"goal": "leeds", "steps": [
            {"id": "s1", "description": "add a customer", "tool": "write_query",
             "args": {"query": "INSERT INTO customers (name, city) VALUES ('John Doe', 'Leeds')"}},
            {"id": "s2", "description": "the city's customers", "tool": "read_query",
             "args": {"query": "SELECT name FROM customers WHERE city = 'Leeds'"}, "depends_on": ["s1"]}]}"#;
    run_on_shop(plan, extra)
}

/// Runs the given `plan` against a fresh copy of the shop (no joiner, no replans); returns the run's JSON, its
/// events and the customers left in the database.
fn run_on_shop(plan: &str, extra: &[&str]) -> (Value, Vec<Value>, Vec<String>) {
    let scratch = Scratch::new();
    let plan = scratch.write("plan.json", plan);
    let mut args = vec!["--plan", plan.to_str().unwrap(), "--max-replans", "0", "--joiner", "off"];
    args.extend_from_slice(extra);
    ask_the_shop(&scratch, &args, "Which of our customers live in Leeds?")
}

/// Runs `goal` with `args` against a fresh copy of the shop in `scratch`; returns the run's JSON, its events and
/// the customers left in the database.
fn ask_the_shop(scratch: &Scratch, args: &[&str], goal: &str) -> (Value, Vec<Value>, Vec<String>) {
    let workspace = scratch.workspace();
    std::fs::create_dir_all(&workspace).unwrap();
    let db = workspace.join("shop.db");
    let python = installed_program("venv/bin/python3");
    let made = Command::new(&python).args(["-c", SHOP, db.to_str().unwrap()]).output().unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let server = installed_program("venv/bin/mcp-server-sqlite");
    let config = json!({"mcpServers": {"db": {"command": server, "args": ["--db-path", db]}}});
    let config = scratch.write("mcp.json", &config.to_string());
    let mut all = vec!["run", "--workspace", workspace.to_str().unwrap(), "--mcp", config.to_str().unwrap()];
    all.extend_from_slice(&["--mcp-timeout", "60"]);
    all.extend_from_slice(args);
    all.push(goal);
    let (json, _) = scratch.tandem_json(&all);
    (json, scratch.latest_events(), customers(&db))
}

/// Issue #71, item 6 (a call written after what it depends on is seen), with the real models: asked which
/// customers live in a city, the planner (shown the database's tools before the built-ins) looks the tables up
/// first, and the query that answers is one written in a plan after a table's description or list came back (the
/// `dependencies` rule has a query written blind beside them written again). The answer names both customers.
#[test]
fn a_query_is_written_after_the_tables_are_seen() {
    let scratch = Scratch::new();
    let (json, events, names) =
        ask_the_shop(&scratch, &["--threads", "2", "--joiner", "planner"], "Which of our customers live in Leeds?");
    assert_eq!(names, ["Ana Souza", "Ben Carter", "Dev Patel"], "a question changed the database: {json}");
    let answer = json["answer"].as_str().unwrap_or_default();
    assert!(answer.contains("Ben Carter") && answer.contains("Dev Patel"), "{json}");
    let seq = |e: &Value| e["seq"].as_u64().unwrap();
    let seen = events
        .iter()
        .find(|e| {
            e["event"] == "step_finished"
                && ["list_tables", "describe_table"].contains(&e["tool"].as_str().unwrap_or_default())
                && e["error"].is_null()
        })
        .unwrap_or_else(|| panic!("no table was looked up: {events:?}"));
    let answering = events
        .iter()
        .find(|e| {
            e["event"] == "step_finished" && e["tool"] == "read_query" && e["output"].to_string().contains("Dev Patel")
        })
        .unwrap_or_else(|| panic!("no query read the city's customers: {events:?}"));
    let written = events
        .iter()
        .find(|e| e["event"] == "plan_written" && e["version"] == answering["version"])
        .expect("the answering query's plan");
    assert!(seq(written) > seq(seen), "the query was written before the tables were seen: {written} / {seen}");
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

/// Rule `errors-in-results`: the SQLite server answers a query over a column its table lacks with the text
/// "Database error: no such column: …" and no error flag. The step fails with that message (logged as the rule's),
/// so nothing reads it as the customers' data; with the rule off the same text is the step's result.
#[test]
fn a_database_error_answered_as_text_is_a_failed_step() {
    let plan = r#"{"goal": "newest", "steps": [
        {"id": "s1", "description": "the newest customer", "tool": "read_query",
         "args": {"query": "SELECT name FROM customers ORDER BY signup_date DESC LIMIT 1"}}]}"#;
    let step = |events: &[Value]| -> Value {
        events.iter().find(|e| e["event"] == "step_finished" && e["step"] == "s1").cloned().expect("s1 finished")
    };
    let (json, events, _) = run_on_shop(plan, &[]);
    let failed = step(&events);
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(error.contains("no such column: signup_date") && failed["output"].is_null(), "{json}");
    let applied = events.iter().find(|e| e["event"] == "rule_applied").expect("a rule_applied event");
    assert_eq!((applied["rule"].as_str(), applied["step"].as_str()), (Some("errors-in-results"), Some("s1")));

    let (_, events, _) = run_on_shop(plan, &["--rules-off", "errors-in-results"]);
    let taken = step(&events);
    assert!(taken["error"].is_null(), "{taken}");
    assert!(taken["output"].to_string().contains("no such column"), "{taken}");
}
