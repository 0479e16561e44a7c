//! Replication: the wire protocol, the server that streams a store's log to downstream nodes,
//! and the client that follows an ordered list of sources.

pub mod client;
pub mod protocol;
pub mod server;
