//! Rule `fields-read-from-text` (run, general): at run time, a reference to a field (`$s1.commit_id$`) of a step
//! whose output is only text (an MCP tool's `{"text": …}`, a string) and has no such field takes that text; an `llm`
//! step reads it in its prompt; for a tool's argument the planner's model reads the value the field names out of
//! the text, shown the goal and the step, under a grammar that admits only a piece of the text (a line, what
//! follows a line's `Label:`, a word), and the tool is called with it. Off, the step fails (missing field) and the
//! run replans. Stated on the plan (a reference) and the result (text, no such field).
//!
//! The same holds for a reading: an `llm` step whose whole text a tool step passes as an argument (`$s2.text$` as
//! `read_file`'s `path`) is read by the planner's model as a piece of the results that step reads, under the same
//! grammar, shown the step's question and the parameter it fills, rather than written as a sentence: asked "What is
//! the path to the expenses file?" over a folder's listing, the 0.5B wrote "The path to the expenses file is:
//! shop.db", and `read_file` was called with that sentence (tasks-apps `db-ana-total`).
//!
//! Applied where references resolve (`agent::plan::refs::Resolution::read_text`) and where the orchestrator reads
//! the values (`agent::run::orchestrator::execution`, and `::readings` for a reading passed whole).
//!
//! Why: small planners guess fields of outputs they have not seen; the 0.5B executor took the older of two commits
//! in 3 of 4 runs of the test, the 1.5B planner none of 4.

/// Rule `fields-read-from-text` (run, general).
pub struct FieldsReadFromText;

impl super::Rule for FieldsReadFromText {
    fn about(&self) -> super::About {
        super::About {
            name: "fields-read-from-text",
            stage: super::Stage::Run,
            profile: super::Profile::General,
            keys_on: "a reference to a field of a step whose output is only text: that text (a prompt reads it; a tool argument gets the piece a model reads out under a grammar); a reading a tool step passes whole as an argument: such a piece of the results it reads",
        }
    }
}
