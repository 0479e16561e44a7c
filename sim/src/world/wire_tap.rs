//! What the `fetch` checker reads: the bytes of every replication connection as its readers
//! take them, framed by the judge.
//!
//! Plaintext replication (`[node] tls = false`): madsim's TCP read hook (the carried patch)
//! hands over every chunk a stream's reader takes — the simulator's own tap on the wire.
//! Over TLS the wire carries ciphertext, so the same bytes come from one layer up: each node's
//! TLS stream reports what its reader took, decrypted (`NodeObserver::plaintext_read`), with
//! the connection's addresses. A source reached through a relay sees the relay's hop as its
//! peer; [`Relayed`] gives back the replica and the relay's listening address, which is what
//! the wire tap names on the replica's hop. Either way the judge gets the same reads of the
//! same connections; only the hello through a relay is read a relay hop later (when the source
//! reads it, not when the relay does), which can only loosen the judge's first half by that hop.

use std::net::SocketAddr;
use std::sync::Arc;

use qs_node::observe::{NodeEvent, NodeObserver};

use crate::checkers::fetch::Fetch;
use crate::links::Relayed;
use crate::sync::Locked;
use crate::trace::{RecorderObserver, SharedRecorder};

/// Feeds the wire's reads to `fetch` (plaintext replication): call before any node starts, as a
/// stream takes the hook when it is made.
pub fn tap_the_wire(fetch: Fetch, recorder: SharedRecorder) {
    madsim::net::NetSim::current().set_tcp_read_hook(Some(Arc::new(move |local, peer, bytes: &bytes::Bytes| {
        judge(&fetch, &recorder, local, peer, bytes);
    })));
}

fn judge(fetch: &Fetch, recorder: &SharedRecorder, local: SocketAddr, peer: SocketAddr, bytes: &[u8]) {
    let violation = fetch.lock().read(super::now_ms(), local, peer, bytes);
    if let Some(violation) = violation {
        recorder.locked().record(violation);
    }
}

/// The nodes' observer: their events to the recorder, and over TLS their decrypted reads to
/// `fetch`.
#[derive(Debug)]
pub struct WorldObserver {
    pub events: RecorderObserver,
    pub fetch: Fetch,
    pub relayed: Relayed,
}

impl NodeObserver for WorldObserver {
    fn observe(&self, node: &str, event: NodeEvent) {
        self.events.observe(node, event);
    }

    fn plaintext_read(&self, local: SocketAddr, peer: SocketAddr, bytes: &[u8]) {
        let (local, peer) = self.relayed.behind(peer).unwrap_or((local, peer));
        judge(&self.fetch, &self.events.0, local, peer, bytes);
    }
}
