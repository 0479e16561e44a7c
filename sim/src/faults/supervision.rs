//! What a node's process tells its supervisor (`process::supervisor`): it hit a poisoned page,
//! or it failed to start. The disk model reports the first, the world the second; the
//! supervisor, woken by either, kills or restarts the process.

use crate::sync::Locked;
use std::sync::Mutex;

/// What the supervisor is told: processes that hit a poisoned page, and processes that failed
/// to start (with the node's error).
#[derive(Debug, Default)]
pub struct Supervision {
    pub(super) sigbus: Mutex<Vec<String>>,
    pub(super) failed_starts: Mutex<Vec<(String, String)>>,
    pub(super) wake: tokio::sync::Notify,
}

impl Supervision {
    /// `node`'s process touched a poisoned page: the supervisor kills it now.
    pub fn died_of_sigbus(&self, node: &str) {
        self.sigbus.locked().push(node.to_string());
        self.wake.notify_one();
    }

    /// `node`'s process failed to start with `reason`: recorded, and started again later.
    pub fn failed_to_start(&self, node: &str, reason: String) {
        self.failed_starts.locked().push((node.to_string(), reason));
        self.wake.notify_one();
    }
}
