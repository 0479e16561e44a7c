//! Each node's configuration as the simulator generates it from a scenario: addresses, sources
//! (round robin over the tier above, relays across data centers), the `[node]` settings, the
//! planted bugs — built as the node's own typed [`NodeConfig`] values, never as text. Compiled in
//! both builds, so `Scenario::load` can have the node's own validation judge every generated
//! configuration: a scenario the loader accepts is one every node accepts.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;

use std::collections::BTreeSet;

use qs_node::EngineKind;
use qs_node::config::{
    ConfigError, ListenConfig, MemberConfig, MemoryConfig, NodeConfig, ProducerConfig, ReplicationConfig,
    RetentionConfig, Role, RootConfig, StorageConfig,
};
use qs_node::connections::ConnectionsConfig;
use qs_node::tls::TlsConfig;

use super::{NodeSettings, Scenario};

pub const DATABASE_ID: &str = "5157534d-0000-0000-0000-000000000051";

/// [`DATABASE_ID`], parsed: every node's `database_id`, and what a node's status must name.
pub fn database_id() -> qs_node::DatabaseId {
    DATABASE_ID.parse().expect("DATABASE_ID is a database id")
}
pub const REPLICATION_PORT: u16 = 7000;
pub const MEMCACHED_PORT: u16 = 11211;
pub const HTTP_PORT: u16 = 8000;
/// The bearer token of the simulated writers, the root's one producer.
pub const PRODUCER_TOKEN: &str = "qsim-producer-token";
/// The root group members' `operator_token`: what the `membership` fault's operator carries.
pub const OPERATOR_TOKEN: &str = "qsim-operator-token";
/// The producer's one prefix: every writer key starts with it (`cfg<w>:<n>`); a key outside it
/// is refused (403).
pub const KEY_PREFIX: &str = "cfg";
/// RocksDB memtable per column family in the simulator: at the workloads' few KB/s per node
/// a memtable fills in tens of simulated seconds, so flushes and level-0 compactions run.
pub const SIM_ROCKSDB_MEMTABLE_BYTES: usize = 128 << 10;
/// First relay port (see `crate::links`).
pub const RELAY_PORT_BASE: u16 = 20_000;

/// The relay port on a source's host for the downstream node at `position` in topology order.
pub fn relay_port(position: usize) -> u16 {
    let port = RELAY_PORT_BASE as usize + position;
    assert!(port <= usize::from(u16::MAX), "relay port for topology position {position}: above {}", u16::MAX);
    port as u16
}

// The address plan. Node `n` (from 0) of tier `t` (0 is the root's) is `10.B.t.L` with
// `B = n / 255` and `L = n % 255 + 1`: a tier of up to 255 nodes sits in `10.0.t.0/24`, and
// larger tiers take one block `B` of 255 more at a time, so a small tree's addresses (and its
// traces) are those of every earlier qsim. Clients use the third octets no tier can have:
// readers `10.B.254.L` (numbered like nodes), the producer `10.0.255.1`, the impostors
// `10.0.255.2`, the census `10.0.255.3`.

/// Hosts in one block of the address plan (last octets 1..=255).
const BLOCK_HOSTS: usize = 255;
/// Most hosts of one kind (nodes of one tier, or readers) the address plan can number.
pub const ADDRESSES_PER_TIER: usize = BLOCK_HOSTS * 256;
/// The third octet of the readers' hosts.
const READERS_OCTET: u8 = 254;

/// The `n`th host (from 0) of the plan's row `row` (a tier, or the readers): `10.B.row.L`.
fn numbered(row: u8, n: usize) -> IpAddr {
    assert!(n < ADDRESSES_PER_TIER, "host {n} of row {row}: the address plan numbers {ADDRESSES_PER_TIER}");
    IpAddr::V4(Ipv4Addr::new(10, (n / BLOCK_HOSTS) as u8, row, (n % BLOCK_HOSTS + 1) as u8))
}

/// Node `n` (from 0) of tier `tier` (0: the root or its group's members).
pub fn ip(tier: usize, n: usize) -> IpAddr {
    assert!(tier <= super::TIERS_MAX, "tier {tier}: at most {} below the root", super::TIERS_MAX);
    numbered(tier as u8, n)
}

/// The host of the reader on the `n`th edge (from 0) that has one.
pub fn reader_ip(n: usize) -> IpAddr {
    numbered(READERS_OCTET, n)
}

/// The writers' one producer host (the census's root session runs there too).
pub const PRODUCER_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 255, 1));
/// The census's edge sessions' host.
pub const CENSUS_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 255, 3));

/// One node as the world starts it.
#[derive(Debug)]
pub struct Planned {
    pub config: NodeConfig,
    pub ip: IpAddr,
    /// Relay ports this node's host serves for downstream replicas in other data centers.
    pub relays: Vec<u16>,
}

/// Where the run's certificates live: `<scratch>/tls`, written by `world::certificates`.
pub fn tls_dir(scratch: &Path) -> std::path::PathBuf {
    scratch.join("tls")
}

/// A node's `[tls]`: its certificate and key `<name>.pem`/`.key` and the run's CA `ca.pem`,
/// read again at the node's default interval.
pub fn tls_config(scratch: &Path, name: &str) -> TlsConfig {
    let dir = tls_dir(scratch);
    TlsConfig {
        certificate: dir.join(format!("{name}.pem")),
        key: dir.join(format!("{name}.key")),
        ca: dir.join("ca.pem"),
        reload_interval: qs_node::tls::RELOAD_INTERVAL_DEFAULT,
        https: false,
    }
}

/// Each node's configuration, in topology order (root first). `scratch` holds the nodes'
/// files outside the store (snapshot exports and imports).
pub fn configs(scenario: &Scenario, scratch: &Path) -> Vec<Planned> {
    generate(scenario, scratch).expect("a loaded scenario's node configurations are valid (checked at load)")
}

/// The nodes' configurations, built as the node's own typed values and each validated by the
/// node's own rules ([`NodeConfig::validated`]); the first one the node refuses, with its name.
#[expect(
    clippy::too_many_lines,
    reason = "138 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub fn generate(scenario: &Scenario, scratch: &Path) -> Result<Vec<Planned>, (String, ConfigError)> {
    let settings = &scenario.node;
    let engine = scenario.engine();
    let listen = |ip: IpAddr| ListenConfig {
        replication: SocketAddr::new(ip, REPLICATION_PORT),
        memcached: SocketAddr::new(ip, MEMCACHED_PORT),
        http: SocketAddr::new(ip, HTTP_PORT),
    };
    let storage = |name: &str| {
        let mut storage = StorageConfig::new(engine, scratch.join(name).join("store"));
        match engine {
            // RocksDB's default 64 MiB memtables would not fill within a simulated run, so
            // nothing would be flushed or compacted; small ones make both happen every few
            // simulated seconds.
            EngineKind::Rocksdb => {
                let memtable = settings.rocksdb_memtable_bytes.map(|b| b.as_u64() as usize);
                storage.memtable_bytes = Some(memtable.unwrap_or(SIM_ROCKSDB_MEMTABLE_BYTES));
                storage.cache_bytes = settings.rocksdb_cache_bytes;
                storage.block_bytes = settings.rocksdb_block_bytes;
            }
            EngineKind::Lmdb if settings.lmdb_write_map => storage.write_map = Some(true),
            EngineKind::Lmdb | EngineKind::Memory => {}
        }
        if let Some(scrub) = settings.scrub_interval {
            storage.scrub_interval = scrub;
        }
        storage
    };
    let replication = || {
        // Every node's staleness_failover, the root group's members' too: a member judges itself
        // behind its group by its newest entry's age against its own (what it tells its
        // replicas), so a member left at the default would still say "healthy" long after the
        // replicas below it went stale, and the tier below would move instead of waiting.
        let mut replication =
            ReplicationConfig { staleness_failover: settings.staleness_failover, ..ReplicationConfig::default() };
        if let Some(bytes) = settings.snapshot_chunk_bytes {
            replication.snapshot_chunk_bytes = bytes;
        }
        if let Some(entries) = settings.apply_batch_entries_max {
            replication.apply_batch_entries_max = entries;
        }
        if let Some(min) = settings.reconnect_backoff_min {
            replication.reconnect_backoff_min = min;
        }
        if let Some(max) = settings.reconnect_backoff_max {
            replication.reconnect_backoff_max = max;
        }
        if let Some(bootstraps) = settings.bootstraps_served_max {
            replication.bootstraps_served_max = bootstraps;
        }
        replication
    };
    let node = |name: String, role: Role, ip: IpAddr, replication: ReplicationConfig, root: Option<RootConfig>| {
        let tls = settings.tls.then(|| tls_config(scratch, &name));
        NodeConfig {
            storage: storage(&name),
            name,
            role,
            database_id: database_id(),
            listen: listen(ip),
            replication,
            retention: RetentionConfig {
                keep_entries_min: Some(settings.retention_entries),
                keep_age: settings.retention_age,
                gc_interval: settings.gc_interval,
            },
            root,
            memory: MemoryConfig::default(),
            connections: connections(settings),
            tls,
            // The scenario's planted bugs, every switch as the node reads it.
            legacy: scenario.legacy.clone(),
        }
    };
    let quota = u32::try_from(producer_quota(scenario)).unwrap_or(u32::MAX);
    let burst = u32::try_from(producer_burst(scenario)).unwrap_or(u32::MAX);
    let topology = &scenario.topology;
    // A root group's members, at 10.0.0.1, .2, ...; each lists them all, the standby ones last.
    let members: Vec<MemberConfig> = if topology.root_members > 1 {
        (0..topology.root_members + topology.root_standby)
            .map(|n| MemberConfig {
                id: n as u64 + 1,
                replication: listen(ip(0, n)).replication,
                http: listen(ip(0, n)).http,
                standby: n >= topology.root_members,
            })
            .collect()
    } else {
        Vec::new()
    };
    let root = RootConfig {
        batch_window: settings.batch_window,
        heartbeat_interval: settings.heartbeat_interval,
        raft_snapshot_entries: settings.raft_snapshot_entries,
        raft_log_keep_entries: settings.raft_log_keep_entries,
        producers: vec![ProducerConfig {
            name: "qsim".to_string(),
            token: PRODUCER_TOKEN.to_string(),
            prefixes: vec![KEY_PREFIX.to_string(), crate::workload::census::CENSUS_PREFIX.to_string()],
            writes_per_s: quota,
            burst,
        }],
        operator_token: (topology.root_members > 1).then(|| OPERATOR_TOKEN.to_string()),
        ..RootConfig::default()
    };
    let mut out = Vec::new();
    for (n, name) in topology.roster_names().into_iter().enumerate() {
        let root = RootConfig {
            member_id: (!members.is_empty()).then_some(n as u64 + 1),
            members: members.clone(),
            ..root.clone()
        };
        out.push((node(name, Role::Root, ip(0, n), replication(), Some(root)), ip(0, n)));
    }
    let relayed = topology.datacenters > 1 && !topology.cross_dc_latency.is_zero();
    // Per node in topology order, the relay ports its host serves.
    let mut relays: Vec<BTreeSet<u16>> = vec![BTreeSet::new(); out.len()];
    // (address, data center, position) of each node of the tier above: the root's first
    // voters first, all in data center 0 (a standby member is no replica's configured source).
    let mut parents: Vec<(IpAddr, usize, usize)> =
        (0..topology.root_members.max(1)).map(|n| (ip(0, n), 0, n)).collect();
    for (t, tier) in topology.tiers.iter().enumerate() {
        let tier = tier.get_ref();
        let mut this_tier = Vec::new();
        for n in 0..tier.count {
            let node_ip = ip(t + 1, n);
            let position = out.len();
            let dc = topology.datacenter(n);
            relays.push(BTreeSet::new());
            // Round robin over the tier above: primaries first, then secondaries. A source in
            // another data center is reached through its relay for this node.
            let mut pick = |k: usize| {
                let (source_ip, source_dc, source_position) = parents[(n + k) % parents.len()];
                if relayed && source_dc != dc {
                    let port = relay_port(position);
                    relays[source_position].insert(port);
                    SocketAddr::new(source_ip, port)
                } else {
                    SocketAddr::new(source_ip, REPLICATION_PORT)
                }
            };
            let mut replication = replication();
            replication.primaries = (0..tier.primaries).map(&mut pick).collect();
            replication.secondaries = (tier.primaries..tier.primaries + tier.secondaries).map(&mut pick).collect();
            let name = format!("{}-{}", tier.name, n + 1);
            out.push((node(name, Role::Replica, node_ip, replication, None), node_ip));
            this_tier.push((node_ip, dc, position));
        }
        parents = this_tier;
    }
    out.into_iter()
        .zip(relays)
        .map(|((config, ip), relays)| {
            let name = config.name.clone();
            let config = config.validated("generated node configuration").map_err(|e| (name, e))?;
            Ok(Planned { config, ip, relays: relays.into_iter().collect() })
        })
        .collect()
}

/// Each replica's configured sources by node name (primaries first, then secondaries), read
/// from the configurations [`generate`] makes, so it can never disagree with what the nodes are
/// given. Empty for a scenario its nodes refuse (never one `Scenario::load` accepted).
pub fn source_names(scenario: &Scenario) -> std::collections::BTreeMap<String, Vec<String>> {
    let Ok(planned) = generate(scenario, Path::new("/qsim-scratch-not-created")) else {
        return Default::default();
    };
    let names: std::collections::BTreeMap<IpAddr, String> =
        planned.iter().map(|p| (p.ip, p.config.name.clone())).collect();
    planned
        .iter()
        .filter(|p| p.config.role == Role::Replica)
        .map(|p| {
            let mine = p.config.sources().iter().filter_map(|a| names.get(&a.ip()).cloned()).collect();
            (p.config.name.clone(), mine)
        })
        .collect()
}

/// Operations a second of the producer's default quota per operation a second its writers may
/// offer at their peak: generous, so a correct token bucket never throttles a run, while one
/// that never refilled would throttle every run after its first second.
pub const QUOTA_HEADROOM: f64 = 4.0;
/// The least default quota, in operations a second (a slow writer's Poisson bursts pass).
pub const QUOTA_MIN_PER_S: f64 = 100.0;

/// The writers' shared producer's quota in operations a second (and its burst: one second's
/// worth). Producers run under a quota, as the example configuration's do: by default
/// [`QUOTA_HEADROOM`] times the writers' peak offered operations a second (the highest of their
/// rate, burst rate and preload rate, times the most operations a request may carry — a swarm
/// writer's drawn batches included), at least [`QUOTA_MIN_PER_S`]; the sum of the writers'
/// `modes.quota_per_s` when any sets one (a quota below the offered rate, to exercise 429s);
/// none to speak of with `[node] producer_quota = false`.
/// The writers' shared producer's burst: the sum of the writers' `modes.quota_burst` when any
/// sets one (the others counting one second of their quota), else one second of
/// [`producer_quota`].
pub fn producer_burst(scenario: &Scenario) -> u64 {
    let writers = scenario.workload.iter().filter_map(|w| match w {
        super::Workload::Writer { modes, .. } => Some(modes),
        _ => None,
    });
    let bursts: Vec<f64> = writers.clone().filter_map(|m| m.quota_burst).collect();
    if bursts.is_empty() {
        return producer_quota(scenario);
    }
    writers.map(|m| m.quota_burst.or(m.quota_per_s).unwrap_or(0.0)).sum::<f64>().ceil() as u64
}

pub fn producer_quota(scenario: &Scenario) -> u64 {
    let explicit: Vec<f64> = scenario
        .workload
        .iter()
        .filter_map(|w| match w {
            super::Workload::Writer { modes, .. } => modes.quota_per_s,
            _ => None,
        })
        .collect();
    if !explicit.is_empty() {
        return explicit.iter().sum::<f64>().ceil() as u64;
    }
    if !scenario.node.producer_quota {
        return 1_000_000;
    }
    let drawn_batches = scenario.swarm.as_ref().is_some_and(|s| s.writer_modes);
    let peak: f64 = scenario
        .workload
        .iter()
        .filter_map(|w| match w {
            super::Workload::Writer { rate_per_s, burst, preload_rate_per_s, modes, .. } => {
                let requests =
                    rate_per_s.max(burst.map_or(0.0, |b| b.rate_per_s)).max(preload_rate_per_s.unwrap_or(0.0));
                let ops = if drawn_batches { super::workload::DRAWN_BATCH_OPS_MAX } else { modes.ops_per_request() };
                Some(requests * f64::from(ops))
            }
            _ => None,
        })
        .sum();
    (peak * QUOTA_HEADROOM).max(QUOTA_MIN_PER_S).ceil() as u64
}

/// Every node's connection caps: the node's defaults, the replication and memcached listeners'
/// caps as the scenario sets them.
fn connections(settings: &NodeSettings) -> ConnectionsConfig {
    let defaults = ConnectionsConfig::default();
    let replication = qs_node::connections::settings::ReplicationConnections {
        max: settings.replication_connections_max.unwrap_or(defaults.replication.max),
        ..defaults.replication.clone()
    };
    let memcached = qs_node::connections::settings::MemcachedConnections {
        max: settings.memcached_connections_max.unwrap_or(defaults.memcached.max),
        ..defaults.memcached.clone()
    };
    ConnectionsConfig { replication, memcached, ..defaults }
}
