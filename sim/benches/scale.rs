//! How a run's cost grows with the tree: the `scale` scenario (`scenarios/scale.toml`, ten
//! thousand nodes) and the same story on smaller trees of the same shape, each in its own
//! `qsim run` process, with its wall time, simulated time over wall time (at or above 1: real
//! time or faster), peak resident memory and memory per node, and the trace it kept. Build and
//! run inside the simulator's build:
//!
//! `./ci/bench-scale.sh` (or `RUSTFLAGS="--cfg madsim" cargo bench -p qs-sim --bench scale
//! --target-dir target/madsim -- [--nodes 500,2000,5000,10000] [--seed N]`).
//!
//! A smaller tree keeps the scenario's fan-out, workload and faults
//! ([`qs_sim::scenario::resize`]): top-1 partitioned, and the points of presence that follow main-2
//! down together. At 10 000 nodes the run is the shipped scenario's. Runs go one after another, so
//! each has the machine's two cores to itself (the simulation is one thread; the second core is
//! the kernel's and this process's).

#[cfg(madsim)]
use qs_sim::scenario::resize;

/// One `qsim run` of one tree size.
#[cfg(madsim)]
struct Run {
    nodes: usize,
    simulated_s: f64,
    wall_s: f64,
    /// Peak resident set of the run's process (the kernel's `ru_maxrss`), bytes.
    peak_rss: u64,
    events: u64,
    events_omitted: u64,
    passed: bool,
}

/// Runs `qsim` once on `scenario` in its own process and reads its peak memory from the kernel
/// when it is reaped (`wait4`).
#[cfg(madsim)]
fn run_once(scenario: &std::path::Path, nodes: usize, seed: u64, dir: &std::path::Path) -> Run {
    let bin = env!("CARGO_BIN_EXE_qsim");
    let start = std::time::Instant::now();
    // Reaped below by `wait4`, which also gives the peak memory std's `wait` does not.
    #[allow(clippy::zombie_processes)]
    let child = std::process::Command::new(bin)
        .arg("run")
        .arg(scenario)
        .args(["--seed", &seed.to_string(), "--no-report", "--out"])
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("running {bin}: {e}"));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    #[allow(unsafe_code)]
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet reaped (std reaps only in wait/try_wait, never
    // called on it); `status` and `usage` are valid for writes.
    #[allow(unsafe_code)]
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4 on the run's process: {}", std::io::Error::last_os_error());
    let wall_s = start.elapsed().as_secs_f64();
    let summary_path = dir.join("summary.json");
    let summary: serde_json::Value = std::fs::read(&summary_path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_else(|| panic!("{bin} left no readable {}", summary_path.display()));
    Run {
        nodes,
        simulated_s: summary["simulated_ms"].as_f64().unwrap_or(0.0) / 1000.0,
        wall_s,
        peak_rss: usage.ru_maxrss as u64 * 1024,
        events: summary["events"].as_u64().unwrap_or(0),
        events_omitted: summary["events_omitted"].as_u64().unwrap_or(0),
        passed: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
    }
}

#[cfg(madsim)]
fn usage() -> ! {
    eprintln!("usage: scale [--nodes 500,2000,5000,10000] [--seed N]");
    std::process::exit(2)
}

#[cfg(madsim)]
#[expect(
    clippy::too_many_lines,
    reason = "73 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
fn main() {
    let mut sizes: Vec<usize> = vec![500, 2_000, 5_000, 10_000];
    let mut seed: u64 = 1;
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--nodes", Some(list)) => {
                sizes = list.split(',').map(|n| n.trim().parse().unwrap_or_else(|_| usage())).collect();
            }
            ("--seed", Some(n)) => seed = n.parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    let (min, max) = (resize::NODES_MIN, qs_sim::scenario::NODES_MAX);
    if let Some(bad) = sizes.iter().find(|&&n| !(min..=max).contains(&n)) {
        eprintln!("--nodes {bad}: each size must be {min} to {max} (the loader's limit)");
        std::process::exit(2)
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/scale.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let out = tempfile::tempdir().expect("a scratch directory");
    println!("qsim scale: {} on trees of {sizes:?} nodes, seed {seed}, one run at a time", path.display());
    println!(
        "{:>7} {:>28} {:>10} {:>9} {:>13} {:>10} {:>10} {:>9} {:>10} {:>8}",
        "nodes",
        "tiers (top/main/pop/edge)",
        "simulated",
        "wall",
        "sim s/wall s",
        "peak RSS",
        "per node",
        "kept",
        "omitted",
        "verdict"
    );
    let mut runs: Vec<Run> = Vec::new();
    for &nodes in &sizes {
        let scenario = out.path().join(format!("scale-{nodes}.toml"));
        let sized = resize::resized(&text, nodes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        std::fs::write(&scenario, sized).unwrap_or_else(|e| panic!("writing {}: {e}", scenario.display()));
        let run = run_once(&scenario, nodes, seed, &out.path().join(format!("run-{nodes}")));
        let tiers = resize::tiers_for(nodes).map(|n| n.to_string()).join("/");
        println!(
            "{:>7} {:>28} {:>9.1}s {:>8.1}s {:>13.2} {:>9.0}M {:>9.0}K {:>9} {:>10} {:>8}",
            nodes,
            tiers,
            run.simulated_s,
            run.wall_s,
            run.simulated_s / run.wall_s,
            run.peak_rss as f64 / 1e6,
            run.peak_rss as f64 / 1e3 / nodes as f64,
            run.events,
            run.events_omitted,
            if run.passed { "pass" } else { "FAIL" }
        );
        runs.push(run);
    }
    // How cost grows: wall time and memory per node, against the smallest tree's.
    if let Some(first) = runs.first() {
        println!("\ngrowth against {} nodes (1.00: linear in nodes)", first.nodes);
        println!("{:>7} {:>16} {:>18}", "nodes", "wall per node", "memory per node");
        for run in &runs {
            let per = |v: f64, n: usize| v / n as f64;
            println!(
                "{:>7} {:>15.2}x {:>17.2}x",
                run.nodes,
                per(run.wall_s, run.nodes) / per(first.wall_s, first.nodes),
                per(run.peak_rss as f64, run.nodes) / per(first.peak_rss as f64, first.nodes)
            );
        }
    }
    if runs.iter().any(|r| !r.passed) {
        eprintln!("a run failed: rerun it with `qsim run` on the scenario the table names to see why");
        std::process::exit(1)
    }
}

#[cfg(not(madsim))]
fn main() {
    eprintln!("the scale benchmark runs in the simulator's build: ./ci/bench-scale.sh");
    std::process::exit(2)
}
