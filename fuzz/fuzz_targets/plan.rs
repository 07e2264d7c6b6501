//! Plan JSON and its validator: any text is parsed or refused; a parsed plan validates without panicking, its
//! problems are in words, and it reads back from its own JSON unchanged.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tandem::agent::Plan;
use tandem::tools::{ToolContext, ToolRegistry, Workspace};

fn registry() -> &'static ToolRegistry {
    static REGISTRY: OnceLock<ToolRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let context = ToolContext::new(Workspace::new(std::env::temp_dir()).unwrap()).with_write(true);
        ToolRegistry::builtins(&context.with_shell(["echo"]))
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(plan) = Plan::from_json(text) else { return };
    for issue in plan.validate(registry()) {
        assert!(!issue.to_string().is_empty());
    }
    let _ = plan.clone().with_explicit_dependencies().validate(registry());
    let again = serde_json::to_string(&plan).unwrap();
    assert_eq!(Plan::from_json(&again).unwrap(), plan, "a plan must read back from its own JSON");
});
