//! The simulator's seam for a node's disk: what each store operation is ([`DiskOp`]), which
//! keys it touches ([`PageAccess`]), and the model that charges them ([`DiskModel`]). A real
//! node has no model: its disk supplies the latency and the failures.

/// What a store operation is, for a [`DiskModel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskOp {
    /// Opening the store at start-up (reads its head).
    Open,
    /// A read: a key, a range of the log, a snapshot export.
    Read,
    /// One atomic, synced commit of `bytes` logical bytes.
    Commit { bytes: u64 },
}

/// The simulator's seam for the disk: how long each store operation takes, and whether it
/// kills the process. A real node has none — its disk supplies both. Under the simulator the
/// returned latency is slept in simulated time before the operation (so a slow disk delays
/// exactly the tasks that touch it), and a model may panic to kill the node's process the way a
/// SIGBUS on a poisoned mmap page does.
///
/// It is the disk's [`IoFaults`](crate::store::faults::IoFaults) too: the I/O errors it gives
/// opens, commits, renames and the node's own writes (none, by default).
pub trait DiskModel: crate::store::faults::IoFaults + Send + Sync + std::fmt::Debug {
    fn charge(&self, op: DiskOp) -> std::time::Duration;

    /// How long the pages one read or apply touches take to reach: the simulator's cache model
    /// charges a hit nothing and a miss a read on the disk. The default has no cache: a `get`
    /// costs one disk read, an apply nothing beyond its commit.
    fn charge_pages(&self, access: PageAccess<'_>) -> std::time::Duration {
        match access {
            PageAccess::Get { .. } => self.charge(DiskOp::Read),
            PageAccess::Apply { .. } => std::time::Duration::ZERO,
        }
    }
}

/// The keys a store operation touches, for a [`DiskModel`]'s cache model.
#[derive(Clone, Copy, Debug)]
pub enum PageAccess<'a> {
    /// One memcached `get`/`gets`: its keys in request order.
    Get { keys: &'a [&'a [u8]] },
    /// One apply (a root batch or a replicated frame): its operations in order.
    Apply { ops: &'a [&'a crate::entry::Op] },
}
