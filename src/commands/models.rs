//! `tandem models list | pull | verify | path`.

use crate::cli::ModelsCommand;
use crate::progress::Reporter;
use crate::store::{ModelStore, VerifyReport};
use crate::{Error, Result};

/// Runs a `models` subcommand.
pub fn run(cmd: ModelsCommand, reporter: &dyn Reporter) -> Result<()> {
    let store = ModelStore::open()?;
    let all_ids = || store.entries().iter().map(|e| e.id.clone()).collect::<Vec<_>>();
    match cmd {
        ModelsCommand::List => {
            println!("{:<38} {:<9} {:>9}  {:<19} {}", "ID", "ROLE", "SIZE", "LICENSE", "CACHED");
            for e in store.entries() {
                let cached = match store.cached_path(&e.id) {
                    Some(p) => p.display().to_string(),
                    None => "no (pulled on first use)".into(),
                };
                println!("{:<38} {:<9} {:>6.0} MB  {:<19} {}", e.id, e.role, e.size as f64 / 1e6, e.license, cached);
            }
            println!("cache: {}", store.cache_dir().display());
        }
        ModelsCommand::Pull { ids, force } => {
            let ids = if ids.is_empty() { all_ids() } else { ids };
            for id in ids {
                let path = store.pull(&id, force, reporter)?;
                reporter.message(&format!("{id}: ready at {}", path.display()));
            }
        }
        ModelsCommand::Verify { ids } => {
            let ids = if ids.is_empty() { all_ids() } else { ids };
            let mut bad = Vec::new();
            for id in ids {
                match store.verify(&id, reporter)? {
                    VerifyReport::Ok => println!("{id}: ok"),
                    VerifyReport::Missing => println!("{id}: not cached"),
                    VerifyReport::Mismatch { size, sha256 } => {
                        println!("{id}: MISMATCH ({size} bytes, sha256 {sha256}); run `tandem models pull --force {id}`");
                        bad.push(id);
                    }
                }
            }
            if !bad.is_empty() {
                return Err(Error::Usage(format!("corrupt cached models: {}", bad.join(", "))));
            }
        }
        ModelsCommand::Path { id } => {
            let resolved = store.resolve(&id, reporter)?;
            println!("{}", resolved.path.display());
        }
    }
    Ok(())
}
