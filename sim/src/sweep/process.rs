//! One run of a sweep in a process of its own: started, given a wall-clock budget, killed past
//! it, classified from its exit status and files, and — when asked — run a second time in
//! another process to compare traces.
//!
//! Guarantees:
//! - **Nothing a run does takes the sweep down.** A run that panics, aborts, is killed by a
//!   signal, runs out of memory or cannot start is recorded (`crash`, `error`); a run still going
//!   at its budget is killed and recorded as `hang`, with the command that reproduces it.
//! - **Nothing is lost.** The run's standard output and error go straight to `stdout.txt` and
//!   `stderr.txt` in its folder as it writes them, so a killed run leaves what it said.
//! - **A differing trace is never a pass or a plain failure.** With determinism checks on, a run
//!   whose second process writes another trace is `nondeterministic`, naming the first event
//!   that differs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wait_timeout::ChildExt;

use super::signature;
use crate::exit;
use crate::scenario::Scenario;
use qs_reports::schema::{Outcome, RunResult, RunSummary};

/// How a sweep runs each run.
#[derive(Clone, Debug, Default)]
pub struct RunSettings {
    /// The wall-clock budget of every run; `None`: [`default_budget`] of its scenario.
    pub budget: Option<Duration>,
    /// A command each run is started under (`nice -n 10`, `prlimit --as=8G`, a test double): its
    /// words, then `qsim run ...`. It must `exec` the run (or pass signals on), so that killing
    /// it at the budget kills the run.
    pub wrapper: Vec<String>,
    /// Re-run failing runs and a sample of passing ones in a second process (see
    /// [`determinism_sampled`]).
    pub check_determinism: bool,
}

/// Shortest budget: start-up, a RocksDB open, a report, on a busy machine.
pub const BUDGET_MIN: Duration = Duration::from_secs(60);
/// Longest default budget: a scenario that simulates days runs in minutes, and an hour-long
/// run is a hang whatever it simulates. `--run-timeout` overrides it.
pub const BUDGET_MAX: Duration = Duration::from_secs(3600);
/// Wall seconds allowed per simulated second. The slowest engine runs the 40-node reference
/// scenario at about 6 simulated seconds per wall second on a busy 2-core machine in a release
/// build (docs/performance.md, `./ci/bench-sim.sh`), and a debug build several times slower; 2 wall seconds
/// per simulated second leaves a debug build of a heavy scenario room.
pub const WALL_PER_SIMULATED: u32 = 2;
/// Share of passing runs a determinism check re-runs, in percent (FoundationDB's harness
/// re-runs about 5 % of its tests to check determinism).
pub const DETERMINISM_SAMPLE_PERCENT: u64 = 5;

/// A run's default budget: [`BUDGET_MIN`] plus [`WALL_PER_SIMULATED`] × (its simulated duration
/// and convergence bound), at most [`BUDGET_MAX`].
pub fn default_budget(scenario: &Scenario) -> Duration {
    let simulated = scenario.scenario.duration + scenario.checks.converge_within;
    (BUDGET_MIN + simulated * WALL_PER_SIMULATED).min(BUDGET_MAX)
}

/// Whether a passing run of `run_name` under `seed` is among the sampled
/// [`DETERMINISM_SAMPLE_PERCENT`]: a hash of both, so the same runs are sampled on every machine
/// and in every shard.
pub fn determinism_sampled(run_name: &str, seed: u64) -> bool {
    let hash = blake3::hash(format!("{run_name}\0{seed}").as_bytes());
    let first = u64::from_le_bytes(hash.as_bytes()[..8].try_into().expect("8 bytes"));
    first % 100 < DETERMINISM_SAMPLE_PERCENT
}

/// How one process of a run ended.
#[derive(Clone, Debug)]
pub struct Ended {
    pub outcome: Outcome,
    pub exit_code: Option<i32>,
    /// Why, in words, when the run's own summary cannot say (a crash, a hang, an error).
    pub problem: Option<String>,
}

impl Ended {
    /// The run's failure signature: its summary's (see [`read_summary`]) for a violation or
    /// liveness failure, else one made from how the process ended; none for a pass.
    pub fn signature(&self, summary: Option<&RunSummary>, node_names: &[String]) -> Option<String> {
        match self.outcome {
            Outcome::Pass => None,
            Outcome::Violation | Outcome::Liveness => summary.and_then(|s| s.signature.clone()),
            // A hang has no shape beyond itself: where it hung is in its folder.
            Outcome::Hang => Some("hang".to_string()),
            other => {
                Some(format!("{other}: {}", signature::normalize(self.problem.as_deref().unwrap_or(""), node_names)))
            }
        }
    }
}

/// Runs `scenario` under `seed` with `qsim` at `exe` into `dir`, within `budget`.
fn run_process(exe: &Path, wrapper: &[String], scenario: &Scenario, seed: u64, dir: &Path, budget: Duration) -> Ended {
    run_qsim(exe, wrapper, &scenario.run_args(seed), dir, budget)
}

/// Runs `qsim run RUN_ARGS --no-report --out DIR` with `qsim` at `exe` (under `wrapper`, if
/// any), within `budget`; its output streamed into `dir`.
#[expect(
    clippy::too_many_lines,
    reason = "74 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub fn run_qsim(exe: &Path, wrapper: &[String], run_args: &[String], dir: &Path, budget: Duration) -> Ended {
    let _ = std::fs::create_dir_all(dir);
    let files = std::fs::File::create(dir.join("stdout.txt"))
        .and_then(|out| Ok((out, std::fs::File::create(dir.join("stderr.txt"))?)));
    let (stdout, stderr) = match files {
        Ok(files) => files,
        Err(e) => {
            return Ended {
                outcome: Outcome::Error,
                exit_code: None,
                problem: Some(format!("cannot write into {}: {e}", dir.display())),
            };
        }
    };
    let mut command = match wrapper.split_first() {
        Some((program, words)) => {
            let mut c = Command::new(program);
            c.args(words).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    // A scratch folder of the run's own, removed below however the run ends: a killed run
    // cannot remove what it wrote there.
    let scratch = crate::scratch::RunScratch::new();
    if let Some(scratch) = &scratch {
        command.env("QSIM_SCRATCH_DIR", scratch.path());
    }
    command
        .arg("run")
        .args(run_args)
        .args(["--no-report", "--out"])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let shown = wrapper.first().map_or_else(|| exe.display().to_string(), String::clone);
            return Ended {
                outcome: Outcome::Error,
                exit_code: None,
                problem: Some(format!("could not start {shown}: {e}")),
            };
        }
    };
    let status = match child.wait_timeout(budget) {
        Ok(Some(status)) => status,
        Ok(None) | Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            return Ended {
                outcome: Outcome::Hang,
                exit_code: None,
                problem: Some(format!(
                    "still running after its budget of {}; killed",
                    humantime_serde::re::humantime::format_duration(budget)
                )),
            };
        }
    };
    let code = status.code();
    let outcome = match code.and_then(|c| u8::try_from(c).ok()) {
        Some(exit::PASS) => Outcome::Pass,
        Some(exit::VIOLATION) => Outcome::Violation,
        Some(exit::LIVENESS) => Outcome::Liveness,
        Some(exit::NONDETERMINISM) => Outcome::Nondeterministic,
        Some(exit::USAGE) | Some(exit::NOT_SIMULATOR) => Outcome::Error,
        _ => Outcome::Crash, // exit 4, a signal, or anything unexpected
    };
    let problem = match outcome {
        Outcome::Crash => Some(crash_reason(dir, &status)),
        Outcome::Error => Some(first_line(&dir.join("stderr.txt")).unwrap_or_else(|| format!("exit status {status}"))),
        _ => None,
    };
    Ended { outcome, exit_code: code, problem }
}

/// Why a run crashed: the simulator's own panic line, an allocation failure, or the signal.
fn crash_reason(dir: &Path, status: &std::process::ExitStatus) -> String {
    let stdout = std::fs::read_to_string(dir.join("stdout.txt")).unwrap_or_default();
    let stderr = std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default();
    if let Some(line) = stdout.lines().find_map(|l| l.strip_prefix("verdict    CRASH: ")) {
        return line.to_string();
    }
    if let Some(line) = stderr.lines().find(|l| l.contains("memory allocation of") && l.contains("failed")) {
        return format!("out of memory: {line}");
    }
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(9) => "killed by SIGKILL (the kernel's OOM killer, or a supervisor)".to_string(),
        Some(signal) => format!("killed by {}", signal_name(signal)),
        None => format!("exit status {status}"),
    }
}

/// A signal's name: signatures keep it (a SIGSEGV and a SIGABRT are different bugs), where a
/// bare number would be taken out as one.
fn signal_name(signal: i32) -> String {
    let name = match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        other => return format!("signal {other}"),
    };
    name.to_string()
}

fn first_line(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()?.lines().find(|l| !l.trim().is_empty()).map(str::to_string)
}

/// The `summary.json` a run wrote into `dir`, if it wrote one that parses.
pub fn read_summary(dir: &Path) -> Option<RunSummary> {
    std::fs::read(dir.join("summary.json")).ok().and_then(|b| serde_json::from_slice(&b).ok())
}

/// Runs one (scenario, seed) of a sweep into its folder under `out`.
pub fn run_one(exe: &Path, settings: &RunSettings, scenario: &Scenario, seed: u64, out: &Path) -> RunResult {
    let started = Instant::now();
    let dir = scenario.out_dir(out, seed);
    let budget = settings.budget.unwrap_or_else(|| default_budget(scenario));
    let ended = run_process(exe, &settings.wrapper, scenario, seed, &dir, budget);
    let summary = read_summary(&dir);
    let names = scenario.node_names();
    let first_problem = summary
        .as_ref()
        .and_then(|s| {
            s.verdicts
                .iter()
                .find(|v| v.status != qs_reports::schema::VerdictStatus::Pass)
                .and_then(|v| v.first.clone().map(|f| format!("{}: {f}", v.checker)))
        })
        .or_else(|| ended.problem.clone());
    let signature = ended.signature(summary.as_ref(), &names);
    let expected = scenario.scenario.expect;
    let mut result = RunResult {
        scenario: scenario.run_name(),
        path: scenario.path.clone(),
        seed,
        outcome: ended.outcome,
        expected: serde_json::to_value(expected).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
        ok: ended.exit_code == Some(i32::from(expected.exit_code())),
        exit_code: ended.exit_code,
        digest: summary.as_ref().map(|s| s.digest.clone()),
        max_lag_ms: summary.as_ref().and_then(|s| s.max_lag_ms),
        converged_after_ms: summary.as_ref().and_then(|s| s.converged_after_ms),
        propagation_p99_ms: summary.as_ref().and_then(|s| s.propagation.iter().map(|r| r.p99_ms).max()),
        first_problem,
        reproduce: scenario.reproduce(seed),
        out: dir.clone(),
        signature,
        wall_ms: 0,
        determinism_checked: false,
        probes: summary.as_ref().map(|s| s.probes.clone()).unwrap_or_default(),
        // The scenario's, not the summary's: a run that crashed wrote none, and is still a run
        // of its scenario on this engine.
        engine: Some(scenario.engine().to_string()),
        build: summary.as_ref().map(|s| s.build.clone()),
    };
    let rerun = settings.check_determinism
        && matches!(result.outcome, Outcome::Pass | Outcome::Violation | Outcome::Liveness | Outcome::Crash)
        && (result.outcome != Outcome::Pass || determinism_sampled(&result.scenario, seed));
    if rerun {
        check_determinism(exe, settings, scenario, seed, budget, &mut result);
    }
    result.wall_ms = started.elapsed().as_millis() as u64;
    result
}

/// Runs the seed again in another process into `<run folder>/determinism-check` and compares
/// the traces event by event; a difference makes the run `nondeterministic`.
fn check_determinism(
    exe: &Path,
    settings: &RunSettings,
    scenario: &Scenario,
    seed: u64,
    budget: Duration,
    result: &mut RunResult,
) {
    let second_dir: PathBuf = result.out.join("determinism-check");
    let second = run_process(exe, &settings.wrapper, scenario, seed, &second_dir, budget);
    result.determinism_checked = true;
    let first_trace = std::fs::read_to_string(result.out.join("trace.jsonl")).ok();
    let second_trace = std::fs::read_to_string(second_dir.join("trace.jsonl")).ok();
    let differs = match (&first_trace, &second_trace) {
        (Some(a), Some(b)) => {
            let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
            (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i)).map(|at| {
                format!(
                    "traces differ at event {at}: first run {}; second run {}",
                    a.get(at).copied().unwrap_or("(ended)"),
                    b.get(at).copied().unwrap_or("(ended)")
                )
            })
        }
        // A crash writes no trace: both crashing the same way is deterministic.
        (None, None) if second.outcome == result.outcome => None,
        _ => Some(format!("the first run ended {}, the second {}", result.outcome, second.outcome)),
    };
    let differs = differs.or_else(|| {
        (second.outcome != result.outcome).then(|| {
            format!("the same trace, but the first run ended {} and the second {}", result.outcome, second.outcome)
        })
    });
    if let Some(why) = differs {
        result.outcome = Outcome::Nondeterministic;
        result.ok = false;
        result.exit_code = Some(i32::from(exit::NONDETERMINISM));
        result.signature = Some("nondeterministic".to_string());
        result.first_problem = Some(why);
        result.reproduce = format!("{} --check-determinism", scenario.reproduce(seed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn about_five_percent_of_passing_runs_are_sampled_the_same_everywhere() {
        let sampled = (1..=10_000u64).filter(|&seed| determinism_sampled("swarm", seed)).count();
        assert!((400..600).contains(&sampled), "{sampled} of 10 000");
        let again = (1..=10_000u64).filter(|&seed| determinism_sampled("swarm", seed)).count();
        assert_eq!(sampled, again);
        assert_ne!(
            (1..=200u64).filter(|&s| determinism_sampled("a", s)).collect::<Vec<_>>(),
            (1..=200u64).filter(|&s| determinism_sampled("b", s)).collect::<Vec<_>>(),
        );
    }
}
