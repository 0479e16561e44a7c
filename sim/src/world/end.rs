//! The end of a run: each node's totals and key usage, and whether the cluster converged.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use qs_node::state::NodeState;

use crate::checkers::contract::{WriteCounters, WriteCountersRead, WriteLedgers, judge_write_page};
use crate::checkers::convergence::Lost;
use crate::checkers::listener_counts;
use crate::checkers::reads::Reads;
use crate::faults::SimNode;
use crate::scenario::Scenario;
use crate::trace::{Event, SharedRecorder};
use crate::workload::Acked;

use super::{States, live, record};
use crate::sync::Locked;

/// End of run: each node's totals, and the root's key usage by prefix with the readers' counts.
pub(super) fn summarize(
    scenario: &Scenario,
    nodes: &[SimNode],
    states: &States,
    reads: &Reads,
    recorder: &SharedRecorder,
) {
    let tiers: BTreeMap<String, String> = scenario.node_infos().into_iter().map(|n| (n.name, n.tier)).collect();
    let states = live(states);
    for node in nodes {
        let Some(state) = states.get(&node.name) else { continue };
        let stats = state.read_store(|s| s.stats()).ok();
        let metrics = &state.metrics;
        let bogus = state.read_counters.bogus_requests.load(Ordering::Relaxed);
        record(recorder, |at_ms| Event::NodeSummary {
            at_ms,
            node: node.name.clone(),
            tier: tiers.get(&node.name).cloned().unwrap_or_default(),
            applied: stats.as_ref().map_or(0, |s| s.applied_index),
            failovers: metrics.failovers.get(),
            bootstraps: metrics.bootstraps.get(),
            bogus_requests: bogus,
            logical_bytes: stats.as_ref().map_or(0, |s| s.logical_bytes_written),
            engine_bytes_written: stats.as_ref().map(|s| s.disk_bytes_written),
        });
    }
    let Some((root_name, root)) = reference_root(&states) else { return };
    refused_never_logged(root_name, root, reads, recorder);
    let Ok(pairs) = root.read_store(|s| s.dump()) else { return };
    let reads = reads.lock();
    // prefix -> (keys, bytes, reads, never read)
    let mut usage: BTreeMap<String, (u64, u64, u64, u64)> = BTreeMap::new();
    for (key_bytes, value) in pairs {
        let key = String::from_utf8_lossy(&key_bytes).into_owned();
        let prefix = key.split_once(':').map_or(key.as_str(), |(p, _)| p).to_string();
        let read = reads.reads_per_key.get(&key).copied().unwrap_or(0);
        let entry = usage.entry(prefix).or_default();
        entry.0 += 1;
        entry.1 += (key_bytes.len() + value.len()) as u64;
        entry.2 += read;
        entry.3 += u64::from(read == 0);
    }
    drop(reads);
    for (prefix, (keys, bytes, reads, never_read)) in usage {
        record(recorder, |at_ms| Event::KeyUsage { at_ms, prefix, keys, bytes, reads, never_read });
    }
}

/// At the end, every root's write counters against the clients' write ledger (the clients
/// are stopped: what was in flight stays unanswered for good): a process counts only answers
/// it gave, so its counters are at most what its clients were answered plus what never was
/// ([`judge_write_page`]) — the census's pages judge the same during the run, where it read
/// them; this judges every root, every run.
pub(super) fn write_counters_at_the_end(
    nodes: &[SimNode],
    states: &States,
    writes: &WriteLedgers,
    recorder: &SharedRecorder,
) {
    let states = live(states);
    for node in nodes.iter().filter(|n| crate::trace::is_root(&n.name)) {
        let Some(state) = states.get(&node.name) else { continue };
        let ledger = writes.at(std::net::SocketAddr::new(node.ip, crate::scenario::nodes::HTTP_PORT));
        let metrics = &state.metrics;
        let counters = WriteCounters {
            throttled: metrics.writes_throttled.get(),
            refused: metrics.writes_refused.get(),
            committed_ops: metrics.writes_accepted.get() + metrics.writes_identical_dropped.get(),
        };
        let read = WriteCountersRead { sent: ledger, received: ledger, counters };
        if let Some(wrong) = judge_write_page(&read) {
            crate::workload::census::violation(recorder, &node.name, format!("at the end of the run: {wrong}"));
        }
    }
}

/// At the end, every live node's connection counters, per listener, against what its socket
/// handed it since the process started (madsim's count; see [`listener_counts`]).
pub(super) fn connection_counters_at_the_end(nodes: &[SimNode], states: &States, recorder: &SharedRecorder) {
    use qs_node::connections::ListenerKind;
    let net = madsim::net::NetSim::current();
    let states = live(states);
    for node in nodes {
        let Some(state) = states.get(&node.name) else { continue };
        let metrics = &state.metrics;
        let listen = &state.config.listen;
        for &kind in ListenerKind::ALL {
            // The port this process bound for the listener, from its own configuration.
            let port = match kind {
                ListenerKind::Http => listen.http.port(),
                ListenerKind::Memcached => listen.memcached.port(),
                ListenerKind::Replication => listen.replication.port(),
            };
            let label = qs_node::metrics::Metrics::label("listener", kind.name());
            let counts = listener_counts::ListenerCounts {
                handed_over: net.tcp_accepted(node.handle.id(), port),
                max: state.config.connections.max(kind) as u64,
                accepted: metrics.connections_accepted.get_or_create(&label).get(),
                refused: metrics.connections_refused.get_or_create(&label).get(),
                refused_per_peer: metrics.connections_refused_per_peer.get_or_create(&label).get(),
                shed: metrics.connections_shed.get_or_create(&label).get(),
                open: metrics.connections_open.get_or_create(&label).get(),
            };
            if let Some(wrong) = listener_counts::judge(kind.name(), &counts) {
                crate::workload::census::violation(recorder, &node.name, format!("at the end of the run: {wrong}"));
            }
        }
    }
}

/// A refused write never landed, so no entry of the root's log holds it: every retained
/// entry's operations are read, and a value whose version the root refused (400, 403, 429, a
/// 503 that said nothing was applied) is a `reads` violation at the entry's index — whether or
/// not a reader ever read it before it was overwritten.
fn refused_never_logged(root_name: &str, root: &NodeState, reads: &Reads, recorder: &SharedRecorder) {
    let reads = reads.lock();
    let mut found = Vec::new();
    root.with_store(|store| {
        let limits = qs_node::store::LogReadLimits { entries_max: 500, bytes_max: usize::MAX };
        let mut after = 0;
        loop {
            match store.read_log_after(after, limits) {
                Ok(qs_node::store::LogRead::Entries(entries)) if !entries.is_empty() => {
                    for entry in &entries {
                        for op in &entry.ops {
                            let qs_node::Op::Set { key, value } = op else { continue };
                            let key = String::from_utf8_lossy(key);
                            let Some(version) = crate::checkers::reads::version_of(value) else { continue };
                            if reads.was_refused(&key, version) {
                                found.push((entry.index, key.into_owned(), version));
                            }
                        }
                    }
                    after = entries.last().map_or(after, |e| e.index);
                }
                Ok(qs_node::store::LogRead::Collected { first_retained }) if first_retained > after + 1 => {
                    after = first_retained - 1;
                }
                _ => break,
            }
        }
    });
    drop(reads);
    for (index, key, version) in found {
        let message = format!(
            "the root's log holds version {version} of {key} at index {index}, though the root refused that write: \
             it said nothing of it was applied"
        );
        let node = root_name.to_string();
        record(recorder, |at_ms| Event::Violation {
            at_ms,
            checker: crate::trace::Checker::Reads,
            node,
            index,
            message,
        });
    }
}

/// The root whose log and state every node is judged against: the root, or in a root group
/// the running member furthest ahead (on a tie, the first by name). A member behind it is then
/// pending like any replica. With its name.
fn reference_root(states: &BTreeMap<String, std::sync::Arc<NodeState>>) -> Option<(&str, &NodeState)> {
    states
        .iter()
        .filter(|(name, _)| crate::trace::is_root(name))
        .map(|(name, state)| (state.read_store(|s| s.applied_index()), name.as_str(), &**state))
        .fold(None, |best: Option<(u64, &str, &NodeState)>, (index, name, state)| match best {
            Some((best_index, _, _)) if best_index >= index => best,
            _ => Some((index, name, state)),
        })
        .map(|(_, name, state)| (name, state))
}

/// The root's recent log as convergence needs it: the chain hash at each retained index, and
/// the newest index whose entry changed data (the root goes on writing heartbeats — entries
/// without operations — after the writers stop, so a replica a heartbeat or two behind holds
/// every write: converged, not pending).
struct RootLog {
    index: u64,
    hashes: BTreeMap<u64, qs_node::entry::ChainHash>,
    /// The newest entry with operations, or the oldest retained index less one when every
    /// retained entry is a heartbeat (the data changed no later than that).
    data_index: u64,
}

/// How far back from its head the root's log is read: past any convergence bound's heartbeats.
const ROOT_LOG_TAIL: u64 = 2_000;

fn root_log(root: &NodeState) -> RootLog {
    root.with_store(|store| {
        let index = store.applied_index();
        let mut hashes = BTreeMap::new();
        let mut data_index = 0;
        let mut after = index.saturating_sub(ROOT_LOG_TAIL);
        let limits = qs_node::store::LogReadLimits { entries_max: 500, bytes_max: usize::MAX };
        loop {
            match store.read_log_after(after, limits) {
                Ok(qs_node::store::LogRead::Entries(entries)) if !entries.is_empty() => {
                    for entry in &entries {
                        hashes.insert(entry.index, entry.hash);
                        if !entry.ops.is_empty() {
                            data_index = entry.index;
                        }
                    }
                    after = entries.last().map_or(index, |e| e.index);
                }
                Ok(qs_node::store::LogRead::Collected { first_retained }) if first_retained > after + 1 => {
                    data_index = data_index.max(first_retained - 1);
                    after = first_retained - 1;
                }
                _ => break,
            }
        }
        let first = hashes.keys().next().copied().unwrap_or(index + 1);
        RootLog { index, hashes, data_index: data_index.max(first.saturating_sub(1)).min(index) }
    })
}

/// Why the cluster has not converged yet: per node, what differs from the root. A node has
/// converged when it holds every entry up to the root's newest data entry, its chain hash is
/// the root's at its index, and its state is the root's.
///
/// States are compared only once every node passes the cheap checks (index and chain hash):
/// a state digest reads the whole store, and ten thousand of them every poll while the tree is
/// still catching up would cost more than the run.
pub(super) fn pending(
    nodes: &[SimNode],
    states: &States,
    acked: &Acked,
    retired: &std::collections::BTreeSet<String>,
) -> Vec<String> {
    let nodes: Vec<&SimNode> = nodes.iter().filter(|n| !retired.contains(&n.name)).collect();
    let states = live(states);
    let head = |state: &NodeState| state.read_store(|s| (s.applied_index(), s.chain_hash()));
    let Some((root_name, root)) = reference_root(&states) else {
        return vec!["no root member is running".into()];
    };
    let log = root_log(root);
    let mut out = Vec::new();
    for node in &nodes {
        let Some(state) = states.get(&node.name) else {
            out.push(format!("{} has not started", node.name));
            continue;
        };
        let (index, hash) = head(state);
        if index < log.data_index {
            out.push(format!("{} is at index {index}, the root's newest write at {}", node.name, log.data_index));
        } else if index > log.index {
            out.push(format!("{} is at index {index}, past the root's {}", node.name, log.index));
        } else if log.hashes.get(&index).is_some_and(|root_hash| *root_hash != hash) {
            out.push(format!("{} is at index {index} with another chain hash than the root's there", node.name));
        }
    }
    if out.is_empty() {
        let digest = |state: &NodeState| state.read_store(|s| s.state_digest().map_err(|e| e.to_string()));
        match digest(root) {
            Err(e) => out.push(format!("{root_name}, the reference root, holds a state that cannot be read: {e}")),
            Ok(reference) => {
                for node in &nodes {
                    let Some(state) = states.get(&node.name) else { continue };
                    let index = state.read_store(|s| s.applied_index());
                    match digest(state) {
                        Ok(ours) if ours == reference => {}
                        Ok(_) => out.push(format!(
                            "{} holds every write to index {index}, but a different state than {root_name}, the reference root",
                            node.name
                        )),
                        Err(e) => {
                            out.push(format!("{} is at index {index}, but its state cannot be read: {e}", node.name))
                        }
                    }
                }
            }
        }
    }
    // Every acknowledged write survives (`checkers::convergence::KeyFate`). Every node now
    // holds the root's state (equal digests), so what the root holds, every node holds: the
    // writes are judged there once, not once per node.
    if out.is_empty() {
        let everyone = if nodes.len() > 1 { " (nor does any node: all hold the root's state)" } else { "" };
        for (key, fate) in acked.locked().iter() {
            let key_bytes = key;
            let key = crate::checkers::contract::key_shown(key_bytes);
            match root.read_store(|s| s.get(key_bytes)).map(|held| fate.judge(held.as_deref())) {
                Ok(Ok(())) => {}
                Ok(Err(Lost::Missing)) => {
                    out.push(format!("{root_name} does not hold {key}, whose write was acknowledged{everyone}"))
                }
                Ok(Err(Lost::Older)) => out.push(format!(
                    "{root_name} holds a value of {key} older than its newest acknowledged write{everyone}"
                )),
                Err(e) => out.push(format!("{root_name} cannot read {key}: {e}")),
            }
        }
    }
    out
}

/// Per tier, the node holding the most data: its sizing by the formulas, and the largest
/// modelled RSS any node of the tier reached.
pub(super) fn sizing(
    scenario: &Scenario,
    nodes: &[SimNode],
    recorder: &SharedRecorder,
) -> Vec<qs_reports::schema::SizingRow> {
    if scenario.resources.is_none() {
        return Vec::new();
    }
    let tiers: BTreeMap<String, String> = scenario.node_infos().into_iter().map(|n| (n.name, n.tier)).collect();
    let mut rss_max: BTreeMap<String, u64> = BTreeMap::new();
    // Every node's, kept in the trace or not (`crate::trace::Detail`).
    for (node, rss) in recorder.locked().rss_max() {
        let tier = tiers.get(node).cloned().unwrap_or_default();
        let max = rss_max.entry(tier).or_default();
        *max = (*max).max(*rss);
    }
    let mut rows: Vec<qs_reports::schema::SizingRow> = Vec::new();
    for info in scenario.node_infos() {
        let Some(node) = nodes.iter().find(|n| n.name == info.name) else { continue };
        let Some((sizing, categories)) = node.device.with_model(|m| (m.sizing(), m.categories())) else { continue };
        let row = qs_reports::schema::SizingRow {
            tier: info.tier.clone(),
            data_bytes: sizing.data_bytes,
            used_bytes: sizing.used_bytes,
            cache_bytes: sizing.cache_bytes,
            cache_low: sizing.cache_low,
            cache_high: sizing.cache_high,
            memory_limit: sizing.memory_limit,
            memory_needed: sizing.memory_needed,
            rss_max: rss_max.get(&info.tier).copied().unwrap_or(0),
            cache_undersized: sizing.cache_undersized(),
            memory_undersized: sizing.memory_undersized(),
            categories: categories
                .into_iter()
                .map(|c| qs_reports::schema::CategoryRow {
                    prefix: c.prefix,
                    keys: c.keys,
                    data_bytes: c.data_bytes,
                    stored_bytes: c.stored_bytes,
                    cached_bytes: c.cached_bytes,
                })
                .collect(),
        };
        match rows.iter_mut().find(|r| r.tier == row.tier) {
            Some(existing) if existing.data_bytes >= row.data_bytes => {}
            Some(existing) => *existing = row,
            None => rows.push(row),
        }
    }
    rows
}
