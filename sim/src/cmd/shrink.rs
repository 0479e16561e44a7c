//! `qsim shrink`: a failing run (its folder, or a scenario and seed) to the smallest scenario
//! that fails the same way, written ready to pin under `scenarios/regression/`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use qs_node::EngineKind;
use qs_sim::exit;
use qs_sim::shrink::{ShrinkPlan, edits};

/// What the command line asked to shrink.
pub struct ShrinkArgs {
    /// A run folder (with summary.json) or a scenario file.
    pub target: PathBuf,
    pub seed: Option<u64>,
    pub engine: Option<EngineKind>,
    pub max_steps: usize,
    pub run_timeout: Option<Duration>,
    pub out: Option<PathBuf>,
}

#[expect(
    clippy::too_many_lines,
    reason = "113 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub fn shrink(args: ShrinkArgs) -> ExitCode {
    let (scenario, seed, engine) = match resolve(&args) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("qsim shrink: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let name = match qs_sim::scenario::Scenario::load(&scenario) {
        Ok(s) => s.scenario.name,
        Err(e) => {
            eprintln!("qsim shrink: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let out =
        args.out.clone().unwrap_or_else(|| PathBuf::from(format!("scenarios/regression/{name}-seed-{seed}.toml")));
    let work = std::env::temp_dir().join(format!("qsim-shrink-{name}-{seed}-{}", std::process::id()));
    let plan = ShrinkPlan {
        scenario: scenario.clone(),
        seed,
        engine,
        max_steps: args.max_steps,
        budget: args.run_timeout,
        work: work.clone(),
    };
    println!(
        "shrink     {} seed {seed}{}: at most {} candidate runs, each in its own process",
        scenario.display(),
        engine.as_ref().map_or(String::new(), |e| format!(" on {e}")),
        args.max_steps
    );
    let started = std::time::Instant::now();
    let result = qs_sim::shrink::shrink(&plan, &mut |line| eprintln!("qsim shrink: {line}"));
    let _ = std::fs::remove_dir_all(&work);
    let shrunk = match result {
        Ok(shrunk) => shrunk,
        Err(e) => {
            eprintln!("qsim shrink: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let mut table = shrunk.table.clone();
    let new_name = format!("{name}-seed-{seed}");
    let expect = match shrunk.failure.exit_code.and_then(|c| u8::try_from(c).ok()) {
        Some(exit::VIOLATION) => Some("violation"),
        Some(exit::LIVENESS) => Some("liveness"),
        _ => None,
    };
    if let Some(toml::Value::Table(head)) = table.get_mut("scenario") {
        head.insert("name".into(), toml::Value::String(new_name.clone()));
        head.insert(
            "description".into(),
            toml::Value::String(format!(
                "Shrunk from {} seed {seed}: fails with {}",
                scenario.display(),
                shrunk.failure.signature
            )),
        );
        head.insert("seed".into(), toml::Value::Integer(seed as i64));
        match expect {
            Some(expect) => head.insert("expect".into(), toml::Value::String(expect.into())),
            None => head.remove("expect"),
        };
    }
    let reproduce = format!(
        "./qsim run {} --seed {seed}{}",
        scenario.display(),
        engine.as_ref().map_or(String::new(), |e| format!(" --engine {e}"))
    );
    let header = format!(
        "{new_name}: shrunk by `qsim shrink` from `{reproduce}`.\n\
         What failed: {} (exit {}).\n\
         Before: {}.\n\
         After:  {} ({} candidate runs, {} kept{}).\n\
         \n\
         Postmortem — what broke, why, and what fixed it: (write it here before pinning this file).\n\
         While the bug stands this scenario fails as above (`expect`); once it is fixed, set\n\
         expect = \"pass\" so the regression set guards the fix.",
        shrunk.failure.signature,
        shrunk.failure.exit_code.map_or("none".to_string(), |c| c.to_string()),
        shrunk.before,
        shrunk.after,
        shrunk.steps,
        shrunk.kept.len(),
        if shrunk.budget_exhausted { "; the step budget ran out" } else { "" },
    );
    let text = edits::render(&table, &header);
    if let Some(dir) = out.parent()
        && !dir.as_os_str().is_empty()
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        eprintln!("qsim shrink: {}: {e}", dir.display());
        return ExitCode::from(exit::USAGE);
    }
    if let Err(e) = std::fs::write(&out, text) {
        eprintln!("qsim shrink: {}: {e}", out.display());
        return ExitCode::from(exit::USAGE);
    }
    println!("failure    {} (exit {:?})", shrunk.failure.signature, shrunk.failure.exit_code);
    println!("before     {}", shrunk.before);
    println!("after      {}", shrunk.after);
    for what in &shrunk.kept {
        println!("kept       {what}");
    }
    println!(
        "steps      {} candidate runs in {:.0} s{}",
        shrunk.steps,
        started.elapsed().as_secs_f64(),
        if shrunk.budget_exhausted { " (the step budget ran out: --max-steps)" } else { "" }
    );
    println!("written    {}", out.display());
    println!("reproduce  ./qsim run {}", out.display());
    ExitCode::from(exit::PASS)
}

/// The scenario file, seed and engine to shrink.
fn resolve(args: &ShrinkArgs) -> Result<(PathBuf, u64, Option<EngineKind>), String> {
    let target = &args.target;
    if target.is_dir() {
        let summary: qs_reports::schema::RunSummary = std::fs::read(target.join("summary.json"))
            .map_err(|e| format!("{}: not a run folder (summary.json: {e})", target.display()))
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| format!("{}/summary.json: {e}", target.display())))?;
        let file_engine = qs_sim::scenario::Scenario::load(&summary.path).map_err(|e| e.to_string())?.engine();
        // The engine the run used, where it is not the file's (an older summary may name none).
        let engine = match args.engine {
            Some(engine) => Some(engine),
            None if summary.engine.is_empty() => None,
            None => {
                let run_engine = qs_sim::scenario::parse_engine(&summary.engine)
                    .map_err(|e| format!("{}/summary.json: its engine: {e}", target.display()))?;
                (run_engine != file_engine).then_some(run_engine)
            }
        };
        return Ok((summary.path.clone(), args.seed.unwrap_or(summary.seed), engine));
    }
    if !target.is_file() {
        return Err(format!("{}: no such run folder or scenario file", target.display()));
    }
    let scenario = qs_sim::scenario::Scenario::load(target).map_err(|e| e.to_string())?;
    let seed = args.seed.or(scenario.scenario.seed).unwrap_or(1);
    Ok((target.to_path_buf(), seed, args.engine))
}
