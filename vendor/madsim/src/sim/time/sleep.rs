use super::*;
use std::{
    fmt,
    pin::Pin,
    task::{Poll, Waker},
};

/// Waits until `duration` has elapsed.
pub fn sleep(duration: Duration) -> Sleep {
    let handle = TimeHandle::current();
    handle.sleep(duration)
}

/// Waits until `deadline` is reached.
pub fn sleep_until(deadline: Instant) -> Sleep {
    let handle = TimeHandle::current();
    handle.sleep_until(deadline)
}

/// Future returned by [`sleep`] and [`sleep_until`].
///
/// [`sleep`]: sleep()
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Sleep {
    pub(super) handle: TimeHandle,
    pub(super) deadline: Instant,
    /// qsim patch: the one timer this sleep registered for `deadline`, as the slot holding the
    /// waker it will wake. A later poll replaces the waker in the slot instead of adding another
    /// timer; a drop or a `reset` empties it, so the timer, when it fires, wakes nothing.
    pub(super) timer: Option<Arc<WakerSlot>>,
}

/// The waker a [`Sleep`]'s timer wakes when it fires, if the sleep still wants it.
pub(super) type WakerSlot = spin::Mutex<Option<Waker>>;

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel_timer();
    }
}

impl Sleep {
    /// Returns the instant at which the future will complete.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Returns `true` if `Sleep` has elapsed.
    ///
    /// A `Sleep` instance is elapsed when the requested duration has elapsed.
    pub fn is_elapsed(&self) -> bool {
        self.handle.clock.now_instant() >= self.deadline
    }

    /// Resets the `Sleep` instance to a new deadline.
    pub fn reset(mut self: Pin<&mut Self>, deadline: Instant) {
        self.deadline = deadline;
        self.cancel_timer();
    }

    /// Empties the registered timer's slot: madsim's timer heap cannot remove an entry, so the
    /// entry stays until its deadline and then wakes nothing.
    fn cancel_timer(&mut self) {
        if let Some(slot) = self.timer.take() {
            slot.lock().take();
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        if self.is_elapsed() {
            return Poll::Ready(());
        }
        let this = self.get_mut();
        match &this.timer {
            Some(slot) => {
                let mut waker = slot.lock();
                if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *waker = Some(cx.waker().clone());
                }
            }
            None => {
                let slot = Arc::new(WakerSlot::new(Some(cx.waker().clone())));
                let fired = slot.clone();
                this.handle.add_timer_at(this.deadline, move || {
                    let waker = fired.lock().take();
                    if let Some(waker) = waker {
                        waker.wake();
                    }
                });
                this.timer = Some(slot);
            }
        }
        Poll::Pending
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .finish()
    }
}
