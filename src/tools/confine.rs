//! Kernel confinement of the programs tools start (`shell`, command tools): on Linux with Landlock, a child may
//! read and run anything the user can, but create, change or delete files only inside the workspace (and write
//! to `/dev/null` and friends). Where the kernel has no Landlock (or on other systems), children are not confined
//! by the kernel, [`confinement`] says so, and the run's output repeats it: never claim more than is in force.
//!
//! What Landlock does not cover here: reading (secrets the user can read, a child can read), the network, and
//! files already open (the output pipes).

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// What confines the programs tools start, on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// Landlock, with the kernel's ABI version: writes only inside the workspace.
    Landlock(i32),
    /// Nothing beyond the working directory and the allowlist; the reason in words.
    Unconfined(String),
}

impl std::fmt::Display for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Confinement::Landlock(abi) => {
                write!(f, "confined by Landlock (ABI {abi}): they may write only inside the workspace")
            }
            Confinement::Unconfined(why) => write!(
                f,
                "not confined by the kernel ({why}): they run in the workspace but can write wherever the user can"
            ),
        }
    }
}

/// The confinement in force for tool programs on this machine (asked of the kernel once).
pub fn confinement() -> &'static Confinement {
    static FOUND: OnceLock<Confinement> = OnceLock::new();
    FOUND.get_or_init(detect)
}

#[cfg(target_os = "linux")]
fn detect() -> Confinement {
    if crate::settings::env::no_landlock() {
        return Confinement::Unconfined("switched off with TANDEM_NO_LANDLOCK".into());
    }
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the VERSION flag only returns the ABI
    // version (or an error); it reads and writes no memory.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if abi >= 1 {
        return Confinement::Landlock(abi as i32);
    }
    let why = match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENOSYS) => "this kernel has no Landlock",
        Some(libc::EOPNOTSUPP) => "Landlock is switched off in this kernel (add it to the lsm= boot parameter)",
        _ => "Landlock is not available",
    };
    Confinement::Unconfined(why.into())
}

#[cfg(not(target_os = "linux"))]
fn detect() -> Confinement {
    Confinement::Unconfined("Landlock is Linux-only".into())
}

/// Arranges for `command`'s process to be confined to writing inside `workspace` before it starts, when the
/// kernel can; otherwise leaves it as it is.
#[cfg(target_os = "linux")]
pub(crate) fn confine(command: &mut Command, workspace: &Path) -> std::io::Result<()> {
    use landlock::{path_beneath_rules, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError, ABI};
    use std::os::unix::process::CommandExt;

    if !matches!(confinement(), Confinement::Landlock(_)) {
        return Ok(());
    }
    let abi = ABI::V3;
    let devices = ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/urandom", "/dev/random"];
    // Built here, in the parent: the child between fork and exec may only make system calls.
    let ruleset = (|| -> Result<_, RulesetError> {
        Ruleset::default()
            .handle_access(AccessFs::from_all(abi))?
            .create()?
            .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))?
            .add_rules(path_beneath_rules(devices, AccessFs::from_read(abi) | AccessFs::WriteFile))?
            .add_rules(path_beneath_rules([workspace], AccessFs::from_all(abi)))
    })()
    .map_err(|e| std::io::Error::other(format!("preparing the Landlock rules: {e}")))?;
    let mut ruleset = Some(ruleset);
    // SAFETY: the closure runs in the forked child before exec; restrict_self makes two system calls (prctl
    // NO_NEW_PRIVS and landlock_restrict_self) on a ruleset built before the fork, and allocates only to report
    // an error.
    unsafe {
        command.pre_exec(move || match ruleset.take() {
            Some(ruleset) => ruleset.restrict_self().map(|_| ()).map_err(std::io::Error::other),
            None => Ok(()),
        });
    }
    Ok(())
}

/// Other systems: nothing to arrange ([`confinement`] says so).
#[cfg(not(target_os = "linux"))]
pub(crate) fn confine(_command: &mut Command, _workspace: &Path) -> std::io::Result<()> {
    Ok(())
}
