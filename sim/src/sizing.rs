//! `qsim sizing`: the cache formula against the model, as a curve. One scenario with
//! `[resources]` and a reader runs once as a pilot (to learn the store's used bytes), then once
//! per (key popularity, cache share): the cache set to that share of the used bytes, the
//! readers' Zipf skew set, the memory limit lifted (an OOM kill would cut the curve). Each run is
//! a child `qsim run` process, as in a sweep; the page plots the edges' read miss ratio
//! against the share, with the 1–2 % rule beside it.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use qs_reports::schema::{Event, RunSummary, parse_trace};
use qs_reports::sizing::{SizingPoint, SizingSweep};

use crate::scenario::Scenario;
use crate::sync::Locked;

/// Shares of the store's pages tried by default, in percent: around the 1–2 % rule.
pub const DEFAULT_SHARES: [f64; 8] = [0.125, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0];
/// Key popularities tried by default: a flatter and a sharper Zipf.
pub const DEFAULT_SKEWS: [f64; 2] = [0.8, 1.2];

/// What to sweep.
#[derive(Clone, Debug)]
pub struct SizingPlan {
    pub scenario: PathBuf,
    pub shares: Vec<f64>,
    pub skews: Vec<f64>,
    pub seed: u64,
    pub jobs: usize,
    pub out: PathBuf,
}

/// Runs the plan; every run's folder stays under `out`.
pub fn run(plan: &SizingPlan) -> Result<SizingSweep, String> {
    let scenario = Scenario::load(&plan.scenario).map_err(|e| e.to_string())?;
    let Some(resources) = &scenario.resources else {
        return Err(format!("{}: has no [resources]: nothing to size", plan.scenario.display()));
    };
    if !scenario.workload.iter().any(|w| matches!(w, crate::scenario::Workload::Reader { .. })) {
        return Err(format!("{}: has no reader: no reads to miss", plan.scenario.display()));
    }
    if plan.shares.iter().chain(&plan.skews).any(|v| !v.is_finite() || *v < 0.0) || plan.shares.is_empty() {
        return Err("shares and skews must be non-negative numbers, at least one share".into());
    }
    let text = std::fs::read_to_string(&plan.scenario).map_err(|e| format!("{}: {e}", plan.scenario.display()))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| format!("{}: {e}", plan.scenario.display()))?;
    std::fs::create_dir_all(plan.out.join("scenarios")).map_err(|e| format!("{}: {e}", plan.out.display()))?;
    let exe = std::env::current_exe().map_err(|e| format!("the path of this qsim: {e}"))?;

    // The pilot: the scenario as written, for the used bytes its cache is a share of.
    let pilot = write_variant(&table, &plan.out, "pilot", resources.cache_bytes.as_u64(), None)?;
    let pilot_dir = plan.out.join("runs").join("pilot");
    run_child(&exe, &pilot, plan.seed, &pilot_dir)?;
    let summary: RunSummary = std::fs::read(pilot_dir.join("summary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| format!("the pilot run wrote no summary (see {})", pilot_dir.display()))?;
    let used_bytes = summary.sizing.iter().map(|r| r.used_bytes).max().unwrap_or(0);
    if used_bytes == 0 {
        return Err("the pilot run's store holds no pages: does the writer write?".into());
    }

    let mut cells: VecDeque<(f64, f64)> = VecDeque::new();
    for &skew in &plan.skews {
        for &share in &plan.shares {
            cells.push_back((skew, share));
        }
    }
    let total = cells.len();
    let queue = Arc::new(Mutex::new(cells));
    let points: Arc<Mutex<Vec<Result<SizingPoint, String>>>> = Arc::default();
    std::thread::scope(|scope| {
        for _ in 0..plan.jobs.max(1) {
            scope.spawn(|| {
                loop {
                    let next = queue.locked().pop_front();
                    let Some((skew, share)) = next else { return };
                    let point = one_point(&exe, &table, plan, used_bytes, skew, share);
                    let mut points = points.locked();
                    points.push(point);
                    eprintln!("qsim sizing: {}/{total} runs", points.len());
                }
            });
        }
    });
    let mut done = Vec::new();
    for point in crate::sync::into_inner(Arc::try_unwrap(points).map_err(|_| "runs still held")?) {
        done.push(point?);
    }
    done.sort_by(|a, b| a.skew.total_cmp(&b.skew).then(a.share_percent.total_cmp(&b.share_percent)));
    Ok(SizingSweep { scenario: scenario.scenario.name.clone(), seed: plan.seed, used_bytes, points: done })
}

fn one_point(
    exe: &Path,
    table: &toml::Table,
    plan: &SizingPlan,
    used_bytes: u64,
    skew: f64,
    share: f64,
) -> Result<SizingPoint, String> {
    let name = format!("skew-{skew}-share-{share}");
    let cache_bytes = ((used_bytes as f64 * share / 100.0) as u64).max(1);
    let file = write_variant(table, &plan.out, &name, cache_bytes, Some(skew))?;
    let dir = plan.out.join("runs").join(&name);
    run_child(exe, &file, plan.seed, &dir)?;
    let text = std::fs::read_to_string(dir.join("trace.jsonl")).map_err(|e| format!("{}: {e}", dir.display()))?;
    let events = parse_trace(&text).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (mut hits, mut misses) = (0u64, 0u64);
    for event in &events {
        if let Event::CacheSample { node, hits: h, misses: m, warm: true, .. } = event
            && node.starts_with(edge_prefix(table).as_str())
        {
            hits += h;
            misses += m;
        }
    }
    let touches = hits + misses;
    Ok(SizingPoint {
        skew,
        share_percent: share,
        cache_bytes,
        miss_ratio: if touches == 0 { 0.0 } else { misses as f64 / touches as f64 },
        read_touches: touches,
        run: format!("runs/{name}"),
    })
}

/// The last tier's name: the readers' edges.
fn edge_prefix(table: &toml::Table) -> String {
    let tier = table
        .get("topology")
        .and_then(|t| t.get("tiers"))
        .and_then(|t| t.as_array())
        .and_then(|tiers| tiers.last())
        .and_then(|t| t.get("name"))
        .and_then(|n| n.as_str())
        .unwrap_or("edge");
    format!("{tier}-")
}

/// The scenario with its cache, readers' skew and name changed and no memory limit, written
/// under `out/scenarios/`.
fn write_variant(
    table: &toml::Table,
    out: &Path,
    name: &str,
    cache_bytes: u64,
    skew: Option<f64>,
) -> Result<PathBuf, String> {
    let mut table = table.clone();
    if let Some(about) = table.get_mut("scenario").and_then(|s| s.as_table_mut()) {
        about.insert("name".into(), toml::Value::String(format!("sizing-{name}")));
    }
    if let Some(resources) = table.get_mut("resources").and_then(|r| r.as_table_mut()) {
        resources.insert("cache_bytes".into(), toml::Value::Integer(cache_bytes as i64));
        resources.remove("memory_limit");
    }
    if let (Some(skew), Some(workloads)) = (skew, table.get_mut("workload").and_then(|w| w.as_array_mut())) {
        for workload in workloads.iter_mut().filter_map(|w| w.as_table_mut()) {
            if workload.get("kind").and_then(|k| k.as_str()) == Some("reader") {
                workload.insert("skew".into(), toml::Value::Float(skew));
            }
        }
    }
    let path = out.join("scenarios").join(format!("{name}.toml"));
    let text = toml::to_string(&table).map_err(|e| format!("{name}: {e}"))?;
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

fn run_child(exe: &Path, scenario: &Path, seed: u64, dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let output = Command::new(exe)
        .arg("run")
        .arg(scenario)
        .args(["--seed", &seed.to_string(), "--out"])
        .arg(dir)
        .output()
        .map_err(|e| format!("could not start qsim: {e}"))?;
    let _ = std::fs::write(dir.join("stdout.txt"), &output.stdout);
    let _ = std::fs::write(dir.join("stderr.txt"), &output.stderr);
    // A run that fails its checks still measured its misses; one that wrote no trace did not.
    if dir.join("trace.jsonl").exists() {
        Ok(())
    } else {
        Err(format!(
            "{} seed {seed} wrote no trace (exit {:?}; see {})",
            scenario.display(),
            output.status.code(),
            dir.join("stderr.txt").display()
        ))
    }
}
