//! Simulator speed: simulated seconds per wall second and seeds per hour for the reference
//! scenario (40 nodes over four tiers, ten simulated minutes, 50 writes/s), on each engine
//! (memory, LMDB, RocksDB) and on LMDB with `[node] lmdb_write_map = false` (`pwrite`, not the
//! simulator's default `MDB_WRITEMAP`),
//! with the ratio of each to the memory engine, and the CPU each run used (RocksDB's flushes
//! and compactions run on threads of their own, so a run can use more than one core). Build
//! and run inside the simulator's build:
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
//! messages over the same simulated time with no qsim code ([`bare_world`]); then the same for
//! the reference world with its writes cut to 1 per second (same seeds, same faults and reads),
//! and what each write adds: the wall time between the two worlds over the writes between them
//! (with `--baseline`, the baseline runs that world too, and its cost per message is printed
//! beside this build's).
//! Most of qsim's cost per message at 50 writes/s is applying entries on every replica, not
//! carrying messages; the two rows tell the two apart.
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
    /// User and system CPU time of the run's process, all its threads.
    cpu_s: f64,
    events: u64,
    messages: u64,
    /// Writes the root acknowledged.
    writes_acked: u64,
    passed: bool,
}

/// Runs `qsim` (the binary at `bin`) once on `engine` with `seed`, in its own process, as
/// `qsim sweep` runs seeds: a second run in one process is neither deterministic nor safe
/// (global tracing state outlives the first run).
#[cfg(madsim)]
fn run_once(bin: &std::path::Path, scenario: &std::path::Path, engine: &str, seed: u64, dir: &std::path::Path) -> Run {
    // Waited-for children's CPU time, which grows by exactly this run's once it is waited for.
    let children_cpu = || {
        let stat = procfs::process::Process::myself().and_then(|me| me.stat()).expect("reading /proc/self/stat");
        (stat.cutime + stat.cstime) as f64 / procfs::ticks_per_second() as f64
    };
    let cpu_before = children_cpu();
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
    let cpu_s = children_cpu() - cpu_before;
    let summary_path = dir.join("summary.json");
    let summary: serde_json::Value = std::fs::read(&summary_path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_else(|| panic!("{} left no readable {}", bin.display(), summary_path.display()));
    Run {
        simulated_s: summary["simulated_ms"].as_f64().unwrap_or(0.0) / 1000.0,
        wall_s,
        cpu_s,
        events: summary["events"].as_u64().unwrap_or(0),
        messages: summary["messages"].as_u64().unwrap_or(0),
        writes_acked: summary["writes_acked"].as_u64().unwrap_or(0),
        passed: status.success(),
    }
}

/// One way the reference scenario runs: an engine, and for LMDB whether the scenario turns the
/// simulator's `MDB_WRITEMAP` off (`[node] lmdb_write_map = false`).
#[cfg(madsim)]
struct Setup {
    label: &'static str,
    engine: &'static str,
    lmdb_pwrite: bool,
}

#[cfg(madsim)]
const SETUPS: [Setup; 4] = [
    Setup { label: "memory", engine: "memory", lmdb_pwrite: false },
    Setup { label: "lmdb", engine: "lmdb", lmdb_pwrite: false },
    Setup { label: "lmdb-pwrite", engine: "lmdb", lmdb_pwrite: true },
    Setup { label: "rocksdb", engine: "rocksdb", lmdb_pwrite: false },
];

/// Writes the scenario at `from` to `to`, changed by `edit`.
#[cfg(madsim)]
fn write_edited(from: &std::path::Path, to: &std::path::Path, edit: impl FnOnce(&mut toml::Table)) {
    let text = std::fs::read_to_string(from).unwrap_or_else(|e| panic!("reading {}: {e}", from.display()));
    let mut scenario: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    edit(&mut scenario);
    std::fs::write(to, toml::to_string(&scenario).expect("a scenario serializes"))
        .unwrap_or_else(|e| panic!("writing {}: {e}", to.display()));
}

/// Writes the scenario at `from` to `to` with `[node] lmdb_write_map = false` added.
#[cfg(madsim)]
fn write_with_lmdb_pwrite(from: &std::path::Path, to: &std::path::Path) {
    write_edited(from, to, |scenario| {
        let node = scenario.entry("node").or_insert_with(|| toml::Value::Table(toml::Table::new()));
        node.as_table_mut().expect("[node] is a table").insert("lmdb_write_map".into(), toml::Value::Boolean(false));
    });
}

/// Writes the scenario at `from` to `to` with every writer's rate set to `rate_per_s`.
#[cfg(madsim)]
fn write_with_write_rate(from: &std::path::Path, to: &std::path::Path, rate_per_s: i64) {
    write_edited(from, to, |scenario| {
        let workloads = scenario.get_mut("workload").and_then(toml::Value::as_array_mut).expect("[[workload]]s");
        for workload in workloads.iter_mut().filter_map(toml::Value::as_table_mut) {
            if workload.get("kind").and_then(toml::Value::as_str) == Some("writer") {
                workload.insert("rate_per_s".into(), toml::Value::Integer(rate_per_s));
            }
        }
    });
}

/// Writer rate of the message-cost table's second world: the reference world with its writes
/// all but gone, so what is left per message is carrying it (keepalives, reads, reconnections
/// after faults) rather than applying entries.
#[cfg(madsim)]
const FEW_WRITES_PER_S: i64 = 1;

#[cfg(madsim)]
fn usage() -> ! {
    eprintln!("usage: sim_speed [--seeds N] [--baseline PATH-TO-ANOTHER-QSIM]");
    std::process::exit(2)
}

#[cfg(madsim)]
#[expect(
    clippy::too_many_lines,
    reason = "166 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
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
        "{:<11} {:<8} {:>6} {:>12} {:>10} {:>14} {:>8} {:>12} {:>8}",
        "engine", "build", "seed", "simulated", "wall", "sim s/wall s", "cores", "events", "verdict"
    );
    let out = tempfile::tempdir().expect("a scratch directory");
    let pwrite_path = out.path().join("reference-lmdb-pwrite.toml");
    write_with_lmdb_pwrite(&path, &pwrite_path);
    // Per setup, per build: the rate, where that build ran the setup.
    let mut rates: Vec<Vec<f64>> = Vec::new();
    // This build's memory-engine runs: (seed, run).
    let mut memory_runs: Vec<(u64, Run)> = Vec::new();
    for setup in &SETUPS {
        let label = setup.label;
        // The same scenario on each engine, as `qsim run --engine` runs it.
        let scenario = if setup.lmdb_pwrite { &pwrite_path } else { &path };
        // A baseline from before the simulator's default turned to `MDB_WRITEMAP` runs `lmdb`
        // with `pwrite`, so that row's speed-up is the default's. (A baseline from before
        // `lmdb_write_map` existed refuses the `lmdb-pwrite` scenario.)
        let mut totals = vec![(0.0, 0.0, 0.0); builds.len()];
        for seed in 1..=seeds {
            for (position, (build, bin)) in builds.iter().enumerate() {
                let dir = out.path().join(format!("{label}-{build}-seed-{seed}"));
                let run = run_once(bin, scenario, setup.engine, seed, &dir);
                let verdict = if run.passed { "pass" } else { "FAIL" };
                println!(
                    "{label:<11} {build:<8} {seed:>6} {:>11.1}s {:>9.2}s {:>14.0} {:>8.2} {:>12} {verdict:>8}",
                    run.simulated_s,
                    run.wall_s,
                    run.simulated_s / run.wall_s,
                    run.cpu_s / run.wall_s,
                    run.events
                );
                totals[position].0 += run.simulated_s;
                totals[position].1 += run.wall_s;
                totals[position].2 += run.cpu_s;
                if setup.engine == "memory" && *build == "this" {
                    memory_runs.push((seed, run));
                }
            }
        }
        let mut setup_rates = Vec::new();
        for (position, (build, _)) in builds.iter().enumerate() {
            let (simulated, wall, cpu) = totals[position];
            setup_rates.push(simulated / wall);
            println!(
                "{label} ({build}): {:.0} simulated seconds per wall second; {:.0} seeds per hour per core \
                 ({:.0} by CPU time, {:.2} cores in use)",
                simulated / wall,
                3600.0 / (wall / seeds as f64),
                3600.0 / (cpu / seeds as f64),
                cpu / wall
            );
        }
        rates.push(setup_rates);
    }
    println!();
    if baseline.is_some() {
        println!("{:<11} {:>14} {:>14} {:>10}", "engine", "baseline", "this build", "speed-up");
        for (setup, setup_rates) in SETUPS.iter().zip(&rates) {
            let (before, now) = (setup_rates[0], setup_rates[1]);
            println!("{:<11} {:>14.0} {:>14.0} {:>9.2}x", setup.label, before, now, now / before);
        }
        println!(
            "(simulated seconds per wall second; the same seeds, each run on the baseline and then on this build)"
        );
        println!();
    }
    let this = builds.len() - 1;
    let memory = rates[0][this];
    for (setup, setup_rates) in SETUPS.iter().zip(&rates).skip(1) {
        let ratio = setup_rates[this] / memory;
        println!("{} runs at {ratio:.2}x the memory engine's speed", setup.label);
    }
    println!("(lmdb: the simulator's default, MDB_WRITEMAP; lmdb-pwrite: [node] lmdb_write_map = false)");
    println!();
    println!("cost per simulated message, memory engine, against a bare madsim world of the same shape");
    let few_writes_path = out.path().join("reference-few-writes.toml");
    write_with_write_rate(&path, &few_writes_path, FEW_WRITES_PER_S);
    // This build's runs of the 1-write/s world, and with a baseline, the baseline's: each seed
    // on the baseline and then on this build, as above.
    let mut few_writes: Vec<(u64, Run)> = Vec::new();
    let mut few_writes_baseline: Vec<(u64, Run)> = Vec::new();
    for (seed, _) in &memory_runs {
        for &(build, bin) in &builds {
            let dir = out.path().join(format!("few-writes-{build}-seed-{seed}"));
            let run = run_once(bin, &few_writes_path, "memory", *seed, &dir);
            if build == "this" { few_writes.push((*seed, run)) } else { few_writes_baseline.push((*seed, run)) }
        }
    }
    let world = |name: &str, runs: &[(u64, Run)]| {
        println!("{name}");
        println!(
            "{:>6} {:>12} {:>14} {:>12} {:>14} {:>8}",
            "seed", "qsim msgs", "qsim us/msg", "bare msgs", "bare us/msg", "ratio"
        );
        let (mut qsim_total, mut bare_total) = (0.0, 0.0);
        for (seed, run) in runs {
            let simulated = std::time::Duration::from_secs_f64(run.simulated_s);
            let bare = bare_world::run(*seed, run.messages, simulated, BARE_MESSAGE_BYTES);
            let qsim_us = run.wall_s * 1e6 / run.messages.max(1) as f64;
            let bare_us = bare.wall.as_secs_f64() * 1e6 / bare.messages.max(1) as f64;
            let failed = if run.passed { "" } else { "  (the qsim run FAILED)" };
            println!(
                "{seed:>6} {:>12} {qsim_us:>14.2} {:>12} {bare_us:>14.2} {:>7.1}x{failed}",
                run.messages,
                bare.messages,
                qsim_us / bare_us
            );
            qsim_total += qsim_us;
            bare_total += bare_us;
        }
        qsim_total / bare_total.max(f64::MIN_POSITIVE)
    };
    let ratio = world("the reference world", &memory_runs);
    println!(
        "qsim costs {ratio:.1}x a bare madsim world per simulated message ({} nodes, {BARE_MESSAGE_BYTES}-byte messages, a timer each)",
        bare_world::NODES
    );
    let few_ratio = world(&format!("the same world at {FEW_WRITES_PER_S} write/s"), &few_writes);
    // What the writes add: the wall time between the two worlds over the writes between them,
    // each applied by every node but the root.
    let sum = |runs: &[(u64, Run)], field: fn(&Run) -> f64| runs.iter().map(|(_, run)| field(run)).sum::<f64>();
    let extra_wall = sum(&memory_runs, |r| r.wall_s) - sum(&few_writes, |r| r.wall_s);
    let extra_writes = sum(&memory_runs, |r| r.writes_acked as f64) - sum(&few_writes, |r| r.writes_acked as f64);
    let replicas = (scenario.node_names().len() - 1) as f64;
    println!(
        "at {FEW_WRITES_PER_S} write/s qsim costs {few_ratio:.1}x; the writes add {:.0} us of wall time each \
         ({:.2} us per replica that applies it)",
        extra_wall * 1e6 / extra_writes.max(1.0),
        extra_wall * 1e6 / (extra_writes * replicas).max(1.0)
    );
    if !few_writes_baseline.is_empty() {
        // The change's effect on carrying messages: the same seeds, the same messages but for
        // what the change itself re-draws.
        let per_message =
            |runs: &[(u64, Run)]| sum(runs, |r| r.wall_s) * 1e6 / sum(runs, |r| r.messages as f64).max(1.0);
        let (before, after) = (per_message(&few_writes_baseline), per_message(&few_writes));
        println!(
            "at {FEW_WRITES_PER_S} write/s the baseline takes {before:.2} us per message, this build {after:.2}: \
             {:.2}x the baseline's speed",
            before / after
        );
    }
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
