//! `qsim report` (rebuild a run's or a sweep's page), `qsim list` (the scenarios and their
//! stories) and `qsim sizing` (one scenario over cache shares × key popularities).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use qs_sim::exit;
use qs_sim::scenario::Scenario;

pub fn sizing(plan: &qs_sim::sizing::SizingPlan) -> ExitCode {
    if !cfg!(madsim) {
        eprintln!("qsim: this build cannot run scenarios (built without --cfg madsim); use ./qsim");
        return ExitCode::from(exit::NOT_SIMULATOR);
    }
    let sweep = match qs_sim::sizing::run(plan) {
        Ok(sweep) => sweep,
        Err(e) => {
            eprintln!("qsim sizing: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    println!(
        "scenario   {} seed {}; the store's pages: {}",
        sweep.scenario,
        sweep.seed,
        bytesize::ByteSize(sweep.used_bytes)
    );
    for p in &sweep.points {
        println!(
            "skew {:<5} cache {:>6} % of pages ({}): {:>6.2} % of {} page reads missed",
            p.skew,
            p.share_percent,
            bytesize::ByteSize(p.cache_bytes),
            p.miss_ratio * 100.0,
            p.read_touches
        );
    }
    for (skew, knee) in sweep.knees() {
        match knee {
            Some(k) => println!("knee       skew {skew}: under 1 % misses from {k} % of pages (the rule: 1–2 %)"),
            None => println!("knee       skew {skew}: no share tried gets under 1 % misses"),
        }
    }
    match qs_reports::sizing::write_sizing(&plan.out, &sweep) {
        Ok(path) => println!("report     {}", path.display()),
        Err(e) => {
            eprintln!("qsim sizing: {e}");
            return ExitCode::from(exit::USAGE);
        }
    }
    ExitCode::from(exit::PASS)
}

pub fn report(dir: &Path) -> ExitCode {
    let written = if dir.join("trace.jsonl").exists() {
        qs_reports::write_run_report(dir)
    } else {
        qs_reports::write_sweep_report(dir)
    };
    match written {
        Ok(path) => {
            println!("report     {}", path.display());
            ExitCode::from(exit::PASS)
        }
        Err(e) => {
            eprintln!("qsim: {e}");
            ExitCode::from(exit::USAGE)
        }
    }
}

pub fn list(dir: &Path) -> ExitCode {
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect(),
        Err(e) => {
            eprintln!("qsim: {}: {e}", dir.display());
            return ExitCode::from(exit::USAGE);
        }
    };
    paths.sort();
    let mut refused = 0;
    for path in paths {
        match Scenario::load(&path) {
            Ok(s) => println!("{:<28} {}\n{:<28} {}", s.scenario.name, path.display(), "", s.scenario.description),
            Err(e) => {
                refused += 1;
                eprintln!("qsim: {e}");
            }
        }
    }
    ExitCode::from(if refused > 0 { exit::USAGE } else { exit::PASS })
}
