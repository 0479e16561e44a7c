//! The nightly definition: one TOML file (`ci/nightly.toml`) that says which scenarios run on
//! which engines over which seeds, cut into how many shards — read by every launcher (the
//! `ci/nightly-*.sh` scripts, the GitHub Actions workflow, the Kubernetes Job) through
//! `qsim nightly`, so they cannot drift apart.
//!
//! ```toml
//! seeds = "1..=200"               # A..B (B excluded) or A..=B
//! shards = 8                      # machines (CI jobs, pods) the sweep is cut into
//! jobs = 2                        # runs at a time on each (default: its cores)
//! known = "nightly-known.txt"     # failure signatures already known, beside this file
//! run_timeout = "20m"             # every run's wall-clock budget (default: from its scenario)
//! check_determinism = true        # re-run failing runs and 5 % of passing ones (default: true)
//! shard_budget = "45m"            # the wall time a shard may take; `qsim nightly --plan` checks
//!                                 # the seeds against it from a recent night's timings
//!
//! [[sweep]]
//! scenarios = ["scenarios/quickstart.toml", "scenarios/swarm.toml"]
//! engines = ["memory", "lmdb", "rocksdb"]
//! ```
//!
//! Scenario paths are relative to the directory `qsim` runs in (the repository root), as the
//! reproduce lines print them; `known` is relative to the definition's own directory.
//!
//! Guarantees: a definition that loads names at least one (scenario, engine) pair, each once,
//! every scenario file loads, the seeds and shard count are valid, and the known-failures file
//! exists; any problem is refused with the file, the field and what is wrong.

use std::path::{Path, PathBuf};
use std::time::Duration;

use qs_node::EngineKind;
use serde::Deserialize;

use super::Shard;
use crate::scenario::{Scenario, parse_engine};

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NightlyFile {
    seeds: String,
    shards: u64,
    #[serde(default)]
    jobs: Option<usize>,
    #[serde(default)]
    known: Option<PathBuf>,
    #[serde(default, with = "humantime_serde")]
    run_timeout: Option<Duration>,
    #[serde(default = "yes")]
    check_determinism: bool,
    #[serde(default, with = "humantime_serde")]
    shard_budget: Option<Duration>,
    sweep: Vec<SweepFile>,
    #[serde(default)]
    real: Option<RealFile>,
}

/// `[real]`: scenarios run on real processes (`qsim real`), one after another.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RealFile {
    scenarios: Vec<PathBuf>,
    engines: Vec<String>,
    seeds: String,
    #[serde(default)]
    skip_unsupported: bool,
}

/// The nightly's real-process runs: each (scenario, engine) pair over `seeds`, by `qsim real`
/// (wall-clock time: one after another, never side by side).
#[derive(Clone, Debug, PartialEq)]
pub struct RealRuns {
    pub runs: Vec<(PathBuf, EngineKind)>,
    pub seeds: std::ops::Range<u64>,
    /// Faults the machine cannot inject are skipped with a warning rather than refusing the run.
    pub skip_unsupported: bool,
}

impl RealRuns {
    /// The `qsim real` argument lists, one per pair (`first_seeds`: only that many seeds each).
    pub fn commands(&self, first_seeds: Option<u64>) -> Vec<Vec<String>> {
        let end = first_seeds.map_or(self.seeds.end, |n| self.seeds.end.min(self.seeds.start + n));
        self.runs
            .iter()
            .map(|(scenario, engine)| {
                let mut args = vec![
                    "real".to_string(),
                    scenario.display().to_string(),
                    "--engine".to_string(),
                    engine.to_string(),
                    "--seeds".to_string(),
                    format!("{}..{end}", self.seeds.start),
                ];
                if self.skip_unsupported {
                    args.push("--skip-unsupported".to_string());
                }
                args
            })
            .collect()
    }
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepFile {
    scenarios: Vec<PathBuf>,
    engines: Vec<String>,
}

/// A loaded, checked nightly definition.
#[derive(Clone, Debug)]
pub struct Nightly {
    pub path: PathBuf,
    pub seeds: std::ops::Range<u64>,
    pub shards: u64,
    pub jobs: Option<usize>,
    /// The known-failures file, resolved against the definition's directory.
    pub known: Option<PathBuf>,
    pub run_timeout: Option<Duration>,
    pub check_determinism: bool,
    /// The wall time one shard may take on its machine (see [`estimate`]).
    pub shard_budget: Option<Duration>,
    /// Every (scenario file, engine) pair, in the file's order.
    pub runs: Vec<(PathBuf, EngineKind)>,
    /// The real-process runs (`[real]`), if any.
    pub real: Option<RealRuns>,
}

/// Why a nightly definition was refused.
#[derive(Debug, thiserror::Error)]
pub enum NightlyError {
    #[error("{path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: {message}")]
    Syntax { path: String, message: String },
    #[error("{path}: field `{field}`: {problem}")]
    Invalid { path: String, field: &'static str, problem: String },
}

impl Nightly {
    pub fn load(path: &Path) -> Result<Nightly, NightlyError> {
        let shown = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|source| NightlyError::Read { path: shown.clone(), source })?;
        Nightly::parse(&text, path)
    }

    /// Parses `text` as the definition at `path` (used for messages and to resolve `known`).
    #[expect(
        clippy::too_many_lines,
        reason = "90 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
    pub fn parse(text: &str, path: &Path) -> Result<Nightly, NightlyError> {
        let shown = path.display().to_string();
        let invalid =
            |field: &'static str, problem: String| NightlyError::Invalid { path: shown.clone(), field, problem };
        let file: NightlyFile =
            toml::from_str(text).map_err(|e| NightlyError::Syntax { path: shown.clone(), message: e.to_string() })?;
        let seeds = super::parse_seeds(&file.seeds).map_err(|e| invalid("seeds", e))?;
        if file.shards == 0 {
            return Err(invalid("shards", "must be at least 1".into()));
        }
        if file.jobs == Some(0) {
            return Err(invalid("jobs", "must be at least 1".into()));
        }
        if file.run_timeout.is_some_and(|t| t.is_zero()) {
            return Err(invalid("run_timeout", "must be above zero".into()));
        }
        if file.shard_budget.is_some_and(|t| t.is_zero()) {
            return Err(invalid("shard_budget", "must be above zero".into()));
        }
        let known = file.known.map(|k| path.parent().unwrap_or(Path::new("")).join(k));
        if let Some(known) = &known
            && !known.is_file()
        {
            return Err(invalid("known", format!("{} is not a file", known.display())));
        }
        let mut runs: Vec<(PathBuf, EngineKind)> = Vec::new();
        if file.sweep.is_empty() {
            return Err(invalid("sweep", "names no [[sweep]]: nothing would run".into()));
        }
        for sweep in &file.sweep {
            if sweep.scenarios.is_empty() || sweep.engines.is_empty() {
                return Err(invalid("sweep", "each [[sweep]] needs at least one scenario and one engine".into()));
            }
            let engines: Vec<EngineKind> = sweep
                .engines
                .iter()
                .map(|engine| parse_engine(engine).map_err(|e| invalid("sweep.engines", e)))
                .collect::<Result<_, _>>()?;
            for scenario in &sweep.scenarios {
                Scenario::load(scenario).map_err(|e| invalid("sweep.scenarios", e.to_string()))?;
                for &engine in &engines {
                    let pair = (scenario.clone(), engine);
                    if runs.contains(&pair) {
                        return Err(invalid(
                            "sweep",
                            format!(
                                "{} on {engine} is listed twice: its runs would be counted twice",
                                scenario.display()
                            ),
                        ));
                    }
                    runs.push(pair);
                }
            }
        }
        let real = match &file.real {
            None => None,
            Some(real) => {
                let seeds = super::parse_seeds(&real.seeds).map_err(|e| invalid("real.seeds", e))?;
                if real.scenarios.is_empty() || real.engines.is_empty() {
                    return Err(invalid("real", "needs at least one scenario and one engine".into()));
                }
                let mut runs = Vec::new();
                for scenario in &real.scenarios {
                    Scenario::load(scenario).map_err(|e| invalid("real.scenarios", e.to_string()))?;
                    for engine in &real.engines {
                        let engine = parse_engine(engine).map_err(|e| invalid("real.engines", e))?;
                        if engine == EngineKind::Memory {
                            return Err(invalid(
                                "real.engines",
                                "memory is the simulator's engine: a real node's store must outlive its process".into(),
                            ));
                        }
                        runs.push((scenario.clone(), engine));
                    }
                }
                Some(RealRuns { runs, seeds, skip_unsupported: real.skip_unsupported })
            }
        };
        Ok(Nightly {
            real,
            path: path.to_path_buf(),
            seeds,
            shards: file.shards,
            jobs: file.jobs,
            known,
            run_timeout: file.run_timeout,
            check_determinism: file.check_determinism,
            shard_budget: file.shard_budget,
            runs,
        })
    }

    /// Checks that `shard` is one of this definition's shards (or `1/1`, the whole sweep in one
    /// process): a launcher cut into another number of shards would run a different sweep.
    pub fn check_shard(&self, shard: Shard) -> Result<(), NightlyError> {
        if shard.count != self.shards && shard.count != 1 {
            return Err(NightlyError::Invalid {
                path: self.path.display().to_string(),
                field: "shards",
                problem: format!(
                    "the definition cuts the sweep into {} shards, but this launcher runs shard {}/{}; change one to match the other",
                    self.shards, shard.index, shard.count
                ),
            });
        }
        Ok(())
    }
}

/// One scenario × engine pair's share of a plan, from a recent night's timings.
#[derive(Clone, Debug, PartialEq)]
pub struct PairEstimate {
    /// The pair's run name (the scenario's name, with the engine when overridden).
    pub run_name: String,
    /// How many of its runs the timings hold.
    pub runs_timed: u64,
    /// Their mean wall time; `None` when none was timed (the plan then assumes the mean of
    /// every timed run, and says so).
    pub mean_wall_ms: Option<u64>,
}

/// What a plan costs: per pair, and a shard's wall time.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanEstimate {
    pub pairs: Vec<PairEstimate>,
    /// Every run's wall time summed, divided among the shards and the runs a shard runs at
    /// once. Runs share a machine's cores, so this is a floor when `jobs` exceeds the cores.
    pub shard_wall: Duration,
    /// Seeds per pair that would fill `shard_budget` (when the definition sets one).
    pub seeds_to_fill: Option<u64>,
}

/// Estimates a plan of `seeds` seeds over the pairs named `run_names`, cut into `shards` shards
/// of `jobs` runs at a time, from `timings` (a recent sweep's runs, any seeds).
pub fn estimate(
    run_names: &[String],
    seeds: u64,
    shards: u64,
    jobs: usize,
    budget: Option<Duration>,
    timings: &[qs_reports::schema::RunResult],
) -> PlanEstimate {
    let pairs: Vec<PairEstimate> = run_names
        .iter()
        .map(|name| {
            let walls: Vec<u64> = timings.iter().filter(|r| &r.scenario == name).map(|r| r.wall_ms).collect();
            let runs_timed = walls.len() as u64;
            let mean_wall_ms = (runs_timed > 0).then(|| walls.iter().sum::<u64>() / runs_timed);
            PairEstimate { run_name: name.clone(), runs_timed, mean_wall_ms }
        })
        .collect();
    let timed: Vec<u64> = pairs.iter().filter_map(|p| p.mean_wall_ms).collect();
    let fallback = if timed.is_empty() { 0 } else { timed.iter().sum::<u64>() / timed.len() as u64 };
    // One seed of every pair, in wall milliseconds.
    let per_seed_ms: u64 = pairs.iter().map(|p| p.mean_wall_ms.unwrap_or(fallback)).sum();
    let parallel = shards.max(1) * jobs.max(1) as u64;
    let shard_wall = Duration::from_millis(per_seed_ms.saturating_mul(seeds) / parallel);
    let seeds_to_fill = budget.filter(|_| per_seed_ms > 0).map(|b| b.as_millis() as u64 * parallel / per_seed_ms);
    PlanEstimate { pairs, shard_wall, seeds_to_fill }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    /// Parses `text` with `@` standing for the repository root (tests run in `sim/`).
    fn parse(text: &str) -> Result<Nightly, String> {
        let text = text.replace('@', &root().display().to_string());
        Nightly::parse(&text, &root().join("ci/test-nightly.toml")).map_err(|e| e.to_string())
    }

    const GOOD: &str = r#"
        seeds = "1..=20"
        shards = 4
        [[sweep]]
        scenarios = ["@/scenarios/quickstart.toml"]
        engines = ["memory", "lmdb"]
        [[sweep]]
        scenarios = ["@/scenarios/cascade.toml"]
        engines = ["rocksdb"]
    "#;

    /// `[real]` lists `qsim real` commands, one per pair, its seeds cut by `first_seeds`; the
    /// simulator's memory engine is refused there.
    #[test]
    fn real_runs_are_one_command_a_pair() {
        assert_eq!(parse(GOOD).unwrap().real, None);
        let with_real = format!(
            "{GOOD}\n[real]\nscenarios = [\"@/scenarios/quickstart.toml\"]\nengines = [\"lmdb\", \"rocksdb\"]\nseeds = \"1..=10\"\nskip_unsupported = true\n"
        );
        let real = parse(&with_real).unwrap().real.unwrap();
        let commands = real.commands(Some(2));
        assert_eq!(commands.len(), 2);
        assert_eq!(commands[1][2..], ["--engine", "rocksdb", "--seeds", "1..3", "--skip-unsupported"]);
        assert!(commands[0][1].ends_with("scenarios/quickstart.toml"));
        assert_eq!(real.commands(None)[0][5], "1..11");
        let memory = with_real.replace("[\"lmdb\", \"rocksdb\"]", "[\"memory\"]");
        assert!(parse(&memory).unwrap_err().contains("real.engines"), "{}", parse(&memory).unwrap_err());
    }

    #[test]
    fn a_definition_lists_every_scenario_engine_pair_once() {
        let n = parse(GOOD).unwrap();
        assert_eq!((n.seeds.clone(), n.shards, n.check_determinism), (1..21, 4, true));
        let pairs: Vec<(String, EngineKind)> =
            n.runs.iter().map(|(p, e)| (p.file_name().unwrap().to_string_lossy().into_owned(), *e)).collect();
        assert_eq!(
            pairs,
            [
                ("quickstart.toml".to_string(), EngineKind::Memory),
                ("quickstart.toml".to_string(), EngineKind::Lmdb),
                ("cascade.toml".to_string(), EngineKind::Rocksdb)
            ]
        );
        assert!(n.check_shard("2/4".parse().unwrap()).is_ok());
        assert!(n.check_shard("1/1".parse().unwrap()).is_ok(), "the whole sweep at once");
        let err = n.check_shard("2/8".parse().unwrap()).unwrap_err().to_string();
        assert!(err.contains("field `shards`") && err.contains("4 shards") && err.contains("2/8"), "{err}");
    }

    #[test]
    fn bad_definitions_are_refused_naming_the_field() {
        for (text, field) in [
            (GOOD.replace("shards = 4", "shards = 0"), "shards"),
            (GOOD.replace("1..=20", "20..1"), "seeds"),
            (GOOD.replace("\"lmdb\"", "\"lmbd\""), "sweep.engines"),
            (GOOD.replace("cascade.toml", "no-such.toml"), "sweep.scenarios"),
            (GOOD.replace("\"memory\", \"lmdb\"", "\"memory\", \"memory\""), "sweep"),
            (format!("known = \"missing.txt\"\n{GOOD}"), "known"),
            (format!("run_timeout = \"0s\"\n{GOOD}"), "run_timeout"),
            (format!("shard_budget = \"0s\"\n{GOOD}"), "shard_budget"),
        ] {
            let err = parse(&text).unwrap_err();
            assert!(err.contains("test-nightly.toml") && err.contains(&format!("field `{field}`")), "{field}: {err}");
        }
        let err = parse("seeds = \"1..2\"\nshards = 1\nsweeps = []").unwrap_err();
        assert!(err.contains("sweeps"), "{err}");
    }

    fn timed(scenario: &str, wall_ms: u64) -> qs_reports::schema::RunResult {
        qs_reports::schema::RunResult {
            scenario: scenario.into(),
            path: PathBuf::new(),
            seed: 1,
            outcome: qs_reports::schema::Outcome::Pass,
            expected: "pass".into(),
            ok: true,
            exit_code: Some(0),
            digest: None,
            first_problem: None,
            reproduce: String::new(),
            out: PathBuf::new(),
            max_lag_ms: None,
            converged_after_ms: None,
            propagation_p99_ms: None,
            signature: None,
            wall_ms,
            determinism_checked: false,
            probes: Vec::new(),
            engine: None,
            build: None,
        }
    }

    /// A shard's time is every pair's mean wall time × seeds, shared by shards × jobs; a pair
    /// with no timing is charged the mean of the timed ones; the budget gives the seeds.
    #[test]
    fn a_plan_is_estimated_from_a_nights_timings() {
        let timings = [timed("a", 1_000), timed("a", 3_000), timed("b", 10_000), timed("other", 99_000)];
        let names = ["a".to_string(), "b".to_string(), "c".to_string()];
        let plan = estimate(&names, 100, 4, 2, Some(Duration::from_secs(3600)), &timings);
        assert_eq!(plan.pairs[0], PairEstimate { run_name: "a".into(), runs_timed: 2, mean_wall_ms: Some(2_000) });
        assert_eq!(plan.pairs[2].mean_wall_ms, None);
        // One seed: 2 s + 10 s + 6 s (c at the mean) = 18 s; × 100 seeds / (4 × 2) = 225 s.
        assert_eq!(plan.shard_wall, Duration::from_secs(225));
        // An hour × 8 / 18 s = 1600 seeds.
        assert_eq!(plan.seeds_to_fill, Some(1600));
        assert_eq!(estimate(&names, 100, 4, 2, None, &timings).seeds_to_fill, None);
    }
}
