//! `qsim explore`: a budget of runs of one swarm scenario, the seeds chosen by probe rarity
//! (`qs_sim::explore`); prints the plan, then per probe its runs and hits, the probes never
//! reached, and every failure with the command that reproduces it.
//!
//! Exit codes: 0 when every run ended as the scenario expects; 1 otherwise; 2 for bad
//! arguments, a scenario that does not load or has no `[swarm]`, or an output folder that
//! cannot be written.

use std::path::Path;
use std::process::ExitCode;

use qs_reports::schema::Outcome;
use qs_sim::exit;
use qs_sim::explore::{ExplorePlan, ExploreSummary};

use super::load;

pub fn explore(path: &Path, engine: Option<qs_node::EngineKind>, plan: &ExplorePlan) -> ExitCode {
    let scenario = match load(path, engine) {
        Ok(scenario) => scenario,
        Err(e) => {
            eprintln!("qsim explore: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    if scenario.swarm.is_none() {
        eprintln!(
            "qsim explore: {} has no [swarm]: every seed draws the same faults, so there is nothing to choose \
             between; sweep it instead",
            path.display()
        );
        return ExitCode::from(exit::USAGE);
    }
    let candidates = plan.candidates();
    println!(
        "explore    {} ({}): {} runs from seeds {}..{}, {} at a time",
        scenario.run_name(),
        path.display(),
        plan.runs,
        candidates.start,
        candidates.end,
        plan.jobs
    );
    println!(
        "rounds     the first {} seeds in order, then rounds of {} chosen by probe rarity ({} % of picks at random)",
        plan.first_round().min(plan.runs),
        plan.round(),
        (qs_sim::explore::RANDOM_SHARE * 100.0).round()
    );
    let exe = std::env::current_exe().expect("the path of this qsim");
    let summary = match qs_sim::explore::explore(&scenario, plan, &exe) {
        Ok(summary) => summary,
        Err(e) => {
            eprintln!("qsim explore: writing into {}: {e}", plan.out.display());
            return ExitCode::from(exit::USAGE);
        }
    };
    // Run reports for the runs that did not pass, as a sweep writes them.
    for run in summary.results.iter().filter(|r| r.result.outcome != Outcome::Pass) {
        if run.result.out.join("trace.jsonl").exists()
            && let Err(e) = qs_reports::write_run_report(&run.result.out)
        {
            eprintln!("qsim explore: report for seed {}: {e}", run.result.seed);
        }
    }
    print_report(&summary, &plan.out);
    ExitCode::from(if summary.failed > 0 { exit::VIOLATION } else { exit::PASS })
}

/// The probe table, the probes never reached, the failures and the closing line.
fn print_report(summary: &ExploreSummary, out: &Path) {
    println!("{:<34} {:>5} {:>9}", "probe", "runs", "hits");
    for row in &summary.probes {
        println!("{:<34} {:>5} {:>9}", row.probe.name(), row.runs, row.hits);
    }
    let never: Vec<&str> = summary.never_reached.iter().map(|p| p.name()).collect();
    println!(
        "never      reached by none of {} runs: {}",
        summary.runs,
        if never.is_empty() { "none".into() } else { never.join(", ") }
    );
    for rare in &summary.rare {
        let with = match rare.feature {
            Some(feature) => {
                format!("; most often with {feature} ({} of its {} runs reached it)", rare.reached_with, rare.runs_with)
            }
            None => String::new(),
        };
        println!("rare       {} in {} runs{with}", rare.probe.name(), rare.runs);
    }
    let guided = summary.results.iter().filter(|r| matches!(r.choice, qs_sim::explore::Choice::Guided { .. })).count();
    println!("chosen     {guided} runs guided by probe rarity, the rest in the first round or at random");
    for run in summary.results.iter().filter(|r| !r.result.ok) {
        let r = &run.result;
        println!(
            "failure    seed {}: {} (expected {}) — {}",
            r.seed,
            r.outcome,
            r.expected,
            r.first_problem.as_deref().unwrap_or("see its output")
        );
        println!("reproduce  {}", r.reproduce);
    }
    println!(
        "results    {} runs, {} not as expected ({})",
        summary.runs,
        summary.failed,
        out.join("summary.json").display()
    );
}
