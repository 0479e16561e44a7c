//! Scenario files: one story each, in TOML.
//!
//! Guarantees: a scenario that [`Scenario::load`] accepts can run — every duration is positive
//! and bounded, every fault names a node that exists and a kind this build can inject, and the
//! topology is a tree of at most [`TIERS_MAX`] tiers below the root. A bad file is refused with
//! the file, the line and the field, and what is allowed.
//!
//! ```toml
//! [scenario]
//! name = "quickstart"
//! description = "What it reproduces and what must hold."
//! duration = "2m"                  # the safety phase, in simulated time
//! engine = "memory"                # memory (lmdb and rocksdb: not in the simulator yet)
//! expect = "pass"                  # pass | violation | liveness (canaries expect a failure)
//!
//! [topology]                       # below the root, tier by tier
//! tiers = [
//!   { name = "mid", count = 2 },
//!   { name = "edge", count = 4, primaries = 1, secondaries = 1 },
//! ]
//!
//! [node]
//! batch_window = "500ms"
//! heartbeat_interval = "1s"
//! staleness_failover = "30s"
//! retention_entries = 100000       # log entries each node keeps
//! gc_interval = "1s"
//!
//! [[workload]]
//! kind = "writer"                  # producers writing through the root's HTTP API
//! rate_per_s = 5
//! keys = 50
//! value_bytes = { min = 10, max = 200 }
//!
//! [[fault]]
//! at = "30s"
//! kind = "kill"                    # kill | pause | partition
//! target = "mid-1"
//! duration = "20s"                 # then restart | resume | heal
//!
//! [checks]
//! lag_max = "35s"
//! converge_within = "60s"
//!
//! [swarm]                          # optional: faults drawn from the seed
//! kinds = ["kill", "pause", "partition"]   # the seed turns a non-empty subset on
//! count_min = 1
//! count_max = 6
//! duration_min = "2s"
//! duration_max = "40s"
//!
//! [legacy]                         # planted bugs, off unless a bug-zoo scenario asks
//! serve_nearest_when_collected = false
//! apply_without_gap_check = false
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// Most tiers below the root: the seed's deepest tree has six layers.
pub const TIERS_MAX: usize = 6;
/// Most nodes in one scenario.
pub const NODES_MAX: usize = 500;
/// Longest safety phase, in simulated time.
pub const DURATION_MAX: Duration = Duration::from_secs(7 * 24 * 3600);
/// Most faults in one scenario file.
pub const FAULTS_MAX: usize = 1_000;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub scenario: About,
    pub topology: Topology,
    #[serde(default)]
    pub node: NodeSettings,
    #[serde(default)]
    pub workload: Vec<Workload>,
    #[serde(default)]
    pub fault: Vec<Spanned<Fault>>,
    pub checks: Checks,
    /// Faults drawn from the seed, in addition to `fault`.
    pub swarm: Option<Swarm>,
    /// Planted bugs switched on in every node (see `qs_node::config::LegacyConfig`).
    #[serde(default)]
    pub legacy: qs_node::config::LegacyConfig,
    /// The file this came from (set by `load`).
    #[serde(skip)]
    pub path: PathBuf,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct About {
    pub name: String,
    pub description: String,
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    #[serde(default = "default_engine")]
    pub engine: Spanned<String>,
    /// What a run of this scenario must end in; a sweep counts a run that ends so as passing.
    /// Canaries and planted-bug scenarios expect a failure.
    #[serde(default)]
    pub expect: Expect,
}

/// The outcome a scenario is written to produce.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    #[default]
    Pass,
    /// An invariant violation (exit 1).
    Violation,
    /// No convergence within the bound (exit 3).
    Liveness,
}

impl Expect {
    /// The `qsim run` exit code this expectation corresponds to.
    pub fn exit_code(self) -> u8 {
        match self {
            Expect::Pass => crate::exit::PASS,
            Expect::Violation => crate::exit::VIOLATION,
            Expect::Liveness => crate::exit::LIVENESS,
        }
    }
}

fn default_engine() -> Spanned<String> {
    Spanned::new(0..0, "memory".to_string())
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    pub tiers: Vec<Spanned<Tier>>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    pub name: String,
    pub count: usize,
    #[serde(default = "one")]
    pub primaries: usize,
    #[serde(default)]
    pub secondaries: usize,
}

fn one() -> usize {
    1
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodeSettings {
    #[serde(with = "humantime_serde")]
    pub batch_window: Duration,
    #[serde(with = "humantime_serde")]
    pub heartbeat_interval: Duration,
    #[serde(with = "humantime_serde")]
    pub staleness_failover: Duration,
    /// Log entries every node keeps (its retention floor); older ones are collected.
    pub retention_entries: u64,
    /// How often every node collects its log.
    #[serde(with = "humantime_serde")]
    pub gc_interval: Duration,
}

impl Default for NodeSettings {
    fn default() -> Self {
        NodeSettings {
            batch_window: Duration::from_millis(500),
            heartbeat_interval: Duration::from_secs(1),
            staleness_failover: Duration::from_secs(30),
            retention_entries: 100_000,
            gc_interval: Duration::from_secs(1),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, tag = "kind", rename_all = "lowercase")]
pub enum Workload {
    /// Writes through the root's HTTP API at a steady rate.
    Writer { rate_per_s: f64, keys: u64, value_bytes: ValueBytes },
}

#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValueBytes {
    pub min: usize,
    pub max: usize,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    #[serde(with = "humantime_serde")]
    pub at: Duration,
    pub kind: FaultKind,
    pub target: Spanned<String>,
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
}

/// Swarm mode: the seed picks which of `kinds` are on (a non-empty subset), how many faults
/// there are, and each one's time, target (any node but the root) and duration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Swarm {
    pub kinds: Vec<FaultKind>,
    pub count_min: usize,
    pub count_max: usize,
    #[serde(with = "humantime_serde")]
    pub duration_min: Duration,
    #[serde(with = "humantime_serde")]
    pub duration_max: Duration,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultKind {
    /// The node's process dies; after `duration` it restarts on the same disk.
    Kill,
    /// The node's process stops running (SIGSTOP); after `duration` it resumes.
    Pause,
    /// The node can neither send nor receive; after `duration` the network heals.
    Partition,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Largest replication lag a node with a healthy path to the root may show.
    #[serde(with = "humantime_serde")]
    pub lag_max: Duration,
    /// How long, after every fault heals, every live node has to converge.
    #[serde(with = "humantime_serde")]
    pub converge_within: Duration,
}

/// A scenario that was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Syntax { path: String, message: String },
    #[error("{path}:{line}: field `{field}`: {problem}")]
    Invalid { path: String, line: usize, field: String, problem: String },
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ScenarioError::Read { path: path.display().to_string(), source })?;
        Scenario::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Scenario, ScenarioError> {
        let shown = path.display().to_string();
        let mut scenario: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Syntax {
            path: shown.clone(),
            message: e.to_string().trim_end().to_string(),
        })?;
        scenario.path = path.to_path_buf();
        let line_of = |span: std::ops::Range<usize>| text[..span.start.min(text.len())].matches('\n').count() + 1;
        scenario.validate().map_err(|(span, field, problem)| ScenarioError::Invalid {
            path: shown,
            line: span.map_or(1, line_of),
            field,
            problem,
        })?;
        Ok(scenario)
    }

    /// The faults of a run under `seed`: the file's, then (in swarm mode) those the seed draws.
    /// Drawn faults never overlap another fault on the same node.
    pub fn faults_for(&self, seed: u64) -> Vec<Fault> {
        use rand::{RngExt, SeedableRng};
        let mut faults: Vec<Fault> = self.fault.iter().map(|f| f.get_ref().clone()).collect();
        let Some(swarm) = &self.swarm else { return faults };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x7377_6172_6d00_0000);
        // Which kinds are on for this seed: each with probability 1/2, at least one.
        let mut kinds: Vec<FaultKind> = swarm.kinds.iter().copied().filter(|_| rng.random_bool(0.5)).collect();
        if kinds.is_empty() {
            kinds.push(swarm.kinds[rng.random_range(0..swarm.kinds.len())]);
        }
        let targets: Vec<String> = self.node_names().into_iter().skip(1).collect();
        let horizon = self.scenario.duration.as_millis() as u64;
        let count = rng.random_range(swarm.count_min..=swarm.count_max);
        for _ in 0..count {
            let kind = kinds[rng.random_range(0..kinds.len())];
            let target = targets[rng.random_range(0..targets.len())].clone();
            let at = Duration::from_millis(rng.random_range(0..horizon));
            let span = swarm.duration_min.as_millis() as u64..=swarm.duration_max.as_millis() as u64;
            let duration = Duration::from_millis(rng.random_range(span));
            let overlaps =
                faults.iter().any(|f| *f.target.get_ref() == target && at < f.at + f.duration && f.at < at + duration);
            if !overlaps {
                faults.push(Fault { at, kind, target: Spanned::new(0..0, target), duration });
            }
        }
        faults
    }

    /// Node names: `root`, then `<tier>-<n>` counting from 1, tier by tier.
    pub fn node_names(&self) -> Vec<String> {
        let mut names = vec!["root".to_string()];
        for tier in &self.topology.tiers {
            names.extend((1..=tier.get_ref().count).map(|n| format!("{}-{n}", tier.get_ref().name)));
        }
        names
    }

    /// Every node with its tier, in topology order (root first).
    pub fn node_infos(&self) -> Vec<qs_reports::schema::NodeInfo> {
        let mut nodes = vec![qs_reports::schema::NodeInfo { name: "root".into(), tier: "root".into(), depth: 0 }];
        for (depth, tier) in self.topology.tiers.iter().enumerate() {
            let tier = tier.get_ref();
            nodes.extend((1..=tier.count).map(|n| qs_reports::schema::NodeInfo {
                name: format!("{}-{n}", tier.name),
                tier: tier.name.clone(),
                depth: depth as u32 + 1,
            }));
        }
        nodes
    }

    fn validate(&self) -> Result<(), (Option<std::ops::Range<usize>>, String, String)> {
        let bad = |span: Option<std::ops::Range<usize>>, field: &str, problem: String| {
            Err((span, field.to_string(), problem))
        };
        if self.scenario.name.is_empty() || self.scenario.name.contains(char::is_whitespace) {
            return bad(None, "scenario.name", "must be non-empty with no whitespace".into());
        }
        if self.scenario.duration.is_zero() || self.scenario.duration > DURATION_MAX {
            return bad(None, "scenario.duration", format!("must be above zero and at most {DURATION_MAX:?}"));
        }
        if self.scenario.engine.get_ref() != "memory" {
            return bad(
                Some(self.scenario.engine.span()),
                "scenario.engine",
                format!(
                    "{:?} cannot run in the simulator yet; only \"memory\" can (LMDB and RocksDB run in the real node)",
                    self.scenario.engine.get_ref()
                ),
            );
        }
        let tiers = &self.topology.tiers;
        if tiers.is_empty() || tiers.len() > TIERS_MAX {
            return bad(None, "topology.tiers", format!("needs 1 to {TIERS_MAX} tiers below the root"));
        }
        let mut parents = 1;
        let mut total = 1;
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
        }
        if total > NODES_MAX {
            return bad(None, "topology.tiers", format!("{total} nodes; at most {NODES_MAX}"));
        }
        let n = &self.node;
        if n.batch_window.is_zero() || n.heartbeat_interval < Duration::from_millis(10) {
            return bad(
                None,
                "node.batch_window",
                "batch_window must be above zero, heartbeat_interval at least 10ms".into(),
            );
        }
        for workload in &self.workload {
            let Workload::Writer { rate_per_s, keys, value_bytes } = workload;
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
        if self.fault.len() > FAULTS_MAX {
            return bad(None, "fault", format!("at most {FAULTS_MAX} faults"));
        }
        let names = self.node_names();
        for fault in &self.fault {
            let (span, f) = (Some(fault.span()), fault.get_ref());
            if !names.contains(f.target.get_ref()) {
                let problem = format!("{:?} is not a node; nodes are {}", f.target.get_ref(), names.join(", "));
                return bad(Some(f.target.span()), "fault.target", problem);
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
            } else if swarm.count_min > swarm.count_max || swarm.count_max > FAULTS_MAX {
                Some("needs count_min <= count_max <= 1000")
            } else if swarm.duration_min.is_zero() || swarm.duration_min > swarm.duration_max {
                Some("needs 0 < duration_min <= duration_max")
            } else {
                None
            };
            if let Some(problem) = problem {
                return bad(None, "swarm", problem.into());
            }
        }
        if self.checks.converge_within.is_zero() || self.checks.lag_max.is_zero() {
            return bad(None, "checks", "lag_max and converge_within must be above zero".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[scenario]
name = "t"
description = "d"
duration = "1m"

[topology]
tiers = [{ name = "edge", count = 2 }]

[[fault]]
at = "10s"
kind = "kill"
target = "edge-1"
duration = "5s"

[checks]
lag_max = "10s"
converge_within = "30s"
"#;

    fn refused(text: &str) -> String {
        Scenario::parse(text, Path::new("s.toml")).unwrap_err().to_string()
    }

    #[test]
    fn accepts_a_small_scenario_and_names_its_nodes() {
        let s = Scenario::parse(GOOD, Path::new("s.toml")).unwrap();
        assert_eq!(s.node_names(), vec!["root", "edge-1", "edge-2"]);
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_field() {
        let err = refused(&GOOD.replace("\"edge-1\"", "\"edge-9\""));
        assert!(err.starts_with("s.toml:13: field `fault.target`"), "{err}");
        assert!(err.contains("root, edge-1, edge-2"), "{err}");
        let err = refused(&GOOD.replace("kind = \"kill\"", "kind = \"meteor\""));
        assert!(err.contains("s.toml") && err.contains("line 12") && err.contains("meteor"), "{err}");
        let err = refused(&GOOD.replace("duration = \"1m\"", "duration = \"1m\"\nengine = \"lmdb\""));
        assert!(err.contains("scenario.engine") && err.contains(":6:"), "{err}");
        let err = refused(&GOOD.replace("count = 2 }", "count = 2, primaries = 2 }"));
        assert!(err.contains("topology.tiers.primaries") && err.contains(":8:"), "{err}");
    }
}
