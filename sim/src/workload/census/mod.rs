//! The census: a client that sends every kind of request the node answers, with the values at
//! its edges, and judges every reply against what a correct node may answer (the `contract`
//! checker, [`crate::checkers::contract`]).
//!
//! The writers and readers send what a steady producer and a steady reader send; the census
//! sends the rest, so that a bug where users and operators actually meet the node — a reply
//! framed wrong for an empty value, a refused command that puts the stream out of step, two
//! binary keys that collide, a counter that counts the wrong thing — fails a run:
//!
//! - **Edge sessions** ([`edge`]), one per census edge, on the memcached port: every operation
//!   of [`EdgeOp`], drawn by [`EdgeOpWeights`] (a new operation does not compile until it has a
//!   weight, and every weight is at least one, so every seed can reach every operation). Each
//!   request is followed on the wire by a `version`, whose answer must come next: a reply with
//!   a line too many or too few shows at once. Values of writer keys go to the `reads` checker
//!   as a reader's do.
//! - **A root session** ([`root`]), from the producer's host, on the HTTP API: writes of the
//!   census's own keys ([`census_keys`]: 1 and 250 bytes long, binary ones through
//!   percent-encoding) with edge values ([`census_value`]: empty, with the protocol's framing
//!   bytes inside, binary, exactly `VALUE_BYTES_MAX`), and the requests a correct root must
//!   refuse (a 251-byte key, a value or a batch one past its limit), status and metrics. Every
//!   write's fate goes to `convergence` and the producer's quota judge, as a writer's do.
//!
//! Every choice is drawn from the run's seed, on streams of the census's own: turning the
//! census off (`[census] enabled = false`) leaves every other client's draws as they were.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::checkers::contract::{Ledgers, SentValues};
use crate::checkers::reads::Reads;
use crate::trace::{Checker, Event, SharedRecorder};

pub mod edge;
pub mod root;
pub mod wire;

pub use edge::{EdgeOp, EdgeOpWeights, edge_census};
pub use root::{RootOp, RootOpWeights, root_census};

/// The prefix every census key starts with: the producer's second prefix, outside the
/// writers' `cfg`.
pub const CENSUS_PREFIX: &str = "~";

/// Longest the census waits for one answer before it gives the connection up.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// What the census shares with the other clients' judges.
#[derive(Clone, Debug)]
pub struct CensusJudges {
    pub reads: Reads,
    pub ledgers: Ledgers,
    pub sent: SentValues,
    pub acked: super::Acked,
    pub quota: crate::checkers::quota::Quota,
    /// Every root's write requests and their answers, which its metrics page must agree with.
    pub writes: crate::checkers::contract::WriteLedgers,
}

/// The census's keys: one byte (the prefix alone) and 250 bytes long, and binary ones that
/// only percent-encoding carries in a URL — two that differ only in bytes that are not UTF-8,
/// and a literal `%41` beside the `A` it would decode to.
pub fn census_keys() -> Vec<Vec<u8>> {
    let mut longest = CENSUS_PREFIX.as_bytes().to_vec();
    longest.resize(qs_node::limits::KEY_BYTES_MAX, b'k');
    vec![
        CENSUS_PREFIX.as_bytes().to_vec(),
        longest,
        b"~\xfe".to_vec(),
        b"~\xff".to_vec(),
        "~é".as_bytes().to_vec(),
        b"~A".to_vec(),
        b"~%41".to_vec(),
        b"~/a?b#c".to_vec(),
    ]
}

/// Keys no client ever writes (no producer prefix starts them), for negative lookups: one
/// byte, 250 bytes, and a few ordinary ones.
pub fn absent_key(rng: &mut ChaCha8Rng) -> Vec<u8> {
    match rng.random_range(0..4) {
        0 => b"!".to_vec(),
        1 => vec![b'!'; qs_node::limits::KEY_BYTES_MAX],
        _ => format!("!absent:{}", rng.random_range(0..1000)).into_bytes(),
    }
}

/// A census value: empty (a quarter of them), the protocol's own framing inside, arbitrary
/// bytes, or (rarely) exactly `VALUE_BYTES_MAX` — cut to `bytes_max` (`[census]
/// value_bytes_max`). `utf8`: only values a JSON string carries (a batch's).
pub fn census_value(rng: &mut ChaCha8Rng, utf8: bool, bytes_max: usize) -> Vec<u8> {
    let mut value = drawn_value(rng, utf8);
    value.truncate(bytes_max);
    value
}

/// A census value before [`census_value`] cuts it.
fn drawn_value(rng: &mut ChaCha8Rng, utf8: bool) -> Vec<u8> {
    match rng.random_range(0..40) {
        0..10 => Vec::new(),
        10..16 => b"\r\nEND\r\n".to_vec(),
        16..20 => b"VALUE ~ 0 1\r\nx\r\nEND\r\n".to_vec(),
        20..22 if !utf8 => vec![b'v'; qs_node::limits::VALUE_BYTES_MAX],
        20..30 if !utf8 => {
            let len = rng.random_range(1..=300);
            (0..len).map(|_| rng.random::<u8>()).collect()
        }
        _ => {
            let len = rng.random_range(1..=64);
            (0..len).map(|_| rng.random_range(b' '..=b'~')).collect()
        }
    }
}

/// Records a `contract` violation at `node`.
pub(crate) fn violation(recorder: &SharedRecorder, node: &str, message: String) {
    use crate::sync::Locked;
    let mut recorder = recorder.locked();
    let at_ms = recorder.now_ms();
    recorder.record(Event::Violation { at_ms, checker: Checker::Contract, node: node.to_string(), index: 0, message });
}

/// A swarm run's weight for an operation whose default weight is `default` (swarm testing:
/// each seed leans on some operations and starves others, so a bug that needs many of one kind
/// in a row is reached): kept, quadrupled, or cut to one — never to nothing.
fn swarmed_weight(rng: &mut ChaCha8Rng, default: u32) -> u32 {
    match rng.random_range(0..4) {
        0 => 1,
        1 => default * 4,
        _ => default,
    }
}

/// Draws an operation by weight: `weights[n]` for `ops[n]`.
fn draw<T: Copy>(rng: &mut ChaCha8Rng, ops: &[T], weight: impl Fn(T) -> u32) -> T {
    let total: u32 = ops.iter().map(|&op| weight(op)).sum();
    let mut at = rng.random_range(0..total);
    for &op in ops {
        if at < weight(op) {
            return op;
        }
        at -= weight(op);
    }
    unreachable!("the draw is below the weights' total")
}

/// The census clients of a run: an edge session on each of up to `sessions` edges (spread
/// evenly over them, the first always among them), and one root session when the scenario
/// has a writer (the census's writes share its producer).
#[derive(Clone, Debug)]
pub struct CensusSpecs {
    pub edges: Vec<edge::EdgeSpec>,
    pub root: Option<root::RootSpec>,
}

/// The census of `scenario` under `seed`: `roots` the root's (or its members') names and HTTP
/// addresses, `edges` the last tier's nodes (name and memcached address).
pub fn specs(
    scenario: &crate::scenario::Scenario,
    seed: u64,
    roots: &[(String, SocketAddr)],
    edges: &[(String, SocketAddr)],
) -> CensusSpecs {
    let census = &scenario.census;
    if !crate::scenario::Census::runs_in(scenario) {
        return CensusSpecs { edges: Vec::new(), root: None };
    }
    let writers = scenario.workload.iter().filter_map(|w| match w {
        crate::scenario::Workload::Writer { keys, .. } => Some(*keys),
        _ => None,
    });
    let writer_keys: Arc<[String]> =
        writers.enumerate().flat_map(|(w, keys)| (0..keys).map(move |n| super::key_name(w, n))).collect();
    // A swarm run draws how often each operation is sent (a stream of its own); others send
    // the defaults.
    let mut weights_rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0077_6569_6768_7473);
    let swarmed = scenario.swarm.is_some();
    let edge_weights = if swarmed { EdgeOpWeights::swarmed(&mut weights_rng) } else { EdgeOpWeights::DEFAULT };
    let root_weights = if swarmed { RootOpWeights::swarmed(&mut weights_rng) } else { RootOpWeights::DEFAULT };
    let sessions = census.sessions.min(edges.len());
    let edges = (0..sessions)
        .map(|n| {
            let (edge, addr) = &edges[n * edges.len() / sessions];
            edge::EdgeSpec {
                name: format!("census@{edge}"),
                edge: edge.clone(),
                addr: *addr,
                rate_per_s: census.rate_in(scenario.scenario.duration),
                writer_keys: writer_keys.clone(),
                weights: edge_weights,
                seed: seed ^ 0x6365_6e73_7573 ^ ((n as u64) << 40),
            }
        })
        .collect();
    let writes = scenario.workload.iter().any(|w| matches!(w, crate::scenario::Workload::Writer { .. }));
    let root = writes.then(|| root::RootSpec {
        value_bytes_max: census.value_bytes_max.0 as usize,
        roots: roots.iter().map(|(_, addr)| *addr).collect(),
        names: roots.iter().map(|(name, _)| name.clone()).collect(),
        rate_per_s: census.rate_in(scenario.scenario.duration),
        weights: root_weights,
        seed: seed ^ 0x726f_6f74_6365_6e73,
    });
    CensusSpecs { edges, root }
}
