//! Whole runs of the `qsim` binary (built with `--cfg madsim`) for the cache and memory models:
//! the seed scenarios tell their stories (an undersized cache misses about 40 % of page reads
//! and fails `cache`, one sized by the 1–2 % rule misses under 1 % and passes; a byte sample
//! outgrowing its limit is OOM-killed and restarted, its fix is not; glibc's RSS grows toward 3×
//! the heap over days and jemalloc's does not), a planted over-budget node is caught and named,
//! the runs are deterministic across processes, RocksDB nodes read through the RocksDB-shaped
//! model, bad `[resources]` are refused, and the report shows the new charts, the sizing table
//! and memory by key category.
#![cfg(madsim)]

use std::path::Path;
use std::process::Command;

use qs_reports::schema::{Checker, Event, FaultKind, FaultPhase, parse_trace};

use crate::common::{failed_naming, passed, qsim};

fn trace(out: &Path) -> Vec<Event> {
    parse_trace(&std::fs::read_to_string(out.join("trace.jsonl")).expect("a trace")).expect("a valid trace")
}

/// Edges' read misses over read page touches, in windows past `from_ms`.
fn edge_read_miss_ratio(events: &[Event], from_ms: u64) -> f64 {
    let (mut hits, mut misses) = (0u64, 0u64);
    for e in events {
        if let Event::CacheSample { at_ms, node, hits: h, misses: m, warm: true, .. } = e
            && *at_ms > from_ms
            && node.starts_with("edge")
        {
            hits += h;
            misses += m;
        }
    }
    assert!(hits + misses > 10_000, "the edges read enough to judge: {hits} hits, {misses} misses");
    misses as f64 / (hits + misses) as f64
}

fn oom_faults(events: &[Event], phase: FaultPhase) -> usize {
    events.iter().filter(|e| matches!(e, Event::Fault { kind: FaultKind::Oom, phase: p, .. } if *p == phase)).count()
}

#[test]
fn an_undersized_cache_misses_like_the_seed_and_fails_cache_while_the_sized_one_passes() {
    let dir = tempfile::tempdir().unwrap();
    let (undersized, sized) = (dir.path().join("undersized"), dir.path().join("sized"));
    let (code, stdout) = qsim(&["run", "scenarios/cache-undersized.toml", "--seed", "1"], &undersized);
    assert_eq!(code, 1, "{stdout}");
    assert!(failed_naming(&undersized, Checker::Cache, &["cache miss ratio of reads"]), "{stdout}");
    assert!(
        stdout.contains("UNDERSIZED")
            && stdout.contains("formulas   predict a violation; the models found a violation: agree"),
        "{stdout}"
    );
    for checker in [Checker::Sequence, Checker::Chain, Checker::Reads, Checker::Memory] {
        assert!(passed(&undersized, checker), "{checker} must pass: {stdout}");
    }
    let ratio = edge_read_miss_ratio(&trace(&undersized), 60_000);
    // The seed: 25 903 misses in 65 755 page reads (39 %).
    assert!((0.30..0.60).contains(&ratio), "undersized miss ratio {ratio}");

    let (code, stdout) = qsim(&["run", "scenarios/cache-sized.toml", "--seed", "1"], &sized);
    assert_eq!(code, 0, "{stdout}");
    assert!(passed(&sized, Checker::Cache) && stdout.contains("agree"), "{stdout}");
    let ratio = edge_read_miss_ratio(&trace(&sized), 60_000);
    // The seed's fix: 432 misses in 52 400 (0.8 %).
    assert!(ratio < 0.02, "sized miss ratio {ratio}");

    // The report charts both and tables the sizing, and memory by key category.
    let page = std::fs::read_to_string(undersized.join("report.html")).unwrap();
    for id in ["chart-cache_miss", "chart-memory", "sizing-section", "category-section"] {
        assert!(page.contains(&format!("id=\"{id}\"")), "report lacks {id}");
    }
    // One writer, one category: every key is in it, at the stated scale, and the cache held
    // some of the hot keys' leaves, never more than the leaves themselves.
    let summary: qs_reports::schema::RunSummary =
        serde_json::from_slice(&std::fs::read(undersized.join("summary.json")).unwrap()).unwrap();
    let edge = summary.sizing.iter().find(|s| s.tier == "edge").expect("an edge tier");
    assert_eq!(edge.categories.len(), 1, "{:?}", edge.categories);
    let cfg = &edge.categories[0];
    assert_eq!(cfg.prefix, "cfg0");
    assert!(cfg.keys > 20_000 * 1000, "scaled keys {}", cfg.keys);
    assert!(
        cfg.data_bytes <= cfg.stored_bytes && cfg.cached_bytes > 0 && cfg.cached_bytes <= cfg.stored_bytes,
        "{cfg:?}"
    );
}

/// A small RocksDB cluster under the simulator, reading a hot set through the RocksDB-shaped
/// cache model with `cache_bytes` of cache for 400 GiB.
fn rocksdb_cache_scenario(dir: &Path, cache_bytes: &str) -> std::path::PathBuf {
    let path = dir.join(format!("cache-rocksdb-{}.toml", cache_bytes.replace(' ', "")));
    std::fs::write(
        &path,
        format!(
            r#"
[scenario]
name = "cache-rocksdb"
description = "RocksDB's index and data blocks under a hot set"
duration = "75s"
engine = "rocksdb"

[topology]
tiers = [{{ name = "edge", count = 2 }}]

[[workload]]
kind = "writer"
rate_per_s = 2
keys = 20000
value_bytes = {{ min = 20, max = 60 }}
preload_rate_per_s = 1000

[[workload]]
kind = "reader"
rate_per_s = 400
skew = 1.0
hot_keys = 40

[resources]
stands_for = "400 GiB"
page_bytes = "512 B"
cache_bytes = "{cache_bytes}"
miss_ratio_max = 0.05

[checks]
lag_max = "35s"
converge_within = "60s"
"#
        ),
    )
    .unwrap();
    path
}

#[test]
fn rocksdb_nodes_read_through_its_shape_deterministically_and_the_formula_holds() {
    let dir = tempfile::tempdir().unwrap();
    let sized = rocksdb_cache_scenario(dir.path(), "17 GiB");
    let (code, stdout) =
        qsim(&["run", sized.to_str().unwrap(), "--seed", "1", "--check-determinism"], &dir.path().join("a"));
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("RocksDB blocks: an index block per"), "the RocksDB shape: {stdout}");
    assert!(passed(&dir.path().join("a"), Checker::Cache) && stdout.contains("determinism pass"), "{stdout}");
    // The edges read through the model: enough block reads to judge the windows.
    let samples = trace(&dir.path().join("a"));
    let reads: u64 = samples
        .iter()
        .filter_map(|e| match e {
            Event::CacheSample { hits, misses, .. } => Some(hits + misses),
            _ => None,
        })
        .sum();
    assert!(reads > 10_000, "{reads} block reads");

    let undersized = rocksdb_cache_scenario(dir.path(), "2 GiB");
    let (code, stdout) = qsim(&["run", undersized.to_str().unwrap(), "--seed", "1"], &dir.path().join("b"));
    assert_eq!(code, 1, "{stdout}");
    assert!(failed_naming(&dir.path().join("b"), Checker::Cache, &[]) && stdout.contains("UNDERSIZED"), "{stdout}");
}

#[test]
fn a_byte_sample_past_the_limit_is_oom_killed_and_restarted_and_its_fix_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout) = qsim(&["run", "scenarios/memory-byte-sample.toml", "--seed", "1"], dir.path());
    assert_eq!(code, 1, "{stdout}");
    assert!(failed_naming(dir.path(), Checker::Memory, &["(OOM kill)", "byte sample"]), "{stdout}");
    let events = trace(dir.path());
    assert!(oom_faults(&events, FaultPhase::Start) >= 5, "OOM kills");
    assert!(oom_faults(&events, FaultPhase::End) >= 4, "restarts by the supervisor");
    // The sample grew with the data before the first kill: about data / 250 × 1.25.
    let samples: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::MemorySample { node, byte_sample, .. } if node == "root" => Some(*byte_sample),
            _ => None,
        })
        .collect();
    assert!(samples[2] < samples[40], "the byte sample grows as data loads: {samples:?}");
    let page = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(page.contains("id=\"chart-memory_components\"") && page.contains("byte sample"), "components charted");

    let sized = dir.path().join("sized");
    let (code, stdout) = qsim(&["run", "scenarios/memory-byte-sample-sized.toml", "--seed", "1"], &sized);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(oom_faults(&trace(&sized), FaultPhase::Start), 0);
    // At 1.5 TiB the sample holds 1.5 TiB / 250 × 1.25 ≈ 8.2 GB (the seed: 4–6 GB per TB).
    let last = trace(&sized)
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::MemorySample { node, byte_sample, .. } if node == "root" => Some(*byte_sample),
            _ => None,
        })
        .unwrap();
    let expected = 1.5 * (1u64 << 40) as f64 / 250.0 * 1.25;
    assert!((last as f64 / expected - 1.0).abs() < 0.1, "byte sample {last} vs {expected}");
}

#[test]
fn glibc_grows_toward_three_times_the_heap_over_days_and_jemalloc_stays_flat() {
    let dir = tempfile::tempdir().unwrap();
    // RSS over heap of the root's samples: the largest, and the last.
    let ratios = |events: &[Event]| -> (f64, f64) {
        let ratios: Vec<f64> = events
            .iter()
            .filter_map(|e| match e {
                Event::MemorySample { node, rss, allocator_overhead, .. } if node == "root" => {
                    Some(*rss as f64 / (rss - allocator_overhead) as f64)
                }
                _ => None,
            })
            .collect();
        (ratios.iter().copied().fold(0.0, f64::max), *ratios.last().unwrap())
    };
    let (code, stdout) = qsim(&["run", "scenarios/memory-glibc.toml", "--seed", "1"], dir.path());
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("disagree: the models found what the formulas leave out"), "{stdout}");
    let events = trace(dir.path());
    assert!(oom_faults(&events, FaultPhase::Start) >= 3, "every node outgrows its limit");
    let (max, _) = ratios(&events);
    // The seed: RSS near 3× the live heap (15 GB → 30 GB); here 2.5× when the limit stops it.
    assert!(max > 2.4, "glibc RSS / heap reached {max}");

    let jemalloc = dir.path().join("jemalloc");
    let (code, stdout) = qsim(&["run", "scenarios/memory-jemalloc.toml", "--seed", "1"], &jemalloc);
    assert_eq!(code, 0, "{stdout}");
    let (max, last) = ratios(&trace(&jemalloc));
    assert!(max < 1.2 && last > 1.1, "jemalloc RSS / heap {max}, {last}");
}

#[test]
fn a_planted_over_budget_node_is_caught_and_named() {
    let dir = tempfile::tempdir().unwrap();
    // quickstart with a 1.5 GiB limit over 1 GiB of base, a 1 GiB cache and buffers: every node is
    // over budget once its cache fills.
    let quickstart =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/quickstart.toml")).unwrap();
    let planted = dir.path().join("over-budget.toml");
    std::fs::write(
        &planted,
        quickstart.replace("name = \"quickstart\"", "name = \"over-budget\"")
            + "\n[resources]\nstands_for = \"100 GiB\"\ncache_bytes = \"1 GiB\"\nbase_bytes = \"1 GiB\"\nmemory_limit = \"1536 MiB\"\npage_bytes = \"512 B\"\n",
    )
    .unwrap();
    let out = dir.path().join("run");
    let (code, stdout) = qsim(&["run", planted.to_str().unwrap(), "--seed", "1"], &out);
    assert_eq!(code, 1, "{stdout}");
    assert!(failed_naming(&out, Checker::Memory, &["over the limit 1.50 GiB"]), "{stdout}");
    assert!(oom_faults(&trace(&out), FaultPhase::Start) >= 1);
}

#[test]
fn resource_runs_are_deterministic_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout) =
        qsim(&["run", "scenarios/cache-sized.toml", "--seed", "3", "--check-determinism"], &dir.path().join("a"));
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("determinism pass"), "{stdout}");
    // A failing run (OOM kills, restarts): the same seed twice, the same trace.
    let digest = |out: &str| {
        let (_, stdout) = qsim(&["run", "scenarios/memory-byte-sample.toml", "--seed", "4"], &dir.path().join(out));
        let line = stdout.lines().find_map(|l| l.split("digest ").nth(1)).unwrap();
        line.split_whitespace().next().unwrap().to_string()
    };
    assert_eq!(digest("b"), digest("c"));
}

#[test]
fn bad_resources_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let quickstart =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/quickstart.toml")).unwrap();
    for (section, field) in [
        ("[resources]\ncache_bytes = \"1 GiB\"\nstands_for = \"1 KiB\"\n", "resources.stands_for"),
        ("[resources]\ncache_bytes = \"1 GiB\"\npage_bytes = \"100 B\"\n", "resources.page_bytes"),
        ("[resources]\ncache_bytes = \"1 GiB\"\nmemory_limit = \"512 MiB\"\n", "resources.memory_limit"),
        ("[resources]\ncache_bytes = \"1 GiB\"\nmiss_ratio_max = 1.5\n", "resources.miss_ratio_max"),
        ("[resources]\ncache_bytes = \"1 GiB\"\nallocator = \"tcmallok\"\n", "allocator"),
        ("[resources]\ncache_bytes = \"lots\"\n", "cache_bytes"),
    ] {
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, format!("{quickstart}\n{section}")).unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_qsim")).args(["run"]).arg(&bad).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{section}: {stderr}");
        assert!(stderr.contains("bad.toml") && stderr.contains(field), "{section}: {stderr}");
    }
}

#[test]
fn a_sizing_sweep_plots_the_miss_ratio_falling_with_the_cache_share() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new(env!("CARGO_BIN_EXE_qsim"))
        .current_dir(&root)
        .args(["sizing", "scenarios/cache-sized.toml", "--shares", "0.25,2", "--skews", "1.0", "--jobs", "2", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let sweep: qs_reports::sizing::SizingSweep =
        serde_json::from_slice(&std::fs::read(dir.path().join("sizing.json")).unwrap()).unwrap();
    assert_eq!(sweep.points.len(), 2);
    let (small, large) = (&sweep.points[0], &sweep.points[1]);
    assert!(small.share_percent < large.share_percent);
    assert!(small.miss_ratio > 0.2 && large.miss_ratio < 0.01, "{small:?} {large:?}");
    assert!(stdout.contains("knee       skew 1: under 1 % misses from 2 % of pages"), "{stdout}");
    let page = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(page.contains("id=\"chart-sizing\"") && page.contains("within the rule"));
    for point in &sweep.points {
        assert!(dir.path().join(&point.run).join("report.html").exists(), "{} has its report", point.run);
    }
}
