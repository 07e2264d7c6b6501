//! `tandem models list | pull | verify | path`: the store's command-line face. Results go to stdout, progress and
//! status lines to stderr through the reporter.

use crate::cli::ModelsCommand;
use crate::progress::Reporter;
use crate::store::{CacheStatus, ModelStore, StoreError, VerifyReport};
use crate::Result;

/// Runs a `models` subcommand.
pub fn run(cmd: ModelsCommand, reporter: &dyn Reporter) -> Result<()> {
    let store = ModelStore::open()?;
    match cmd {
        ModelsCommand::List => list(&store)?,
        ModelsCommand::Pull { ids, force } => {
            for id in ids_or_all(&store, ids)? {
                let path = store.pull(&id, force, reporter)?;
                reporter.message(&format!("{id}: ready at {}", path.display()));
            }
        }
        ModelsCommand::Verify { ids } => verify(&store, ids, reporter)?,
        ModelsCommand::Path { id } => {
            let resolved = store.resolve(&id, reporter)?;
            println!("{}", resolved.path.display());
        }
    }
    Ok(())
}

/// The given ids (checked against the manifest before any work starts), or every id in the manifest.
fn ids_or_all(store: &ModelStore, ids: Vec<String>) -> Result<Vec<String>> {
    if ids.is_empty() {
        return Ok(store.entries().iter().map(|e| e.id.clone()).collect());
    }
    for id in &ids {
        store.entry(id)?;
    }
    Ok(ids)
}

fn list(store: &ModelStore) -> Result<()> {
    let width = store.entries().iter().map(|e| e.id.len()).max().unwrap_or(2).max(2);
    println!("{:<width$}  {:<9} {:>8}  {:<19} STATUS", "ID", "ROLE", "SIZE", "LICENSE");
    for e in store.entries() {
        let status = match store.status(&e.id)? {
            CacheStatus::Verified { path } => located("verified", store, &path),
            CacheStatus::Unverified { path } => located("cached, not verified yet", store, &path),
            CacheStatus::WrongSize { path, size } => {
                located(&format!("wrong size ({size} bytes), will be pulled again"), store, &path)
            }
            CacheStatus::NotCached => "not cached (pulled on first use)".to_string(),
        };
        let size = format!("{:.0} MB", e.size as f64 / 1e6);
        println!("{:<width$}  {:<9} {:>8}  {:<19} {status}", e.id, e.role, size, e.license);
    }
    println!("\ncache: {}", store.cache_dir().display());
    Ok(())
}

/// `status`, plus where the file is when it is not in the cache (a `TANDEM_MODELS` directory).
fn located(status: &str, store: &ModelStore, path: &std::path::Path) -> String {
    if path.parent() == Some(store.cache_dir()) {
        status.to_string()
    } else {
        format!("{status} ({})", path.display())
    }
}

fn verify(store: &ModelStore, ids: Vec<String>, reporter: &dyn Reporter) -> Result<()> {
    let explicit = !ids.is_empty();
    let mut bad = Vec::new();
    for id in ids_or_all(store, ids)? {
        match store.verify(&id, reporter)? {
            VerifyReport::Ok { path } => println!("{id}: ok ({})", path.display()),
            VerifyReport::Missing => {
                println!("{id}: not cached");
                // Asked for by name, a missing model is a failure; in "verify everything" it is just not there.
                if explicit {
                    bad.push(format!("{id} is not cached (`tandem models pull {id}`)"));
                }
            }
            VerifyReport::Mismatch { path, size, sha256 } => {
                println!("{id}: MISMATCH {} ({size} bytes, sha256 {sha256})", path.display());
                bad.push(format!("{id} does not match the manifest (`tandem models pull --force {id}`)"));
            }
        }
    }
    if !bad.is_empty() {
        return Err(StoreError::VerifyFailed { problems: bad.join("; ") }.into());
    }
    Ok(())
}
