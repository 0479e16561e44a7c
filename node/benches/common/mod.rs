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

/// A loopback port free now, for a node to listen on.
pub fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free loopback port")
}
