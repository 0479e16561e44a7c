//! Fetch: a replica fetches each log entry and each snapshot chunk once.
//!
//! The bound this checker states on a replica's fetched work: every entry and every snapshot
//! chunk crosses the network to it once per cause — once, and again only after the replica
//! lost it (a store that never applied it, a disk replaced, a transfer ended). The bytes that
//! costs, per replica, are counted and printed with the run ([`Fetched`]).
//!
//! For the log, two halves, each true of any correct node whatever the faults:
//! - **the client asks from what it applied**: a replica's hello for the log (not a probe's
//!   newest-only hello) names as its last index at least the index the replica had applied when
//!   it sent it. The judge sees reads, not sends, so it takes the least of two moments after the
//!   send: when the source read the hello and when the replica read the first answer. Either
//!   alone blames a correct node — a source paused with the hello unread answers long after,
//!   to a client that moved on (and reads nothing); a store reopened after a failed commit
//!   reports, while the hello is out, an entry that had landed after all. A client resuming from
//!   an old cursor fetches again what it has.
//! - **the source sends what follows**: every `Entries` frame on a connection carries only
//!   entries after the index its hello named — for a newest-only hello too (the client says what
//!   it holds; a source behind it sends nothing it named). A source that starts over, or streams
//!   a catch-up burst to a probe that already holds it, fetches work for nothing.
//!
//! An entry received but not applied before its connection broke is asked for again rightly:
//! it is above the applied index at the next hello. A run with such waste can end with every
//! node's state right and pass every other checker, only slower; this one names it.
//!
//! What is measured is the simulator's, not the node's: madsim hands every chunk of bytes a
//! TCP stream's reader takes (`NetSim::set_tcp_read_hook`, the carried patch) to
//! [`FetchJudge::read`], which frames the replication protocol itself (the node's own codec:
//! length, type, payload) in both directions of every connection to a source — the hello as the
//! source (or a relay in front of it) reads it, the entries as the replica reads them. The
//! applied index is the node's trace (`applied`, `bootstrapped`; the `sequence` and `chain`
//! checkers judge those), its latest; the end of a `sigbus` fault (the disk replaced by an
//! empty one) sets it to 0.
//!
//! Over TLS (the simulator's default) the wire carries ciphertext, so the same reads come from
//! one layer up: each node's TLS stream reports what its reader took, decrypted, with the
//! connection's addresses (`world/wire_tap.rs`). And since a judge that cannot see the
//! connections would pass every run, [`FetchJudge::blind`] fails a run in which a replica holds
//! entries yet not one byte it read from a source reached the judge.
//!
//! Snapshots have the same two halves, resumed chunks in place of entries (see `snapshot.rs`).
//!
//! Per replica the judge also counts the bytes it read from its sources, the entries and
//! chunks they carried, and how many of those it held already ([`FetchJudge::totals`]); one
//! violation per connection names the first waste.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use qs_node::replication::protocol::{FrameType, Message, Want};
use qs_node::store::snapshot::SnapshotManifest;
use rustc_hash::FxBuildHasher;

use crate::sync::Locked;
use crate::trace::{Checker, Event, FaultKind, FaultPhase, Observer};
use framer::{Framer, Kept};
use snapshot::{ChunkRead, Resume, Staged, Transfer};

mod framer;
mod snapshot;
#[cfg(test)]
mod tests;

/// What one replica read from its sources (bytes, entries, chunks, and those it held already).
pub use qs_reports::schema::FetchedRow as Fetched;

/// One connection from a replica to a source (or a relay in front of it).
#[derive(Debug, Default)]
struct Connection {
    to_source: Framer,
    to_replica: Framer,
    /// The hello's last index and whether it asked for the newest entries only (a hello for
    /// the log).
    hello: Option<(u64, bool)>,
    /// A hello for the log from a main stream (not a probe), not yet judged: its last index, and
    /// the replica's applied index when the source read it.
    hello_to_judge: Option<(u64, u64)>,
    /// The connection asked for a snapshot.
    transfer: Option<Transfer>,
    /// The connection's waste was reported (one violation a connection).
    reported: bool,
}

/// One node as the judge follows it.
#[derive(Debug, Default)]
struct Followed {
    /// Its latest applied index, from its trace (none before its first such event).
    applied: Option<u64>,
    /// What it holds of a snapshot transfer.
    staged: Staged,
    /// Its disk answers errors now (a `disk-error` fault).
    disk_failing: bool,
    /// What it read from its sources, once it read anything.
    fetched: Option<Fetched>,
}

/// First entries of `Entries` frames already checked, by their bytes: each entry crosses the
/// wire once per replica, ten thousand times in a large tree, and checking it (decompressing,
/// parsing, hashing) every time was a twentieth of such a run. Bytes equal to checked bytes
/// check the same. Forgotten whole when full: what matters is the entries in flight now.
#[derive(Debug, Default)]
struct Checked(HashMap<Box<[u8]>, u64, FxBuildHasher>);

/// Entries [`Checked`] remembers: about a frame's worth of the newest entries of every chain.
const CHECKED_ENTRIES_MAX: usize = 1024;

impl Checked {
    /// The index of `compressed` if it is a sound entry (`StoredEntry::check`).
    fn index(&mut self, compressed: &[u8]) -> Option<u64> {
        if let Some(&index) = self.0.get(compressed) {
            return Some(index);
        }
        let index = qs_node::StoredEntry::check(compressed.to_vec()).ok()?.index();
        if self.0.len() >= CHECKED_ENTRIES_MAX {
            self.0.clear();
        }
        self.0.insert(compressed.into(), index);
        Some(index)
    }
}

/// The judge (see the module doc), shared by the checker and madsim's read hook.
///
/// Every read of every replica passes through [`read`](Self::read): nodes are followed by a
/// number, found once per read by address, not by name in maps keyed by name.
#[derive(Debug, Default)]
pub struct FetchJudge {
    by_ip: BTreeMap<IpAddr, usize>,
    /// Every followed node's number, in name order (the order of [`totals`](Self::totals)).
    by_name: BTreeMap<String, usize>,
    /// By number: each node's name, and what the judge follows of it.
    names: Vec<String>,
    nodes: Vec<Followed>,
    /// The ports that serve replication: every node's replication port, and the relays'.
    serving: BTreeSet<u16>,
    /// By (the replica's address, the source's).
    connections: BTreeMap<(SocketAddr, SocketAddr), Connection>,
    checked: Checked,
}

impl FetchJudge {
    /// `names_by_ip`: the nodes; `serving`: the ports a source serves replication on.
    pub fn new(names_by_ip: BTreeMap<IpAddr, String>, serving: BTreeSet<u16>) -> FetchJudge {
        let mut judge = FetchJudge { serving, ..FetchJudge::default() };
        for (ip, name) in names_by_ip {
            let number = judge.number(&name);
            judge.by_ip.insert(ip, number);
        }
        judge
    }

    /// `name`'s number, followed from now on if it was not.
    fn number(&mut self, name: &str) -> usize {
        if let Some(&number) = self.by_name.get(name) {
            return number;
        }
        self.names.push(name.to_string());
        self.nodes.push(Followed::default());
        self.by_name.insert(name.to_string(), self.nodes.len() - 1);
        self.nodes.len() - 1
    }

    fn node(&mut self, name: &str) -> &mut Followed {
        let number = self.number(name);
        &mut self.nodes[number]
    }

    /// `bytes` read at `at_ms` by the stream `local` ← `peer`: a violation when they complete
    /// the first answer to a hello that asked for what the replica holds, or a frame of entries
    /// or a chunk its hello did not ask for (the first such on the connection).
    #[expect(
        clippy::too_many_lines,
        reason = "141 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
    pub fn read(&mut self, at_ms: u64, local: SocketAddr, peer: SocketAddr, bytes: &[u8]) -> Option<Event> {
        // A relay's hop on its own host is the source's business.
        if local.ip() == peer.ip() {
            return None;
        }
        let (replica, source, to_replica) =
            match (self.serving.contains(&local.port()), self.serving.contains(&peer.port())) {
                (false, true) => (local, peer, true),
                (true, false) => (peer, local, false),
                _ => return None,
            };
        let number = *self.by_ip.get(&replica.ip())?;
        let source_address;
        let source_name = match self.by_ip.get(&source.ip()) {
            Some(&number) => self.names[number].as_str(),
            None => {
                source_address = source.to_string();
                &source_address
            }
        };
        let node = self.names[number].as_str();
        let Followed { applied, staged, disk_failing, fetched } = &mut self.nodes[number];
        let totals = fetched.get_or_insert_default();
        if to_replica {
            totals.bytes += bytes.len() as u64;
        }
        let applied = applied.unwrap_or(0);
        let disk_failing = *disk_failing;
        let connection = self.connections.entry((replica, source)).or_default();
        let framer = if to_replica { &mut connection.to_replica } else { &mut connection.to_source };
        let mut problems = Vec::new();
        for frame in framer.push(bytes) {
            if !to_replica {
                if let Some(Ok(Message::Hello(hello))) = whole(&frame).map(|p| Message::decode_frame(frame.kind, p)) {
                    connection.hello = None;
                    connection.hello_to_judge = None;
                    match hello.want {
                        Want::Log => {
                            connection.hello = Some((hello.last_index, hello.newest_only));
                            connection.hello_to_judge = (!hello.newest_only).then_some((hello.last_index, applied));
                        }
                        Want::Snapshot { resume_chunk, manifest_fingerprint } => {
                            let resume = Resume { chunk: resume_chunk, fingerprint: manifest_fingerprint };
                            let held_when_read = Some(staged.clone());
                            connection.transfer = Some(Transfer { resume, held_when_read, ..Transfer::default() });
                        }
                        // Between root group members: Raft's traffic, not a fetch of the log.
                        Want::Raft { .. } => {}
                    }
                }
                continue;
            }
            // A hello is judged at the replica's first read of an answer (any frame).
            if let Some((asked_after, applied_when_read)) = connection.hello_to_judge.take()
                && asked_after < applied.min(applied_when_read)
            {
                let held = applied.min(applied_when_read);
                problems.push((
                    asked_after + 1,
                    format!(
                        "{node} asked {source_name} for the log after {asked_after} while it had applied {held}: a \
                         replica asks from what it applied, so it fetches each entry once"
                    ),
                ));
            }
            if let Some(transfer) = &mut connection.transfer
                && let Some(held_when_read) = transfer.held_when_read.take()
            {
                if let (Some(_), Some(asked)) =
                    (transfer.resume.asks_again(&held_when_read), transfer.resume.asks_again(staged))
                {
                    problems.push((
                        applied + 1,
                        format!(
                            "{node} asked {source_name} for a snapshot from {asked}: a replica resumes a transfer \
                             from what it stored, so it fetches each chunk once"
                        ),
                    ));
                }
                staged.told(&transfer.resume);
            }
            match &frame.kept {
                Kept::Entries { count, first } => {
                    totals.entries += count;
                    let Some(first) = first.as_deref().and_then(|e| self.checked.index(e)) else {
                        continue;
                    };
                    let last = first + count.saturating_sub(1);
                    if first <= applied {
                        totals.entries_again += last.min(applied) - first + 1;
                    }
                    if let Some((asked_after, newest_only)) = connection.hello
                        && first <= asked_after
                    {
                        problems.push((
                            first,
                            format!(
                                "{source_name} sent {node} entries {first}..={last} on a connection whose hello asked \
                                 for entries after {asked_after}{}: a source sends what follows the index its client \
                                 names, so a replica fetches each entry once",
                                if newest_only { " (newest only)" } else { "" }
                            ),
                        ));
                    }
                }
                Kept::Whole(payload) => {
                    let Some(transfer) = &mut connection.transfer else { continue };
                    match Message::decode_frame(frame.kind, payload) {
                        Ok(Message::SnapshotManifest { manifest_json }) => {
                            if let Ok(manifest) = serde_json::from_slice::<SnapshotManifest>(&manifest_json) {
                                transfer.manifest(&manifest, staged, applied);
                            }
                        }
                        Ok(Message::SnapshotChunk(chunk)) => {
                            totals.chunks += 1;
                            if transfer.chunk(&chunk, staged, disk_failing) == ChunkRead::Again {
                                totals.chunks_again += 1;
                            }
                            if transfer.unasked(&chunk) {
                                problems.push((
                                    applied + 1,
                                    format!(
                                        "{source_name} sent {node} snapshot chunk {} on a connection whose hello \
                                         asked to resume from chunk {} of the same manifest: a source sends from the \
                                         chunk its client names, so a replica fetches each chunk once",
                                        chunk.number, transfer.resume.chunk
                                    ),
                                ));
                            }
                        }
                        _ => {}
                    }
                }
                Kept::Nothing if frame.kind == FrameType::SnapshotDone as u8 && connection.transfer.is_some() => {
                    // The transfer is whole: installed, or (failing) fetched again rightly.
                    *staged = Staged::Nothing;
                }
                Kept::Nothing => {}
            }
        }
        let (index, message) = problems.into_iter().next()?;
        if connection.reported {
            return None;
        }
        connection.reported = true;
        Some(Event::Violation { at_ms, checker: Checker::Fetch, node: node.to_string(), index, message })
    }

    /// Per replica, what it read from its sources so far.
    pub fn totals(&self) -> BTreeMap<&str, Fetched> {
        self.followed().filter_map(|(name, node)| Some((name, node.fetched?))).collect()
    }

    /// Every followed node with its name, in name order.
    fn followed(&self) -> impl Iterator<Item = (&str, &Followed)> {
        self.by_name.iter().map(|(name, &number)| (name.as_str(), &self.nodes[number]))
    }

    /// At the run's end: a violation if a replica holds entries yet this judge read no byte it
    /// took from a source — the judge was blind to its connections (a wire it cannot read, such
    /// as TLS without the nodes' decrypted reads), and its pass would mean nothing.
    pub fn blind(&self, at_ms: u64) -> Option<Event> {
        let (node, index) = self.followed().find_map(|(name, node)| {
            let index = node.applied.filter(|&index| index > 0)?;
            let read_nothing = node.fetched.is_none_or(|fetched| fetched.bytes == 0);
            (!crate::trace::is_root(name) && read_nothing).then_some((name, index))
        })?;
        Some(Event::Violation {
            at_ms,
            checker: Checker::Fetch,
            node: node.to_string(),
            index,
            message: format!(
                "{node} holds entries up to {index} yet no byte it read from a source reached this checker: \
                 it could not see the replication connections"
            ),
        })
    }
}

/// The payload a frame kept whole, if it did.
fn whole(frame: &framer::Frame) -> Option<&[u8]> {
    match &frame.kept {
        Kept::Whole(payload) => Some(payload),
        _ => None,
    }
}

/// The checker: the judge, fed the trace (applied indexes) here and the bytes by
/// madsim's read hook (see `world`).
#[derive(Clone, Debug, Default)]
pub struct Fetch(pub Arc<Mutex<FetchJudge>>);

impl Fetch {
    pub fn new(judge: FetchJudge) -> Fetch {
        Fetch(Arc::new(Mutex::new(judge)))
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, FetchJudge> {
        self.0.locked()
    }
}

impl Observer for Fetch {
    fn observe(&mut self, event: &Event) -> Vec<Event> {
        match event {
            Event::Applied { node, last, .. } => self.lock().node(node).applied = Some(*last),
            Event::Bootstrapped { node, index, .. } => self.lock().node(node).applied = Some(*index),
            // The end of a `sigbus` fault replaces the node's disk with an empty one: it fetches
            // everything again, rightly.
            Event::Fault { node, kind: FaultKind::Sigbus, phase: FaultPhase::End, .. } => {
                let mut judge = self.lock();
                let node = judge.node(node);
                node.applied = Some(0);
                node.staged = Staged::Nothing;
            }
            Event::Fault { node, kind: FaultKind::DiskError, phase, .. } => {
                self.lock().node(node).disk_failing = *phase == FaultPhase::Start;
            }
            _ => {}
        }
        Vec::new()
    }
}
