//! The carried madsim patch (`vendor/madsim`, `vendor/README.md`): a `Sleep` registers one timer
//! for its deadline, and a dropped or reset `Sleep` wakes nothing — as under real tokio, whose
//! timers are cancelled on drop. Stock madsim 0.2.34 fails the first two tests (measured): every
//! poll of a `Sleep` adds a timer, and every timer wakes the task that polled it, so a stale
//! deadline re-polls a task that is waiting on something else. That spurious poll is what would
//! hide a lost-wakeup bug in the node (a future that returns `Pending` without keeping the waker)
//! from the simulator while real tokio hangs on it.
#![cfg(madsim)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use madsim::runtime::Runtime;
use madsim::time::{Instant, Sleep, sleep};

/// A task that, on its first poll, polls `first` (a sleep it then drops or resets), and from then
/// on waits forever without keeping a waker: the only thing that can poll it again is a stale
/// timer. Counts its polls.
struct WaitsOnNothing {
    first: Option<Pin<Box<Sleep>>>,
    reset_to: Option<Duration>,
    polls: Arc<AtomicUsize>,
}

impl Future for WaitsOnNothing {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        if let Some(mut first) = self.first.take() {
            // Polled three times: one timer, however often it is polled.
            for _ in 0..3 {
                assert!(first.as_mut().poll(cx).is_pending());
            }
            match self.reset_to {
                // Reset far past the test's end and kept: the old deadline must not wake.
                Some(later) => {
                    first.as_mut().reset(Instant::now() + later);
                    self.first = Some(first);
                    self.reset_to = None;
                }
                None => drop(first),
            }
        }
        Poll::Pending
    }
}

fn polls_after_the_stale_deadline(reset_to: Option<Duration>) -> usize {
    let runtime = Runtime::with_seed_and_config(1, madsim::Config::default());
    runtime.block_on(async move {
        let polls = Arc::new(AtomicUsize::new(0));
        let task =
            WaitsOnNothing { first: Some(Box::pin(sleep(Duration::from_secs(1)))), reset_to, polls: polls.clone() };
        let _waiting = madsim::task::spawn(task);
        // Well past the dropped (or reset) sleep's original deadline.
        sleep(Duration::from_secs(5)).await;
        polls.load(Ordering::SeqCst)
    })
}

#[test]
fn a_dropped_sleep_wakes_nothing_at_its_deadline() {
    assert_eq!(polls_after_the_stale_deadline(None), 1, "the dropped sleep's timer polled the task again");
}

#[test]
fn a_reset_sleep_wakes_nothing_at_its_old_deadline() {
    assert_eq!(
        polls_after_the_stale_deadline(Some(Duration::from_secs(3600))),
        1,
        "the reset sleep's old timer polled the task again"
    );
}

#[test]
fn a_sleep_polled_again_still_completes_at_its_deadline() {
    let runtime = Runtime::with_seed_and_config(1, madsim::Config::default());
    let (woke_at, polls) = runtime.block_on(async {
        let start = Instant::now();
        let polls = Arc::new(AtomicUsize::new(0));
        let counted = polls.clone();
        // Polled once per 100 ms tick by the interval beside it, and done at 1 s exactly.
        let mut deadline = Box::pin(sleep(Duration::from_secs(1)));
        let mut tick = madsim::time::interval(Duration::from_millis(100));
        std::future::poll_fn(|cx| {
            counted.fetch_add(1, Ordering::SeqCst);
            while tick.poll_tick(cx).is_ready() {}
            deadline.as_mut().poll(cx)
        })
        .await;
        (Instant::now().duration_since(start), polls.load(Ordering::SeqCst))
    });
    assert!(woke_at >= Duration::from_secs(1) && woke_at < Duration::from_millis(1001), "completed at {woke_at:?}");
    assert!(polls >= 10, "polled {polls} times: the interval's ticks re-poll the sleep");
}
