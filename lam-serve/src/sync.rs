//! The one rule for the proxy's locks: a mutex held by a holder that
//! panicked is taken anyway (every holder leaves its data consistent
//! between calls). At the bottom of the crate: every module may use it.

use std::sync::{Mutex, MutexGuard};

/// Lock a mutex, taking the data even when a panicking holder poisoned it.
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
