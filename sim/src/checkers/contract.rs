//! Contract: every reply a node gives is one a correct node may give to that request, and what
//! it tells its operator is true.
//!
//! The census client (`crate::workload::census`) sends every request the node answers, edge
//! values included, reads each reply byte for byte with its own strict parser, and records a
//! `contract` violation naming the request when a reply falls outside the set a correct node
//! may answer it with — computed from the request's arguments and what the clients know, never
//! from how this node happens to word things. This module holds the parts of that judgement
//! that outlive one request:
//!
//! - **The operator's counters** ([`ReadLedger`], [`judge_counters`]): every client of an edge's
//!   memcached port (the readers and the census) tells the ledger what it sent and what came
//!   back, so two `stats` replies read on one connection (one process: a restart ends the
//!   connection and resets the counters) bound how far `get_hits`, `get_misses` and
//!   `bogus_requests` may have moved between them. The bounds hold for any timing: a key the
//!   node counted between the two replies was answered in between or is still unanswered; a
//!   key answered in between was counted in between unless it was already unanswered at the
//!   first. Requests that never got an answer (timed out, connection lost) stay unanswered for
//!   good, which only widens the bounds — the judgement errs towards the node. A root's
//!   metrics page is judged the same way ([`WriteLedgers`], [`judge_write_counters`]): every
//!   client of its HTTP API tells the ledger each write request it sent and the status that
//!   came back, and `qs_writes_throttled_total` (429s) and `qs_writes_refused_total` (other
//!   4xx answers to writes) must move between two pages read on one connection as those
//!   answers allow — a read, a redirect or a 5xx moves neither. At the end of a simulated run
//!   every root's counters are held to the one-page bound as well (`world::end`), so a run
//!   whose census read few pages still judges them; so are every node's connection counters,
//!   against the network's own count of the connections each listener took
//!   ([`super::listener_counts`]).
//! - **What a key may hold** ([`SentValues`]): per census key, every value sent to it (as a
//!   hash), so a read of it that returns bytes nobody wrote there — a framing slip, or two keys
//!   that collide — is named.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::sync::Locked;

/// What the clients of one edge's memcached port sent it and heard back, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadLedger {
    /// Keys answered with a value, over all answered `get`/`gets`.
    pub hits: u64,
    /// Keys answered as absent.
    pub misses: u64,
    /// Keys asked for whose answer has not come back (in flight, or lost for good).
    pub keys_unanswered: u64,
    /// Requests answered with an error line the node must count as refused (`ERROR`,
    /// `CLIENT_ERROR`).
    pub refusals: u64,
    /// Requests sent that a correct node refuses, not (yet) answered.
    pub refusals_unanswered: u64,
}

/// Every edge's ledger, by node name.
pub type Ledgers = Arc<Mutex<BTreeMap<String, ReadLedger>>>;

/// Changes to one edge's ledger.
pub trait LedgerBook {
    /// `edge`'s ledger as it is now.
    fn at(&self, edge: &str) -> ReadLedger;
    /// A get of `keys` keys is about to be written to `edge`.
    fn get_sent(&self, edge: &str, keys: u64);
    /// The whole answer to a get of `keys` keys came back: `hits` values, the rest misses.
    fn get_answered(&self, edge: &str, keys: u64, hits: u64);
    /// A get of `keys` keys was answered with an error line (`SERVER_ERROR`: nothing counted).
    fn get_failed(&self, edge: &str, keys: u64);
    /// A request a correct node refuses is about to be written to `edge`.
    fn refusal_sent(&self, edge: &str);
    /// Its refusal came back: `counted` when it is one the node counts as refused (`ERROR`,
    /// `CLIENT_ERROR`), not a `SERVER_ERROR`.
    fn refusal_answered(&self, edge: &str, counted: bool);
}

impl LedgerBook for Ledgers {
    fn at(&self, edge: &str) -> ReadLedger {
        self.locked().get(edge).copied().unwrap_or_default()
    }

    fn get_sent(&self, edge: &str, keys: u64) {
        self.locked().entry(edge.to_string()).or_default().keys_unanswered += keys;
    }

    fn get_answered(&self, edge: &str, keys: u64, hits: u64) {
        assert!(hits <= keys, "{hits} hits among {keys} keys");
        let mut ledgers = self.locked();
        let ledger = ledgers.entry(edge.to_string()).or_default();
        ledger.keys_unanswered -= keys;
        ledger.hits += hits;
        ledger.misses += keys - hits;
    }

    fn get_failed(&self, edge: &str, keys: u64) {
        self.locked().entry(edge.to_string()).or_default().keys_unanswered -= keys;
    }

    fn refusal_sent(&self, edge: &str) {
        self.locked().entry(edge.to_string()).or_default().refusals_unanswered += 1;
    }

    fn refusal_answered(&self, edge: &str, counted: bool) {
        let mut ledgers = self.locked();
        let ledger = ledgers.entry(edge.to_string()).or_default();
        ledger.refusals_unanswered -= 1;
        ledger.refusals += u64::from(counted);
    }
}

/// The read counters a `stats` reply shows: memcached's `get_hits` and `get_misses`, and
/// `bogus_requests` where the node reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub hits: u64,
    pub misses: u64,
    pub refusals: Option<u64>,
}

/// One `stats` reply and the edge's ledger when it was asked for and when it came back.
#[derive(Clone, Copy, Debug)]
pub struct CountersRead {
    pub sent: ReadLedger,
    pub received: ReadLedger,
    pub counters: Counters,
}

/// Whether the counters moved between two reads on one connection (`earlier`, then `later`)
/// as the clients' ledger allows (see the module doc); the first that did not, in words.
pub fn judge_counters(earlier: &CountersRead, later: &CountersRead) -> Option<String> {
    let keys = [earlier.received.keys_unanswered, later.received.keys_unanswered];
    let refusals = [earlier.received.refusals_unanswered, later.received.refusals_unanswered];
    let (before, after) = (earlier.counters, later.counters);
    let ledgers = [earlier.sent, earlier.received, later.sent, later.received];
    let moved = |name, before, after, answered: fn(&ReadLedger) -> u64, unanswered| {
        counter_moved(
            Counter { name, replies: "stats replies", before, after },
            ledgers.map(|l| answered(&l)),
            unanswered,
        )
    };
    moved("get_hits", before.hits, after.hits, |l| l.hits, keys)
        .or_else(|| moved("get_misses", before.misses, after.misses, |l| l.misses, keys))
        .or_else(|| match (before.refusals, after.refusals) {
            (Some(b), Some(a)) => moved("bogus_requests", b, a, |l| l.refusals, refusals),
            _ => None,
        })
}

/// One operator's counter as two replies on one connection showed it.
struct Counter<'a> {
    name: &'a str,
    /// What the two replies were, for the message: "stats replies", "metrics pages".
    replies: &'a str,
    before: u64,
    after: u64,
}

/// Whether `counter` moved as the clients' count of the answers it counts allows. `answered`
/// is that count at the earlier read's request and answer and at the later one's; `unanswered`
/// the requests (or keys) it may count that had no answer yet at each read's answer.
fn counter_moved(counter: Counter<'_>, answered: [u64; 4], unanswered: [u64; 2]) -> Option<String> {
    let Counter { name, replies, before, after } = counter;
    let [earlier_sent, earlier_received, later_sent, later_received] = answered;
    let Some(moved) = after.checked_sub(before) else {
        return Some(format!("{name} went down from {before} to {after} on one connection"));
    };
    // Counted in between: answered in between, or still unanswered at the later read.
    let most = later_received - earlier_sent + unanswered[1];
    // Answered in between: counted in between, unless unanswered at the earlier read.
    let least = later_sent.saturating_sub(earlier_received + unanswered[0]);
    (!(least..=most).contains(&moved)).then(|| {
        format!(
            "{name} moved by {moved} between two {replies}, but the clients were answered {least} to {most} \
             (from {before} to {after})"
        )
    })
}

/// What the clients of one root's HTTP API (the writers and the census) sent it and heard
/// back, cumulative: the write requests (`PUT`, `DELETE`, `POST /v1/batch`) it answered with a
/// status its `writes_throttled` and `writes_refused` counters count, and the key operations
/// of those it answered 2xx, which its `writes_accepted` and `writes_identical_dropped` count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteLedger {
    /// Write requests answered 429 (over the producer's quota).
    pub throttled: u64,
    /// Write requests answered with another client error (4xx): a refusal.
    pub refused: u64,
    /// Write requests sent whose answer has not come back (in flight, or lost for good).
    pub unanswered: u64,
    /// Key operations in the write requests answered 2xx (committed, or dropped as identical
    /// rewrites).
    pub committed_ops: u64,
    /// Key operations in the write requests not answered yet.
    pub unanswered_ops: u64,
}

/// Every root's write ledger, by its HTTP address.
#[derive(Clone, Debug, Default)]
pub struct WriteLedgers(Arc<Mutex<BTreeMap<SocketAddr, WriteLedger>>>);

impl WriteLedgers {
    /// `root`'s ledger as it is now.
    pub fn at(&self, root: SocketAddr) -> WriteLedger {
        self.0.locked().get(&root).copied().unwrap_or_default()
    }

    /// A write request of `ops` key operations is about to be sent to `root`.
    pub fn sent(&self, root: SocketAddr, ops: u64) {
        let mut ledgers = self.0.locked();
        let ledger = ledgers.entry(root).or_default();
        ledger.unanswered += 1;
        ledger.unanswered_ops += ops;
    }

    /// `root` answered a write request of `ops` key operations with `status` (a request that
    /// never gets one stays unanswered for good).
    pub fn answered(&self, root: SocketAddr, status: u16, ops: u64) {
        let mut ledgers = self.0.locked();
        let ledger = ledgers.entry(root).or_default();
        assert!(
            ledger.unanswered > 0 && ledger.unanswered_ops >= ops,
            "an answer from {root} to a write request nobody sent"
        );
        ledger.unanswered -= 1;
        ledger.unanswered_ops -= ops;
        match status {
            200..=299 => ledger.committed_ops += ops,
            429 => ledger.throttled += 1,
            400..=499 => ledger.refused += 1,
            _ => {}
        }
    }
}

/// Whether `method` on `path` is a write request `WriteLedgers` counts.
pub fn is_write_request(method: &hyper::Method, path: &str) -> bool {
    let writes = path.starts_with("/v1/keys/") || path == "/v1/batch";
    writes && matches!(*method, hyper::Method::PUT | hyper::Method::DELETE | hyper::Method::POST)
}

/// The key operations a write request carries: one for a key's `PUT` or `DELETE`, a batch's
/// `ops` (none when its body is no batch: the root refuses it, counting none).
pub fn write_request_ops(path: &str, body: &[u8]) -> u64 {
    if path != "/v1/batch" {
        return 1;
    }
    let ops = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|batch| Some(batch.get("ops")?.as_array()?.len()));
    ops.unwrap_or(0) as u64
}

/// The write counters a root's metrics page shows: `qs_writes_throttled_total`,
/// `qs_writes_refused_total`, and the key operations of the requests it answered 2xx —
/// `qs_writes_accepted_total` and `qs_writes_identical_dropped_total` together (each operation
/// is one or the other).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteCounters {
    pub throttled: u64,
    pub refused: u64,
    pub committed_ops: u64,
}

/// The name [`WriteCounters::committed_ops`] goes by in a verdict.
const COMMITTED_OPS: &str = "qs_writes_accepted_total + qs_writes_identical_dropped_total";

impl WriteCounters {
    /// The counters from an OpenMetrics page, or what is missing or unreadable.
    pub fn of_page(page: &str) -> Result<WriteCounters, String> {
        let page = qs_node::metrics::page::Page::parse(page).map_err(|e| e.to_string())?;
        let sample = |name: &str| page.count(name).map_err(|e| e.to_string());
        Ok(WriteCounters {
            throttled: sample("qs_writes_throttled_total")?,
            refused: sample("qs_writes_refused_total")?,
            committed_ops: sample("qs_writes_accepted_total")? + sample("qs_writes_identical_dropped_total")?,
        })
    }
}

/// One metrics page read and the root's write ledger when it was asked for and when it came
/// back.
#[derive(Clone, Copy, Debug)]
pub struct WriteCountersRead {
    pub sent: WriteLedger,
    pub received: WriteLedger,
    pub counters: WriteCounters,
}

/// Whether one metrics page counts no more than the clients were ever answered: a process
/// counts only answers it gave, and every one it gave is in the ledger (answered, or still
/// unanswered when the page came back) — whichever process of the root gave them, so this
/// holds across restarts and needs no second page.
pub fn judge_write_page(read: &WriteCountersRead) -> Option<String> {
    let (counters, ledger) = (read.counters, read.received);
    let over = |name: &str, counted: u64, answered: u64, unanswered: u64, what: &str| {
        let most = answered + unanswered;
        (counted > most).then(|| {
            format!("{name} is {counted}, but the clients were answered at most {most} such {what} in the whole run")
        })
    };
    over("qs_writes_throttled_total", counters.throttled, ledger.throttled, ledger.unanswered, "write requests")
        .or_else(|| {
            over("qs_writes_refused_total", counters.refused, ledger.refused, ledger.unanswered, "write requests")
        })
        .or_else(|| {
            let ops = "key operations in write requests answered 2xx";
            over(COMMITTED_OPS, counters.committed_ops, ledger.committed_ops, ledger.unanswered_ops, ops)
        })
}

/// Whether a root's write counters moved between two metrics pages read on one connection as
/// the clients' ledger allows (the bounds of [`judge_counters`], over write requests); the
/// first that did not, in words.
pub fn judge_write_counters(earlier: &WriteCountersRead, later: &WriteCountersRead) -> Option<String> {
    let requests = [earlier.received.unanswered, later.received.unanswered];
    let ops = [earlier.received.unanswered_ops, later.received.unanswered_ops];
    let ledgers = [earlier.sent, earlier.received, later.sent, later.received];
    let (before, after) = (earlier.counters, later.counters);
    let moved = |name, before, after, answered: fn(&WriteLedger) -> u64, unanswered| {
        counter_moved(
            Counter { name, replies: "metrics pages", before, after },
            ledgers.map(|l| answered(&l)),
            unanswered,
        )
    };
    moved("qs_writes_throttled_total", before.throttled, after.throttled, |l| l.throttled, requests)
        .or_else(|| moved("qs_writes_refused_total", before.refused, after.refused, |l| l.refused, requests))
        .or_else(|| moved(COMMITTED_OPS, before.committed_ops, after.committed_ops, |l| l.committed_ops, ops))
}

/// Per census key, every value ever sent to it (hashed: a value may be a mebibyte).
#[derive(Clone, Debug, Default)]
pub struct SentValues(Arc<Mutex<BTreeMap<Vec<u8>, BTreeSet<Fingerprint>>>>);

/// A value's hash and length.
type Fingerprint = (u64, usize);

impl SentValues {
    /// `value` is about to be sent to `key`.
    pub fn sent(&self, key: &[u8], value: &[u8]) {
        self.0.locked().entry(key.to_vec()).or_default().insert(fingerprint(value));
    }

    /// Whether `value` was ever sent to `key`.
    pub fn was_sent(&self, key: &[u8], value: &[u8]) -> bool {
        self.0.locked().get(key).is_some_and(|values| values.contains(&fingerprint(value)))
    }
}

/// A key as messages show it: as it is when it is UTF-8, escaped when not.
pub fn key_shown(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(key) => key.to_string(),
        Err(_) => qs_node::entry::escape(key),
    }
}

/// A value's hash and length. `DefaultHasher::new()` is SipHash with fixed keys: the same in
/// every process.
fn fingerprint(value: &[u8]) -> Fingerprint {
    let mut hasher = std::hash::DefaultHasher::new();
    value.hash(&mut hasher);
    (hasher.finish(), value.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(hits: u64, misses: u64, keys_unanswered: u64) -> ReadLedger {
        ReadLedger { hits, misses, keys_unanswered, ..ReadLedger::default() }
    }

    fn read(sent: ReadLedger, received: ReadLedger, hits: u64, misses: u64) -> CountersRead {
        CountersRead { sent, received, counters: Counters { hits, misses, refusals: None } }
    }

    #[test]
    fn counters_that_moved_with_the_answers_pass() {
        let earlier = read(ledger(10, 5, 0), ledger(10, 5, 0), 10, 5);
        let later = read(ledger(30, 25, 0), ledger(30, 25, 0), 30, 25);
        assert_eq!(judge_counters(&earlier, &later), None);
    }

    #[test]
    fn keys_in_flight_at_either_read_may_fall_on_either_side() {
        // 4 keys unanswered at the first read: the node may have counted them before it (as
        // hits) though the clients heard of them after.
        let earlier = read(ledger(10, 5, 4), ledger(10, 5, 4), 14, 5);
        let later = read(ledger(30, 25, 3), ledger(30, 25, 3), 30, 28);
        assert_eq!(judge_counters(&earlier, &later), None);
    }

    #[test]
    fn misses_counted_as_hits_are_named() {
        let earlier = read(ledger(10, 5, 0), ledger(10, 5, 0), 15, 5);
        let later = read(ledger(12, 25, 1), ledger(12, 25, 1), 37, 25);
        let found = judge_counters(&earlier, &later).expect("a violation");
        assert!(found.starts_with("get_hits moved by 22"), "{found}");
        assert!(found.contains("answered 2 to 3"), "{found}");
    }

    #[test]
    fn hits_not_counted_are_named_and_so_is_a_counter_going_down() {
        let earlier = read(ledger(10, 0, 0), ledger(10, 0, 0), 10, 0);
        let later = read(ledger(20, 0, 0), ledger(20, 0, 0), 10, 0);
        assert!(judge_counters(&earlier, &later).is_some_and(|v| v.contains("answered 10 to 10")));
        let later = read(ledger(20, 0, 0), ledger(20, 0, 0), 9, 0);
        assert!(judge_counters(&earlier, &later).is_some_and(|v| v.contains("went down")));
    }

    #[test]
    fn refusals_are_judged_only_where_the_node_reports_them() {
        let refusals =
            |refusals, refusals_unanswered| ReadLedger { refusals, refusals_unanswered, ..ReadLedger::default() };
        let mut earlier = read(refusals(2, 0), refusals(2, 0), 0, 0);
        let mut later = read(refusals(5, 0), refusals(5, 0), 0, 0);
        assert_eq!(judge_counters(&earlier, &later), None, "not reported");
        earlier.counters.refusals = Some(2);
        later.counters.refusals = Some(4);
        assert!(judge_counters(&earlier, &later).is_some_and(|v| v.starts_with("bogus_requests moved by 2")));
        later.counters.refusals = Some(5);
        assert_eq!(judge_counters(&earlier, &later), None);
    }

    #[test]
    fn a_ledger_follows_its_clients() {
        let ledgers = Ledgers::default();
        ledgers.get_sent("edge-1", 3);
        assert_eq!(ledgers.at("edge-1"), ledger(0, 0, 3));
        ledgers.get_answered("edge-1", 3, 2);
        ledgers.get_sent("edge-1", 2);
        ledgers.get_failed("edge-1", 2);
        ledgers.refusal_sent("edge-1");
        assert_eq!(ledgers.at("edge-1").refusals_unanswered, 1);
        ledgers.refusal_answered("edge-1", true);
        ledgers.refusal_sent("edge-1");
        ledgers.refusal_answered("edge-1", false);
        assert_eq!(
            ledgers.at("edge-1"),
            ReadLedger { hits: 2, misses: 1, keys_unanswered: 0, refusals: 1, refusals_unanswered: 0 }
        );
        assert_eq!(ledgers.at("edge-2"), ReadLedger::default());
    }

    fn writes(throttled: u64, refused: u64, unanswered: u64) -> WriteLedger {
        WriteLedger { throttled, refused, unanswered, committed_ops: 0, unanswered_ops: 0 }
    }

    fn page(ledger: WriteLedger, throttled: u64, refused: u64) -> WriteCountersRead {
        WriteCountersRead {
            sent: ledger,
            received: ledger,
            counters: WriteCounters { throttled, refused, committed_ops: 0 },
        }
    }

    /// A ledger of `committed` operations answered 2xx and `unanswered` ones in flight.
    fn ops(committed_ops: u64, unanswered_ops: u64) -> WriteLedger {
        WriteLedger { committed_ops, unanswered_ops, unanswered: unanswered_ops.min(1), ..WriteLedger::default() }
    }

    fn ops_page(ledger: WriteLedger, committed_ops: u64) -> WriteCountersRead {
        WriteCountersRead {
            sent: ledger,
            received: ledger,
            counters: WriteCounters { committed_ops, ..WriteCounters::default() },
        }
    }

    #[test]
    fn committed_operations_are_counted_as_the_clients_were_answered() {
        // Eight answered 2xx, three in flight: the page may count them.
        assert_eq!(judge_write_page(&ops_page(ops(8, 3), 11)), None);
        let found = judge_write_page(&ops_page(ops(8, 3), 12)).expect("a violation");
        assert!(found.starts_with("qs_writes_accepted_total + qs_writes_identical_dropped_total is 12, but the clients were answered at most 11 such key operations"), "{found}");
        // Between two pages: what was answered 2xx in between was counted in between.
        let earlier = ops_page(ops(8, 0), 8);
        assert_eq!(judge_write_counters(&earlier, &ops_page(ops(12, 0), 12)), None);
        assert_eq!(judge_write_counters(&earlier, &ops_page(ops(12, 2), 14)), None);
        // An identical rewrite counted as accepted as well as dropped: one too many.
        let found = judge_write_counters(&earlier, &ops_page(ops(12, 0), 13)).expect("a violation");
        assert!(
            found.contains("moved by 5 between two metrics pages, but the clients were answered 4 to 4"),
            "{found}"
        );
        // A commit answered 2xx and never counted.
        assert!(judge_write_counters(&earlier, &ops_page(ops(12, 0), 11)).is_some());
    }

    #[test]
    fn write_counters_move_with_the_writes_answered() {
        let earlier = page(writes(1, 2, 0), 1, 2);
        assert_eq!(judge_write_counters(&earlier, &page(writes(3, 5, 0), 3, 5)), None);
        // One write in flight at the later page: the node may have counted it already.
        assert_eq!(judge_write_counters(&earlier, &page(writes(3, 5, 1), 3, 6)), None);
        // A read of a missing key counted as a refused write (nothing unanswered to explain it).
        let found = judge_write_counters(&earlier, &page(writes(3, 5, 0), 3, 7)).expect("a violation");
        assert!(found.starts_with("qs_writes_refused_total moved by 5 between two metrics pages"), "{found}");
        assert!(found.contains("answered 3 to 3"), "{found}");
        // A 429 not counted.
        assert!(judge_write_counters(&earlier, &page(writes(3, 5, 0), 2, 5)).is_some());
    }

    #[test]
    fn one_page_counts_no_more_than_the_clients_were_answered() {
        assert_eq!(judge_write_page(&page(writes(1, 4, 3), 1, 7)), None);
        let found = judge_write_page(&page(writes(0, 4, 3), 0, 14)).expect("a violation");
        assert!(found.starts_with("qs_writes_refused_total is 14, but the clients were answered at most 7"), "{found}");
        assert!(judge_write_page(&page(writes(0, 4, 0), 1, 4)).is_some_and(|v| v.contains("throttled")));
    }

    #[test]
    fn a_write_ledger_sorts_answers_by_status() {
        let ledgers = WriteLedgers::default();
        let root: SocketAddr = "10.0.0.1:8080".parse().expect("an address");
        for status in [200, 429, 400, 413, 307, 503, 204] {
            ledgers.sent(root, 3);
            ledgers.answered(root, status, 3);
        }
        ledgers.sent(root, 4);
        assert_eq!(ledgers.at(root), WriteLedger { committed_ops: 6, unanswered_ops: 4, ..writes(1, 2, 1) });
        assert_eq!(write_request_ops("/v1/keys/a", b"x"), 1);
        assert_eq!(
            write_request_ops("/v1/batch", br#"{"ops":[{"op":"delete","key":"a"},{"op":"delete","key":"b"}]}"#),
            2
        );
        assert_eq!(write_request_ops("/v1/batch", b"not a batch"), 0);
        assert!(is_write_request(&hyper::Method::PUT, "/v1/keys/a"));
        assert!(is_write_request(&hyper::Method::POST, "/v1/batch"));
        assert!(!is_write_request(&hyper::Method::GET, "/v1/keys/a"));
        assert!(!is_write_request(&hyper::Method::POST, "/v1/root/members"));
    }

    #[test]
    fn write_counters_are_read_from_a_metrics_page() {
        let counts = "qs_writes_accepted_total 30\nqs_writes_identical_dropped_total 2\n";
        let page = format!(
            "# TYPE qs_writes_throttled counter\nqs_writes_throttled_total 4\nqs_writes_refused_total 9\n{counts}# EOF\n"
        );
        assert_eq!(WriteCounters::of_page(&page), Ok(WriteCounters { throttled: 4, refused: 9, committed_ops: 32 }));
        assert!(
            WriteCounters::of_page(&format!("qs_writes_throttled_total 4\n{counts}"))
                .is_err_and(|e| e.contains("no qs_writes_refused"))
        );
        assert!(
            WriteCounters::of_page("qs_writes_throttled_total 4\nqs_writes_refused_total 9\n")
                .is_err_and(|e| e.contains("no qs_writes_accepted_total"))
        );
        assert!(
            WriteCounters::of_page(&format!("qs_writes_throttled_total x\nqs_writes_refused_total 1\n{counts}"))
                .is_err()
        );
    }

    #[test]
    fn sent_values_remember_each_key_apart() {
        let sent = SentValues::default();
        sent.sent(b"~\xfe", b"");
        sent.sent(b"~\xff", b"a");
        assert!(sent.was_sent(b"~\xfe", b""));
        assert!(!sent.was_sent(b"~\xfe", b"a"));
        assert!(!sent.was_sent(b"~", b""));
    }
}
