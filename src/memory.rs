//! Process memory: hand freed heap memory back to the system.

/// Returns the heap's free pages to the system (glibc's `malloc_trim`). After a model is dropped, glibc keeps most
/// of its freed weights resident (buffers of a few MiB come from the heap once a few have been freed), and the
/// next load in the same process adds to them: `tandem bench speed --repeats 3`, which loads the model three
/// times, peaked well above one load (docs/performance.md, "Memory"). A no-op off glibc.
pub fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointers and only hands back pages that glibc's allocator holds as free; it
    // takes each arena's lock itself, so it may run while other threads allocate.
    unsafe {
        libc::malloc_trim(0);
    }
}
