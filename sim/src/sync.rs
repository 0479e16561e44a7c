//! One rule for the simulator's locks.
//!
//! A panic in any task of a run ends the run: madsim re-raises it out of `block_on` (the run's
//! verdict is a crash; nothing of the run goes on), and a sweep's or a sizing's worker thread
//! that panics is reported as its run's crash. So a lock is poisoned only by a panic that is
//! already ending what it belonged to, and is taken again only while that panic unwinds — to
//! record what happened, or to hand back the results gathered so far. Its guard is then used
//! as is, decided here once: a second panic would only hide the first.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// [`Mutex::lock`] under the rule above.
pub trait Locked<T: ?Sized> {
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`Mutex::into_inner`] under the rule above.
pub fn into_inner<T>(mutex: Mutex<T>) -> T {
    mutex.into_inner().unwrap_or_else(PoisonError::into_inner)
}
