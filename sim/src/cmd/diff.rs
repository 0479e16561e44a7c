//! `qsim diff A B`: two runs side by side — the first event where their traces part, with a few
//! events of context from each side, the count of events after it, what differs in what produced
//! them, their verdicts, and an HTML page with both fault timelines and lag charts on one time
//! axis. A and B are run folders (`qsim run --out`, a sweep's `<scenario>/seed-<n>/`) or trace
//! files. Exit 0: the traces are identical; 1: they differ; 2: an input could not be read.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use qs_reports::diff::{Side, first_divergence, provenance, render_diff, verdicts};
use qs_sim::exit;

pub struct DiffArgs {
    pub a: PathBuf,
    pub b: PathBuf,
    /// Events of context on each side of the divergence.
    pub context: usize,
    /// Where the HTML page goes (none: not written).
    pub html: Option<PathBuf>,
}

pub fn diff(args: &DiffArgs) -> ExitCode {
    let load = |path: &Path| Side::load(path).map_err(|e| eprintln!("qsim diff: {e}"));
    let (Ok(a), Ok(b)) = (load(&args.a), load(&args.b)) else {
        return ExitCode::from(exit::USAGE);
    };
    println!("A          {}", a.origin.display());
    println!("B          {}", b.origin.display());
    let differing: Vec<_> = provenance(a.summary.as_ref(), b.summary.as_ref())
        .into_iter()
        .filter(|r| r.differs() && !matches!(r.field, "digest" | "events" | "simulated" | "outcome"))
        .collect();
    if differing.is_empty() {
        println!("produced   the same way, as far as the summaries tell (build, scenario, seed, engine, settings)");
    }
    for row in &differing {
        println!("differs    {:<16} A {}  B {}", row.field, row.a, row.b);
    }
    let divergence = first_divergence(&a.lines, &b.lines, args.context);
    match &divergence {
        None => println!("trace      identical: {} events, byte for byte", a.lines.len()),
        Some(d) => {
            println!("trace      identical for {} events; part at event {}", d.index, d.index + 1);
            for (i, line) in &d.before {
                println!("  {:<4} {:>7}  {line}", "both", i + 1);
            }
            let side = |tag: &str, events: &[(usize, String)]| {
                if events.is_empty() {
                    println!("  {tag:<4} {:>7}  (its trace ended)", "");
                }
                for (i, line) in events {
                    println!("  {tag:<4} {:>7}  {line}", i + 1);
                }
            };
            side("A", &d.a);
            side("B", &d.b);
            println!("after      A {} events from there, B {}", d.rest_a, d.rest_b);
        }
    }
    let all = verdicts(a.summary.as_ref(), b.summary.as_ref());
    let changed: Vec<_> = all.iter().filter(|(_, x, y)| x != y).collect();
    if changed.is_empty() && !all.is_empty() {
        println!("verdicts   the same on both sides, all {} checkers", all.len());
    }
    for (checker, x, y) in changed {
        println!("verdict    {checker:<12} A {x:<24} B {y}");
    }
    if let Some(path) = &args.html {
        if let Err(e) = std::fs::write(path, render_diff(&a, &b, divergence.as_ref())) {
            eprintln!("qsim diff: {}: cannot write the page: {e}", path.display());
            return ExitCode::from(exit::USAGE);
        }
        println!("report     {}", path.display());
    }
    ExitCode::from(if divergence.is_some() { exit::DIFFERENT } else { exit::PASS })
}
