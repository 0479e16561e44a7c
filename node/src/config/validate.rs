//! Validation of a parsed configuration: every rule [`NodeConfig::parse`] enforces, each
//! refusal naming the field and what is allowed.

use super::*;

impl NodeConfig {
    #[expect(
        clippy::too_many_lines,
        reason = "134 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
    pub(super) fn validate(&self) -> Result<(), (&'static str, String)> {
        if !cfg!(any(madsim, qsim_harness)) && self.legacy != super::LegacyConfig::default() {
            return Err((
                "legacy",
                "turns on a planted bug, which only the simulator's harness builds have (`--cfg madsim`, or the \
                 `--cfg qsim_harness` qs-node that `./qsim real` builds): a real node never runs one. Remove the \
                 [legacy] section"
                    .to_string(),
            ));
        }
        if self.name.is_empty() || self.name.len() > 64 || self.name.chars().any(|c| c.is_whitespace()) {
            return Err(("name", "must be 1 to 64 characters with no whitespace".into()));
        }
        if self.storage.engine != EngineKind::Memory && self.storage.path.as_os_str().is_empty() {
            return Err(("storage.path", format!("is required for the {} engine", self.storage.engine)));
        }
        if let Some(bytes) = self.storage.memtable_bytes {
            if self.storage.engine != EngineKind::Rocksdb {
                return Err((
                    "storage.memtable_bytes",
                    format!("applies to rocksdb only, not {}", self.storage.engine),
                ));
            }
            if !(MEMTABLE_BYTES_MIN..=MEMTABLE_BYTES_MAX).contains(&bytes) {
                return Err((
                    "storage.memtable_bytes",
                    format!("{bytes} is out of range; allowed {MEMTABLE_BYTES_MIN} to {MEMTABLE_BYTES_MAX}"),
                ));
            }
        }
        self.validate_memory()?;
        self.connections.validate()?;
        if let Some(tls) = &self.tls {
            use crate::tls::{RELOAD_INTERVAL_MAX, RELOAD_INTERVAL_MIN};
            if !(RELOAD_INTERVAL_MIN..=RELOAD_INTERVAL_MAX).contains(&tls.reload_interval) {
                return Err((
                    "tls.reload_interval",
                    format!(
                        "{:?} is out of range; allowed {RELOAD_INTERVAL_MIN:?} to {RELOAD_INTERVAL_MAX:?}",
                        tls.reload_interval
                    ),
                ));
            }
        }
        let r = &self.replication;
        let sources = r.primaries.len() + r.secondaries.len();
        match self.role {
            Role::Replica if sources == 0 => {
                return Err(("replication.primaries", "a replica needs at least one source".into()));
            }
            Role::Replica if self.root.is_some() => {
                return Err(("root", "is only allowed with role = \"root\"".into()));
            }
            Role::Root if sources > 0 => {
                return Err(("replication.primaries", "the root has no sources; it is the top of the tree".into()));
            }
            Role::Root if self.root.is_none() => {
                return Err(("root", "role = \"root\" needs a [root] section (batch_window, producers)".into()));
            }
            _ => {}
        }
        if sources > SOURCES_MAX {
            return Err(("replication.primaries", format!("{sources} sources listed; at most {SOURCES_MAX}")));
        }
        let mut all: Vec<_> = r.primaries.iter().chain(&r.secondaries).collect();
        all.sort();
        if all.windows(2).any(|w| w[0] == w[1]) {
            return Err(("replication.secondaries", "a source is listed twice".into()));
        }
        if all.contains(&&self.listen.replication) {
            return Err(("replication.primaries", "lists this node's own replication address".into()));
        }
        if r.staleness_failover < Duration::from_millis(100) {
            return Err(("replication.staleness_failover", "must be at least 100ms".into()));
        }
        if r.reconnect_backoff_min.is_zero() || r.reconnect_backoff_min > r.reconnect_backoff_max {
            return Err((
                "replication.reconnect_backoff_min",
                "must be above zero and at most reconnect_backoff_max".into(),
            ));
        }
        if r.bootstraps_served_max == 0 {
            return Err(("replication.bootstraps_served_max", "must be at least 1".into()));
        }
        if !(SNAPSHOT_CHUNK_BYTES_MIN..=crate::store::snapshot::CHUNK_BYTES_MAX)
            .contains(&r.snapshot_chunk_bytes.as_u64())
        {
            return Err((
                "replication.snapshot_chunk_bytes",
                format!("must be 4 KiB to {}", bytesize::ByteSize(crate::store::snapshot::CHUNK_BYTES_MAX)),
            ));
        }
        if r.snapshot_timeout < Duration::from_millis(100) || r.snapshot_timeout > Duration::from_secs(3600) {
            return Err(("replication.snapshot_timeout", "must be 100ms to 1h".into()));
        }
        if r.apply_batch_entries_max == 0 || r.apply_batch_entries_max > 100_000 {
            return Err(("replication.apply_batch_entries_max", "must be 1 to 100000".into()));
        }
        if self.retention.gc_interval < Duration::from_millis(10) {
            return Err(("retention.gc_interval", "must be at least 10ms".into()));
        }
        if let Some(root) = &self.root {
            if root.batch_window.is_zero() || root.batch_window > Duration::from_secs(60) {
                return Err(("root.batch_window", "must be above zero and at most 60s".into()));
            }
            if root.heartbeat_interval < Duration::from_millis(10) {
                return Err(("root.heartbeat_interval", "must be at least 10ms".into()));
            }
            if root.producers.len() > PRODUCERS_MAX {
                return Err(("root.producers", format!("at most {PRODUCERS_MAX} producers")));
            }
            let mut tokens: Vec<&str> = root.producers.iter().map(|p| p.token.as_str()).collect();
            tokens.sort_unstable();
            if tokens.windows(2).any(|w| w[0] == w[1]) {
                return Err(("root.producers.token", "two producers share a token".into()));
            }
            for p in &root.producers {
                if p.token.len() < 8 {
                    return Err((
                        "root.producers.token",
                        format!("producer {}: token must be at least 8 characters", p.name),
                    ));
                }
                if p.prefixes.is_empty() || p.prefixes.iter().any(String::is_empty) {
                    return Err(("root.producers.prefixes", format!("producer {}: needs non-empty prefixes", p.name)));
                }
                if p.writes_per_s == 0 || p.burst == 0 {
                    return Err((
                        "root.producers.writes_per_s",
                        format!("producer {}: quota must be above zero", p.name),
                    ));
                }
            }
            validate_group(root, self.planted().raft_log_keep_zero_accepted)?;
        }
        Ok(())
    }

    /// The cache settings of `[storage]` and the `[memory]` budget.
    #[expect(
        clippy::too_many_lines,
        reason = "80 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
    fn validate_memory(&self) -> Result<(), (&'static str, String)> {
        let storage = &self.storage;
        let not_here = match storage.engine {
            EngineKind::Rocksdb => None,
            EngineKind::Lmdb => Some("LMDB reads through the OS page cache, whose size is the machine's free memory"),
            EngineKind::Memory => Some("the memory engine holds everything in memory and has no cache"),
        };
        for (field, value) in
            [("storage.cache_bytes", storage.cache_bytes), ("storage.block_bytes", storage.block_bytes)]
        {
            if let (Some(_), Some(why)) = (value, not_here) {
                return Err((field, format!("applies to rocksdb only, not {}: {why}", storage.engine)));
            }
        }
        if self.legacy.acknowledge_before_sync && storage.engine == EngineKind::Lmdb && storage.write_map == Some(true)
        {
            return Err((
                "legacy.acknowledge_before_sync",
                "needs storage.write_map off on lmdb: unsynced pages of a writable map are stores to memory, which \
                 the simulator's page cache cannot see (it sees pwrite), so a power loss could not drop them"
                    .to_string(),
            ));
        }
        if storage.direct_reads.is_some() && storage.engine != EngineKind::Rocksdb {
            return Err((
                "storage.direct_reads",
                format!("applies to rocksdb only, not {}: it is RocksDB's use_direct_reads", storage.engine),
            ));
        }
        for (field, value, flag) in [
            ("storage.read_ahead", storage.read_ahead, "MDB_NORDAHEAD"),
            ("storage.write_map", storage.write_map, "MDB_WRITEMAP"),
        ] {
            if value.is_some() && storage.engine != EngineKind::Lmdb {
                return Err((field, format!("applies to lmdb only, not {}: it is LMDB's {flag}", storage.engine)));
            }
        }
        let in_range = |field: &'static str, value: Option<ByteSize>, min: u64, max: u64| match value {
            Some(bytes) if !(min..=max).contains(&bytes.as_u64()) => Err((
                field,
                format!(
                    "{} ({bytes}) is out of range; allowed {} ({}) to {} ({})",
                    bytes.as_u64(),
                    min,
                    ByteSize(min),
                    max,
                    ByteSize(max)
                ),
            )),
            _ => Ok(()),
        };
        in_range("storage.cache_bytes", storage.cache_bytes, CACHE_BYTES_MIN, CACHE_BYTES_MAX)?;
        in_range("storage.block_bytes", storage.block_bytes, BLOCK_BYTES_MIN, BLOCK_BYTES_MAX)?;
        in_range("memory.limit_bytes", self.memory.limit_bytes, MEMORY_LIMIT_BYTES_MIN, MEMORY_LIMIT_BYTES_MAX)?;
        if storage.engine != EngineKind::Rocksdb {
            return Ok(());
        }
        let cache = storage.rocksdb_cache_bytes();
        let block = storage.block_bytes.map_or(ROCKSDB_BLOCK_BYTES_DEFAULT as u64, |b| b.as_u64());
        if block > cache {
            return Err((
                "storage.block_bytes",
                format!("{} is larger than the block cache ({}): no block would fit", ByteSize(block), ByteSize(cache)),
            ));
        }
        if let Some(limit) = self.memory.limit_bytes
            && cache >= limit.as_u64()
        {
            // The cache fills up to its capacity in normal operation: a node whose cache alone
            // reaches the limit would be restarted over and over.
            let (field, which) = match storage.cache_bytes {
                Some(_) => ("storage.cache_bytes", "storage.cache_bytes"),
                None => ("memory.limit_bytes", "the default storage.cache_bytes"),
            };
            return Err((
                field,
                format!(
                    "{which} ({}) is not below memory.limit_bytes ({limit}): the cache alone would reach the limit",
                    ByteSize(cache)
                ),
            ));
        }
        Ok(())
    }
}

/// A root group: 3 or 5 first voters and at most [`ROSTER_MAX`] members in all, with distinct
/// ids from 1, this node's among them. (An even group tolerates no more failures than the odd
/// one below it, and more members slow every commit; a group of one is a root without
/// `members`.)
fn validate_group(root: &super::RootConfig, planted_keep_zero: bool) -> Result<(), (&'static str, String)> {
    let first = root.first_voters().len();
    match (root.member_id, root.members.len()) {
        (None, 0) => return Ok(()),
        (Some(_), 0) => return Err(("root.member_id", "is set, but [[root.members]] lists no group".into())),
        (None, _) => return Err(("root.member_id", "must name this node's id among [[root.members]]".into())),
        (Some(_), n) if n > ROSTER_MAX => {
            return Err(("root.members", format!("lists {n} members; a roster holds at most {ROSTER_MAX}")));
        }
        (Some(_), _) if first == 3 || first == 5 => {}
        (Some(_), n) if n == first => {
            return Err(("root.members", format!("lists {n} members; a root group has 3 or 5")));
        }
        (Some(_), n) => {
            return Err((
                "root.members",
                format!("lists {first} members not marked standby (of {n}); a root group starts with 3 or 5"),
            ));
        }
    }
    if root.operator_token.as_deref().is_some_and(|token| token.len() < OPERATOR_TOKEN_BYTES_MIN) {
        return Err((
            "root.operator_token",
            format!("is shorter than {OPERATOR_TOKEN_BYTES_MIN} bytes: too easy to guess for what it allows"),
        ));
    }
    let mut ids: Vec<u64> = root.members.iter().map(|m| m.id).collect();
    ids.sort_unstable();
    if ids.first() == Some(&0) {
        return Err(("root.members.id", "ids start at 1".into()));
    }
    if let Some(pair) = ids.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(("root.members.id", format!("id {} is listed twice", pair[0])));
    }
    let me = root.member_id.expect("checked above");
    if root.member(me).is_none() {
        return Err(("root.member_id", format!("{me} is not among the members' ids {ids:?}")));
    }
    validate_raft_log(root, planted_keep_zero)
}

/// Most members a roster lists: 5 voters and 2 standing by to replace them.
const ROSTER_MAX: usize = 7;
/// Shortest `root.operator_token`.
const OPERATOR_TOKEN_BYTES_MIN: usize = 16;

/// Largest `root.raft_snapshot_entries` and `root.raft_log_keep_entries`. A member holds its
/// Raft log in memory (raft-rs's) as well as on disk: up to both settings' entries together
/// between two snapshots. A million entries is a hundred times the default interval (days of
/// a busy root's batches): past any useful bound, a larger figure is a unit mistake (and near
/// `u64::MAX` the index of the next snapshot would overflow).
const RAFT_LOG_ENTRIES_MAX: u64 = 1_000_000;

/// The root group's Raft log settings, as `root::group` (`compact_if_due`) and
/// `consensus::Member::compact` use them: every `raft_snapshot_entries` applied entries a
/// member snapshots at the entry it just applied and keeps the last `raft_log_keep_entries`
/// entries up to it. Any pair in range runs: a keep at or above the interval only means the log
/// holds more entries (up to both together), never that it is not compacted.
fn validate_raft_log(root: &super::RootConfig, planted_keep_zero: bool) -> Result<(), (&'static str, String)> {
    let max = RAFT_LOG_ENTRIES_MAX;
    let entries = root.raft_snapshot_entries;
    if !(1..=max).contains(&entries) {
        let why = if entries == 0 {
            "it is how many entries a member applies between two snapshots of its Raft log, and 0 is no interval"
        } else {
            "a member holds up to raft_snapshot_entries + raft_log_keep_entries Raft entries in memory, and past \
             the maximum that is no longer a bound"
        };
        return Err(("root.raft_snapshot_entries", format!("{entries} is out of range; allowed 1 to {max}: {why}")));
    }
    let keep = root.raft_log_keep_entries;
    // PLANTED BUG (legacy `raft_log_keep_zero_accepted`): 0 let through.
    let let_through = planted_keep_zero && keep == 0;
    if !((1..=max).contains(&keep) || let_through) {
        let why = if keep == 0 {
            "a compaction must keep at least the entry its snapshot is at, whose term raft-rs reads to append \
             the entries after it; 0 compacts that entry away too (the whole log, once all of it was applied), \
             and raft-rs panics appending the next entry (\"after 0 is out of range\")"
        } else {
            "a member holds up to raft_snapshot_entries + raft_log_keep_entries Raft entries in memory, and past \
             the maximum that is no longer a bound"
        };
        return Err(("root.raft_log_keep_entries", format!("{keep} is out of range; allowed 1 to {max}: {why}")));
    }
    Ok(())
}
