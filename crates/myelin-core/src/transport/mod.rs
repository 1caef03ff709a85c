//! Transports: how messages leave the process.
//!
//! The intra-process manager delivers within a context;
//! the shared-memory transport (feature `shm`, on by default) connects
//! contexts in other processes (and other contexts of this process) on the
//! same host. `MYELIN_TRANSPORT=intra` turns it off at run time (any value
//! that does not list `shm` does).

#[cfg(feature = "shm")]
pub(crate) mod shm;
pub(crate) mod wake;

/// Whether the shared-memory transport is compiled in and not turned off
/// by `MYELIN_TRANSPORT`.
pub fn shared_memory_enabled() -> bool {
    if !cfg!(feature = "shm") {
        return false;
    }
    match std::env::var("MYELIN_TRANSPORT") {
        Ok(v) => v.split(',').any(|t| t.trim() == "shm"),
        Err(_) => true,
    }
}
