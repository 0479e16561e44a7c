//! Clocks: every node's host keeps its own wall clock — ahead or behind, fast or slow, stepped
//! forward or back now and then — as hosts do under NTP, and worse when NTP fails. Without this
//! every node reads one simulated clock and skew never happens.
//!
//! A run draws, from a stream of its own (seeded by the run's seed), each node's clock: with
//! probability `[clocks] share`, an offset, a drift, and perhaps one step during the safety
//! phase ([`draw`]). A node the file names under `[[clocks.node]]` keeps the file's clock;
//! `[clocks] drawn = false` draws none. What a run drew is printed under the seed and kept in
//! `summary.json` and the report, and `qsim shrink` can take it away (a clock back in step).
//!
//! The node reads its wall clock through one seam (`qs_node::clock::unix_ms`); the simulator
//! installs the drawn clocks behind it for the run's hosts
//! (`qs_node::clock::simulated::install`). The checkers never read a node's clock: lag is the
//! simulated time since the root committed what a node lacks. So the rule they keep is the
//! knobs' rule: **a clock may change timing and traces, never a verdict** — what a correct node
//! must hold (an edge 40 s ahead does not fail over; a root stepping back makes no lag negative
//! and stalls no quota) is in `qs_node::clock`'s module doc.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `[clocks]`: whether a run draws clocks, how many, and the ones the file sets.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClockSettings {
    /// False: every host keeps the simulated time, but for the ones under `node`.
    pub drawn: bool,
    /// The chance each node's clock is drawn off the simulated time.
    pub share: f64,
    /// Clocks the file sets, by node name.
    pub node: Vec<PinnedClock>,
}

impl Default for ClockSettings {
    fn default() -> ClockSettings {
        ClockSettings { drawn: true, share: 0.5, node: Vec::new() }
    }
}

/// `[[clocks.node]]`: one node's clock, as the file sets it.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PinnedClock {
    pub name: String,
    /// Ahead of the simulated time at the start, in ms (negative: behind).
    #[serde(default)]
    pub offset_ms: i64,
    /// Fast by this many parts per million (negative: slow).
    #[serde(default)]
    pub drift_ppm: i64,
    /// Steps during the run.
    #[serde(default)]
    pub steps: Vec<PinnedStep>,
}

/// A step of a pinned clock: at `at` into the run, by `by_ms` (negative: back).
#[derive(Clone, Copy, Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PinnedStep {
    #[serde(with = "humantime_serde")]
    pub at: Duration,
    pub by_ms: i64,
}

/// The most a clock may be set off the simulated time, at the start or by a step: a day. Past
/// that it is a wrong date, not a skew, and the node's stamps lose meaning (beyond the test).
pub const OFFSET_MAX_MS: i64 = 24 * 3600 * 1000;
/// The fastest or slowest a clock may run: 10 % (a crystal is off by tens of ppm; a broken
/// clock source, by percent).
pub const DRIFT_MAX_PPM: i64 = 100_000;

/// One node's clock in a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeClock {
    pub node: String,
    pub offset_ms: i64,
    pub drift_ppm: i64,
    /// (ms into the run, by ms), in order.
    pub steps: Vec<(u64, i64)>,
    /// The file set it (else the seed drew it).
    pub pinned: bool,
}

impl std::fmt::Display for NodeClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.node, signed_ms(self.offset_ms))?;
        if self.drift_ppm != 0 {
            write!(f, " {:+}ppm", self.drift_ppm)?;
        }
        for &(at_ms, by_ms) in &self.steps {
            write!(f, ", at {} steps {}", humantime::format_duration(Duration::from_millis(at_ms)), signed_ms(by_ms))?;
        }
        if self.pinned {
            write!(f, " (the file's)")?;
        }
        Ok(())
    }
}

fn signed_ms(ms: i64) -> String {
    let sign = if ms < 0 { '-' } else { '+' };
    format!("{sign}{}", humantime::format_duration(Duration::from_millis(ms.unsigned_abs())))
}

impl NodeClock {
    /// The node's side of the seam.
    #[cfg(madsim)]
    pub fn host_clock(&self) -> qs_node::clock::simulated::HostClock {
        use qs_node::clock::simulated::{ClockStep, HostClock};
        let steps = self.steps.iter().map(|&(at_ms, by_ms)| ClockStep { at_ms, by_ms }).collect();
        HostClock { offset_ms: self.offset_ms, drift_ppm: self.drift_ppm, steps }
    }

    /// As `[[clocks.node]]` writes it.
    pub fn pinned(&self) -> PinnedClock {
        let steps = self.steps.iter().map(|&(at, by_ms)| PinnedStep { at: Duration::from_millis(at), by_ms }).collect();
        PinnedClock { name: self.node.clone(), offset_ms: self.offset_ms, drift_ppm: self.drift_ppm, steps }
    }
}

/// Offsets a drawn clock starts at: in step as NTP keeps it, a few seconds off, and far off
/// (NTP down for days, a VM restored from a snapshot).
const OFFSETS_MS: [i64; 6] = [-40_000, -5_000, -300, 300, 5_000, 40_000];
/// Drifts: a good crystal, a poor one, and a broken clock source.
const DRIFTS_PPM: [i64; 5] = [-5_000, -100, 0, 100, 5_000];
/// Steps: NTP's step threshold is 128 ms; an operator's `date -s`, a leap of a VM's clock.
const STEPS_MS: [i64; 4] = [-30_000, -2_000, 2_000, 30_000];
/// The chance a drawn clock steps once during the run.
const STEP_CHANCE: f64 = 0.3;

/// The stream the clock draws come from, apart from every other draw of the run.
const CLOCK_STREAM: u64 = 0x636c_6f63_6b73;

/// The clocks of a run of `scenario` under `seed`: for each node in order, whether and which
/// clock (all of it always drawn, so one node's pinning leaves the others' draws as they were),
/// the file's clock where it sets one.
pub fn draw(scenario: &crate::scenario::Scenario, seed: u64) -> Vec<NodeClock> {
    let settings = &scenario.clocks;
    let pinned: BTreeMap<&str, &PinnedClock> = settings.node.iter().map(|c| (c.name.as_str(), c)).collect();
    let duration_ms = scenario.scenario.duration.as_millis().max(1) as u64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ CLOCK_STREAM);
    let mut clocks = Vec::new();
    for node in scenario.node_names() {
        let on = rng.random_bool(settings.share.clamp(0.0, 1.0));
        let offset_ms = OFFSETS_MS[rng.random_range(0..OFFSETS_MS.len())];
        let drift_ppm = DRIFTS_PPM[rng.random_range(0..DRIFTS_PPM.len())];
        let steps_once = rng.random_bool(STEP_CHANCE);
        let step = (rng.random_range(0..duration_ms), STEPS_MS[rng.random_range(0..STEPS_MS.len())]);
        if let Some(file) = pinned.get(node.as_str()) {
            let mut steps: Vec<(u64, i64)> = file.steps.iter().map(|s| (s.at.as_millis() as u64, s.by_ms)).collect();
            steps.sort_by_key(|&(at, _)| at);
            clocks.push(NodeClock { node, offset_ms: file.offset_ms, drift_ppm: file.drift_ppm, steps, pinned: true });
        } else if settings.drawn && on {
            let steps = if steps_once { vec![step] } else { Vec::new() };
            clocks.push(NodeClock { node, offset_ms, drift_ppm, steps, pinned: false });
        }
    }
    clocks
}

impl ClockSettings {
    /// What is wrong with the file's clocks, against the scenario's node names.
    pub fn validate(&self, names: &[String]) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.share) {
            return Err(format!("clocks.share must be between 0 and 1, not {}", self.share));
        }
        let mut seen = std::collections::BTreeSet::new();
        for clock in &self.node {
            let name = &clock.name;
            if !names.contains(name) {
                return Err(format!("clocks.node names `{name}`, which is not a node of this topology"));
            }
            if !seen.insert(name) {
                return Err(format!("clocks.node names `{name}` twice"));
            }
            let offsets =
                std::iter::once(("offset_ms", clock.offset_ms)).chain(clock.steps.iter().map(|s| ("by_ms", s.by_ms)));
            for (field, ms) in offsets {
                if ms.abs() > OFFSET_MAX_MS {
                    return Err(format!(
                        "clocks.node `{name}`: {field} = {ms} is more than a day ({OFFSET_MAX_MS} ms) off: a wrong date, not a skew"
                    ));
                }
            }
            if clock.drift_ppm.abs() > DRIFT_MAX_PPM {
                return Err(format!(
                    "clocks.node `{name}`: drift_ppm = {} is past ±{DRIFT_MAX_PPM} (10 %)",
                    clock.drift_ppm
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    fn scenario(extra: &str) -> Scenario {
        let text = format!(
            "[scenario]\nname = \"t\"\ndescription = \"t\"\nduration = \"60s\"\n\n[topology]\ntiers = [{{ name = \"edge\", count = 2 }}]\n\n[checks]\nlag_max = \"10s\"\nconverge_within = \"10s\"\n\n{extra}"
        );
        Scenario::parse(&text, std::path::Path::new("t.toml")).expect("a valid scenario")
    }

    #[test]
    fn draws_are_a_function_of_the_seed_and_differ_between_seeds() {
        let s = scenario("");
        assert_eq!(draw(&s, 7), draw(&s, 7));
        let differ = (0..20).any(|seed| draw(&s, seed) != draw(&s, seed + 1));
        assert!(differ, "twenty seeds drew the same clocks");
        let some = (0..50).flat_map(|seed| draw(&s, seed)).count();
        assert!(some > 0, "fifty seeds drew no clock at half a chance each");
    }

    #[test]
    fn a_pinned_clock_is_kept_and_leaves_the_other_draws_alone() {
        let free = scenario("");
        let pinned = scenario(
            "[clocks]\n[[clocks.node]]\nname = \"edge-1\"\noffset_ms = 40000\nsteps = [{ at = \"10s\", by_ms = -30000 }]\n",
        );
        for seed in 0..20 {
            let (a, b) = (draw(&free, seed), draw(&pinned, seed));
            let edge = b.iter().find(|c| c.node == "edge-1").expect("the pinned clock");
            assert_eq!((edge.offset_ms, edge.steps.clone(), edge.pinned), (40_000, vec![(10_000, -30_000)], true));
            let others = |v: &[NodeClock]| v.iter().filter(|c| c.node != "edge-1").cloned().collect::<Vec<_>>();
            assert_eq!(others(&a), others(&b));
        }
    }

    #[test]
    fn drawn_false_draws_none_but_the_files() {
        let s = scenario("[clocks]\ndrawn = false\n[[clocks.node]]\nname = \"root\"\ndrift_ppm = 100\n");
        for seed in 0..20 {
            let clocks = draw(&s, seed);
            assert_eq!(clocks.len(), 1);
            assert_eq!(clocks[0].to_string(), "root +0s +100ppm (the file's)");
        }
    }

    #[test]
    fn bad_clocks_are_refused_with_what_was_wrong() {
        let text = |extra: &str| {
            format!(
                "[scenario]\nname = \"t\"\ndescription = \"t\"\nduration = \"60s\"\n\n[topology]\ntiers = [{{ name = \"edge\", count = 2 }}]\n\n[checks]\nlag_max = \"10s\"\nconverge_within = \"10s\"\n\n{extra}"
            )
        };
        let refused = |extra: &str| {
            Scenario::parse(&text(extra), std::path::Path::new("t.toml")).expect_err("refused").to_string()
        };
        assert!(refused("[clocks]\n[[clocks.node]]\nname = \"edge-9\"\n").contains("edge-9"));
        assert!(
            refused("[clocks]\n[[clocks.node]]\nname = \"root\"\noffset_ms = 90000000\n").contains("more than a day")
        );
        assert!(refused("[clocks]\n[[clocks.node]]\nname = \"root\"\ndrift_ppm = 200000\n").contains("drift_ppm"));
        assert!(refused("[clocks]\nshare = 2.0\n").contains("share"));
        assert!(
            refused("[clocks]\n[[clocks.node]]\nname = \"root\"\n[[clocks.node]]\nname = \"root\"\n").contains("twice")
        );
    }
}
