//! What the benchmarks that start real `qs-node` processes share: each includes this module
//! (`#[path = "common/mod.rs"] mod common;`), as a bench target cannot import another's.

use std::net::{SocketAddr, TcpListener};
use std::process::Child;

/// A started process, killed and reaped when dropped: a failed benchmark leaves no node behind.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `n` distinct loopback ports free now, for nodes to listen on. Each is held until all are
/// chosen: one released at once could be handed out again by the next bind, and two listeners
/// of one run given one port leave a node that never starts.
pub fn free_ports<const N: usize>() -> [SocketAddr; N] {
    let held: [TcpListener; N] =
        std::array::from_fn(|_| TcpListener::bind("127.0.0.1:0").expect("a free loopback port"));
    held.each_ref().map(|l| l.local_addr().expect("a bound listener's address"))
}
