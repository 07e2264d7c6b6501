//! An optional number the user did not give keeps the tool's declared default.
//!
//! Rule `declared-defaults`, profile `general`: a number passed to a parameter the tool declares optional with a
//! numeric `default` in its schema, other than that default, which the goal writes nowhere, whose parameter the
//! goal does not name and which is no earlier result, is left out, so the tool's own default applies. Numbers come
//! from the user or from results; the default is the tool author's choice for a user who gave none. A number the
//! goal writes or whose parameter it names is kept, and so is one written as its default (some callers write
//! defaults out). Switches and texts are left alone (a switch the goal asks for in its description's words is
//! `switches-asked`'s, `mend/options.rs`).
//!
//! Why: the 1.5B planner set optional parameters to values of its own (tasks-mcp `web-keynote-kolkata`: `fetch`
//! with `start_index: 100` and `raw: true`, defaults 0 and false, so the page came back cut before the keynote's
//! time). Unlike the bench-only `optional` rule, a parameter without a declared default is left alone.

use super::leave_out_unasked;
use crate::agent::plan::Plan;
use crate::tools::ToolRegistry;

/// Leaves out each optional number that departs from its declared default unasked; returns one line per
/// argument (`s1: start_index 100 left out (optional, default 0, and the goal names neither it nor 100)`).
pub fn restore_declared_defaults(plan: &mut Plan, registry: &ToolRegistry) -> Vec<String> {
    leave_out_unasked(plan, registry, |parameter, value| {
        let default = parameter.get("default")?;
        let departs = value.is_number() && default.is_number() && value.as_f64() != default.as_f64();
        departs.then(|| format!("default {default}, "))
    })
}
