//! `qsim shrink`: a failing run turned into the smallest scenario that still fails the same way.
//!
//! 1. The run's scenario is written out as an explicit schedule ([`edits::explicit`]): the
//!    faults the seed drew become `[[fault]]` entries and `[swarm]` goes, so the same seed runs
//!    the same faults without drawing them. That scenario must fail with the run's signature, or
//!    the shrink stops and says so.
//! 2. Greedy reduction: candidates ([`edits::candidates`]: a shorter run, fewer faults, shorter
//!    faults, fewer nodes and tiers, fewer writes and reads) are tried in order, each in its own
//!    `qsim run` process under a wall-clock budget; the first that fails with the **same exit
//!    code and the same signature** replaces the scenario and the candidates start over. It
//!    stops when no candidate keeps the failure, or at the step budget.
//! 3. The result is written with a header saying what failed, the original scenario and seed,
//!    and the reduction (before → after), ready to be pinned under `scenarios/regression/`.
//!
//! Guarantees: the candidates and their order depend only on the scenario, so the same failing
//! run shrinks to the same scenario; a candidate the loader refuses is skipped without a run;
//! nothing a candidate does (hang, crash) stops the shrink; the shrunk scenario fails exactly
//! as the original run did, because it was last run and compared.

pub mod edits;

use std::path::{Path, PathBuf};
use std::time::Duration;

use qs_node::EngineKind;
use toml::Table;

use crate::scenario::Scenario;
use crate::sweep::process::{Ended, default_budget, read_summary, run_qsim};
use edits::Size;

/// What to shrink and how.
#[derive(Clone, Debug)]
pub struct ShrinkPlan {
    pub scenario: PathBuf,
    pub seed: u64,
    /// Run on this engine instead of the scenario's.
    pub engine: Option<EngineKind>,
    /// Most candidate runs.
    pub max_steps: usize,
    /// Each candidate's wall-clock budget; `None`: from its scenario.
    pub budget: Option<Duration>,
    /// Where the candidates run (each in a folder of its own).
    pub work: PathBuf,
}

/// How the run fails: what every candidate must reproduce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub exit_code: Option<i32>,
    pub signature: String,
}

/// A finished shrink.
#[derive(Clone, Debug)]
pub struct Shrunk {
    pub failure: Failure,
    pub before: Size,
    pub after: Size,
    /// Candidates run, and those kept, in words.
    pub steps: usize,
    pub kept: Vec<String>,
    /// The shrunk scenario as a table; [`edits::render`] writes it.
    pub table: Table,
    /// Whether the step budget ran out before the last candidate was tried.
    pub budget_exhausted: bool,
}

/// Why a shrink could not start.
#[derive(Debug, thiserror::Error)]
pub enum ShrinkError {
    #[error("{0}")]
    Scenario(String),
    #[error("{path} seed {seed} does not fail (it passes), so there is nothing to shrink")]
    Passes { path: String, seed: u64 },
    #[error(
        "the explicit schedule of {path} seed {seed} fails differently ({found}) than the run ({expected}): \
         the failure depends on how the faults were drawn, which this shrink cannot keep"
    )]
    NotReproduced { path: String, seed: u64, expected: String, found: String },
    #[error("writing {path}: {source}")]
    Write { path: String, source: std::io::Error },
}

/// Progress, as the shrink goes: one line per candidate.
pub type Progress<'a> = &'a mut dyn FnMut(&str);

pub fn shrink(plan: &ShrinkPlan, progress: Progress<'_>) -> Result<Shrunk, ShrinkError> {
    let exe = std::env::current_exe().map_err(|e| ShrinkError::Scenario(format!("the path of this qsim: {e}")))?;
    let text = std::fs::read_to_string(&plan.scenario)
        .map_err(|e| ShrinkError::Scenario(format!("{}: {e}", plan.scenario.display())))?;
    let original_table: Table =
        toml::from_str(&text).map_err(|e| ShrinkError::Scenario(format!("{}: {e}", plan.scenario.display())))?;
    let mut original = Scenario::parse(&text, &plan.scenario).map_err(|e| ShrinkError::Scenario(e.to_string()))?;
    if let Some(engine) = plan.engine {
        original.override_engine(engine);
    }
    let shown = plan.scenario.display().to_string();
    std::fs::create_dir_all(&plan.work)
        .map_err(|source| ShrinkError::Write { path: plan.work.display().to_string(), source })?;

    // The failure to keep: the original run's.
    progress(&format!("running {} seed {} as given", shown, plan.seed));
    let run_dir = plan.work.join("original");
    let ended = run_qsim(&exe, &[], &original.run_args(plan.seed), &run_dir, budget(plan, &original));
    let failure = match ended.signature(read_summary(&run_dir).as_ref(), &original.node_names()) {
        Some(signature) => Failure { exit_code: ended.exit_code, signature },
        None => return Err(ShrinkError::Passes { path: shown, seed: plan.seed }),
    };
    progress(&format!("fails: {} (exit {:?})", failure.signature, failure.exit_code));

    let mut table = edits::explicit(&original_table, &original, plan.seed);
    let before = Size::of(&original, crate::plan::Draws::of(&original, plan.seed).faults.len());
    let mut step = 0;
    let explicit_failure = try_candidate(&exe, plan, &table, step, &failure)
        .map_err(|e| ShrinkError::Scenario(format!("the explicit schedule: {e}")))?;
    if let Err(found) = explicit_failure {
        return Err(ShrinkError::NotReproduced { path: shown, seed: plan.seed, expected: failure.signature, found });
    }
    progress(&format!("the explicit schedule ({before}) fails the same way"));

    let mut kept = Vec::new();
    let mut budget_exhausted = false;
    'shrinking: loop {
        let current = parse(&table, plan)?;
        for (what, candidate) in edits::candidates(&table, &current) {
            if parse(&candidate, plan).is_err() {
                continue;
            }
            if step >= plan.max_steps {
                budget_exhausted = true;
                break 'shrinking;
            }
            step += 1;
            match try_candidate(&exe, plan, &candidate, step, &failure) {
                Ok(Ok(())) => {
                    progress(&format!("step {step}: kept: {what}"));
                    kept.push(what);
                    table = candidate;
                    continue 'shrinking;
                }
                Ok(Err(found)) => progress(&format!("step {step}: {what}: fails otherwise ({found}); not kept")),
                Err(e) => progress(&format!("step {step}: {what}: {e}; not kept")),
            }
        }
        break;
    }
    let shrunk = parse(&table, plan)?;
    let after = Size::of(&shrunk, shrunk.fault.len());
    Ok(Shrunk { failure, before, after, steps: step, kept, table, budget_exhausted })
}

fn budget(plan: &ShrinkPlan, scenario: &Scenario) -> Duration {
    plan.budget.unwrap_or_else(|| default_budget(scenario))
}

/// The table as a scenario (its path: the original's, for messages).
fn parse(table: &Table, plan: &ShrinkPlan) -> Result<Scenario, ShrinkError> {
    let text = toml::to_string(table).map_err(|e| ShrinkError::Scenario(e.to_string()))?;
    Scenario::parse(&text, &plan.scenario).map_err(|e| ShrinkError::Scenario(e.to_string()))
}

/// Runs `candidate` under the seed in its own process: `Ok(Ok(()))` if it fails as `failure`
/// does, `Ok(Err(how))` if it ends otherwise.
fn try_candidate(
    exe: &Path,
    plan: &ShrinkPlan,
    candidate: &Table,
    step: usize,
    failure: &Failure,
) -> Result<Result<(), String>, ShrinkError> {
    let scenario = parse(candidate, plan)?;
    let dir = plan.work.join(format!("step-{step:03}"));
    std::fs::create_dir_all(&dir).map_err(|source| ShrinkError::Write { path: dir.display().to_string(), source })?;
    let file = dir.join("scenario.toml");
    std::fs::write(&file, toml::to_string(candidate).map_err(|e| ShrinkError::Scenario(e.to_string()))?)
        .map_err(|source| ShrinkError::Write { path: file.display().to_string(), source })?;
    let args = vec![file.display().to_string(), "--seed".to_string(), plan.seed.to_string()];
    let ended: Ended = run_qsim(exe, &[], &args, &dir.join("run"), budget(plan, &scenario));
    let signature = ended.signature(read_summary(&dir.join("run")).as_ref(), &scenario.node_names());
    Ok(match signature {
        Some(s) if s == failure.signature && ended.exit_code == failure.exit_code => Ok(()),
        Some(s) => Err(s),
        None => Err("passes".to_string()),
    })
}
