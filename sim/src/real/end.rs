//! The end of a real run, asked of the nodes over their own interfaces: whether the cluster
//! converged (`/v1/status` and memcached `get`s, as an operator would check), and each node's
//! totals (`/v1/status` and `/metrics`).
//!
//! Converged means, for every node: its applied index at least the newest acknowledged write's
//! and no further than the root's, its state digest the root's (the root: the running member
//! furthest ahead), and every acknowledged write's key holding a value its fate allows
//! (`checkers::convergence::KeyFate`). The chain hashes are judged by the `chain` checker from
//! the trace.

use std::net::SocketAddr;
use std::time::Duration;

use qs_node::status::Status;

use crate::checkers::convergence::Lost;
use crate::scenario::Scenario;
use crate::sync::Locked;
use crate::trace::{Event, SharedRecorder};
use crate::workload::Acked;

use super::error::RealError;
use super::processes::Cluster;

/// How long one request to a node may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// One HTTP client for the run's every request (its connections kept between polls).
static AGENT: std::sync::LazyLock<ureq::Agent> =
    std::sync::LazyLock::new(|| ureq::Agent::config_builder().timeout_global(Some(REQUEST_TIMEOUT)).build().into());

fn get(http: SocketAddr, path: &'static str) -> Result<String, RealError> {
    let failed = |source| RealError::Http { address: http, path, source };
    let mut response = AGENT.get(format!("http://{http}{path}")).call().map_err(failed)?;
    response.body_mut().read_to_string().map_err(failed)
}

/// The node's status, read as the node's own type: a field it lacks or mistypes is an error
/// naming it.
pub fn status(http: SocketAddr) -> Result<Status, RealError> {
    Status::parse(&get(http, "/v1/status")?).map_err(|source| RealError::Status { address: http, source })
}

/// One counter of the node's `/metrics`, 0 when absent or unreadable (a summary's figure, not a
/// verdict: the census judges the page itself).
fn metric(text: &str, name: &str) -> u64 {
    qs_node::metrics::page::Page::parse(text).ok().and_then(|page| page.count(name).ok()).unwrap_or(0)
}

/// A key as one node's memcached port (`address`, the client's) answers it.
fn memcached_get(client: &memcache::Client, address: SocketAddr, key: &str) -> Result<Option<Vec<u8>>, RealError> {
    client.get::<Vec<u8>>(key).map_err(|source| RealError::Memcached { address, key: key.to_string(), source })
}

/// A `get` of a key that is not UTF-8, over a connection of its own: the value, or None for a
/// miss.
fn raw_get(address: SocketAddr, key: &[u8]) -> Result<Option<Vec<u8>>, RealError> {
    use std::io::{BufRead, Read, Write};
    let shown = || crate::checkers::contract::key_shown(key);
    let failed = |source| RealError::MemcachedIo { address, key: shown(), source };
    let timeout = std::time::Duration::from_secs(2);
    let stream = std::net::TcpStream::connect_timeout(&address, timeout).map_err(failed)?;
    stream.set_read_timeout(Some(timeout)).map_err(failed)?;
    let mut reader = std::io::BufReader::new(stream);
    reader.get_mut().write_all(&[b"get ", key, b"\r\n"].concat()).map_err(failed)?;
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).map_err(failed)?;
    if line == b"END\r\n" {
        return Ok(None);
    }
    let header = String::from_utf8_lossy(&line).into_owned();
    let bytes: usize = header
        .trim_end()
        .rsplit(' ')
        .next()
        .and_then(|b| b.parse().ok())
        .filter(|_| line.starts_with(b"VALUE "))
        .ok_or_else(|| RealError::MemcachedAnswer { address, key: shown(), header })?;
    let mut value = vec![0; bytes + 2];
    reader.read_exact(&mut value).map_err(failed)?;
    value.truncate(bytes);
    Ok(Some(value))
}

/// Why the cluster has not converged yet, per node; empty when it has. `newest_write` is the
/// root index of the newest acknowledged write.
pub fn pending(cluster: &Cluster, acked: &Acked, newest_write: u64) -> Vec<String> {
    let statuses: Vec<(&str, Result<Status, RealError>)> =
        cluster.nodes.values().map(|node| (node.name.as_str(), status(node.http))).collect();
    let root = statuses
        .iter()
        .filter(|(name, _)| crate::trace::is_root(name))
        .filter_map(|(name, status)| Some((*name, status.as_ref().ok()?)))
        .max_by_key(|(_, status)| status.applied_index);
    let Some((root_name, root)) = root else { return vec!["no root member answers".into()] };
    let mut out = Vec::new();
    for (name, status) in &statuses {
        match status {
            Err(e) => out.push(format!("{name} does not answer: {e}")),
            Ok(s) if s.applied_index < newest_write => out.push(format!(
                "{name} is at index {}, the newest acknowledged write at {newest_write}",
                s.applied_index
            )),
            Ok(s) if s.applied_index > root.applied_index => {
                out.push(format!("{name} is at index {}, past the root's {}", s.applied_index, root.applied_index))
            }
            Ok(s) if s.state_digest != root.state_digest => out.push(format!(
                "{name} holds every write to index {}, but a different state than {root_name}, the reference root",
                s.applied_index
            )),
            Ok(_) => {}
        }
    }
    if !out.is_empty() {
        return out;
    }
    // Every acknowledged write survives, on every node.
    let acked = acked.locked().clone();
    for node in cluster.nodes.values() {
        let url = format!("memcache://{}?timeout=2&protocol=ascii", memcached_address(node));
        let client = match memcache::Client::connect(url.as_str()) {
            Ok(client) => client,
            Err(e) => {
                out.push(format!("{}: memcached: {e}", node.name));
                continue;
            }
        };
        for (key_bytes, fate) in &acked {
            let key = crate::checkers::contract::key_shown(key_bytes);
            let held = match std::str::from_utf8(key_bytes) {
                Ok(key) => memcached_get(&client, memcached_address(node), key),
                // The memcache crate takes keys as `&str`: a binary key is asked for by hand.
                Err(_) => raw_get(memcached_address(node), key_bytes),
            };
            match held.map(|held| fate.judge(held.as_deref())) {
                Ok(Ok(())) => {}
                Ok(Err(Lost::Missing)) => {
                    out.push(format!("{} does not hold {key}, whose write was acknowledged", node.name))
                }
                Ok(Err(Lost::Older)) => {
                    out.push(format!("{} holds a value of {key} older than its newest acknowledged write", node.name))
                }
                Err(e) => out.push(format!("{} cannot read {key}: {e}", node.name)),
            }
        }
    }
    out
}

/// A node's memcached address: its HTTP address's host on the memcached port.
fn memcached_address(node: &super::processes::NodeProcess) -> SocketAddr {
    SocketAddr::new(node.http.ip(), crate::scenario::nodes::MEMCACHED_PORT)
}

/// Each running node's totals as a `node_summary` event (applied index from its status; its
/// failovers, bootstraps, bogus requests and bytes applied from `/metrics`, counted since its
/// process last started, as in the simulator).
pub fn summarize(scenario: &Scenario, cluster: &Cluster, recorder: &SharedRecorder) {
    let tiers: std::collections::BTreeMap<String, String> =
        scenario.node_infos().into_iter().map(|n| (n.name, n.tier)).collect();
    for node in cluster.nodes.values() {
        let Ok(status) = status(node.http) else { continue };
        let metrics = get(node.http, "/metrics").unwrap_or_default();
        let mut recorder = recorder.locked();
        let at_ms = recorder.now_ms();
        recorder.record(Event::NodeSummary {
            at_ms,
            node: node.name.clone(),
            tier: tiers.get(&node.name).cloned().unwrap_or_default(),
            applied: status.applied_index,
            failovers: metric(&metrics, "qs_failovers_total"),
            bootstraps: metric(&metrics, "qs_bootstraps_total"),
            bogus_requests: metric(&metrics, "qs_bogus_requests"),
            logical_bytes: metric(&metrics, "qs_bytes_applied_total"),
            engine_bytes_written: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_read_by_exact_name() {
        let text = "# HELP qs_failovers Moves\n# TYPE qs_failovers counter\nqs_failovers_total 3\nqs_failovers_total_x 9\nqs_bogus_requests 2\n";
        assert_eq!(metric(text, "qs_failovers_total"), 3);
        assert_eq!(metric(text, "qs_bogus_requests"), 2);
        assert_eq!(metric(text, "qs_bootstraps_total"), 0, "absent");
    }
}
