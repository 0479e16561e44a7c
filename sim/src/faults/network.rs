//! Network faults: partitions (symmetric, one-way, between groups), clogged links, added
//! latency and loss, on madsim's simulated network.
//!
//! Fault model (madsim's TCP is reliable and ordered, so faults delay rather than corrupt):
//! - **partition**: nothing reaches or leaves the node. Messages already sent are held, not
//!   dropped, and flow again when the network heals; connections stay open, so nodes detect the
//!   partition by staleness and fail over.
//! - **partition_in** / **partition_out**: one direction only. A node that still receives but
//!   cannot send (or the reverse) looks alive to one side and dead to the other; both sides
//!   must still converge.
//! - **split**: the target and its `group` lose every link to every other node, but not among
//!   themselves: a subtree keeps replicating internally while cut off from the root.
//! - **clog_link**: one link, both ways: a replica and one of its sources cannot talk, while
//!   both still talk to everyone else; the replica must fail over to another source.
//! - **latency**: every message takes `latency`..2×`latency` more (the whole network: madsim
//!   has one latency setting), as across a congested long-haul link. Lag grows but stays within
//!   the bound.
//! - **loss**: a share `rate` of messages is lost and retransmitted with TCP-like backoff; the
//!   stream stalls now and then.
//!
//! Every one of them ends by healing exactly what it broke; the cluster must converge after.

use madsim::net::NetSim;
use madsim::runtime::NodeHandle;
use std::time::Duration;

/// madsim's default one-way latency, restored when a latency fault ends.
const DEFAULT_LATENCY: std::ops::Range<Duration> = Duration::from_millis(1)..Duration::from_millis(10);

pub fn partition(node: &NodeHandle, on: bool) {
    let net = NetSim::current();
    if on { net.clog_node(node.id()) } else { net.unclog_node(node.id()) }
}

pub fn partition_in(node: &NodeHandle, on: bool) {
    let net = NetSim::current();
    if on { net.clog_node_in(node.id()) } else { net.unclog_node_in(node.id()) }
}

pub fn partition_out(node: &NodeHandle, on: bool) {
    let net = NetSim::current();
    if on { net.clog_node_out(node.id()) } else { net.unclog_node_out(node.id()) }
}

/// Cuts (or heals) every link between `side` and `rest`, both ways.
pub fn split(side: &[&NodeHandle], rest: &[&NodeHandle], on: bool) {
    let net = NetSim::current();
    for a in side {
        for b in rest {
            if on {
                net.clog_link(a.id(), b.id());
                net.clog_link(b.id(), a.id());
            } else {
                net.unclog_link(a.id(), b.id());
                net.unclog_link(b.id(), a.id());
            }
        }
    }
}

pub fn clog_link(a: &NodeHandle, b: &NodeHandle, on: bool) {
    split(&[a], &[b], on);
}

/// Adds `extra` to every message's latency, or restores the default with None.
pub fn latency(extra: Option<Duration>) {
    let range = match extra {
        Some(extra) => DEFAULT_LATENCY.start + extra..DEFAULT_LATENCY.end + extra * 2,
        None => DEFAULT_LATENCY,
    };
    NetSim::current().update_config(|config| config.send_latency = range);
}

pub fn loss(rate: Option<f64>) {
    NetSim::current().update_config(|config| config.packet_loss_rate = rate.unwrap_or(0.0));
}
