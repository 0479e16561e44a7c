//! Fault injectors, one module per family; each module's doc states its fault model (when it
//! may fire, what it does, what the cluster must survive).
//!
//! - [`process`]: kill (restart after `duration`; a short one is a fast restart), pause, stop
//!   (SIGTERM: the node's own graceful shutdown, then a start after `duration`);
//! - [`network`]: partition, one-way partitions, split groups, clogged links, latency, loss;
//! - [`disk`]: slow SSD models, failing disks (SIGBUS), I/O errors (EIO, ENOSPC);
//! - [`impostor`]: a peer that is not a root group member asks a member for a Raft link;
//! - power loss (here, in [`apply`]): the target and its `group` (a rack, a data center) die at
//!   once and their disks keep only what was synced — on the memory engine, commits made with
//!   `sync_commits` off and not yet written back are lost (`MemDisk::power_loss`); on LMDB and
//!   RocksDB, whatever the node's real files hold unsynced ([`page_cache`]: directory entries
//!   made, renamed or removed since their directory's last sync drawn undone, overwritten pages
//!   back to their synced bytes, appends torn at a sector). After `duration` they start again.
//! - bit rot (here, in [`apply`]): a share of a replica's stored values is damaged, a flipped
//!   bit as a bad sector leaves. On the memory engine while the node runs (`MemDisk::
//!   corrupt_value`); on LMDB and RocksDB in its real files, with its process stopped for the
//!   moment it takes (`qs_node::store::rot`: LMDB values, RocksDB data blocks). The node must
//!   refuse to serve or forward what fails its checksum, and heal.
//!
//! Garbage-collected logs and cascading disconnects are not injectors but situations the
//! scenarios build from these (a short retention plus a kill; partitions above a deep tree).
//!
//! Every fault is a start step and an end step at simulated times, applied by [`apply`], which
//! records a `fault` event for each. A fault still on when the safety phase ends is ended at the
//! start of the liveness phase.

pub mod disk;
pub mod impostor;
pub mod membership;
pub mod network;
pub mod page_cache;
pub mod process;
pub mod supervision;

use std::sync::{Arc, Mutex};

use madsim::runtime::NodeHandle;
use qs_node::store::MemDisk;

use crate::scenario::FaultKind;
pub use crate::scenario::fault::{FaultStep, steps};
use crate::sync::Locked;
use crate::trace::{Event, FaultPhase, SharedRecorder};

/// The share of a node's values `bit_rot` damages when its fault names no `rate`.
const BIT_ROT_SHARE: f64 = 0.01;

/// A simulated node as the injectors see it.
pub struct SimNode {
    pub name: String,
    pub ip: std::net::IpAddr,
    pub handle: NodeHandle,
    /// The node's disk device (latency, failure).
    pub device: Arc<disk::SimDisk>,
    /// The data on the node's disk (memory engine); replacing the disk swaps in an empty one.
    pub data: Arc<Mutex<MemDisk>>,
    /// The store's directory (LMDB, RocksDB); replacing the disk deletes it, bit rot damages its files.
    pub store_path: Option<std::path::PathBuf>,
    /// The node's folder in the simulated page cache, when a power loss may hit it (LMDB,
    /// RocksDB): what it holds unsynced is lost at the cut.
    pub page_cache: Option<page_cache::Watch>,
    /// SIGTERM: the running process shuts down gracefully when notified (a stopped or killed
    /// one has nobody waiting, and keeps no signal for its next start).
    pub sigterm: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for SimNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimNode").field("name", &self.name).field("ip", &self.ip).finish_non_exhaustive()
    }
}

/// Applies `step` to the cluster and records it.
#[expect(
    clippy::too_many_lines,
    reason = "122 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub fn apply(step: &FaultStep, nodes: &[SimNode], recorder: &SharedRecorder) {
    let fault = &step.fault;
    let by_name = |name: &str| nodes.iter().find(|n| n.name == name).expect("validated node name");
    let on = step.start;
    let mut detail = fault.detail();
    if fault.kind == FaultKind::PowerLoss {
        // One fault per node that loses power, each with what it lost.
        for name in fault.group_with_target() {
            let node = by_name(&name);
            let detail = if on {
                match &node.page_cache {
                    // LMDB and RocksDB: the files lose what they hold unsynced, at the cut, before
                    // the dying process can write or sync anything more (see page_cache).
                    Some(watch) => {
                        let lost = watch.cut_power(&mut |n| madsim::rand::random::<u64>() % n);
                        process::kill(&node.handle);
                        match lost {
                            Ok(lost) => lost.to_string(),
                            Err(e) => panic!("power_loss on {}: dropping its unsynced writes failed: {e}", node.name),
                        }
                    }
                    None => {
                        process::kill(&node.handle);
                        match node.data.locked().power_loss() {
                            0 => "every commit was synced".to_string(),
                            lost => format!("lost {lost} unsynced commits"),
                        }
                    }
                }
            } else {
                if let Some(watch) = &node.page_cache {
                    watch.restore_power();
                }
                process::restart(&node.handle);
                "power back".to_string()
            };
            let mut recorder = recorder.locked();
            let at_ms = recorder.now_ms();
            let phase = if on { FaultPhase::Start } else { FaultPhase::End };
            recorder.record(Event::Fault { at_ms, node: name, kind: FaultKind::PowerLoss, phase, detail });
        }
        return;
    }
    match fault.kind {
        FaultKind::PowerLoss => unreachable!("handled above"),
        FaultKind::BitRot if on => {
            let node = by_name(fault.target.get_ref());
            let share = fault.rate.unwrap_or(BIT_ROT_SHARE);
            detail = match &node.store_path {
                // LMDB and RocksDB: the bytes rot in the node's real files, damaged while its
                // process is down (a running one would go on serving from its caches).
                Some(path) => {
                    process::kill(&node.handle);
                    let rot = qs_node::store::rot::rot_files(path, share, &mut |n| madsim::rand::random::<usize>() % n);
                    process::restart(&node.handle);
                    match rot {
                        Ok(rot) => format!("stopped, {rot}, started again"),
                        Err(e) => panic!("bit_rot on {}: damaging its files failed: {e}", node.name),
                    }
                }
                // The memory engine: latent damage while it runs.
                None => {
                    let disk = node.data.locked().clone();
                    let keys = disk.kv_keys();
                    let count = ((keys.len() as f64 * share).ceil() as usize).clamp(1, keys.len().max(1));
                    let mut damaged = 0;
                    for _ in 0..count {
                        if keys.is_empty() {
                            break;
                        }
                        let key = &keys[madsim::rand::random::<usize>() % keys.len()];
                        damaged += usize::from(disk.corrupt_value(key));
                    }
                    format!("{damaged} stored values damaged")
                }
            };
        }
        FaultKind::BitRot => detail = "latent: the node must have noticed and healed".into(),
        FaultKind::Kill if on => process::kill(&by_name(fault.target.get_ref()).handle),
        FaultKind::Kill => process::restart(&by_name(fault.target.get_ref()).handle),
        FaultKind::Stop if on => by_name(fault.target.get_ref()).sigterm.notify_waiters(),
        FaultKind::Stop => process::restart(&by_name(fault.target.get_ref()).handle),
        FaultKind::Pause if on => process::pause(&by_name(fault.target.get_ref()).handle),
        FaultKind::Pause => process::resume(&by_name(fault.target.get_ref()).handle),
        FaultKind::Partition => network::partition(&by_name(fault.target.get_ref()).handle, on),
        FaultKind::PartitionIn => network::partition_in(&by_name(fault.target.get_ref()).handle, on),
        FaultKind::PartitionOut => network::partition_out(&by_name(fault.target.get_ref()).handle, on),
        FaultKind::Split => {
            let side_names = fault.group_with_target();
            let on_side = |n: &&SimNode| side_names.contains(&n.name);
            let side: Vec<&NodeHandle> = nodes.iter().filter(on_side).map(|n| &n.handle).collect();
            let rest: Vec<&NodeHandle> = nodes.iter().filter(|n| !on_side(n)).map(|n| &n.handle).collect();
            network::split(&side, &rest, on);
        }
        FaultKind::ClogLink => {
            let peer = fault.peer.as_ref().expect("validated peer");
            network::clog_link(&by_name(fault.target.get_ref()).handle, &by_name(peer.get_ref()).handle, on);
        }
        FaultKind::Latency => network::latency(if on { fault.latency } else { None }),
        FaultKind::Loss => network::loss(if on { fault.rate } else { None }),
        FaultKind::SlowDisk => by_name(fault.target.get_ref()).device.set_slow(if on { fault.model } else { None }),
        FaultKind::DiskError => {
            let errors = on.then(|| (fault.error.unwrap_or(crate::scenario::DiskError::Eio), fault.failing_ops()));
            by_name(fault.target.get_ref()).device.set_io_errors(errors);
        }
        FaultKind::Sigbus if on => {
            // The disk starts failing; the running process dies at its next unlucky read.
            by_name(fault.target.get_ref()).device.set_failing(true);
        }
        // The impostor is a client of its own, started and stopped by the world
        // (`impostor::Impostor`); the fault event marks when it tries.
        FaultKind::Impostor => {}
        // The operator is a client too (`membership::Operator`), started by the world.
        FaultKind::Membership => {}
        FaultKind::Oom | FaultKind::FaultPoint => {
            unreachable!("recorded kinds are refused in a scenario at load; the models and the node record their own")
        }
        FaultKind::Sigbus => {
            // Replace the disk: stop the crash loop, swap in an empty disk, start afresh.
            let node = by_name(fault.target.get_ref());
            process::kill(&node.handle);
            node.device.set_failing(false);
            *node.data.locked() = MemDisk::default();
            if let Some(path) = &node.store_path {
                // An open environment of the killed process keeps its unlinked files; the new
                // process creates fresh ones.
                let _ = std::fs::remove_dir_all(path);
            }
            process::restart(&node.handle);
            detail = "disk replaced".into();
        }
    }
    let mut recorder = recorder.locked();
    let at_ms = recorder.now_ms();
    let phase = if on { FaultPhase::Start } else { FaultPhase::End };
    recorder.record(Event::Fault { at_ms, node: fault.target.get_ref().clone(), kind: fault.kind, phase, detail });
}
