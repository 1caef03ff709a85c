//! The poison-tolerant lock every module of the core uses. A leaf: it
//! imports nothing of the crate, so any module may import it without
//! closing a circle (see `tests/module_layers.rs`).

use std::sync::{Mutex, MutexGuard};

/// Lock `m`, taking it over if a panicking holder poisoned it.
///
/// The core's mutexes guard state whose every change is one step (a push,
/// a removal, a replacement of a value): a panic while holding one leaves
/// nothing half-made, and refusing the lock for ever after would turn one
/// failed callback into a dead context.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
