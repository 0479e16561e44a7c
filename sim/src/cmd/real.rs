//! `qsim real`: a scenario on real `qs-node` processes (`qs_sim::real`), one seed or a range of
//! them — the settings, what this machine cannot inject, each run's verdicts, trace, summary
//! and report. Only in the build without `--cfg madsim` (`./qsim real` builds and runs it).

use std::path::PathBuf;
use std::process::ExitCode;

use qs_sim::exit;
use qs_sim::scenario::Scenario;

/// What `qsim real` was asked.
#[derive(Debug)]
pub struct Args {
    pub seeds: Vec<u64>,
    pub out: Option<PathBuf>,
    pub node_bin: Option<PathBuf>,
    pub skip_unsupported: bool,
    pub keep: Option<PathBuf>,
    pub write_report: bool,
}

#[cfg(madsim)]
pub fn real(_: Scenario, args: Args) -> ExitCode {
    let _ = (args.seeds, args.out, args.node_bin, args.skip_unsupported, args.keep, args.write_report);
    eprintln!(
        "qsim: this is the simulator's build (--cfg madsim), whose runtime cannot run real processes' clients; \
         run ./qsim real, which builds the real-runtime qsim and qs-node"
    );
    ExitCode::from(exit::USAGE)
}

/// The `qs-node` to run: `--node-bin`, else `QSIM_NODE_BIN`, else the one beside this `qsim`.
#[cfg(not(madsim))]
fn node_bin(given: Option<PathBuf>) -> Result<PathBuf, String> {
    let path = match given.or_else(|| std::env::var_os("QSIM_NODE_BIN").map(PathBuf::from)) {
        Some(path) => path,
        None => {
            std::env::current_exe().map_err(|e| format!("finding this qsim's folder: {e}"))?.with_file_name("qs-node")
        }
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "no qs-node at {} (./qsim real builds it beside qsim; --node-bin or QSIM_NODE_BIN names another)",
            path.display()
        ))
    }
}

#[cfg(not(madsim))]
#[expect(
    clippy::too_many_lines,
    reason = "85 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub fn real(mut scenario: Scenario, args: Args) -> ExitCode {
    use qs_sim::real::network;
    // Everything happens in a network namespace of the run's own: this process re-runs itself
    // inside one, unless it already is.
    match network::enter_namespace() {
        Ok(Some(status)) => {
            return ExitCode::from(status.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(exit::CRASH));
        }
        Ok(None) => {}
        Err(e) => eprintln!("qsim: {e}; running on this machine's own loopback, without network faults"),
    }
    let namespace = match network::prepare() {
        Ok(namespace) => namespace,
        Err(e) => {
            eprintln!("qsim: preparing the run's network namespace: {e}");
            return ExitCode::from(exit::CRASH);
        }
    };
    let capabilities = network::Capabilities::probe(namespace);
    let node_bin = match node_bin(args.node_bin) {
        Ok(path) => path,
        Err(e) => {
            eprintln!("qsim: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    if let Err(e) = refuse_unreal(&scenario) {
        eprintln!("qsim: {}: {e}", scenario.path.display());
        return ExitCode::from(exit::USAGE);
    }
    if scenario.engine() == qs_node::EngineKind::Memory {
        // A memory store dies with its process: a killed node would come back empty.
        scenario.override_engine(qs_node::EngineKind::Lmdb);
    }

    println!("scenario   {} ({})", scenario.scenario.name, scenario.path.display());
    println!("           {}", scenario.scenario.description);
    println!("mode       real: one qs-node process per node ({}), wall-clock time, no digest", node_bin.display());
    println!("engine     {} (on disk)", scenario.engine());
    println!(
        "network    {}; nftables {}, netem {}",
        match capabilities.namespace {
            network::Namespace::Private => "a namespace of the run's own, node n of tier t at 127.1.t.n",
            network::Namespace::Shared => "this machine's loopback (no namespace): network faults refused",
        },
        if capabilities.nftables { "yes" } else { "no" },
        if capabilities.netem { "yes" } else { "no (this kernel has no sch_netem)" },
    );
    println!(
        "duration   {:?} safety, then up to {:?} to converge",
        scenario.scenario.duration, scenario.checks.converge_within
    );
    println!("not judged fetch (no tap on a real wire); resource models and sizing (simulated only)");

    let options = qs_sim::real::Options { node_bin, skip_unsupported: args.skip_unsupported, keep: args.keep };
    if args.seeds.len() == 1 {
        return ExitCode::from(one(
            &scenario,
            args.seeds[0],
            &args.out,
            false,
            &options,
            &capabilities,
            args.write_report,
        ));
    }
    // Several seeds: judged as a sweep judges, against the scenario's `expect`.
    let expected = scenario.scenario.expect.exit_code();
    let mut unexpected = Vec::new();
    for &seed in &args.seeds {
        let code = one(&scenario, seed, &args.out, true, &options, &capabilities, args.write_report);
        if code != expected {
            unexpected.push((seed, code));
        }
    }
    let runs = args.seeds.len();
    println!(
        "\nreal runs  {runs} seeds of {}: {} as expected (exit {expected}){}",
        scenario.scenario.name,
        runs - unexpected.len(),
        if unexpected.is_empty() {
            String::new()
        } else {
            format!(
                "; NOT as expected: {}",
                unexpected.iter().map(|(s, c)| format!("seed {s} exit {c}")).collect::<Vec<_>>().join(", ")
            )
        }
    );
    ExitCode::from(
        unexpected.first().map_or(exit::PASS, |&(_, code)| if code == exit::PASS { exit::VIOLATION } else { code }),
    )
}

/// A scenario real runs cannot carry as it is, refused by name.
#[cfg(not(madsim))]
fn refuse_unreal(scenario: &Scenario) -> Result<(), String> {
    if scenario.topology.datacenters > 1 && !scenario.topology.cross_dc_latency.is_zero() {
        return Err(
            "[topology] cross_dc_latency: the relays that delay cross-data-center links are the simulator's".into()
        );
    }
    if scenario.resources.is_some() {
        return Err("[resources]: the cache and memory models judge simulated runs only".into());
    }
    Ok(())
}

/// One seed: its faults, the run, its verdicts and files. Returns its exit code.
#[cfg(not(madsim))]
fn one(
    scenario: &Scenario,
    seed: u64,
    out: &Option<PathBuf>,
    many: bool,
    options: &qs_sim::real::Options,
    capabilities: &qs_sim::real::network::Capabilities,
    write_report: bool,
) -> u8 {
    use super::run::{print_probes, print_verdicts, write};
    use qs_sim::verdict::{exit_code, verdicts};
    let draws = qs_sim::plan::Draws::of(scenario, seed);
    let (faults, skipped) = match qs_sim::real::runnable_faults(&draws.faults, capabilities, options.skip_unsupported) {
        Ok(kept) => kept,
        Err(e) => {
            eprintln!("qsim: {}: seed {seed}: {e}", scenario.path.display());
            return exit::USAGE;
        }
    };
    println!("\nseed       {seed}");
    for fault in &faults {
        let with = if fault.group.is_empty() { String::new() } else { format!(" with {}", fault.group.join(", ")) };
        println!(
            "fault      {:?} {}{with} at {:?} for {:?}",
            fault.kind,
            fault.target.get_ref(),
            fault.at,
            fault.duration
        );
    }
    for line in &skipped {
        println!("SKIPPED    {line}");
    }
    let outcome = match qs_sim::real::run(scenario, seed, &faults, options) {
        Ok(outcome) => outcome,
        Err(e) => {
            println!("verdict    CRASH: the real run could not go on: {e}");
            return exit::CRASH;
        }
    };
    let out = match out {
        Some(out) if many => out.join(format!("seed-{seed}")),
        Some(out) => out.clone(),
        None => scenario.out_dir(std::path::Path::new("runs/real"), seed),
    };
    println!("wall clock {:?}; {} writes acknowledged", outcome.simulated, outcome.writes_acked);
    println!("trace      {} events ({})", outcome.events.len(), out.join("trace.jsonl").display());
    let verdicts: Vec<_> =
        verdicts(scenario, &outcome).into_iter().filter(|v| v.checker != qs_reports::schema::Checker::Fetch).collect();
    print_verdicts(&verdicts);
    print_probes(&outcome);
    write(&out, scenario, seed, &outcome, &verdicts, write_report, true);
    let code = exit_code(&outcome, &verdicts);
    if code == exit::PASS {
        println!("verdict    PASS");
    } else {
        println!(
            "rerun      ./qsim real {} --seed {seed}   (not deterministic: the same seed may not fail again)",
            scenario.path.display()
        );
        println!("simulate   {}", scenario.reproduce(seed));
    }
    code
}
