//! The `shell` tool: runs one allowlisted program in the workspace, without a shell interpreter.
//!
//! The command line is split like a POSIX shell splits words (quotes and backslashes), and nothing else: no
//! variables, globs, pipes or redirections. Its first word must be on the run's allowlist. A time limit kills the
//! process group; output past the cap stops the program and is reported as truncated.

use serde_json::{json, Value};

use super::error::{ToolError, ToolResult};
use super::process::{describe_status, run};
use super::read_file::string_arg;
use super::{Tool, ToolContext};

/// Runs `{"command": "wc -l notes.txt"}` and answers `{"stdout", "stderr", "exit_code", "truncated"}`. A
/// non-zero exit is an error carrying the end of standard error.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shell;

impl Shell {
    /// The tool's name in plans.
    pub const NAME: &'static str = "shell";
}

/// Splits a command line into words: whitespace separates, `'…'` is literal, `"…"` allows `\"` `\\` `\$`
/// `` \` `` escapes, a backslash outside quotes escapes the next character. Pipes, redirections and command
/// lists are refused: there is no shell to run them.
pub fn split_command(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quoted_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    finish_word(&mut words, std::mem::take(&mut word), quoted_word)?;
                    in_word = false;
                    quoted_word = false;
                }
            }
            '\'' => {
                in_word = true;
                quoted_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("unbalanced single quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                quoted_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("unbalanced double quote".into()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("unbalanced double quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                quoted_word = true;
                match chars.next() {
                    Some(c) => word.push(c),
                    None => return Err("a trailing backslash escapes nothing".into()),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        finish_word(&mut words, word, quoted_word)?;
    }
    Ok(words)
}

fn finish_word(words: &mut Vec<String>, word: String, quoted: bool) -> Result<(), String> {
    const OPERATORS: [&str; 9] = ["|", "||", "&&", ";", "&", ">", ">>", "<", "2>"];
    if !quoted && OPERATORS.contains(&word.as_str()) {
        return Err(format!(
            "'{word}' needs a shell, and commands run without one: give a single program and its arguments"
        ));
    }
    words.push(word);
    Ok(())
}

impl Tool for Shell {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        "Run one allowed program with arguments in the workspace (no pipes or redirections), e.g. \"wc -l notes.txt\"."
    }

    fn args_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"command": {"type": "string", "minLength": 1, "maxLength": 400}},
            "required": ["command"],
            "additionalProperties": false
        })
    }

    fn output_schema(&self) -> Option<Value> {
        Some(json!({
            "type": "object",
            "properties": {
                "stdout": {"type": "string"},
                "stderr": {"type": "string"},
                "exit_code": {"type": "integer"},
                "truncated": {"type": "boolean"}
            }
        }))
    }

    fn call(&self, args: &Value, ctx: &ToolContext) -> ToolResult<Value> {
        let refused = |reason: String| ToolError::Refused { tool: Self::NAME.into(), reason };
        if ctx.shell_allowlist.is_empty() {
            return Err(refused("the shell is off for this run (allow programs with --allow-shell CMD,...)".into()));
        }
        let line = string_arg(Self::NAME, args, "command")?;
        let argv =
            split_command(line).map_err(|message| ToolError::InvalidArgs { tool: Self::NAME.into(), message })?;
        let Some(program) = argv.first() else {
            return Err(ToolError::InvalidArgs { tool: Self::NAME.into(), message: "the command is empty".into() });
        };
        if !ctx.shell_allowlist.iter().any(|allowed| allowed == program) {
            return Err(refused(format!("'{program}' is not on the allowlist ({})", ctx.shell_allowlist.join(", "))));
        }
        let cap = ctx.shell_max_output_bytes;
        let captured = run(Self::NAME, &argv, ctx.workspace.root(), None, ctx.shell_timeout, cap)?;
        let mut stdout = String::from_utf8_lossy(&captured.stdout).into_owned();
        if captured.overflowed {
            stdout.push_str(&format!("\n[output truncated at {cap} bytes; the program was stopped]"));
        } else if let Some(status) = captured.status.filter(|s| !s.success()) {
            return Err(ToolError::Failed {
                tool: Self::NAME.into(),
                status: describe_status(&status),
                stderr_tail: captured.stderr_text(),
            });
        }
        Ok(json!({
            "stdout": stdout,
            "stderr": String::from_utf8_lossy(&captured.stderr_tail),
            "exit_code": captured.status.and_then(|s| s.code()),
            "truncated": captured.overflowed
        }))
    }
}
