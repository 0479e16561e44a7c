//! Simulator speed: simulated seconds per wall second and seeds per hour for the reference
//! scenario (40 nodes over four tiers, ten simulated minutes, 50 writes/s), on each engine
//! (memory, LMDB, RocksDB), with the ratio of each to the memory engine. Build and run inside the
//! simulator's build:
//!
//! `./ci/bench-sim.sh` (or `RUSTFLAGS="--cfg madsim" cargo bench -p qs-sim --bench sim_speed
//! --target-dir target/madsim -- [--seeds N] [--baseline PATH]`).
//!
//! `--baseline PATH` runs another build's `qsim` binary (a copy of `target/madsim/release/qsim`
//! taken before a change) on the same seeds, each seed on the baseline and then on this build,
//! and prints the two rates per engine side by side: a change measured against what it changed,
//! in one run, on one machine.
//!
//! Seeds run one after another, each in its own `qsim run` process (start-up included), as
//! `qsim sweep --jobs 1` runs them; a sweep with `--jobs J` scales with cores.
//!
//! Then the cost per simulated message: each memory-engine run's wall time over the messages
//! its network carried, against a bare madsim world of the same shape carrying as many
//! messages over the same simulated time with no qsim code ([`bare_world`]).
//!
//! Last, seeds per hour per core on the small `quickstart` scenario, start-up included (ten
//! seeds per reference seed), with the speed-up over the baseline when one is given.

#[cfg(madsim)]
mod bare_world;

/// Size of each message in the bare world: about a replication frame of a few small entries.
#[cfg(madsim)]
const BARE_MESSAGE_BYTES: usize = 256;

/// One `qsim run` of the reference scenario.
#[cfg(madsim)]
struct Run {
    simulated_s: f64,
    wall_s: f64,
    events: u64,
    messages: u64,
    passed: bool,
}

/// Runs `qsim` (the binary at `bin`) once on `engine` with `seed`, in its own process, as
/// `qsim sweep` runs seeds: a second run in one process is neither deterministic nor safe
/// (global tracing state outlives the first run).
#[cfg(madsim)]
fn run_once(bin: &std::path::Path, scenario: &std::path::Path, engine: &str, seed: u64, dir: &std::path::Path) -> Run {
    let start = std::time::Instant::now();
    let status = std::process::Command::new(bin)
        .arg("run")
        .arg(scenario)
        .args(["--engine", engine, "--seed", &seed.to_string(), "--no-report", "--out"])
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("running {}: {e}", bin.display()));
    let wall_s = start.elapsed().as_secs_f64();
    let summary_path = dir.join("summary.json");
    let summary: serde_json::Value = std::fs::read(&summary_path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_else(|| panic!("{} left no readable {}", bin.display(), summary_path.display()));
    Run {
        simulated_s: summary["simulated_ms"].as_f64().unwrap_or(0.0) / 1000.0,
        wall_s,
        events: summary["events"].as_u64().unwrap_or(0),
        messages: summary["messages"].as_u64().unwrap_or(0),
        passed: status.success(),
    }
}

#[cfg(madsim)]
fn usage() -> ! {
    eprintln!("usage: sim_speed [--seeds N] [--baseline PATH-TO-ANOTHER-QSIM]");
    std::process::exit(2)
}

#[cfg(madsim)]
fn main() {
    let mut seeds: u64 = 3;
    let mut baseline: Option<std::path::PathBuf> = None;
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--seeds", Some(n)) => seeds = n.parse().unwrap_or_else(|_| usage()),
            ("--baseline", Some(path)) => baseline = Some(path.into()),
            _ => usage(),
        }
    }
    if let Some(path) = &baseline
        && !path.is_file()
    {
        eprintln!("--baseline {}: no such file (give the path of another build's qsim binary)", path.display());
        std::process::exit(2)
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/reference.toml");
    let scenario = qs_sim::scenario::Scenario::load(&path).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    println!(
        "qsim simulator speed: scenario {} ({} nodes, {:?} simulated + up to {:?} to converge), {seeds} seeds",
        scenario.scenario.name,
        scenario.node_names().len(),
        scenario.scenario.duration,
        scenario.checks.converge_within
    );
    // With a baseline, each seed runs on it and then on this build, so both meet the same
    // moments of a busy machine.
    let this_build = std::path::PathBuf::from(env!("CARGO_BIN_EXE_qsim"));
    let builds: Vec<(&str, &std::path::Path)> = match &baseline {
        Some(path) => vec![("baseline", path.as_path()), ("this", this_build.as_path())],
        None => vec![("this", this_build.as_path())],
    };
    println!(
        "{:<8} {:<8} {:>6} {:>12} {:>10} {:>14} {:>12} {:>8}",
        "engine", "build", "seed", "simulated", "wall", "sim s/wall s", "events", "verdict"
    );
    let out = tempfile::tempdir().expect("a scratch directory");
    // Per engine, per build: simulated and wall seconds summed over the seeds.
    let mut rates: Vec<Vec<f64>> = Vec::new();
    // This build's memory-engine runs: (seed, run).
    let mut memory_runs: Vec<(u64, Run)> = Vec::new();
    for engine in qs_sim::scenario::ENGINES {
        // The same scenario on each engine, as `qsim run --engine` runs it.
        let mut totals = vec![(0.0, 0.0); builds.len()];
        for seed in 1..=seeds {
            for (position, (build, bin)) in builds.iter().enumerate() {
                let dir = out.path().join(format!("{engine}-{build}-seed-{seed}"));
                let run = run_once(bin, &path, engine, seed, &dir);
                let verdict = if run.passed { "pass" } else { "FAIL" };
                println!(
                    "{engine:<8} {build:<8} {seed:>6} {:>11.1}s {:>9.2}s {:>14.0} {:>12} {verdict:>8}",
                    run.simulated_s,
                    run.wall_s,
                    run.simulated_s / run.wall_s,
                    run.events
                );
                totals[position].0 += run.simulated_s;
                totals[position].1 += run.wall_s;
                if engine == "memory" && *build == "this" {
                    memory_runs.push((seed, run));
                }
            }
        }
        let engine_rates: Vec<f64> = totals.iter().map(|(simulated, wall)| simulated / wall).collect();
        for (position, (build, _)) in builds.iter().enumerate() {
            let wall = totals[position].1;
            println!(
                "{engine} ({build}): {:.0} simulated seconds per wall second; {:.0} seeds per hour per core",
                engine_rates[position],
                3600.0 / (wall / seeds as f64)
            );
        }
        rates.push(engine_rates);
    }
    println!();
    if baseline.is_some() {
        println!("{:<8} {:>14} {:>14} {:>10}", "engine", "baseline", "this build", "speed-up");
        for (engine, engine_rates) in qs_sim::scenario::ENGINES.iter().zip(&rates) {
            println!(
                "{engine:<8} {:>14.0} {:>14.0} {:>9.2}x",
                engine_rates[0],
                engine_rates[1],
                engine_rates[1] / engine_rates[0]
            );
        }
        println!(
            "(simulated seconds per wall second; the same seeds, each run on the baseline and then on this build)"
        );
        println!();
    }
    let this = builds.len() - 1;
    for (engine, engine_rates) in qs_sim::scenario::ENGINES.iter().zip(&rates).skip(1) {
        println!("{engine} runs at {:.2}x the memory engine's speed", engine_rates[this] / rates[0][this]);
    }
    println!();
    println!("cost per simulated message, memory engine, against a bare madsim world of the same shape");
    println!(
        "{:>6} {:>12} {:>14} {:>12} {:>14} {:>8}",
        "seed", "qsim msgs", "qsim us/msg", "bare msgs", "bare us/msg", "ratio"
    );
    let (mut qsim_total, mut bare_total) = (0.0, 0.0);
    for (seed, run) in memory_runs {
        let bare = bare_world::run(
            seed,
            run.messages,
            std::time::Duration::from_secs_f64(run.simulated_s),
            BARE_MESSAGE_BYTES,
        );
        let qsim_us = run.wall_s * 1e6 / run.messages.max(1) as f64;
        let bare_us = bare.wall.as_secs_f64() * 1e6 / bare.messages.max(1) as f64;
        println!(
            "{seed:>6} {:>12} {qsim_us:>14.2} {:>12} {bare_us:>14.2} {:>7.1}x",
            run.messages,
            bare.messages,
            qsim_us / bare_us
        );
        qsim_total += qsim_us;
        bare_total += bare_us;
    }
    println!(
        "qsim costs {:.1}x a bare madsim world per simulated message ({} nodes, {BARE_MESSAGE_BYTES}-byte messages, a timer each)",
        qsim_total / bare_total.max(f64::MIN_POSITIVE),
        bare_world::NODES
    );
    println!();
    small_scenario(&builds, seeds * QUICKSTART_SEEDS_PER_SEED, out.path());
}

/// `quickstart` seeds run per reference seed: a quickstart run is short enough that start-up
/// is a large part of it, which is what this row measures.
#[cfg(madsim)]
const QUICKSTART_SEEDS_PER_SEED: u64 = 10;

/// Seeds per hour per core on the small `quickstart` scenario (7 nodes, two simulated minutes),
/// each seed in its own process, start-up included, on each build (alternately, as above).
#[cfg(madsim)]
fn small_scenario(builds: &[(&str, &std::path::Path)], seeds: u64, out: &std::path::Path) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/quickstart.toml");
    let mut walls = vec![0.0; builds.len()];
    for seed in 1..=seeds {
        for (position, (build, bin)) in builds.iter().enumerate() {
            let run = run_once(bin, &path, "memory", seed, &out.join(format!("quickstart-{build}-seed-{seed}")));
            if !run.passed {
                println!("quickstart {build} seed {seed}: FAIL");
            }
            walls[position] += run.wall_s;
        }
    }
    for (position, (build, _)) in builds.iter().enumerate() {
        println!(
            "quickstart ({build}): {seeds} seeds in {:.2}s, start-up included: {:.0} seeds per hour per core",
            walls[position],
            3600.0 * seeds as f64 / walls[position]
        );
    }
    if let [baseline, this] = walls[..] {
        println!("quickstart speed-up: {:.2}x the baseline's seeds per hour", baseline / this);
    }
}

#[cfg(not(madsim))]
fn main() {
    eprintln!("sim_speed runs inside the simulator's build: ./ci/bench-sim.sh");
    std::process::exit(70);
}
