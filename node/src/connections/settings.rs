//! `[connections]`: how many connections each listener holds and how long a client may keep one
//! waiting. Part of the node's configuration file (see [`crate::config`]); validated with it.
//!
//! ```toml
//! [connections]
//! drain_timeout = "10s"           # shutdown: how long open connections get to finish
//! [connections.http]
//! max = 1024                      # open connections; past it one is shed or the new one refused
//! max_per_peer = 512              # open connections from one client address (default: max / 2)
//! header_read_timeout = "30s"     # a request's headers (and an idle keep-alive wait)
//! body_read_timeout = "30s"       # a request's whole body
//! write_timeout = "30s"           # a response write that makes no progress
//! [connections.memcached]
//! max = 1024
//! idle_timeout = "5m"             # the next request line; a reply's write
//! [connections.replication]
//! max = 256
//! idle_timeout = "30s"            # the client's hello; each frame's write
//! ```
//!
//! Every field is optional; the defaults are the constants below, each with its reason.

use std::time::Duration;

use serde::Deserialize;

use super::ListenerKind;

/// Default most open HTTP connections: producers on the root, status and metrics scrapers on
/// every node — tens in practice. nginx's default is 512 connections per worker; this leaves
/// twice that, so a writer that opens a connection per request (the simulator's does) at a
/// few hundred writes a second still fits while commits take a second.
pub const HTTP_CONNECTIONS_MAX_DEFAULT: usize = 1024;
/// Default most open memcached connections: memcached's own default (`-c 1024`), the figure
/// clients and their pool sizes are used to.
pub const MEMCACHED_CONNECTIONS_MAX_DEFAULT: usize = 1024;
/// Default most open replication connections: one per downstream replica (and one per snapshot
/// transfer); a fan-out of hundreds is already a deep tree's whole tier.
pub const REPLICATION_CONNECTIONS_MAX_DEFAULT: usize = 256;
/// The default `max_per_peer` of a listener whose `max` is `max`: half of it, rounded up. One
/// client address — a flood, or a runaway pool — then holds at most half the listener, and every
/// other client shares the other half; half is still far above what one honest client opens
/// (a connection pool of tens), so clients behind one NAT address are not starved by it.
pub const fn max_per_peer_default(max: usize) -> usize {
    max.div_ceil(2)
}

/// Bounds of every `max`: at least one connection; at most 2^20, beyond the open-files limit of
/// any machine this runs on (a larger figure is a typo, not a plan).
pub const CONNECTIONS_MAX_MIN: usize = 1;
pub const CONNECTIONS_MAX_MAX: usize = 1 << 20;

/// Default HTTP header read timeout: hyper's own default (30 s, `http1::Builder::
/// header_read_timeout`). It is also how long an idle keep-alive connection is kept: clients'
/// pools (hyper, Go: 90 s) notice the close and reconnect.
pub const HTTP_HEADER_READ_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// Default deadline for a request's whole body (at most 2 MiB: 70 KB/s still makes it).
pub const HTTP_BODY_READ_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// Default for a response write that makes no progress: a client that stopped reading.
pub const HTTP_WRITE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// Default memcached idle timeout: memcached has none by default and its clients keep pooled
/// connections open between bursts, so this is long; it only reclaims connections of clients
/// that vanished or stalled.
pub const MEMCACHED_IDLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(300);
/// Default replication idle timeout: a replica sends its hello at once, and a replica whose
/// socket stays full this long is as stale as `replication.staleness_failover` (30 s) calls one.
pub const REPLICATION_IDLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// Default drain at shutdown: a batch window (500 ms by default) and its commit, with room.
pub const DRAIN_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);
/// Bounds of every timeout: below 100 ms a loaded machine would time out healthy clients;
/// above a day a "timeout" no longer reclaims anything.
pub const TIMEOUT_MIN: Duration = Duration::from_millis(100);
pub const TIMEOUT_MAX: Duration = Duration::from_secs(24 * 3600);
/// Bounds of `drain_timeout`: zero abandons everything in flight at once; above 10 minutes no
/// supervisor waits (systemd's default stop timeout is 90 s).
pub const DRAIN_TIMEOUT_MAX: Duration = Duration::from_secs(600);

/// `[connections]`.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConnectionsConfig {
    pub http: HttpConnections,
    pub memcached: MemcachedConnections,
    pub replication: ReplicationConnections,
    /// At shutdown, how long open connections and the write batch in flight get to finish
    /// before they are cut.
    #[serde(with = "humantime_serde")]
    pub drain_timeout: Duration,
}

/// `[connections.http]`.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConnections {
    pub max: usize,
    /// Most open connections from one client address (default: [`max_per_peer_default`]).
    pub max_per_peer: Option<usize>,
    /// A request's headers must arrive within this of the connection being ready for them (a
    /// new connection, or the previous response sent).
    #[serde(with = "humantime_serde")]
    pub header_read_timeout: Duration,
    /// A request's whole body must arrive within this.
    #[serde(with = "humantime_serde")]
    pub body_read_timeout: Duration,
    /// A response write that makes no progress this long closes the connection.
    #[serde(with = "humantime_serde")]
    pub write_timeout: Duration,
}

/// `[connections.memcached]`.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemcachedConnections {
    pub max: usize,
    /// Most open connections from one client address (default: [`max_per_peer_default`]).
    pub max_per_peer: Option<usize>,
    /// The next request line (or a refused write's data block) must arrive within this, and
    /// each reply must be written within it.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
}

/// `[connections.replication]`.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReplicationConnections {
    pub max: usize,
    /// Most open connections from one client address (default: [`max_per_peer_default`]).
    pub max_per_peer: Option<usize>,
    /// The client's hello must arrive within this, and each frame must be written within it.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
}

impl Default for ConnectionsConfig {
    fn default() -> Self {
        ConnectionsConfig {
            http: HttpConnections::default(),
            memcached: MemcachedConnections::default(),
            replication: ReplicationConnections::default(),
            drain_timeout: DRAIN_TIMEOUT_DEFAULT,
        }
    }
}

impl Default for HttpConnections {
    fn default() -> Self {
        HttpConnections {
            max: HTTP_CONNECTIONS_MAX_DEFAULT,
            max_per_peer: None,
            header_read_timeout: HTTP_HEADER_READ_TIMEOUT_DEFAULT,
            body_read_timeout: HTTP_BODY_READ_TIMEOUT_DEFAULT,
            write_timeout: HTTP_WRITE_TIMEOUT_DEFAULT,
        }
    }
}

impl Default for MemcachedConnections {
    fn default() -> Self {
        MemcachedConnections {
            max: MEMCACHED_CONNECTIONS_MAX_DEFAULT,
            max_per_peer: None,
            idle_timeout: MEMCACHED_IDLE_TIMEOUT_DEFAULT,
        }
    }
}

impl Default for ReplicationConnections {
    fn default() -> Self {
        ReplicationConnections {
            max: REPLICATION_CONNECTIONS_MAX_DEFAULT,
            max_per_peer: None,
            idle_timeout: REPLICATION_IDLE_TIMEOUT_DEFAULT,
        }
    }
}

impl ConnectionsConfig {
    /// The cap of one listener.
    pub fn max(&self, kind: ListenerKind) -> usize {
        match kind {
            ListenerKind::Http => self.http.max,
            ListenerKind::Memcached => self.memcached.max,
            ListenerKind::Replication => self.replication.max,
        }
    }

    /// The per-address cap of one listener: its `max_per_peer`, else half its `max`.
    pub fn max_per_peer(&self, kind: ListenerKind) -> usize {
        let configured = match kind {
            ListenerKind::Http => self.http.max_per_peer,
            ListenerKind::Memcached => self.memcached.max_per_peer,
            ListenerKind::Replication => self.replication.max_per_peer,
        };
        configured.unwrap_or_else(|| max_per_peer_default(self.max(kind)))
    }

    /// Every bound in range; the error names the field as `connections.<listener>.<field>`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let caps = [
            ("connections.http.max", self.http.max),
            ("connections.memcached.max", self.memcached.max),
            ("connections.replication.max", self.replication.max),
        ];
        for (field, max) in caps {
            if !(CONNECTIONS_MAX_MIN..=CONNECTIONS_MAX_MAX).contains(&max) {
                return Err((
                    field,
                    format!("{max} is out of range; allowed {CONNECTIONS_MAX_MIN} to {CONNECTIONS_MAX_MAX}"),
                ));
            }
        }
        let per_peer = [
            ("connections.http.max_per_peer", self.http.max_per_peer, self.http.max),
            ("connections.memcached.max_per_peer", self.memcached.max_per_peer, self.memcached.max),
            ("connections.replication.max_per_peer", self.replication.max_per_peer, self.replication.max),
        ];
        for (field, per_peer, max) in per_peer {
            if let Some(per_peer) = per_peer
                && !(1..=max).contains(&per_peer)
            {
                return Err((field, format!("{per_peer} is out of range; allowed 1 to the listener's max ({max})")));
            }
        }
        let timeouts = [
            ("connections.http.header_read_timeout", self.http.header_read_timeout),
            ("connections.http.body_read_timeout", self.http.body_read_timeout),
            ("connections.http.write_timeout", self.http.write_timeout),
            ("connections.memcached.idle_timeout", self.memcached.idle_timeout),
            ("connections.replication.idle_timeout", self.replication.idle_timeout),
        ];
        for (field, timeout) in timeouts {
            if !(TIMEOUT_MIN..=TIMEOUT_MAX).contains(&timeout) {
                return Err((
                    field,
                    format!("{timeout:?} is out of range; allowed {TIMEOUT_MIN:?} to {TIMEOUT_MAX:?}"),
                ));
            }
        }
        if self.drain_timeout > DRAIN_TIMEOUT_MAX {
            return Err((
                "connections.drain_timeout",
                format!("{:?} is out of range; allowed 0s to {DRAIN_TIMEOUT_MAX:?}", self.drain_timeout),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::NodeConfig;

    use super::*;

    const ROOT: &str = r#"
        name = "root"
        role = "root"
        database_id = "2a"
        [storage]
        engine = "memory"
        [listen]
        replication = "127.0.0.1:7000"
        memcached = "127.0.0.1:11000"
        http = "127.0.0.1:8000"
        [root]
        batch_window = "50ms"
    "#;

    fn parse(connections: &str) -> Result<NodeConfig, String> {
        NodeConfig::parse(&format!("{ROOT}\n{connections}"), "node.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_when_the_section_or_a_field_is_missing() {
        let config = parse("").unwrap().connections;
        assert_eq!(config.max(ListenerKind::Http), HTTP_CONNECTIONS_MAX_DEFAULT);
        assert_eq!(config.max(ListenerKind::Memcached), MEMCACHED_CONNECTIONS_MAX_DEFAULT);
        assert_eq!(config.max(ListenerKind::Replication), REPLICATION_CONNECTIONS_MAX_DEFAULT);
        assert_eq!(config.http.header_read_timeout, HTTP_HEADER_READ_TIMEOUT_DEFAULT);
        assert_eq!(config.drain_timeout, DRAIN_TIMEOUT_DEFAULT);
        // A table with one field keeps that listener's defaults for the others.
        let config = parse("[connections.replication]\nmax = 9\n[connections.memcached]\nmax = 3").unwrap().connections;
        assert_eq!((config.replication.max, config.replication.idle_timeout), (9, REPLICATION_IDLE_TIMEOUT_DEFAULT));
        assert_eq!((config.memcached.max, config.memcached.idle_timeout), (3, MEMCACHED_IDLE_TIMEOUT_DEFAULT));
        // Per address: half the listener unless set.
        assert_eq!(config.max_per_peer(ListenerKind::Memcached), 2);
        assert_eq!(parse("").unwrap().connections.max_per_peer(ListenerKind::Http), HTTP_CONNECTIONS_MAX_DEFAULT / 2);
        let config = parse("[connections.http]\nmax_per_peer = 7").unwrap().connections;
        assert_eq!(config.max_per_peer(ListenerKind::Http), 7);
    }

    #[test]
    fn reads_every_field() {
        let config = parse(
            "[connections]\ndrain_timeout = \"3s\"\n[connections.http]\nmax = 10\nheader_read_timeout = \"2s\"\n\
             body_read_timeout = \"4s\"\nwrite_timeout = \"5s\"\n[connections.memcached]\nidle_timeout = \"1m\"\n\
             [connections.replication]\nidle_timeout = \"500ms\"",
        )
        .unwrap()
        .connections;
        assert_eq!(config.drain_timeout, Duration::from_secs(3));
        assert_eq!(config.http.max, 10);
        assert_eq!(config.http.header_read_timeout, Duration::from_secs(2));
        assert_eq!(config.http.body_read_timeout, Duration::from_secs(4));
        assert_eq!(config.http.write_timeout, Duration::from_secs(5));
        assert_eq!(config.memcached.idle_timeout, Duration::from_secs(60));
        assert_eq!(config.replication.idle_timeout, Duration::from_millis(500));
    }

    #[test]
    fn refuses_out_of_range_values_naming_file_and_field() {
        for (text, field) in [
            ("[connections.http]\nmax = 0", "connections.http.max"),
            ("[connections.memcached]\nmax = 2000000", "connections.memcached.max"),
            ("[connections.replication]\nmax = 0", "connections.replication.max"),
            ("[connections.http]\nmax_per_peer = 0", "connections.http.max_per_peer"),
            ("[connections.memcached]\nmax = 8\nmax_per_peer = 9", "connections.memcached.max_per_peer"),
            ("[connections.http]\nheader_read_timeout = \"10ms\"", "connections.http.header_read_timeout"),
            ("[connections.http]\nbody_read_timeout = \"0s\"", "connections.http.body_read_timeout"),
            ("[connections.http]\nwrite_timeout = \"2d\"", "connections.http.write_timeout"),
            ("[connections.memcached]\nidle_timeout = \"1ms\"", "connections.memcached.idle_timeout"),
            ("[connections.replication]\nidle_timeout = \"30d\"", "connections.replication.idle_timeout"),
            ("[connections]\ndrain_timeout = \"1h\"", "connections.drain_timeout"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(
                err.starts_with("node.toml: field `") && err.contains(field) && err.contains("allowed"),
                "{field}: {err}"
            );
        }
        // Unknown fields and bad durations are refused by the parser, with the line.
        let err = parse("[connections.http]\nmax_connections = 5").unwrap_err();
        assert!(err.contains("max_connections") && err.contains("line"), "{err}");
        let err = parse("[connections.memcached]\nidle_timeout = \"soon\"").unwrap_err();
        assert!(err.contains("idle_timeout") && err.contains("line"), "{err}");
    }
}
