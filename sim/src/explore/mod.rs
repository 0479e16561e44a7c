//! `qsim explore`: a budget of runs of one swarm scenario, the seeds chosen by probe rarity.
//!
//! In swarm mode the seed alone decides a run's fault mix, and deciding it is cheap: the drawn
//! faults, related groups, interrupts, fault points and writer modes are pure functions of the
//! seed ([`crate::plan::Draws`]). So explore describes many candidate seeds
//! by their [`Feature`]s without running them, runs a first round of seeds in order, learns
//! from the runs' probes which features go with which probes ([`Coverage`]), and spends the
//! rest of the budget in rounds on the candidates whose features predict the probes reached
//! least so far — FoundationDB's probe rarity, Antithesis's guidance — keeping a share of
//! random picks so a feature never judged is still tried.
//!
//! Guarantees:
//! - **Every run is an ordinary seed.** A run is `qsim run SCENARIO --seed K` in its own
//!   process (the sweep's runner, [`crate::sweep::process::run_one`]); its reproduce line is
//!   that command.
//! - **The same seeds on every machine.** Which seeds run depends on the scenario, the budget,
//!   the start seed and the runs' results alone: rounds have a size fixed by the budget (not by
//!   `--jobs`), a round's results are folded in after all of it ended, the random picks come
//!   from a stream seeded by the start seed, every table is a `BTreeMap`, ties go to the lowest
//!   seed. No wall clock, no hash order, no finishing order.
//! - **No seed twice**, and never more runs than the budget.
//! - **Every probe is reported**: each probe of the vocabulary ([`Probe::ALL`]) with its runs
//!   and hits, and the ones never reached named, reached or not.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use qs_reports::schema::{Probe, ProbeHits, RunResult};
use serde::{Deserialize, Serialize};

use crate::scenario::Scenario;
use crate::sweep::process::{self, RunSettings};
use crate::sync::Locked;

mod features;
#[cfg(test)]
mod tests;

pub use features::{Feature, WriterMode, features};

/// Most runs one exploration may spend.
pub const RUNS_MAX: u64 = 1_000_000;
/// Candidate seeds per run of the budget (at least [`CANDIDATES_MIN`]): the pool the guided
/// picks choose from is `start_seed..start_seed + candidates`.
pub const CANDIDATES_PER_RUN: u64 = 16;
pub const CANDIDATES_MIN: u64 = 256;
/// The share of guided picks drawn at random from the candidates left instead.
pub const RANDOM_SHARE: f64 = 0.25;
/// The weight, in runs, of the overall reach of a probe in what a feature predicts of it: a
/// feature seen in few runs predicts about the base rate (empirical Bayes shrinkage).
pub const PRIOR_RUNS: f64 = 2.0;

/// A seed the selection may pick, with its features.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub seed: u64,
    pub features: BTreeSet<Feature>,
}

/// What the runs so far showed: how often each probe was reached, how often each feature was
/// drawn, and how often a run with a feature reached a probe.
#[derive(Clone, Debug, Default)]
pub struct Coverage {
    runs: u64,
    /// Per probe: runs that reached it, and hits in all.
    probes: BTreeMap<Probe, (u64, u64)>,
    /// Per feature: runs that drew it.
    features: BTreeMap<Feature, u64>,
    /// Per feature and probe: runs that drew the one and reached the other.
    together: BTreeMap<(Feature, Probe), u64>,
}

impl Coverage {
    /// Folds in one run: its features and the probes it reached.
    pub fn observe(&mut self, features: &BTreeSet<Feature>, probes: &[ProbeHits]) {
        self.runs += 1;
        let reached: BTreeMap<Probe, u64> = probes.iter().filter(|h| h.hits > 0).map(|h| (h.probe, h.hits)).collect();
        for (&probe, &hits) in &reached {
            let entry = self.probes.entry(probe).or_default();
            entry.0 += 1;
            entry.1 += hits;
        }
        for &feature in features {
            *self.features.entry(feature).or_default() += 1;
            for &probe in reached.keys() {
                *self.together.entry((feature, probe)).or_default() += 1;
            }
        }
    }

    /// Runs folded in.
    pub fn runs(&self) -> u64 {
        self.runs
    }

    /// Runs that reached `probe`, and its hits in all.
    pub fn reached(&self, probe: Probe) -> (u64, u64) {
        self.probes.get(&probe).copied().unwrap_or_default()
    }

    /// How likely a run that draws `feature` is to reach `probe`: the share of such runs that
    /// did, shrunk toward the share of all runs that did by [`PRIOR_RUNS`] runs' weight.
    pub fn predicts(&self, feature: Feature, probe: Probe) -> f64 {
        let base = (self.reached(probe).0 as f64 + 0.5) / (self.runs as f64 + 1.0);
        let with = self.features.get(&feature).copied().unwrap_or(0) as f64;
        let together = self.together.get(&(feature, probe)).copied().unwrap_or(0) as f64;
        (together + PRIOR_RUNS * base) / (with + PRIOR_RUNS)
    }

    /// The feature that predicts `probe` best ([`Coverage::predicts`]) among those drawn in at
    /// least two runs, with the runs that drew it and those of them that reached the probe;
    /// ties go to the first feature in order.
    pub fn best_predictor(&self, probe: Probe) -> Option<(Feature, u64, u64)> {
        let mut best: Option<(Feature, u64, u64, f64)> = None;
        for (&feature, &with) in self.features.iter().filter(|(_, with)| **with >= 2) {
            let chance = self.predicts(feature, probe);
            if best.is_none_or(|(_, _, _, top)| chance > top) {
                let together = self.together.get(&(feature, probe)).copied().unwrap_or(0);
                best = Some((feature, with, together, chance));
            }
        }
        best.filter(|(_, _, together, _)| *together > 0).map(|(feature, with, together, _)| (feature, with, together))
    }

    /// A probe's rarity weight: one over one plus the runs that reached it (and the runs
    /// already picked are expected to, `pending`).
    fn weight(&self, probe: Probe, pending: &BTreeMap<Probe, f64>) -> f64 {
        1.0 / (1.0 + self.reached(probe).0 as f64 + pending.get(&probe).copied().unwrap_or(0.0))
    }

    /// How likely a candidate is to reach each probe: the best any of its features predicts.
    fn expects(&self, features: &BTreeSet<Feature>) -> BTreeMap<Probe, f64> {
        Probe::ALL
            .iter()
            .map(|&probe| (probe, features.iter().map(|&f| self.predicts(f, probe)).fold(0.0, f64::max)))
            .collect()
    }

    /// A candidate's score: the probes it is expected to reach, each weighted by its rarity;
    /// with the probes that weigh most in it, most first.
    pub fn score(&self, features: &BTreeSet<Feature>, pending: &BTreeMap<Probe, f64>) -> (f64, Vec<Probe>) {
        let mut parts: Vec<(f64, Probe)> =
            self.expects(features).into_iter().map(|(p, chance)| (chance * self.weight(p, pending), p)).collect();
        let total: f64 = parts.iter().map(|(part, _)| part).sum();
        parts.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        (total, parts.into_iter().take(3).map(|(_, p)| p).collect())
    }
}

/// Why a seed was run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "by")]
pub enum Choice {
    /// The first round: seeds in order from the start seed, as a sweep runs them.
    First,
    /// A random pick among the candidates left (a guided round's share).
    Random,
    /// The best score among the candidates left: `aiming_at` are the probes that weighed most.
    Guided { score: f64, aiming_at: Vec<Probe> },
}

/// One pick of a round.
#[derive(Clone, Debug, PartialEq)]
pub struct Pick {
    pub seed: u64,
    pub choice: Choice,
}

/// Chooses `count` candidates not in `taken`: each at random with probability `random_share`,
/// else the best-scoring one — scored against what the runs showed plus what the round's
/// earlier picks are expected to reach, so one round spreads over several rare probes. Ties go
/// to the lowest seed.
pub fn choose(
    coverage: &Coverage,
    candidates: &[Candidate],
    taken: &BTreeSet<u64>,
    count: usize,
    random_share: f64,
    rng: &mut impl rand::Rng,
) -> Vec<Pick> {
    use rand::RngExt;
    let mut left: Vec<&Candidate> = candidates.iter().filter(|c| !taken.contains(&c.seed)).collect();
    left.sort_by_key(|c| c.seed);
    left.dedup_by_key(|c| c.seed);
    let mut pending: BTreeMap<Probe, f64> = BTreeMap::new();
    let mut picks = Vec::new();
    while picks.len() < count && !left.is_empty() {
        let (index, choice) = if rng.random_bool(random_share) {
            (rng.random_range(0..left.len()), Choice::Random)
        } else {
            let mut best: Option<(usize, f64, Vec<Probe>)> = None;
            for (i, candidate) in left.iter().enumerate() {
                let (score, aiming_at) = coverage.score(&candidate.features, &pending);
                if best.as_ref().is_none_or(|(_, top, _)| score > *top) {
                    best = Some((i, score, aiming_at));
                }
            }
            let (i, score, aiming_at) = best.expect("a candidate is left");
            (i, Choice::Guided { score, aiming_at })
        };
        let picked = left.remove(index);
        for (probe, chance) in coverage.expects(&picked.features) {
            *pending.entry(probe).or_default() += chance;
        }
        picks.push(Pick { seed: picked.seed, choice });
    }
    picks
}

/// How an exploration runs.
#[derive(Clone, Debug)]
pub struct ExplorePlan {
    /// The budget: how many runs.
    pub runs: u64,
    /// The first candidate seed.
    pub start_seed: u64,
    /// Runs at a time.
    pub jobs: usize,
    pub settings: RunSettings,
    pub out: PathBuf,
}

impl ExplorePlan {
    /// The candidate seeds: `start_seed..` [`CANDIDATES_PER_RUN`] per run of the budget, at
    /// least [`CANDIDATES_MIN`].
    pub fn candidates(&self) -> std::ops::Range<u64> {
        let count = self.runs.saturating_mul(CANDIDATES_PER_RUN).max(CANDIDATES_MIN);
        self.start_seed..self.start_seed.saturating_add(count)
    }

    /// The first round's size: a quarter of the budget (at least one run).
    pub fn first_round(&self) -> u64 {
        self.runs.div_ceil(4).max(1)
    }

    /// Each later round's size: a tenth of the budget, at least 2, at most 32 — fixed by the
    /// budget alone, so `--jobs` never changes which seeds run.
    pub fn round(&self) -> u64 {
        (self.runs / 10).clamp(2, 32)
    }
}

/// One run of an exploration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExploredRun {
    #[serde(flatten)]
    pub result: RunResult,
    /// The round it ran in (0: the first).
    pub round: u64,
    pub features: BTreeSet<Feature>,
    pub choice: Choice,
}

/// One probe across an exploration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeCount {
    pub probe: Probe,
    pub runs: u64,
    pub hits: u64,
}

/// A probe few runs reached, and what went with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RareProbe {
    pub probe: Probe,
    pub runs: u64,
    /// The feature that predicted it best, the runs that drew it, and how many of them reached
    /// the probe.
    pub feature: Option<Feature>,
    pub runs_with: u64,
    pub reached_with: u64,
}

/// An exploration's `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExploreSummary {
    /// The scenario's run name and file.
    pub scenario: String,
    pub path: PathBuf,
    pub runs: u64,
    pub failed: u64,
    /// The candidate seeds, `A..B` (B excluded).
    pub candidates: String,
    /// Every probe of the vocabulary, in table order.
    pub probes: Vec<ProbeCount>,
    pub never_reached: Vec<Probe>,
    /// The probes reached in fewer than a quarter of the runs, each with the feature that went
    /// with it most ([`Coverage::best_predictor`]), rarest first.
    #[serde(default)]
    pub rare: Vec<RareProbe>,
    /// Every run, in the order they were chosen.
    pub results: Vec<ExploredRun>,
}

impl ExploreSummary {
    fn of(scenario: &Scenario, plan: &ExplorePlan, results: &[ExploredRun]) -> ExploreSummary {
        let probes: Vec<ProbeCount> = Probe::ALL
            .iter()
            .map(|&probe| {
                let hits: Vec<u64> = results
                    .iter()
                    .filter_map(|r| r.result.probes.iter().find(|h| h.probe == probe && h.hits > 0))
                    .map(|h| h.hits)
                    .collect();
                ProbeCount { probe, runs: hits.len() as u64, hits: hits.iter().sum() }
            })
            .collect();
        let candidates = plan.candidates();
        let mut coverage = Coverage::default();
        for run in results {
            coverage.observe(&run.features, &run.result.probes);
        }
        let mut rare: Vec<RareProbe> = probes
            .iter()
            .filter(|p| p.runs > 0 && p.runs * 4 < results.len() as u64)
            .map(|p| {
                let best = coverage.best_predictor(p.probe);
                RareProbe {
                    probe: p.probe,
                    runs: p.runs,
                    feature: best.map(|b| b.0),
                    runs_with: best.map_or(0, |b| b.1),
                    reached_with: best.map_or(0, |b| b.2),
                }
            })
            .collect();
        rare.sort_by_key(|r| r.runs);
        ExploreSummary {
            rare,
            scenario: scenario.run_name(),
            path: scenario.path.clone(),
            runs: results.len() as u64,
            failed: results.iter().filter(|r| !r.result.ok).count() as u64,
            candidates: format!("{}..{}", candidates.start, candidates.end),
            never_reached: probes.iter().filter(|p| p.runs == 0).map(|p| p.probe).collect(),
            probes,
            results: results.to_vec(),
        }
    }

    /// Writes it as `summary.json` into `out`.
    pub fn write(&self, out: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(out)?;
        std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(self).expect("serializes"))
    }
}

/// Runs the exploration: `plan.runs` runs of `scenario` with qsim at `exe`, `plan.jobs` at a
/// time, each into its folder under `plan.out`; `summary.json` rewritten after every round.
/// Progress and failures (with their reproduce lines) go to stderr as runs end.
pub fn explore(scenario: &Scenario, plan: &ExplorePlan, exe: &Path) -> std::io::Result<ExploreSummary> {
    use rand::SeedableRng;
    let candidates: Vec<Candidate> =
        plan.candidates().map(|seed| Candidate { seed, features: features(scenario, seed) }).collect();
    let by_seed: BTreeMap<u64, &Candidate> = candidates.iter().map(|c| (c.seed, c)).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(plan.start_seed ^ 0x6578_706c_6f72_6500);
    let mut coverage = Coverage::default();
    let mut taken: BTreeSet<u64> = BTreeSet::new();
    let mut results: Vec<ExploredRun> = Vec::new();
    let mut round = 0;
    while (results.len() as u64) < plan.runs {
        let left = plan.runs - results.len() as u64;
        let picks: Vec<Pick> = if round == 0 {
            candidates
                .iter()
                .take(plan.first_round().min(left) as usize)
                .map(|c| Pick { seed: c.seed, choice: Choice::First })
                .collect()
        } else {
            choose(&coverage, &candidates, &taken, plan.round().min(left) as usize, RANDOM_SHARE, &mut rng)
        };
        if picks.is_empty() {
            break; // every candidate ran
        }
        let ran = run_round(scenario, plan, exe, &picks, results.len() as u64);
        for (pick, result) in picks.into_iter().zip(ran) {
            let features = by_seed[&pick.seed].features.clone();
            coverage.observe(&features, &result.probes);
            taken.insert(pick.seed);
            results.push(ExploredRun { result, round, features, choice: pick.choice });
        }
        ExploreSummary::of(scenario, plan, &results).write(&plan.out)?;
        round += 1;
    }
    Ok(ExploreSummary::of(scenario, plan, &results))
}

/// Runs one round's picks, `plan.jobs` at a time; their results in the picks' order.
fn run_round(scenario: &Scenario, plan: &ExplorePlan, exe: &Path, picks: &[Pick], done: u64) -> Vec<RunResult> {
    let next = Mutex::new(0usize);
    let results: Mutex<BTreeMap<usize, RunResult>> = Mutex::default();
    let finished = Mutex::new(done);
    std::thread::scope(|scope| {
        for _ in 0..plan.jobs.max(1).min(picks.len()) {
            scope.spawn(|| {
                loop {
                    let index = {
                        let mut next = next.locked();
                        let index = *next;
                        *next += 1;
                        index
                    };
                    let Some(pick) = picks.get(index) else { return };
                    let result = process::run_one(exe, &plan.settings, scenario, pick.seed, &plan.out);
                    let mut finished = finished.locked();
                    *finished += 1;
                    let why = match &pick.choice {
                        Choice::First => "first round".to_string(),
                        Choice::Random => "random".to_string(),
                        Choice::Guided { aiming_at, .. } => {
                            format!("for {}", aiming_at.iter().map(|p| p.name()).collect::<Vec<_>>().join(", "))
                        }
                    };
                    eprintln!(
                        "qsim explore: {}/{} seed {} ({why}): {}{}",
                        *finished,
                        plan.runs,
                        pick.seed,
                        result.outcome,
                        if result.ok {
                            String::new()
                        } else {
                            format!(
                                ", NOT AS EXPECTED ({}) — {}",
                                result.first_problem.as_deref().unwrap_or("see its output"),
                                result.reproduce
                            )
                        }
                    );
                    drop(finished);
                    results.locked().insert(index, result);
                }
            });
        }
    });
    crate::sync::into_inner(results).into_values().collect()
}
