//! Child processes that die with tandem: the kernel kills them when the tandem process ends, however it ends.

use std::process::Command;

/// Asks the kernel to kill the child `command` starts when this process dies, however it dies (Linux; elsewhere
/// nothing): a `tandem` killed with SIGKILL runs no destructor, and a child left behind would keep working (a
/// download writing into the store, a benchmarked server holding its port and cores).
pub fn die_with_parent(command: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of the forked child; it allocates nothing and is
        // async-signal-safe.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = command;
}
