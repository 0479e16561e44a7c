//! Simulator speed: simulated seconds per wall second and seeds per hour for the reference
//! scenario (40 nodes over four tiers, ten simulated minutes, 50 writes/s), on each engine
//! (memory, LMDB, RocksDB), with the ratio of each to the memory engine. Build and run inside the
//! simulator's build:
//!
//! `./ci/bench-sim.sh` (or `RUSTFLAGS="--cfg madsim" cargo bench -p qs-sim --bench sim_speed
//! --target-dir target/madsim -- [--seeds N]`).
//!
//! Seeds run one after another, each in its own `qsim run` process (start-up included), as
//! `qsim sweep --jobs 1` runs them; a sweep with `--jobs J` scales with cores.
//!
//! Then the cost per simulated message: each memory-engine run's wall time over the messages
//! its network carried, against a bare madsim world of the same shape carrying as many
//! messages over the same simulated time with no qsim code ([`bare_world`]).

#[cfg(madsim)]
mod bare_world;

/// Size of each message in the bare world: about a replication frame of a few small entries.
#[cfg(madsim)]
const BARE_MESSAGE_BYTES: usize = 256;

#[cfg(madsim)]
fn main() {
    use std::time::Instant;

    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let seeds: u64 = match args.as_slice() {
        [] => 3,
        [flag, n] if flag == "--seeds" => n.parse().unwrap_or_else(|_| {
            eprintln!("--seeds wants a number");
            std::process::exit(2)
        }),
        _ => {
            eprintln!("usage: sim_speed [--seeds N]");
            std::process::exit(2)
        }
    };
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
    println!(
        "{:<8} {:>6} {:>12} {:>10} {:>14} {:>12} {:>8}",
        "engine", "seed", "simulated", "wall", "sim s/wall s", "events", "verdict"
    );
    let out = tempfile::tempdir().expect("a scratch directory");
    let mut rates = Vec::new();
    // Memory-engine runs: (seed, simulated seconds, wall seconds, messages).
    let mut memory_runs: Vec<(u64, f64, f64, u64)> = Vec::new();
    for engine in qs_sim::scenario::ENGINES {
        // The same scenario on each engine, as `qsim run --engine` runs it.
        let (mut simulated, mut wall) = (0.0, 0.0);
        for seed in 1..=seeds {
            // One process per run, as qsim sweep runs them: a second run in one process is
            // neither deterministic nor safe (global tracing state outlives the first run).
            let dir = out.path().join(format!("{engine}-seed-{seed}"));
            let start = Instant::now();
            let status = std::process::Command::new(env!("CARGO_BIN_EXE_qsim"))
                .arg("run")
                .arg(&path)
                .args(["--engine", engine, "--seed", &seed.to_string(), "--no-report", "--out"])
                .arg(&dir)
                .stdout(std::process::Stdio::null())
                .status()
                .expect("qsim runs");
            let took = start.elapsed().as_secs_f64();
            let summary: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.join("summary.json")).expect("a summary")).expect("json");
            let sim = summary["simulated_ms"].as_f64().unwrap_or(0.0) / 1000.0;
            let verdict = if status.success() { "pass" } else { "FAIL" };
            let events = summary["events"].as_u64().unwrap_or(0);
            if engine == "memory" {
                memory_runs.push((seed, sim, took, summary["messages"].as_u64().unwrap_or(0)));
            }
            println!("{engine:<8} {seed:>6} {sim:>11.1}s {took:>9.2}s {:>14.0} {events:>12} {verdict:>8}", sim / took);
            simulated += sim;
            wall += took;
        }
        let rate = simulated / wall;
        println!(
            "{engine}: {rate:.0} simulated seconds per wall second; {:.0} seeds per hour per core",
            3600.0 / (wall / seeds as f64)
        );
        rates.push(rate);
    }
    for (engine, rate) in qs_sim::scenario::ENGINES.iter().zip(&rates).skip(1) {
        println!("{engine} runs at {:.2}x the memory engine's speed", rate / rates[0]);
    }
    println!();
    println!("cost per simulated message, memory engine, against a bare madsim world of the same shape");
    println!(
        "{:>6} {:>12} {:>14} {:>12} {:>14} {:>8}",
        "seed", "qsim msgs", "qsim us/msg", "bare msgs", "bare us/msg", "ratio"
    );
    let (mut qsim_total, mut bare_total) = (0.0, 0.0);
    for (seed, sim, took, messages) in memory_runs {
        let bare = bare_world::run(seed, messages, std::time::Duration::from_secs_f64(sim), BARE_MESSAGE_BYTES);
        let qsim_us = took * 1e6 / messages.max(1) as f64;
        let bare_us = bare.wall.as_secs_f64() * 1e6 / bare.messages.max(1) as f64;
        println!(
            "{seed:>6} {messages:>12} {qsim_us:>14.2} {:>12} {bare_us:>14.2} {:>7.1}x",
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
}

#[cfg(not(madsim))]
fn main() {
    eprintln!("sim_speed runs inside the simulator's build: ./ci/bench-sim.sh");
    std::process::exit(70);
}
