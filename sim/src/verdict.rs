//! The verdict on a run: each checker's pass or fail with its first problem, the exit code, and
//! the failure's signature — one judgement for every run, under the simulator (`qsim run`,
//! sweeps, shrinking) and on real processes (`qsim real`).
//!
//! Guarantees: a pure function of the scenario and the run's outcome (its trace events and
//! what stayed pending at the end); every checker [`crate::checkers::names`] lists for the
//! scenario gets exactly one verdict, in that order; a run whose scenario names probes and
//! reached none of them fails `coverage`.

use qs_reports::schema::{Checker, ProbeHits, Verdict, VerdictStatus};

use crate::exit;
use crate::outcome::RunOutcome;
use crate::scenario::Scenario;
use crate::trace::Event;

/// Each checker's verdict, in [`crate::checkers::names`] order.
pub fn verdicts(scenario: &Scenario, outcome: &RunOutcome) -> Vec<Verdict> {
    crate::checkers::names(scenario)
        .iter()
        .map(|&checker| {
            let (violations, first) = if checker == Checker::Convergence {
                (outcome.pending.len() as u64, outcome.pending.first().cloned())
            } else if checker == Checker::Coverage {
                match coverage_missed(scenario, outcome) {
                    Some(problem) => (1, Some(problem)),
                    None => (0, None),
                }
            } else {
                let found: Vec<&Event> = outcome
                    .violations()
                    .filter(|e| matches!(e, Event::Violation { checker: c, .. } if *c == checker))
                    .collect();
                let first = found.first().map(|e| match e {
                    Event::Violation { at_ms, node, index, message, .. } => {
                        format!("{node} at {at_ms} ms, index {index}: {message}")
                    }
                    _ => unreachable!("filtered to violations"),
                });
                (found.len() as u64, first)
            };
            Verdict {
                checker,
                status: if violations == 0 { VerdictStatus::Pass } else { VerdictStatus::Fail },
                violations,
                first,
            }
        })
        .collect()
}

/// The run's exit code by its verdicts: a run that missed its probes did not show what it
/// exists to show — a failure, not a liveness problem.
pub fn exit_code(outcome: &RunOutcome, verdicts: &[Verdict]) -> u8 {
    let failed = verdicts.iter().any(|v| v.status != VerdictStatus::Pass);
    let violated = outcome.violations().next().is_some()
        || verdicts.iter().any(|v| v.checker == Checker::Coverage && v.status != VerdictStatus::Pass);
    match (failed, violated) {
        (false, _) => exit::PASS,
        (true, true) => exit::VIOLATION,
        (true, false) => exit::LIVENESS,
    }
}

/// The failure's signature: the first failing checker and its first problem's shape.
pub fn signature(scenario: &Scenario, outcome: &RunOutcome, verdicts: &[Verdict]) -> Option<String> {
    let failing = verdicts.iter().find(|v| v.status != VerdictStatus::Pass)?;
    let names = scenario.node_names();
    let message = if failing.checker == Checker::Convergence {
        outcome.pending.first().cloned()
    } else if failing.checker == Checker::Coverage {
        failing.first.clone()
    } else {
        outcome.violations().find_map(|e| match e {
            Event::Violation { checker, message, .. } if *checker == failing.checker => Some(message.clone()),
            _ => None,
        })
    };
    Some(crate::sweep::signature::of_violation(failing.checker.as_str(), message.as_deref().unwrap_or(""), &names))
}

/// The probes a run reached, from its `probes` event.
pub fn probe_hits(outcome: &RunOutcome) -> Vec<ProbeHits> {
    outcome
        .events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::Probes { hits, .. } => Some(hits.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The `coverage` check: a scenario that names its probes fails a run that reached none.
fn coverage_missed(scenario: &Scenario, outcome: &RunOutcome) -> Option<String> {
    let wanted = &scenario.checks.probes;
    let hits = probe_hits(outcome);
    if wanted.is_empty() || hits.iter().any(|h| wanted.contains(&h.probe)) {
        return None;
    }
    let names = |probes: &mut dyn Iterator<Item = qs_reports::schema::Probe>| {
        let names: Vec<String> = probes.map(|p| p.name().to_string()).collect();
        if names.is_empty() { "none".to_string() } else { names.join(", ") }
    };
    Some(format!(
        "the run reached none of the probes the scenario exists to reach ({}); it reached: {}",
        names(&mut wanted.iter().copied()),
        names(&mut hits.iter().map(|h| h.probe))
    ))
}
