//! Helpers shared by the modules of the node's integration-test binary.
#![allow(dead_code)] // the modules use a part each, not necessarily all of it

use std::net::{SocketAddr, TcpListener};

/// A free loopback port below the kernel's ephemeral range (32768 and up), so no outgoing
/// connection can take it between our check and the node's bind.
pub fn free_port() -> SocketAddr {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let base = 20_000 + (std::process::id() % 1_000) as u16 * 12;
    loop {
        let port = base + NEXT.fetch_add(1, Ordering::Relaxed) % 12_000;
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            return listener.local_addr().unwrap();
        }
    }
}

/// Polls `done` every 20 ms until it holds, panicking after `limit`.
pub async fn eventually(what: &str, limit: std::time::Duration, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

pub mod process;

/// Polls `done` every 50 ms until it holds, panicking after `limit` (for tests without a
/// runtime).
pub fn eventually_blocking(what: &str, limit: std::time::Duration, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
