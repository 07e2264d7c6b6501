//! `tandem rules`: the rule book's table, as text or JSON.

use serde_json::{json, Value};

use crate::agent::rules::{Rule, RULES};
use crate::cli::RulesArgs;
use crate::{Error, Result};

/// Where docs/rules.md explains `name`.
pub fn docs_anchor(name: &str) -> String {
    format!("docs/rules.md#{name}")
}

/// One rule as `tandem rules --json` writes it.
pub fn rule_json(rule: &dyn Rule) -> Value {
    let about = rule.about();
    json!({
        "name": about.name,
        "stage": about.stage,
        "profiles": about.profile.profiles(),
        "keys_on": about.keys_on,
        "docs": docs_anchor(about.name),
    })
}

/// Runs `tandem rules`.
pub fn run(args: RulesArgs) -> Result<()> {
    if args.json {
        let rules: Vec<Value> = RULES.iter().map(|rule| rule_json(*rule)).collect();
        println!("{}", serde_json::to_string_pretty(&rules).map_err(Error::encode("the rules"))?);
        return Ok(());
    }
    let width = RULES.iter().map(|rule| rule.about().name.len()).max().unwrap_or(0);
    for rule in RULES {
        let about = rule.about();
        let profiles = about.profile.profiles().join(",");
        println!("{:<width$}  {:<5}  {:<15}  {}", about.name, about.stage.name(), profiles, about.keys_on);
    }
    let general = RULES.iter().filter(|rule| rule.about().profile.profiles().contains(&"general")).count();
    println!(
        "\n{} rules, {general} in `general` (the default of run, plan, batch, serve); `--rules-off NAME,…` turns \
         any off; docs/rules.md explains each.",
        RULES.len()
    );
    Ok(())
}
