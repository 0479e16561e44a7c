//! Process faults: kill, restart after a delay, fast restart, pause and resume.
//!
//! Fault model:
//! - **kill**: the node's process dies at once — its tasks are dropped and its sockets reset,
//!   like SIGKILL. Its disk survives. After `duration` it restarts on that disk (a few hundred
//!   milliseconds is a fast restart, racing its own peers' reconnects) and must resume exactly
//!   where its last commit left it: no replay, no skip. Its downstream nodes fail over to their
//!   next source at the reset.
//! - **pause**: the process stops being scheduled, like SIGSTOP or a long GC pause. Its
//!   connections stay open but silent, so only the staleness threshold can detect it. After
//!   `duration` it resumes and carries on.
//! - **stop**: SIGTERM — the node runs its own graceful shutdown (`Node::shutdown` with its
//!   configured drain timeout): no new connections, the root commits and answers the writes
//!   already queued, open connections finish, the store closes. After `duration` it starts
//!   again. A write it answered while draining is acknowledged like any other.
//!
//! The [`supervisor`] is the nodes' systemd: it kills a process that hit a poisoned page (see
//! `disk.rs`) and starts it again, and starts again a process that failed to start, 1–10 s
//! later, unless a fault holds the node down meanwhile (that fault's end starts it).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::runtime::{Handle, NodeHandle};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::disk::SimDisk;
use super::supervision::Supervision;

use crate::sync::Locked;
use crate::trace::{Event, SharedRecorder};

/// A node the supervisor watches: its name, its madsim node, its disk.
pub type Supervised = (String, NodeHandle, Arc<SimDisk>);

/// The nodes' supervisor (see the module doc). `down`: the nodes a fault holds down now.
pub async fn supervisor(
    supervision: Arc<Supervision>,
    nodes: Vec<Supervised>,
    down: Arc<Mutex<BTreeSet<String>>>,
    recorder: SharedRecorder,
    seed: u64,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7375_7065_7276_6973);
    loop {
        supervision.wake.notified().await;
        let sigbus = std::mem::take(&mut *supervision.sigbus.locked());
        for name in sigbus {
            let Some((_, node, device)) = nodes.iter().find(|(n, _, _)| *n == name) else { continue };
            kill(node);
            let delay = Duration::from_millis(rng.random_range(1_000..=10_000));
            let (node, device) = (node.clone(), device.clone());
            tokio::spawn(async move {
                madsim::time::sleep(delay).await;
                // Unless its disk was replaced meanwhile (the replacement restarted it).
                if device.is_failing() {
                    restart(&node);
                }
            });
        }
        let failed = std::mem::take(&mut *supervision.failed_starts.locked());
        for (name, reason) in failed {
            let Some((_, node, _)) = nodes.iter().find(|(n, _, _)| *n == name) else { continue };
            {
                let mut recorder = recorder.locked();
                let at_ms = recorder.now_ms();
                recorder.record(Event::StartFailed { at_ms, node: name.clone(), reason });
            }
            let delay = Duration::from_millis(rng.random_range(1_000..=10_000));
            let (node, down) = (node.clone(), down.clone());
            tokio::spawn(async move {
                madsim::time::sleep(delay).await;
                if !down.locked().contains(&name) {
                    restart(&node);
                }
            });
        }
    }
}

pub fn kill(node: &NodeHandle) {
    Handle::current().kill(node.id());
}

/// Starts the node's process again. Killing first matters: madsim's restart alone does not
/// reset the node's sockets, so a running process would keep its ports bound.
pub fn restart(node: &NodeHandle) {
    let handle = Handle::current();
    handle.kill(node.id());
    handle.restart(node.id());
}

pub fn pause(node: &NodeHandle) {
    Handle::current().pause(node.id());
}

pub fn resume(node: &NodeHandle) {
    Handle::current().resume(node.id());
}
