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
    sweep: Vec<SweepFile>,
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
    /// Every (scenario file, engine) pair, in the file's order.
    pub runs: Vec<(PathBuf, EngineKind)>,
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
        Ok(Nightly {
            path: path.to_path_buf(),
            seeds,
            shards: file.shards,
            jobs: file.jobs,
            known,
            run_timeout: file.run_timeout,
            check_determinism: file.check_determinism,
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
        ] {
            let err = parse(&text).unwrap_err();
            assert!(err.contains("test-nightly.toml") && err.contains(&format!("field `{field}`")), "{field}: {err}");
        }
        let err = parse("seeds = \"1..2\"\nshards = 1\nsweeps = []").unwrap_err();
        assert!(err.contains("sweeps"), "{err}");
    }
}
