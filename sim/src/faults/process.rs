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

use madsim::runtime::{Handle, NodeHandle};

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
