//! A sweep's `summary.json` ([`SweepSummary`]): how each run ended, the failures grouped by
//! signature, and the known-failures file that marks groups as already known.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{Probe, ProbeHits};

/// How one run of a sweep ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "snake_case")]
pub enum Outcome {
    /// Every checker passed.
    Pass,
    /// A checker found an invariant violation.
    Violation,
    /// The cluster did not converge in time after every fault healed.
    Liveness,
    /// The run panicked, aborted, was killed by a signal, or ran out of memory.
    Crash,
    /// A second process given the same seed produced a different trace.
    #[serde(alias = "nondeterminism")]
    Nondeterministic,
    /// The run went past its wall-clock budget and was killed.
    Hang,
    /// The run could not start or refused its arguments.
    Error,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One run of a sweep.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunResult {
    pub scenario: String,
    pub path: PathBuf,
    pub seed: u64,
    pub outcome: Outcome,
    pub expected: String,
    /// Whether the run ended as its scenario expects.
    pub ok: bool,
    pub exit_code: Option<i32>,
    pub digest: Option<String>,
    /// The first violation or pending convergence reason, in words.
    pub first_problem: Option<String>,
    pub reproduce: String,
    /// The run's folder (holds its trace, summary and report).
    pub out: PathBuf,
    /// Largest lag any node showed, from the run's lag samples.
    #[serde(default)]
    pub max_lag_ms: Option<u64>,
    #[serde(default)]
    pub converged_after_ms: Option<u64>,
    /// The slowest tier's 99th-percentile propagation (root commit to a replica's apply), from
    /// the run's summary; none for a run with no replica apply or no summary.
    #[serde(default)]
    pub propagation_p99_ms: Option<u64>,
    /// How the run failed, in a form shared by every run that failed the same way (see
    /// [`RunSummary::signature`](super::RunSummary::signature)); none for a run that passed.
    #[serde(default)]
    pub signature: Option<String>,
    /// Wall-clock time the run took, in ms (with its determinism re-run, if any).
    #[serde(default)]
    pub wall_ms: u64,
    /// Whether a second process re-ran the seed and compared traces.
    #[serde(default)]
    pub determinism_checked: bool,
    /// The probes the run reached, from its summary.
    #[serde(default)]
    pub probes: Vec<ProbeHits>,
    /// The engine the run's scenario stored on (as run, `--engine` included), a crashed run's
    /// too; none in a sweep written before sweeps recorded it whose run wrote no summary.
    #[serde(default)]
    pub engine: Option<String>,
    /// The build that ran it (its summary's `build`: `qsim <version> (<commit>)`); none as for
    /// `engine`.
    #[serde(default)]
    pub build: Option<String>,
}

/// Runs not as expected that share a signature: one bug, however many seeds found it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureGroup {
    pub signature: String,
    pub outcome: Outcome,
    pub count: u64,
    /// The scenarios (run names) with a run in the group, sorted.
    pub scenarios: Vec<String>,
    /// The group's first run (lowest scenario name, then seed) and how to reproduce it.
    pub first_scenario: String,
    pub first_seed: u64,
    pub reproduce: String,
    /// Listed in the sweep's known-failures file: not new.
    #[serde(default)]
    pub known: bool,
}

/// Failure signatures a sweep already knows about (a known-failures file: one signature a line,
/// `#` comments and blank lines ignored); a group whose signature is listed is not new.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KnownFailures {
    signatures: std::collections::BTreeSet<String>,
}

impl KnownFailures {
    pub fn parse(text: &str) -> KnownFailures {
        KnownFailures {
            signatures: text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_string)
                .collect(),
        }
    }

    pub fn contains(&self, signature: &str) -> bool {
        self.signatures.contains(signature)
    }

    pub fn len(&self) -> usize {
        self.signatures.len()
    }

    pub fn is_empty(&self) -> bool {
        self.signatures.is_empty()
    }
}

/// `summary.json` of a sweep.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepSummary {
    /// `A..B`, B excluded.
    pub seeds: String,
    /// `i/n`.
    pub shard: String,
    pub runs: u64,
    pub failed: u64,
    pub results: Vec<RunResult>,
    /// The runs not as expected, grouped by signature, largest group first.
    #[serde(default)]
    pub groups: Vec<FailureGroup>,
    /// Which night this is, when `qsim merge` made it: what `qsim history` orders nights by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub night: Option<Night>,
}

/// A merged nightly sweep's date and the build its runs ran on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Night {
    /// `YYYY-MM-DD` (UTC), the day the night was merged unless `qsim merge --date` said another.
    pub date: String,
    /// The build every run of the night ran on (`qsim <version> (<commit>)`); none when no run
    /// recorded one.
    pub build: Option<String>,
    /// When the merge ran (RFC 3339, UTC, to the second): orders two nights of one date.
    #[serde(default)]
    pub merged_at: Option<String>,
}

impl Night {
    /// The commit in [`build`](Self::build): what its parentheses hold, or `unknown`.
    pub fn commit(&self) -> &str {
        self.build.as_deref().and_then(commit_of).unwrap_or("unknown")
    }
}

/// The commit in a build string `qsim <version> (<commit>)`.
pub fn commit_of(build: &str) -> Option<&str> {
    let inner = build.rsplit_once('(')?.1.strip_suffix(')')?;
    (!inner.is_empty()).then_some(inner)
}

/// One probe across a sweep: in how many runs it was reached, and how often in all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeRow {
    pub probe: Probe,
    pub runs: u64,
    pub hits: u64,
}

impl SweepSummary {
    /// Every probe (reached or not, in [`Probe::ALL`] order) across the sweep's runs.
    pub fn probe_table(&self) -> Vec<ProbeRow> {
        Probe::ALL
            .iter()
            .map(|&probe| {
                let mut row = ProbeRow { probe, runs: 0, hits: 0 };
                for hits in self.results.iter().flat_map(|r| &r.probes).filter(|h| h.probe == probe) {
                    row.runs += 1;
                    row.hits += hits.hits;
                }
                row
            })
            .collect()
    }

    /// Groups the runs not as expected by signature (a run without one — a run folder that
    /// wrote no summary — by its outcome alone), largest group first, then by signature; marks
    /// the groups `known` lists.
    pub fn regroup(&mut self, known: &KnownFailures) {
        let mut by_signature: std::collections::BTreeMap<String, FailureGroup> = std::collections::BTreeMap::new();
        let mut failing: Vec<&RunResult> = self.results.iter().filter(|r| !r.ok).collect();
        failing.sort_by(|a, b| (&a.scenario, a.seed).cmp(&(&b.scenario, b.seed)));
        for r in failing {
            let signature = r.signature.clone().unwrap_or_else(|| r.outcome.as_str().to_string());
            let group = by_signature.entry(signature.clone()).or_insert_with(|| FailureGroup {
                known: known.contains(&signature),
                signature,
                outcome: r.outcome,
                count: 0,
                scenarios: Vec::new(),
                first_scenario: r.scenario.clone(),
                first_seed: r.seed,
                reproduce: r.reproduce.clone(),
            });
            group.count += 1;
            if !group.scenarios.contains(&r.scenario) {
                group.scenarios.push(r.scenario.clone());
            }
        }
        let mut groups: Vec<FailureGroup> = by_signature.into_values().collect();
        for g in &mut groups {
            g.scenarios.sort();
        }
        groups.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.signature.cmp(&b.signature)));
        self.groups = groups;
    }

    /// Groups not in the known-failures file.
    pub fn new_groups(&self) -> impl Iterator<Item = &FailureGroup> {
        self.groups.iter().filter(|g| !g.known)
    }
}
