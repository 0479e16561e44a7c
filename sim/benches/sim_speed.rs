//! Simulator speed: simulated seconds per wall second and seeds per hour for the reference
//! scenario (40 nodes over four tiers, ten simulated minutes, 50 writes/s), per engine the
//! simulator can run. Build and run inside the simulator's build:
//!
//! `./ci/bench-sim.sh` (or `RUSTFLAGS="--cfg madsim" cargo bench -p qs-sim --bench sim_speed
//! --target-dir target/madsim -- [--seeds N]`).
//!
//! Seeds run one after another, each in its own `qsim run` process (start-up included), as
//! `qsim sweep --jobs 1` runs them; a sweep with `--jobs J` scales with cores.

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
    let (mut simulated, mut wall) = (0.0, 0.0);
    let out = tempfile::tempdir().expect("a scratch directory");
    for seed in 1..=seeds {
        // One process per run, as qsim sweep runs them: a second run in one process is neither
        // deterministic nor safe (global tracing state from the first run outlives it).
        let dir = out.path().join(format!("seed-{seed}"));
        let start = Instant::now();
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_qsim"))
            .arg("run")
            .arg(&path)
            .args(["--seed", &seed.to_string(), "--out"])
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
        println!(
            "{:<8} {seed:>6} {:>11.1}s {:>9.2}s {:>14.0} {:>12} {verdict:>8}",
            "memory",
            sim,
            took,
            sim / took,
            events
        );
        simulated += sim;
        wall += took;
    }
    println!(
        "memory: {:.0} simulated seconds per wall second; {:.0} seeds per hour per core",
        simulated / wall,
        3600.0 / (wall / seeds as f64)
    );
    println!(
        "lmdb, rocksdb: not measured — the simulator runs the memory engine only so far (scenario engine = \"memory\")"
    );
}

#[cfg(not(madsim))]
fn main() {
    eprintln!("sim_speed runs inside the simulator's build: ./ci/bench-sim.sh");
    std::process::exit(70);
}
