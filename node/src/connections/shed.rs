//! Which connection a full listener sheds, and how many one client address may hold.
//!
//! A cap that refuses newcomers hands the port to whoever filled it: connections that send half
//! a request and wait keep every slot until their header timeout, and a producer arriving
//! meanwhile gets nothing. So at the cap a listener sheds instead, as Envoy's overload manager
//! and nginx's idle keep-alive reaping do: the connection that has gone longest without an
//! answer — a half-sent request, a client that never sent one, an idle pooled connection — is
//! closed, and the newcomer takes its place. A client being served is answered within
//! milliseconds of its request, so it is never the one that waited longest. And one address
//! holds at most `max_per_peer` connections (nginx's `limit_conn`), so a flood from one place
//! cannot even fill the listener.
//!
//! Guarantees:
//! - **Deterministic.** The choice is the smallest (last answer, admission number) among the
//!   connections neither kept nor already being shed — no hash order, no clock but
//!   `tokio::time` (madsim's under the simulator).
//! - **Connections being served are kept.** A listener's protocol may mark a connection never
//!   to be shed ([`Answered::keep`]). The replication listener marks every client once its hello
//!   is accepted: a member's proven Raft link only receives, so it would always be the one
//!   unanswered longest, and the group's elections depend on it; a replica's log stream or
//!   snapshot transfer is answered by every frame and keepalive, so shedding it for a newcomer
//!   only cuts a stream being served to start another (a tier dialling a full member churned
//!   thousands of times a run that way). At a full replication listener a newcomer therefore
//!   takes the place of a connection still in its handshake or hello, or is refused and tries
//!   its other sources after its backoff.
//! - **A root group's links come first.** A newcomer from another member's address (the
//!   listener's `members`) may also take the place of a kept connection from an address that
//!   is no member's — a replica's stream — though never of one from a member's address: the
//!   replicas that dialled a member before its peers' links could never keep the group from
//!   its quorum.
//! - **The freed place is the newcomer's.** The shed connection hands its place straight to the
//!   newcomer it was shed for, so a later arrival that finds a place free cannot take it; a
//!   newcomer waits for it at most [`SHED_WAIT`], and is refused after that. A connection is
//!   shed at most once, and a newcomer still waiting for its place is never chosen.
//! - **Accounted.** Every admitted connection is in the [`Registry`] exactly while its
//!   [`Slot`](super::Slot) lives; per-address counts include newcomers still waiting for a place.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, OwnedSemaphorePermit, oneshot};
use tokio::time::Instant;

/// How long a newcomer waits for the place a shed connection frees (that connection's task
/// ending, at its next poll: immediate unless the machine is overloaded) before it is refused
/// after all. Far below any client's own timeout, so a client never waits on this instead of
/// being refused.
pub const SHED_WAIT: Duration = Duration::from_secs(5);

/// When a connection last answered its client: milliseconds since its listener's epoch.
#[derive(Debug)]
pub struct Answered {
    epoch: Instant,
    at_ms: AtomicU64,
    /// Never shed: a client being served past its hello ([`Answered::keep`]).
    kept: AtomicBool,
}

impl Answered {
    /// Answered "now": a new connection counts as answered when admitted, so it has its whole
    /// turn before it can be the one that waited longest.
    fn new(epoch: Instant) -> Answered {
        let answered = Answered { epoch, at_ms: AtomicU64::new(0), kept: AtomicBool::new(false) };
        answered.now();
        answered
    }

    fn now(&self) {
        let ms = u64::try_from(Instant::now().saturating_duration_since(self.epoch).as_millis()).unwrap_or(u64::MAX);
        self.at_ms.store(ms, Ordering::Relaxed);
    }

    fn at_ms(&self) -> u64 {
        self.at_ms.load(Ordering::Relaxed)
    }

    /// This connection is never shed for a newcomer: a client its listener is serving past its
    /// hello (the replication listener's streams and a root group member's Raft links).
    pub fn keep(&self) {
        self.kept.store(true, Ordering::Relaxed);
    }

    fn is_kept(&self) -> bool {
        self.kept.load(Ordering::Relaxed)
    }
}

/// What the accept loop needs of one admitted connection: its answer clock (for [`Answering`])
/// and the signal that it is shed.
#[derive(Clone, Debug)]
pub struct Ticket {
    pub answered: Arc<Answered>,
    pub shed: Arc<Notify>,
}

/// A stream that notes each write that moved bytes as an answer to its client.
#[derive(Debug)]
pub struct Answering<S> {
    inner: S,
    answered: Arc<Answered>,
}

impl<S> Answering<S> {
    pub fn new(inner: S, answered: Arc<Answered>) -> Self {
        Answering { inner, answered }
    }

    /// The stream it wraps.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The connection's answer clock (to [`keep`](Answered::keep) it, say).
    pub fn answered(&self) -> Arc<Answered> {
        self.answered.clone()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Answering<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Answering<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            this.answered.now();
        }
        poll
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            this.answered.now();
        }
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Where a shed connection's place goes: the newcomer it was shed for.
pub type Heir = oneshot::Sender<OwnedSemaphorePermit>;
/// The newcomer's end: the place, once the shed connection has closed.
pub type Inheritance = oneshot::Receiver<OwnedSemaphorePermit>;

/// One admitted connection, as the registry sees it.
#[derive(Debug)]
struct Live {
    ticket: Ticket,
    /// From one of the listener's `members` addresses.
    from_member: bool,
    /// Holds its place (false: a newcomer still waiting for a shed connection's).
    placed: bool,
    /// Told to close, its place promised to this newcomer: not chosen again.
    heir: Option<Heir>,
}

/// A listener's admitted connections and how many each client address holds.
#[derive(Debug)]
pub struct Registry {
    epoch: Instant,
    max_per_peer: usize,
    /// Addresses whose newcomers come first: a root group's other members (replication
    /// listener of a member only; empty elsewhere).
    members: BTreeSet<IpAddr>,
    next: u64,
    live: BTreeMap<u64, Live>,
    /// Admitted connections and newcomers waiting for a shed place, by address.
    per_peer: BTreeMap<IpAddr, usize>,
}

impl Registry {
    /// A registry giving each address `max_per_peer` connections, and newcomers from `members`
    /// precedence over kept connections from other addresses.
    pub fn new(max_per_peer: usize, members: BTreeSet<IpAddr>) -> Registry {
        assert!(max_per_peer >= 1, "validated: max_per_peer is at least 1");
        Registry {
            epoch: Instant::now(),
            max_per_peer,
            members,
            next: 0,
            live: BTreeMap::new(),
            per_peer: BTreeMap::new(),
        }
    }

    /// Counts one more connection from `peer`, or false if it already holds its share.
    pub fn reserve(&mut self, peer: IpAddr) -> bool {
        let held = self.per_peer.entry(peer).or_insert(0);
        if *held >= self.max_per_peer {
            return false;
        }
        *held += 1;
        true
    }

    /// Undoes a [`reserve`](Self::reserve) (a newcomer that got no place, a connection closed).
    pub fn release(&mut self, peer: IpAddr) {
        match self.per_peer.get_mut(&peer) {
            Some(held) if *held > 1 => *held -= 1,
            Some(_) => {
                self.per_peer.remove(&peer);
            }
            None => unreachable!("released {peer} more often than reserved"),
        }
    }

    /// Registers a connection from `peer`: admitted with a place (`placed`), or a newcomer
    /// waiting for a shed connection's. Its id and ticket.
    pub fn enter(&mut self, peer: IpAddr, placed: bool) -> (u64, Ticket) {
        let id = self.next;
        self.next += 1;
        let ticket = Ticket { answered: Arc::new(Answered::new(self.epoch)), shed: Arc::new(Notify::new()) };
        let from_member = self.members.contains(&peer);
        self.live.insert(id, Live { ticket: ticket.clone(), from_member, placed, heir: None });
        (id, ticket)
    }

    /// A waiting newcomer got its place.
    pub fn placed(&mut self, id: u64) {
        if let Some(live) = self.live.get_mut(&id) {
            live.placed = true;
        }
    }

    /// Removes a closed connection; the newcomer its place is promised to, if it was shed.
    pub fn leave(&mut self, id: u64) -> Option<Heir> {
        let removed = self.live.remove(&id);
        assert!(removed.is_some(), "connection {id} left twice");
        removed.and_then(|live| live.heir)
    }

    /// Tells the connection that has gone longest without an answer to close for a newcomer
    /// from `newcomer`, promising its place to the newcomer that gets the returned end; None
    /// when no placed connection may be shed for it: each is already being shed, or kept (for
    /// a newcomer from a member's address, kept and from a member's address).
    pub fn shed_longest_waiting(&mut self, newcomer: IpAddr) -> Option<Inheritance> {
        let for_member = self.members.contains(&newcomer);
        let chosen = self
            .live
            .iter_mut()
            .filter(|(_, live)| live.placed && live.heir.is_none())
            .filter(|(_, live)| !live.ticket.answered.is_kept() || (for_member && !live.from_member))
            .min_by_key(|(id, live)| (live.ticket.answered.at_ms(), **id))
            .map(|(_, live)| live)?;
        let (heir, inheritance) = oneshot::channel();
        chosen.heir = Some(heir);
        chosen.ticket.shed.notify_one();
        Some(inheritance)
    }

    /// Addresses holding connections now, and how many (tests, metrics).
    pub fn peers(&self) -> usize {
        self.per_peer.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn an_address_holds_at_most_its_share_and_gets_it_back_as_it_closes() {
        let mut registry = Registry::new(2, BTreeSet::new());
        assert!(registry.reserve(ip(1)) && registry.reserve(ip(1)));
        assert!(!registry.reserve(ip(1)), "a third from one address is refused");
        assert!(registry.reserve(ip(2)), "another address is not");
        registry.release(ip(1));
        assert!(registry.reserve(ip(1)));
        assert_eq!(registry.peers(), 2);
    }

    // Tokio's paused clock; the simulator's runtime has its own.
    #[cfg(not(madsim))]
    #[tokio::test(start_paused = true)]
    async fn the_connection_shed_is_the_one_unanswered_longest_and_none_is_shed_twice() {
        let mut registry = Registry::new(8, BTreeSet::new());
        let (first, a) = registry.enter(ip(1), true);
        tokio::time::advance(Duration::from_millis(10)).await;
        let (_, b) = registry.enter(ip(2), true);
        tokio::time::advance(Duration::from_millis(10)).await;
        let (_, c) = registry.enter(ip(3), true);
        // A newcomer still waiting for a place is never the one shed.
        let _ = registry.enter(ip(4), false);
        tokio::time::advance(Duration::from_millis(5)).await;
        // The first connection answered its client just now: the second waited longest, then
        // the third.
        a.answered.now();
        assert!(registry.shed_longest_waiting(ip(9)).is_some());
        assert!(tokio::time::timeout(Duration::ZERO, b.shed.notified()).await.is_ok(), "b is shed");
        // Then the third (b is already being shed), then the first; then nothing is left.
        assert!(registry.shed_longest_waiting(ip(9)).is_some());
        assert!(tokio::time::timeout(Duration::ZERO, c.shed.notified()).await.is_ok(), "c is shed");
        let inheritance = registry.shed_longest_waiting(ip(9)).expect("a is left");
        assert!(tokio::time::timeout(Duration::ZERO, a.shed.notified()).await.is_ok(), "a is shed");
        assert!(registry.shed_longest_waiting(ip(9)).is_none(), "every placed connection is being shed");
        // The first's place goes to its heir when it leaves.
        let heir = registry.leave(first).expect("a was shed for a newcomer");
        let permit = Arc::new(tokio::sync::Semaphore::new(1)).try_acquire_owned().unwrap();
        heir.send(permit).unwrap();
        assert!(inheritance.await.is_ok());
    }

    /// Kept connections are shed for no one but a member's newcomer, and for it only those
    /// from addresses that are no member's: a replica's stream gives way to a member's Raft
    /// link, a member's link to nothing.
    #[cfg(not(madsim))]
    #[tokio::test(start_paused = true)]
    async fn kept_connections_give_way_only_to_a_members_newcomer_and_never_a_members_link() {
        let member = ip(1);
        let mut registry = Registry::new(8, BTreeSet::from([member]));
        let (_, link) = registry.enter(member, true);
        link.answered.keep();
        tokio::time::advance(Duration::from_millis(10)).await;
        let (_, stream) = registry.enter(ip(2), true);
        stream.answered.keep();
        tokio::time::advance(Duration::from_millis(10)).await;
        let (_, hello) = registry.enter(ip(3), true);
        tokio::time::advance(Duration::from_millis(10)).await;
        // A replica's newcomer: only the connection still in its hello may go, though the two
        // kept ones waited longer.
        assert!(registry.shed_longest_waiting(ip(4)).is_some());
        assert!(tokio::time::timeout(Duration::ZERO, hello.shed.notified()).await.is_ok(), "the unkept one is shed");
        assert!(registry.shed_longest_waiting(ip(4)).is_none(), "both left are kept");
        // A member's newcomer takes the replica's stream, never the member's link.
        assert!(registry.shed_longest_waiting(member).is_some());
        assert!(tokio::time::timeout(Duration::ZERO, stream.shed.notified()).await.is_ok(), "the stream gives way");
        assert!(registry.shed_longest_waiting(member).is_none(), "a member's link is never shed");
        assert!(tokio::time::timeout(Duration::ZERO, link.shed.notified()).await.is_err());
    }

    #[cfg(not(madsim))]
    #[tokio::test(start_paused = true)]
    async fn a_write_that_moves_bytes_is_an_answer() {
        let registry = Registry::new(1, BTreeSet::new());
        let answered = Arc::new(Answered::new(registry.epoch));
        tokio::time::advance(Duration::from_millis(250)).await;
        let (client, server) = tokio::io::duplex(64);
        let mut server = Answering::new(server, answered.clone());
        assert_eq!(answered.at_ms(), 0);
        tokio::io::AsyncWriteExt::write_all(&mut server, b"HTTP/1.1 200 OK\r\n").await.unwrap();
        assert_eq!(answered.at_ms(), 250);
        drop(client);
    }
}
