//! Replication: the wire protocol, the server that streams a store's log to downstream nodes,
//! the client that follows an ordered list of sources, and when it leaves one (`staleness`).

pub mod bootstrap;
pub mod client;
pub mod dial;
pub mod protocol;
pub mod server;
pub mod staleness;
