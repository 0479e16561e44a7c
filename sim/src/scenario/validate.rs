//! Validation: what `Scenario::load` checks before a scenario may run.

use std::path::Path;
use std::time::Duration;

use super::*;

/// Why a scenario may not inject `oom` or `fault_point`.
const NOT_INJECTED: &str = "oom and fault_point are recorded, not injected: oom by the memory model (give the scenario \
     [resources] with a memory limit its nodes outgrow), fault_point by the node (set [scenario] buggify = true)";

/// A refusal: the span of the offending value (for its line), the field, and the problem.
pub(super) type Refusal = (Option<std::ops::Range<usize>>, String, String);

/// The scenario field behind a field of a generated node configuration.
fn scenario_field(node_field: &str) -> &'static str {
    match node_field {
        "replication.staleness_failover" => "node.staleness_failover",
        "root.batch_window" => "node.batch_window",
        "root.heartbeat_interval" => "node.heartbeat_interval",
        "retention.keep_entries_min" => "node.retention_entries",
        "retention.gc_interval" => "node.gc_interval",
        field if field.starts_with("legacy.") => "legacy",
        _ => "node",
    }
}

impl Scenario {
    pub(super) fn validate(&self) -> Result<(), Refusal> {
        self.validate_scenario()?;
        // Every node's configuration, as the world will generate it, judged by the node itself:
        // a scenario the loader accepts is one every node accepts (the folder is never made).
        if let Err((node, e)) = super::nodes::generate(self, Path::new("/qsim-scratch-not-created")) {
            let (field, problem) = match &e {
                qs_node::config::ConfigError::Invalid { field, problem, .. } => {
                    (scenario_field(field), format!("node {node} refuses its `{field}`: {problem}"))
                }
                other => ("node", format!("node {node} refuses its generated configuration: {other}")),
            };
            return Err((None, field.to_string(), problem));
        }
        Ok(())
    }

    #[expect(
        clippy::too_many_lines,
        reason = "334 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
    fn validate_scenario(&self) -> Result<(), Refusal> {
        let bad = |span: Option<std::ops::Range<usize>>, field: &str, problem: String| {
            Err((span, field.to_string(), problem))
        };
        if self.scenario.name.is_empty() || self.scenario.name.contains(char::is_whitespace) {
            return bad(None, "scenario.name", "must be non-empty with no whitespace".into());
        }
        if self.scenario.duration.is_zero() || self.scenario.duration > DURATION_MAX {
            return bad(None, "scenario.duration", format!("must be above zero and at most {DURATION_MAX:?}"));
        }
        let topology = &self.topology;
        if !(1..=DATACENTERS_MAX).contains(&topology.datacenters) {
            return bad(None, "topology.datacenters", format!("must be 1 to {DATACENTERS_MAX}"));
        }
        if topology.cross_dc_latency > CROSS_DC_LATENCY_MAX {
            return bad(None, "topology.cross_dc_latency", format!("at most {CROSS_DC_LATENCY_MAX:?}"));
        }
        if topology.datacenters == 1 && !topology.cross_dc_latency.is_zero() {
            return bad(None, "topology.cross_dc_latency", "needs datacenters of 2 or more".into());
        }
        if !(super::TCP_WINDOW_MIN..=super::TCP_WINDOW_MAX).contains(&topology.tcp_window) {
            let (min, max) = (super::TCP_WINDOW_MIN, super::TCP_WINDOW_MAX);
            return bad(None, "topology.tcp_window", format!("must be from {min} to {max} (Linux's buffer maxima)"));
        }
        let legacy = &self.legacy;
        if topology.root_members == 1
            && (legacy.raft_acknowledge_before_commit
                || legacy.raft_apply_before_commit
                || legacy.raft_forget_vote
                || legacy.raft_snapshot_without_catch_up
                || legacy.raft_trust_claimed_member
                || legacy.raft_without_pre_vote
                || legacy.raft_stop_consensus_on_failure
                || legacy.raft_snapshot_first_configuration
                || legacy.raft_catch_up_without_progress_deadline
                || legacy.raft_serve_while_paused
                || legacy.raft_catch_up_skips_quota_ledger
                || legacy.raft_send_stale_backlog)
        {
            return bad(
                None,
                "legacy",
                "the raft_* planted bugs live in a root group: set topology.root_members".into(),
            );
        }
        if ![1, 3, 5].contains(&topology.root_members) {
            return bad(None, "topology.root_members", "must be 1 (a root of one), 3 or 5 (a root group)".into());
        }
        if topology.root_standby > 0 && (topology.root_members == 1 || topology.root_standby > 2) {
            return bad(
                None,
                "topology.root_standby",
                "0 to 2, and only beside a root group (root_members 3 or 5)".into(),
            );
        }
        // A standby member never added stays empty, and the run could never converge.
        for (n, name) in topology.roster_names().iter().enumerate().skip(topology.root_members) {
            let id = n as u64 + 1;
            let added =
                self.fault.iter().any(|f| f.get_ref().kind == FaultKind::Membership && f.get_ref().add.contains(&id));
            if !added {
                let problem = format!("{name} (member {id}) stands by but no membership fault adds it");
                return bad(None, "topology.root_standby", problem);
            }
        }
        let tiers = &self.topology.tiers;
        if tiers.is_empty() || tiers.len() > TIERS_MAX {
            return bad(None, "topology.tiers", format!("needs 1 to {TIERS_MAX} tiers below the root"));
        }
        let mut parents = topology.root_members;
        let mut total = topology.root_members;
        let mut tier_names = vec!["root".to_string()];
        for tier in tiers {
            let (span, t) = (Some(tier.span()), tier.get_ref());
            if t.name.is_empty() || !t.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return bad(span, "topology.tiers.name", format!("{:?} must be letters, digits or _", t.name));
            }
            if tier_names.contains(&t.name) {
                return bad(span, "topology.tiers.name", format!("{:?} is used twice", t.name));
            }
            tier_names.push(t.name.clone());
            if t.count == 0 {
                return bad(span, "topology.tiers.count", "must be at least 1".into());
            }
            if t.primaries == 0 || t.primaries + t.secondaries > parents {
                return bad(
                    span,
                    "topology.tiers.primaries",
                    format!(
                        "{} primaries + {} secondaries, but the tier above has {parents} nodes",
                        t.primaries, t.secondaries
                    ),
                );
            }
            parents = t.count;
            total += t.count;
            if total > NODES_MAX {
                return bad(
                    span,
                    "topology.tiers.count",
                    format!("{total} nodes up to this tier; a scenario runs at most {NODES_MAX}"),
                );
            }
        }
        let n = &self.node;
        if n.batch_window.is_zero() || n.heartbeat_interval < Duration::from_millis(10) {
            return bad(
                None,
                "node.batch_window",
                "batch_window must be above zero, heartbeat_interval at least 10ms".into(),
            );
        }
        let caps = [
            ("node.replication_connections_max", n.replication_connections_max),
            ("node.memcached_connections_max", n.memcached_connections_max),
        ];
        for (field, max) in caps {
            use qs_node::connections::settings::{CONNECTIONS_MAX_MAX, CONNECTIONS_MAX_MIN};
            let Some(max) = max else { continue };
            if !(CONNECTIONS_MAX_MIN..=CONNECTIONS_MAX_MAX).contains(&max) {
                let problem = format!("{max} is out of range; allowed {CONNECTIONS_MAX_MIN} to {CONNECTIONS_MAX_MAX}");
                return bad(None, field, problem);
            }
        }
        // The RocksDB settings are checked against the node's ranges whatever the engine: the
        // nodes ignore them on another one, but `--engine rocksdb` would hand them over.
        let rocksdb = {
            use qs_node::config::{
                BLOCK_BYTES_MAX, BLOCK_BYTES_MIN, CACHE_BYTES_MAX, CACHE_BYTES_MIN, MEMTABLE_BYTES_MAX,
                MEMTABLE_BYTES_MIN,
            };
            [
                (
                    "node.rocksdb_memtable_bytes",
                    n.rocksdb_memtable_bytes,
                    MEMTABLE_BYTES_MIN as u64,
                    MEMTABLE_BYTES_MAX as u64,
                ),
                ("node.rocksdb_cache_bytes", n.rocksdb_cache_bytes, CACHE_BYTES_MIN, CACHE_BYTES_MAX),
                ("node.rocksdb_block_bytes", n.rocksdb_block_bytes, BLOCK_BYTES_MIN, BLOCK_BYTES_MAX),
            ]
        };
        for (field, bytes, min, max) in rocksdb {
            let Some(bytes) = bytes else { continue };
            if !(min..=max).contains(&bytes.as_u64()) {
                let problem = format!(
                    "{} ({bytes}) is out of range; allowed {min} ({}) to {max} ({})",
                    bytes.as_u64(),
                    bytesize::ByteSize(min),
                    bytesize::ByteSize(max)
                );
                return bad(None, field, problem);
            }
        }
        if n.raft_snapshot_entries == 0 {
            return bad(None, "node.raft_snapshot_entries", "must be at least 1".into());
        }
        for workload in &self.workload {
            let (rate_per_s, keys, value_bytes) = match workload {
                Workload::Writer { rate_per_s, keys, value_bytes, burst, preload_rate_per_s, modes } => {
                    if let Some((field, problem)) = modes.problem() {
                        return bad(None, field, problem);
                    }
                    if preload_rate_per_s.is_some_and(|r| !(r > 0.0 && r <= 100_000.0)) {
                        return bad(None, "workload.preload_rate_per_s", "must be above 0 and at most 100000".into());
                    }
                    if let Some(b) = burst
                        && (b.every < Duration::from_secs(1)
                            || b.length.is_zero()
                            || b.length >= b.every
                            || !(b.rate_per_s > 0.0 && b.rate_per_s <= 10_000.0))
                    {
                        return bad(
                            None,
                            "workload.burst",
                            "a burst needs every >= 1s, 0 < length < every and 0 < rate_per_s <= 10000".into(),
                        );
                    }
                    (rate_per_s, keys, value_bytes)
                }
                Workload::Reader { rate_per_s, skew, hot_keys } => {
                    if *hot_keys == Some(0) {
                        return bad(None, "workload.hot_keys", "must be at least 1".into());
                    }
                    if !(*rate_per_s > 0.0 && *rate_per_s <= 10_000.0 && (0.0..=10.0).contains(skew)) {
                        return bad(
                            None,
                            "workload",
                            "a reader needs 0 < rate_per_s <= 10000 and 0 <= skew <= 10".into(),
                        );
                    }
                    continue;
                }
            };
            if !(*rate_per_s > 0.0 && *rate_per_s <= 10_000.0) || *keys == 0 || value_bytes.min > value_bytes.max {
                return bad(None, "workload", "a writer needs 0 < rate_per_s <= 10000, keys >= 1, min <= max".into());
            }
            if value_bytes.max > qs_node::limits::VALUE_BYTES_MAX {
                return bad(
                    None,
                    "workload.value_bytes.max",
                    format!("over VALUE_BYTES_MAX ({})", qs_node::limits::VALUE_BYTES_MAX),
                );
            }
        }
        let census = &self.census;
        if census.rate_per_s.is_some_and(|rate| !(rate > 0.0 && rate <= super::Census::RATE_MAX)) {
            let problem = format!("must be above 0 and at most {}", super::Census::RATE_MAX);
            return bad(None, "census.rate_per_s", problem);
        }
        if !(1..=super::Census::SESSIONS_MAX).contains(&census.sessions) {
            return bad(None, "census.sessions", format!("must be 1 to {}", super::Census::SESSIONS_MAX));
        }
        if census.value_bytes_max.0 > qs_node::limits::VALUE_BYTES_MAX as u64 {
            let problem = format!("at most VALUE_BYTES_MAX ({})", qs_node::limits::VALUE_BYTES_MAX);
            return bad(None, "census.value_bytes_max", problem);
        }
        if let Err(problem) = self.clocks.validate(&self.node_names()) {
            return bad(None, "clocks", problem);
        }
        if self.fault.len() > FAULTS_MAX {
            return bad(None, "fault", format!("at most {FAULTS_MAX} faults"));
        }
        let names = self.node_names();
        for fault in &self.fault {
            let (span, f) = (Some(fault.span()), fault.get_ref());
            if !f.kind.injectable() {
                return bad(span, "fault.kind", NOT_INJECTED.into());
            }
            if f.during.is_some() && !matches!(f.kind, FaultKind::Kill | FaultKind::Pause | FaultKind::Partition) {
                let problem = format!("{} faults cannot wait for a bootstrap: only kill, pause and partition", f.kind);
                return bad(span, "fault.during", problem);
            }
            if f.kind.is_network_wide() {
                if f.target.get_ref() != "network" {
                    let problem = format!("{:?} faults act on the whole network: write target = \"network\"", f.kind);
                    return bad(Some(f.target.span()), "fault.target", problem);
                }
            } else if f.target.get_ref() == super::LEADER {
                if self.topology.root_members == 1 {
                    let problem =
                        "\"leader\" names a root group's leader; this root is one process (topology.root_members = 1)";
                    return bad(Some(f.target.span()), "fault.target", problem.into());
                }
                if f.during.is_some() || f.kind == FaultKind::BitRot {
                    let problem = format!("{} faults on \"leader\" are not supported: name the member", f.kind);
                    return bad(Some(f.target.span()), "fault.target", problem);
                }
            } else if !names.contains(f.target.get_ref()) {
                let problem = format!("{:?} is not a node; nodes are {}", f.target.get_ref(), names.join(", "));
                return bad(Some(f.target.span()), "fault.target", problem);
            }
            let needs = |field: &str, present: bool| -> Result<(), Refusal> {
                if present {
                    Ok(())
                } else {
                    bad(span.clone(), &format!("fault.{field}"), format!("a {:?} fault needs `{field}`", f.kind))
                }
            };
            match f.kind {
                FaultKind::ClogLink => {
                    needs("peer", f.peer.is_some())?;
                    let peer = f.peer.as_ref().expect("checked");
                    if !names.contains(peer.get_ref()) || peer.get_ref() == f.target.get_ref() {
                        let problem =
                            format!("{:?} must be another node; nodes are {}", peer.get_ref(), names.join(", "));
                        return bad(Some(peer.span()), "fault.peer", problem);
                    }
                }
                FaultKind::BitRot => {
                    if crate::trace::is_root(f.target.get_ref()) && topology.root_members == 1 {
                        let problem = "bit_rot damages a store that heals from a copy of another's: a root of one has \
                                       none to copy (a root group's members heal from their peers)";
                        return bad(Some(f.target.span()), "fault.target", problem.into());
                    }
                    if f.rate.is_some_and(|r| !(r > 0.0 && r <= 1.0)) {
                        return bad(span, "fault.rate", "a share of the stored values: above 0, at most 1".into());
                    }
                }
                FaultKind::PowerLoss => {
                    if let Some(stranger) = f.group.iter().find(|n| !names.contains(n)) {
                        return bad(span, "fault.group", format!("{stranger:?} is not a node"));
                    }
                }
                FaultKind::Split => {
                    if let Some(stranger) = f.group.iter().find(|n| !names.contains(n)) {
                        return bad(span, "fault.group", format!("{stranger:?} is not a node"));
                    }
                    if f.group_with_target().len() >= names.len() {
                        return bad(span, "fault.group", "a split needs nodes on both sides".into());
                    }
                }
                FaultKind::SlowDisk => needs("model", f.model.is_some())?,
                FaultKind::DiskError => {
                    let error = f.error.unwrap_or(DiskError::Eio);
                    if let Some(op) = f.ops.iter().find(|op| !op.fails_with(error)) {
                        return bad(
                            span,
                            "fault.ops",
                            format!(
                                "a disk answering {} still reads: `{}` fails only with eio",
                                error.as_str(),
                                op.as_str()
                            ),
                        );
                    }
                }
                FaultKind::Impostor => self.check_impostor(span.clone(), f, &names)?,
                FaultKind::Membership => self.check_membership(span.clone(), f)?,
                FaultKind::Latency => {
                    needs("latency", f.latency.is_some_and(|l| !l.is_zero() && l <= Duration::from_secs(10)))?
                }
                FaultKind::Loss => needs("rate", f.rate.is_some_and(|r| r > 0.0 && r < 1.0))?,
                _ => {}
            }
            if f.kind != FaultKind::Impostor && f.credentials.is_some() {
                return bad(span, "fault.credentials", format!("`credentials` are an impostor's, not a {}'s", f.kind));
            }
            if f.kind != FaultKind::Membership && (!f.add.is_empty() || !f.remove.is_empty()) {
                return bad(
                    span,
                    "fault.add",
                    format!("`add` and `remove` are a membership change's, not a {}'s", f.kind),
                );
            }
            if f.kind != FaultKind::DiskError && (f.error.is_some() || !f.ops.is_empty()) {
                return bad(span, "fault.error", format!("`error` and `ops` are a disk_error's, not a {}'s", f.kind));
            }
            if f.at >= self.scenario.duration {
                return bad(span, "fault.at", "must fall inside the scenario's duration".into());
            }
            if f.duration.is_zero() {
                return bad(span, "fault.duration", "must be above zero".into());
            }
        }
        if let Some(swarm) = &self.swarm {
            let problem = if swarm.kinds.is_empty() {
                Some("kinds must name at least one fault kind")
            } else if swarm.kinds.iter().any(|k| !k.injectable()) {
                Some(NOT_INJECTED)
            } else if swarm.kinds.contains(&FaultKind::Membership) {
                Some("membership changes are written out, not drawn: name what they add and remove in a [[fault]]")
            } else if swarm.kinds.contains(&FaultKind::Impostor) {
                Some("impostor faults are written out, not drawn: name their credentials and peer in a [[fault]]")
            } else if swarm.count_min > swarm.count_max || swarm.count_max > FAULTS_MAX {
                Some("needs count_min <= count_max <= 1000")
            } else if swarm.duration_min.is_zero() || swarm.duration_min > swarm.duration_max {
                Some("needs 0 < duration_min <= duration_max")
            } else if swarm.related && !swarm.kinds.iter().any(|k| super::swarm::OUTAGE_KINDS.contains(k)) {
                Some("related draws outages: kinds must name kill, stop, pause, partition or power_loss")
            } else {
                None
            };
            if let Some(problem) = problem {
                return bad(None, "swarm", problem.into());
            }
        }
        if let Some(resources) = &self.resources {
            if self.nominal_bytes() == 0 {
                return bad(None, "resources", "the models need a writer: there is no data to model".into());
            }
            if let Some((field, problem)) = resources.problem(self.nominal_bytes()) {
                return bad(None, field, problem);
            }
        }
        if !(SAMPLE_INTERVAL_MIN..=SAMPLE_INTERVAL_MAX).contains(&self.checks.sample_interval) {
            return bad(
                None,
                "checks.sample_interval",
                format!("must be {SAMPLE_INTERVAL_MIN:?} to {SAMPLE_INTERVAL_MAX:?}"),
            );
        }
        if self.checks.trace_nodes_per_tier == 0 {
            return bad(None, "checks.trace_nodes_per_tier", "must be at least 1".into());
        }
        if self.checks.converge_within.is_zero() || self.checks.lag_max.is_zero() {
            return bad(None, "checks", "lag_max and converge_within must be above zero".into());
        }
        Ok(())
    }
}

impl Scenario {
    /// An `impostor` fault: aimed at a root group member (or its leader) over TLS, with the
    /// certificate of another node when it steals one.
    /// A membership change: asked of a member (or `leader`), of ids in the roster, adding or
    /// removing at least one; the swarm never draws one.
    fn check_membership(&self, span: Option<std::ops::Range<usize>>, f: &Fault) -> Result<(), Refusal> {
        let bad = |field: &str, problem: String| Err((span.clone(), field.to_string(), problem));
        if self.topology.root_members == 1 {
            return bad("fault.kind", "a membership change is a root group's: set topology.root_members".into());
        }
        let roster = self.topology.roster_names();
        let target = f.target.get_ref();
        if target != super::LEADER && !roster.contains(target) {
            let problem = format!("{target:?} is not a root group member: the operator asks one (or \"leader\")");
            return Err((Some(f.target.span()), "fault.target".into(), problem));
        }
        if f.add.is_empty() && f.remove.is_empty() {
            return bad("fault.add", "a membership change adds or removes at least one member".into());
        }
        if let Some(id) = f.add.iter().chain(&f.remove).find(|&&id| id == 0 || id as usize > roster.len()) {
            return bad("fault.add", format!("member {id} is not in the roster (ids 1 to {})", roster.len()));
        }
        Ok(())
    }

    fn check_impostor(&self, span: Option<std::ops::Range<usize>>, f: &Fault, names: &[String]) -> Result<(), Refusal> {
        let bad = |span: Option<std::ops::Range<usize>>, field: &str, problem: String| {
            Err((span, field.to_string(), problem))
        };
        if self.topology.root_members == 1 {
            return bad(span, "fault.kind", "an impostor claims a root group member: set topology.root_members".into());
        }
        let target = f.target.get_ref();
        if target != super::LEADER && !self.topology.root_names().contains(target) {
            let problem = format!("{target:?} is not a root group member: an impostor dials one (or \"leader\")");
            return bad(Some(f.target.span()), "fault.target", problem);
        }
        if !self.node.tls && f.credentials.unwrap_or_default() != Credentials::Plaintext {
            let problem = "without node.tls the nodes take no certificates: only credentials = \"plaintext\" applies";
            return bad(span, "fault.credentials", problem.into());
        }
        match (f.credentials.unwrap_or_default(), &f.peer) {
            (Credentials::Stolen, None) => {
                bad(span, "fault.peer", "a stolen certificate is some node's: name it in `peer`".into())
            }
            (Credentials::Stolen, Some(peer)) if !names.contains(peer.get_ref()) => {
                bad(Some(peer.span()), "fault.peer", format!("{:?} is not a node", peer.get_ref()))
            }
            (Credentials::Stolen, Some(peer)) if self.topology.root_names().contains(peer.get_ref()) => {
                let problem = "a member's own certificate is a member's: steal a replica's";
                bad(Some(peer.span()), "fault.peer", problem.into())
            }
            (Credentials::Stolen, Some(_)) => Ok(()),
            (_, Some(peer)) => {
                bad(Some(peer.span()), "fault.peer", "only stolen credentials name the node they came from".into())
            }
            (_, None) => Ok(()),
        }
    }
}
