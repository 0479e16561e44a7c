//! `qsim run`: one scenario under one seed — the settings, the run, each checker's verdict, the
//! sizing lines, the trace, summary and report, and with `--check-determinism` a second process
//! that must write the identical trace (whether the run passed or failed: the failing seed is
//! the one a user reproduces).

use std::path::PathBuf;
use std::process::ExitCode;

use qs_reports::schema::{Checker, VerdictStatus};
use qs_sim::exit;
#[cfg(madsim)]
use qs_sim::plan::FaultOrigin;
use qs_sim::scenario::Scenario;
#[cfg(madsim)]
use qs_sim::verdict::{exit_code, verdicts};
use qs_sim::verdict::{probe_hits, signature};

/// How `qsim run` runs and what it writes beside the trace and summary.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(madsim), expect(dead_code, reason = "a build without --cfg madsim runs no scenario"))]
pub struct Options {
    /// Run the seed again in a second process and compare the traces.
    pub check_determinism: bool,
    /// Write `report.html`.
    pub write_report: bool,
    /// Write the nodes' own log (`qs_sim::node_log`).
    pub log: bool,
}

#[cfg(not(madsim))]
pub fn run(_: &Scenario, _: u64, _: Option<PathBuf>, _: Options) -> ExitCode {
    eprintln!(
        "qsim: this build has no simulator runtime (it was built without --cfg madsim); run scenarios with ./qsim"
    );
    ExitCode::from(exit::NOT_SIMULATOR)
}

/// Per tier, the sizing formulas against the configuration, then whether the formulas'
/// prediction (undersized: a `cache` or `memory` violation) agrees with what the models found.
#[cfg(madsim)]
fn print_sizing(
    scenario: &Scenario,
    sizing: &[qs_reports::schema::SizingRow],
    verdicts: &[qs_reports::schema::Verdict],
) {
    use bytesize::ByteSize;
    let Some(models) = scenario.models() else { return };
    let few = if models.capacity_pages() < qs_sim::resources::CACHE_PAGES_FEW {
        format!("; only {} — too coarse to read much into", models.capacity_pages())
    } else {
        String::new()
    };
    println!(
        "models     {} stands for {} (scale {:.3e}); cache {} = {} model pages of {}{few} ({}); {:?} allocator{}",
        ByteSize(scenario.nominal_bytes()),
        ByteSize((scenario.nominal_bytes() as f64 * models.scale) as u64),
        models.scale,
        models.spec.cache_bytes,
        models.capacity_pages(),
        models.spec.page_bytes,
        models.shape,
        models.spec.allocator,
        if models.spec.byte_sample { ", byte sample" } else { "" },
    );
    for row in sizing {
        let share = if row.used_bytes == 0 { 0.0 } else { 100.0 * row.cache_bytes as f64 / row.used_bytes as f64 };
        let limit = row.memory_limit.map_or_else(|| "no limit".to_string(), |l| ByteSize(l).to_string());
        println!(
            "sizing     {:<8} data {} in {} of pages: cache {} ({share:.2} %) vs 1–2 % = {}–{} {}; memory {limit} vs formula {} {} (modelled RSS up to {})",
            row.tier,
            ByteSize(row.data_bytes),
            ByteSize(row.used_bytes),
            ByteSize(row.cache_bytes),
            ByteSize(row.cache_low),
            ByteSize(row.cache_high),
            if row.cache_undersized { "UNDERSIZED" } else { "ok" },
            ByteSize(row.memory_needed),
            if row.memory_undersized { "UNDERSIZED" } else { "ok" },
            ByteSize(row.rss_max),
        );
    }
    let predicted =
        sizing.iter().any(|r| (r.cache_undersized && models.spec.miss_ratio_max.is_some()) || r.memory_undersized);
    let found = verdicts
        .iter()
        .any(|v| matches!(v.checker, Checker::Cache | Checker::Memory) && v.status != VerdictStatus::Pass);
    let said = |bad: bool| if bad { "a violation" } else { "a pass" };
    let agreement = if predicted == found {
        "agree".to_string()
    } else if found {
        "disagree: the models found what the formulas leave out (allocator overhead, key popularity)".to_string()
    } else {
        "disagree: sized below the formulas, the models still held (skewed reads, a small data set)".to_string()
    };
    println!("formulas   predict {}; the models found {}: {agreement}", said(predicted), said(found));
}

#[cfg(madsim)]
#[expect(
    clippy::too_many_lines,
    reason = "99 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub fn run(scenario: &Scenario, seed: u64, out: Option<PathBuf>, options: Options) -> ExitCode {
    let names = scenario.node_names();
    let prepared = qs_sim::world::Prepared::new(scenario, seed);
    let draws = &prepared.plan().draws;
    println!("scenario   {} ({})", scenario.scenario.name, scenario.path.display());
    println!("           {}", scenario.scenario.description);
    println!("seed       {seed}");
    println!("engine     {}", engine_line(scenario, draws));
    if scenario.node.tls {
        println!("tls        mutual TLS on replication, certificates issued from the seed");
    } else {
        println!("tls        off: replication in plaintext ([node] tls = false)");
    }
    if draws.fault_points {
        let origin = if scenario.scenario.buggify { "" } else { " (swarm: drawn from the seed)" };
        println!("buggify    on: the node's fault points may fire{origin}");
    }
    let knobs = &prepared.scenario().knobs_drawn;
    if !knobs.is_empty() {
        let knobs: Vec<String> = knobs.iter().map(ToString::to_string).collect();
        println!("knobs      {} (drawn from the seed; [knobs] drawn = false runs the file's)", knobs.join(", "));
    }
    let clocks = &prepared.scenario().clocks_drawn;
    if !clocks.is_empty() {
        let clocks: Vec<String> = clocks.iter().map(ToString::to_string).collect();
        println!("clocks     {} (off the simulated time; [clocks] drawn = false keeps the file's)", clocks.join("; "));
    }
    println!("nodes      {}", nodes_line(scenario, &names));
    let topology = &scenario.topology;
    if topology.datacenters > 1 {
        println!(
            "links      {} data centers (root in dc 0, node k of each tier in dc k mod {}); cross-DC replication +{:?} one way",
            topology.datacenters, topology.datacenters, topology.cross_dc_latency
        );
    }
    println!(
        "duration   {:?} safety, then up to {:?} to converge",
        scenario.scenario.duration, scenario.checks.converge_within
    );
    for (f, from) in draws.faults.iter().zip(draws.origins(scenario.fault.len())) {
        let origin = match from {
            FaultOrigin::File => String::new(),
            FaultOrigin::Drawn => "   (swarm: drawn from the seed)".to_string(),
            FaultOrigin::Related(group) => format!("   (swarm: related, {group})"),
        };
        let with = if f.group.is_empty() { String::new() } else { format!(" with {}", f.group.join(", ")) };
        println!("fault      {:?} {}{with} at {:?} for {:?}{origin}", f.kind, f.target.get_ref(), f.at, f.duration);
    }

    let out = out.unwrap_or_else(|| scenario.out_dir(std::path::Path::new("runs"), seed));
    if options.log {
        match qs_sim::node_log::install(&out) {
            Ok(path) => println!("log        the nodes' own log: {}", path.display()),
            Err(e) => eprintln!("qsim: {e}: running without it"),
        }
    }
    let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prepared.run())) {
        Ok(outcome) => outcome,
        Err(panic) => {
            let message =
                panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
            println!("verdict    CRASH: the simulation panicked: {}", message.unwrap_or_default());
            println!("reproduce  {}", scenario.reproduce(seed));
            return ExitCode::from(exit::CRASH);
        }
    };

    println!();
    println!("simulated  {:?}; {} writes acknowledged", outcome.simulated, outcome.writes_acked);
    println!(
        "trace      {} events, digest {} ({})",
        outcome.events.len(),
        outcome.digest,
        out.join("trace.jsonl").display()
    );
    if outcome.events_omitted > 0 {
        println!(
            "           {} more per-node samples and applies seen by the checkers, kept for {} nodes of each tier and every fault's nodes (checks.trace_nodes_per_tier), each tier summarized per sample",
            outcome.events_omitted, scenario.checks.trace_nodes_per_tier
        );
    }
    let verdicts = verdicts(scenario, &outcome);
    print_verdicts(&verdicts);
    println!("fetched    {}", fetched_line(&outcome.fetched));
    if let Some(line) = propagation_line(&outcome.propagation) {
        println!("propagated {line}");
    }
    print_probes(&outcome);
    print_sizing(scenario, &outcome.sizing, &verdicts);
    write(&out, scenario, seed, &outcome, &verdicts, options.write_report, false);
    let code = exit_code(&outcome, &verdicts);
    if options.check_determinism
        && let Some(code) = determinism_check(scenario, seed, &out, &outcome.trace)
    {
        return ExitCode::from(code);
    }
    if code != exit::PASS {
        println!("reproduce  {}", scenario.reproduce(seed));
        return ExitCode::from(code);
    }
    println!("verdict    PASS");
    ExitCode::from(exit::PASS)
}

/// Each checker's verdict, one line each.
pub fn print_verdicts(verdicts: &[qs_reports::schema::Verdict]) {
    for v in verdicts {
        let text = match (&v.first, v.status) {
            (_, VerdictStatus::Pass) => "pass".to_string(),
            (Some(first), _) if v.checker == Checker::Convergence => format!("FAIL: {first}"),
            (Some(first), _) => format!("FAIL ({} violations); first: {first}", v.violations),
            (None, _) => "FAIL".to_string(),
        };
        println!("{:<10} {text}", v.checker.as_str());
    }
}

/// The probes the run reached, in one line.
pub fn print_probes(outcome: &qs_sim::outcome::RunOutcome) {
    let reached: Vec<String> = probe_hits(outcome).iter().map(|h| format!("{} {}", h.probe.name(), h.hits)).collect();
    println!("probes     {}", if reached.is_empty() { "none reached".to_string() } else { reached.join(", ") });
}

/// Writes the trace and summary into `out` and, with `write_report`, the report; prints where.
/// `real`: the run was on real processes.
pub fn write(
    out: &std::path::Path,
    scenario: &Scenario,
    seed: u64,
    outcome: &qs_sim::outcome::RunOutcome,
    verdicts: &[qs_reports::schema::Verdict],
    write_report: bool,
    real: bool,
) {
    if let Err(e) = write_outputs(out, scenario, seed, outcome, verdicts, real) {
        eprintln!("qsim: writing {}: {e}", out.display());
    } else if write_report {
        match qs_reports::write_run_report(out) {
            Ok(path) => println!("report     {}", path.display()),
            Err(e) => eprintln!("qsim: writing the report: {e}"),
        }
    }
}

/// Per tier, how long entries took from the root's commit to their apply there, in one line;
/// None when no replica applied an entry.
#[cfg(madsim)]
fn propagation_line(rows: &[qs_reports::schema::PropagationRow]) -> Option<String> {
    let ms = |ms: u64| if ms < 10_000 { format!("{ms} ms") } else { format!("{:.1} s", ms as f64 / 1000.0) };
    let tiers: Vec<String> = rows
        .iter()
        .map(|r| {
            format!("{} p50 {} p99 {} max {} ({} applies)", r.tier, ms(r.p50_ms), ms(r.p99_ms), ms(r.max_ms), r.entries)
        })
        .collect();
    (!tiers.is_empty()).then(|| format!("from the root's commit: {}", tiers.join("; ")))
}

/// The replicas' fetched work in one line: what the `fetch` checker bounds.
#[cfg(madsim)]
fn fetched_line(fetched: &[qs_reports::schema::NodeFetched]) -> String {
    let mut all = qs_reports::schema::FetchedRow::default();
    for row in fetched.iter().map(|r| r.fetched) {
        all.bytes += row.bytes;
        all.entries += row.entries;
        all.entries_again += row.entries_again;
        all.chunks += row.chunks;
        all.chunks_again += row.chunks_again;
    }
    let per_entry = all.bytes.checked_div(all.entries).map_or_else(String::new, |b| format!(", {b} B an entry"));
    format!(
        "{} replicas read {}{per_entry}: {} entries ({} held already), {} snapshot chunks ({} held already)",
        fetched.len(),
        bytesize::ByteSize(all.bytes),
        all.entries,
        all.entries_again,
        all.chunks,
        all.chunks_again
    )
}

/// Runs the seed again in a fresh process — as a user reproducing it would start — and compares
/// its trace with `events`, event by event. A run must not depend on what an earlier run in the
/// same process initialised (lazy globals that draw randomness once per process would shift the
/// simulator's random stream). `Some(exit code)` when the traces differ or the second run wrote
/// none.
#[cfg(madsim)]
fn determinism_check(scenario: &Scenario, seed: u64, out: &std::path::Path, trace: &str) -> Option<u8> {
    let second = out.join("determinism-check");
    let status = std::env::current_exe().and_then(|exe| {
        std::process::Command::new(exe)
            .arg("run")
            .args(scenario.run_args(seed))
            .args(["--no-report", "--out"])
            .arg(&second)
            .stdout(std::process::Stdio::null())
            .status()
    });
    let again = match status.and_then(|_| std::fs::read_to_string(second.join("trace.jsonl"))) {
        Ok(text) => text,
        Err(e) => {
            println!("determinism FAIL: the second run produced no trace ({e})");
            println!("reproduce  {} --check-determinism", scenario.reproduce(seed));
            return Some(exit::NONDETERMINISM);
        }
    };
    let first: Vec<&str> = trace.lines().collect();
    let again: Vec<&str> = again.lines().collect();
    if let Some(at) = (0..first.len().max(again.len())).find(|&i| first.get(i) != again.get(i)) {
        println!("determinism FAIL: traces differ at event {at}");
        println!("  first run:  {}", first.get(at).copied().unwrap_or("(ended)"));
        println!("  second run: {}", again.get(at).copied().unwrap_or("(ended)"));
        println!("reproduce  {} --check-determinism", scenario.reproduce(seed));
        return Some(exit::NONDETERMINISM);
    }
    println!("determinism pass: a second process produced the identical trace");
    None
}

/// The engine line: the engine, and for LMDB how its pages are written.
#[cfg(madsim)]
fn engine_line(scenario: &Scenario, draws: &qs_sim::plan::Draws) -> String {
    let engine = scenario.engine();
    match engine {
        qs_node::EngineKind::Lmdb if scenario.node.lmdb_write_map && !draws.power_can_fail().is_empty() => {
            "lmdb, MDB_WRITEMAP (pwrite on the nodes a power loss may hit)".to_string()
        }
        qs_node::EngineKind::Lmdb if scenario.node.lmdb_write_map => "lmdb, MDB_WRITEMAP".to_string(),
        qs_node::EngineKind::Lmdb => "lmdb, pages written with pwrite ([node] lmdb_write_map = false)".to_string(),
        _ => engine.to_string(),
    }
}

/// The build that ran a scenario: version and commit, for the report header.
fn build() -> String {
    format!("qsim {} ({})", env!("CARGO_PKG_VERSION"), env!("QSIM_COMMIT"))
}

fn write_outputs(
    out: &std::path::Path,
    scenario: &Scenario,
    seed: u64,
    outcome: &qs_sim::outcome::RunOutcome,
    verdicts: &[qs_reports::schema::Verdict],
    real: bool,
) -> std::io::Result<()> {
    use qs_sim::trace::Event;
    /// Violations listed in the summary (the trace has them all).
    const VIOLATIONS_LISTED: usize = 200;
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("trace.jsonl"), &outcome.trace)?;
    let failed = verdicts.iter().any(|v| v.status != VerdictStatus::Pass);
    let summary = qs_reports::schema::RunSummary {
        scenario: scenario.scenario.name.clone(),
        description: scenario.scenario.description.clone(),
        path: scenario.path.clone(),
        seed,
        engine: scenario.engine().to_string(),
        build: build(),
        outcome: match (failed, outcome.violations().next().is_some()) {
            (false, _) => "pass",
            (true, true) => "violation",
            (true, false) => "liveness",
        }
        .to_string(),
        digest: outcome.digest.clone(),
        events: outcome.events.len() as u64,
        events_omitted: outcome.events_omitted,
        simulated_ms: outcome.simulated.as_millis() as u64,
        messages: outcome.messages,
        liveness_from_ms: outcome.liveness_from.as_millis() as u64,
        converged_after_ms: outcome.converged_after.map(|d| d.as_millis() as u64),
        max_lag_ms: outcome
            .events
            .iter()
            .filter_map(|e| match e {
                Event::LagSample { lag_ms, .. } => Some(*lag_ms),
                // A summarized tier's greatest lag: its nodes' own samples may be left out.
                Event::TierSample { lag_max_ms, .. } => Some(*lag_max_ms),
                _ => None,
            })
            .max(),
        lag_max_ms: scenario.checks.lag_max.as_millis() as u64,
        converge_within_ms: scenario.checks.converge_within.as_millis() as u64,
        writes_acked: outcome.writes_acked as u64,
        sample_interval_ms: scenario.checks.sample_interval.as_millis() as u64,
        miss_ratio_max: scenario.resources.as_ref().and_then(|r| r.miss_ratio_max),
        memory_limit_bytes: scenario.resources.as_ref().and_then(|r| r.memory_limit.map(|l| l.as_u64())),
        sizing: outcome.sizing.clone(),
        signature: signature(scenario, outcome, verdicts),
        probes: probe_hits(outcome),
        fetched: outcome.fetched.clone(),
        propagation: outcome.propagation.clone(),
        knobs: outcome.knobs.clone(),
        clocks: outcome.clocks.clone(),
        pending: outcome.pending.clone(),
        violations: outcome.violations().take(VIOLATIONS_LISTED).map(Event::line).collect(),
        verdicts: verdicts.to_vec(),
        nodes: scenario.node_infos(),
        reproduce: if real {
            format!("./qsim real {} --seed {seed}", scenario.path.display())
        } else {
            scenario.reproduce(seed)
        },
        real,
    };
    std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(&summary).expect("serializes"))
}

/// Most node names the header lists one by one; a larger tree is listed per tier.
#[cfg(madsim)]
const NAMES_LISTED_MAX: usize = 40;

/// The header's `nodes` line: the count and every name, or for a large tree each tier's size.
#[cfg(madsim)]
fn nodes_line(scenario: &Scenario, names: &[String]) -> String {
    if names.len() <= NAMES_LISTED_MAX {
        return format!("{} ({})", names.len(), names.join(", "));
    }
    let topology = &scenario.topology;
    let tiers: Vec<String> = std::iter::once(format!("root {}", topology.root_members))
        .chain(topology.tiers.iter().map(|t| format!("{} {}", t.get_ref().name, t.get_ref().count)))
        .collect();
    format!("{} (per tier: {})", names.len(), tiers.join(", "))
}
