//! `tandem models list | pull | verify | path | add`: the store's command-line face. Results go to stdout, progress and
//! status lines to stderr through the reporter.

use super::model_info::{self, ModelInfo};
use crate::cli::ModelsCommand;
use crate::progress::Reporter;
use crate::store::local::{parse_hub_name, HUB_PREFIX};
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
        ModelsCommand::Add { path, id } => {
            let (id, target, sha) = store.add(&path, id.as_deref(), reporter)?;
            println!("{id}: kept at {} (sha256 {sha}); use it as --planner {id} or --executor {id}", target.display());
        }
    }
    Ok(())
}

/// The given ids (checked against the manifest, hub names for their form, before any work starts), or every id in
/// the manifest.
fn ids_or_all(store: &ModelStore, ids: Vec<String>) -> Result<Vec<String>> {
    if ids.is_empty() {
        return Ok(store.entries().iter().map(|e| e.id.clone()).collect());
    }
    for id in &ids {
        if id.starts_with(HUB_PREFIX) {
            parse_hub_name(id)?;
        } else {
            store.entry(id)?;
        }
    }
    Ok(ids)
}

fn list(store: &ModelStore) -> Result<()> {
    let added = store.added_ids();
    let width = store.entries().iter().map(|e| e.id.len()).chain(added.iter().map(String::len)).max().unwrap_or(2);
    let width = width.max(2);
    println!(
        "{:<width$}  {:<9} {:<9} {:<7} {:>7} {:>8}  {:<19} STATUS",
        "ID", "ROLE", "ARCH", "QUANT", "CONTEXT", "SIZE", "LICENSE"
    );
    for e in store.entries() {
        let status = store.status(&e.id)?;
        let on_disk = match &status {
            CacheStatus::Verified { path } | CacheStatus::Unverified { path } => Some(path.clone()),
            CacheStatus::WrongSize { .. } | CacheStatus::NotCached => None,
        };
        let status = match status {
            CacheStatus::Verified { path } => located("verified", store, &path),
            CacheStatus::Unverified { path } => located("cached, not verified yet", store, &path),
            CacheStatus::WrongSize { path, size } => {
                located(&format!("wrong size ({size} bytes), will be pulled again"), store, &path)
            }
            CacheStatus::NotCached => "not cached (pulled on first use)".to_string(),
        };
        // The header of the file on disk when there is one, else what the manifest says.
        let info = on_disk.and_then(|p| model_info::read(&p).ok()).unwrap_or_else(|| ModelInfo {
            architecture: e.architecture.clone(),
            quantization: e.quantization.clone(),
            context_length: None,
            size: e.size,
        });
        row(&e.id, &e.role, &info, &e.license, &status, width);
    }
    for id in &added {
        let path = store.cache_file(id);
        match model_info::read(&path) {
            Ok(info) => row(id, "added", &info, "-", "added (tandem models add, or a hub name)", width),
            Err(e) => println!("{id:<width$}  added     {} is unreadable: {e}", path.display()),
        }
    }
    println!("\ncache: {}", store.cache_dir().display());
    Ok(())
}

fn row(id: &str, role: &str, info: &ModelInfo, license: &str, status: &str, width: usize) {
    let context = info.context_length.map(|c| c.to_string()).unwrap_or_else(|| "-".into());
    let size = format!("{:.0} MB", info.size as f64 / 1e6);
    println!(
        "{id:<width$}  {role:<9} {:<9} {:<7} {context:>7} {size:>8}  {license:<19} {status}",
        info.architecture, info.quantization
    );
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
