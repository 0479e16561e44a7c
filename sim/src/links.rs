//! Links between data centers.
//!
//! madsim's network gives every message the same latency (1–10 ms one way, drawn per message):
//! that is the scenario's same-data-center link. A scenario with `datacenters = N` places the
//! root in data center 0 and node `k` of every tier in data center `k mod N`; a replica whose
//! source sits in another data center reaches it through a relay that holds every chunk of
//! bytes for `cross_dc_latency`, in order, in both directions.
//!
//! Guarantees:
//! - The relay runs on the source's simulated host, so it shares the source's fate: a kill, a
//!   pause or a partition of the source cuts the relay too, and a restart brings it back with
//!   the node. Partitions and clogged links between the replica and the source act on the
//!   replica → relay hop, which is the link they name.
//! - Bytes are delivered in order and never lost or reordered by the relay; a closed or failed
//!   side closes the whole relayed connection, as a broken long-haul TCP connection would.
//! - The relay holds at most the scenario's TCP window (`[topology] tcp_window`) in each
//!   direction: a reader that stops reading stops its source's writer, through the relay, as
//!   it would on one connection (a long-haul link's bytes in flight are bounded by its window
//!   too). End to end a relayed connection holds up to three windows: its two hops' and the
//!   relay's.
//! - Only replication links are relayed. Writers and readers are local clients of their node.
//! - A relayed message also crosses the source host's own loopback hop, so a cross-DC link
//!   costs the network's per-message latency twice, plus `cross_dc_latency`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The most bytes one read of a relay takes before it schedules them.
const CHUNK_BYTES: usize = 64 * 1024;

pub use crate::scenario::nodes::{RELAY_PORT_BASE, relay_port};

/// Which replica each relayed connection carries: by the relay's own end of its hop to the
/// source (what the source sees as its peer), the relay's listening address and the replica's.
/// A tap on the source's side of a TLS connection reads it through this as the replica's.
#[derive(Clone, Debug, Default)]
pub struct Relayed(Arc<Mutex<BTreeMap<SocketAddr, (SocketAddr, SocketAddr)>>>);

impl Relayed {
    fn record(&self, hop: SocketAddr, listen: SocketAddr, replica: SocketAddr) {
        self.0.lock().expect("the relay map is never left poisoned").insert(hop, (listen, replica));
    }

    /// The relay's listening address and the replica behind `hop`, if `hop` is a relay's.
    pub fn behind(&self, hop: SocketAddr) -> Option<(SocketAddr, SocketAddr)> {
        self.0.lock().expect("the relay map is never left poisoned").get(&hop).copied()
    }
}

/// What a relay adds to a link between data centers.
#[derive(Clone, Copy, Debug)]
pub struct Link {
    /// Added one way to every chunk.
    pub latency: Duration,
    /// The most bytes the relay holds one way (the TCP window).
    pub window: usize,
}

/// Accepts connections on `listen` and relays each to `target` with the link's latency added
/// to every chunk, both ways. Runs until the host is killed.
pub async fn relay(listen: SocketAddr, target: SocketAddr, link: Link, relayed: Relayed) {
    let listener = match TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(e) => panic!("relay {listen} -> {target}: cannot listen: {e}"),
    };
    loop {
        let Ok((inbound, replica)) = listener.accept().await else { continue };
        let relayed = relayed.clone();
        tokio::spawn(async move {
            // The target is this host's own replication port: if the node is not serving yet,
            // the connection is refused and the replica retries, as it would without a relay.
            let Ok(outbound) = TcpStream::connect(target).await else { return };
            if let Ok(hop) = outbound.local_addr() {
                relayed.record(hop, listen, replica);
            }
            let (inbound_read, inbound_write) = tokio::io::split(inbound);
            let (outbound_read, outbound_write) = tokio::io::split(outbound);
            tokio::select! {
                _ = delayed_pipe(inbound_read, outbound_write, link) => {}
                _ = delayed_pipe(outbound_read, inbound_write, link) => {}
            }
        });
    }
}

/// Copies `from` to `to`, each chunk written `link.latency` after it was read, holding at most
/// `link.window` bytes read and not yet written; returns when `from` ends (after the chunks
/// already read are written) or either side fails.
async fn delayed_pipe(mut from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin, link: Link) {
    let (chunks, mut due) = tokio::sync::mpsc::unbounded_channel::<(madsim::time::Instant, Vec<u8>)>();
    // Room in the relay, in bytes: a read takes what it read, a write gives it back.
    let room = Arc::new(tokio::sync::Semaphore::new(link.window));
    let freed = room.clone();
    let read = async move {
        let mut buf = vec![0u8; CHUNK_BYTES.min(link.window)];
        loop {
            // Read only once there is room for a full buffer, so a read never overfills.
            let wanted = u32::try_from(buf.len()).expect("a buffer of at most 64 KiB");
            let Ok(held) = room.acquire_many(wanted).await else { return };
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    held.forget();
                    room.add_permits(buf.len() - n);
                    if chunks.send((madsim::time::Instant::now() + link.latency, buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    };
    let write = async move {
        while let Some((at, chunk)) = due.recv().await {
            madsim::time::sleep_until(at).await;
            // madsim's TCP sends what was written only on flush.
            if to.write_all(&chunk).await.is_err() || to.flush().await.is_err() {
                return;
            }
            freed.add_permits(chunk.len());
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}
