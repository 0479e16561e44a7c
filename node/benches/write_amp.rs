//! Write-amplification benchmark: the same workloads applied to LMDB and RocksDB, printing
//! logical bytes written, bytes written to disk, their ratio, and the space each store takes,
//! beside the seed's figures (LMDB 1.5×–80× write amplification; RocksDB at about 40 % of
//! LMDB's space).
//!
//! The first four workloads use random (incompressible) values, the worst case for space; the
//! last uses configuration-like text, closer to what the seed's 40 % figure was measured on.
//!
//! Run: `cargo bench -p qs-node --bench write_amp` (add `-- --scale 0.2` for a quick look).
//! Every commit is synced, as in production; retention keeps the newest 1000 log entries,
//! collected every 50 commits, as a primary source would.
//!
//! LMDB also runs with `storage.write_map` (`MDB_WRITEMAP`, row `lmdb-wmap`): its commit rate
//! and space beside plain LMDB's. Its bytes written are LMDB's own count, as without the flag,
//! so the two rows' `written` columns match.

use std::time::Instant;

use qs_node::testkit::{ValueKind, Workload};
use qs_node::{EngineKind, OpenOptions, RetentionPolicy, Store, StoreLocation, StoreStats};

struct Case {
    name: &'static str,
    value_bytes: usize,
    ops_per_entry: usize,
    commits: u64,
    key_space: u64,
    values: ValueKind,
}

const CASES: [Case; 5] = [
    Case {
        name: "small values (100 B), small batches (1 write)",
        value_bytes: 100,
        ops_per_entry: 1,
        commits: 2000,
        key_space: 2000,
        values: ValueKind::Random,
    },
    Case {
        name: "small values (100 B), large batches (500 writes)",
        value_bytes: 100,
        ops_per_entry: 500,
        commits: 40,
        key_space: 5000,
        values: ValueKind::Random,
    },
    Case {
        name: "large values (16 KiB), small batches (1 write)",
        value_bytes: 16 << 10,
        ops_per_entry: 1,
        commits: 600,
        key_space: 400,
        values: ValueKind::Random,
    },
    Case {
        name: "large values (16 KiB), large batches (40 writes)",
        value_bytes: 16 << 10,
        ops_per_entry: 40,
        commits: 40,
        key_space: 400,
        values: ValueKind::Random,
    },
    Case {
        name: "config text (1 KiB), medium batches (20 writes)",
        value_bytes: 1 << 10,
        ops_per_entry: 20,
        commits: 300,
        key_space: 3000,
        values: ValueKind::ConfigText,
    },
];

const RETENTION: RetentionPolicy =
    RetentionPolicy { keep_entries_min: Some(1000), keep_age_ms: None, planted_either_rule: false };
const GC_EVERY_COMMITS: u64 = 50;

/// The stores each workload runs on: (label, engine, `MDB_WRITEMAP`).
const ENGINES: [(&str, EngineKind, bool); 3] =
    [("lmdb", EngineKind::Lmdb, false), ("lmdb-wmap", EngineKind::Lmdb, true), ("rocksdb", EngineKind::Rocksdb, false)];

fn run(kind: EngineKind, write_map: bool, case: &Case, scale: f64) -> (StoreStats, f64) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let workload = Workload {
        key_space: case.key_space,
        value_bytes_min: case.value_bytes,
        value_bytes_max: case.value_bytes,
        ops_per_entry_min: case.ops_per_entry,
        ops_per_entry_max: case.ops_per_entry,
        delete_percent: 0,
        values: case.values,
        ..Workload::small(7)
    };
    let options = OpenOptions { lmdb_write_map: write_map, ..OpenOptions::new(workload.db_id) };
    let mut store = Store::open(&StoreLocation::new(kind, &dir.path().join("store")), &options).expect("open store");
    let commits = ((case.commits as f64 * scale).ceil() as u64).max(1);
    let start = Instant::now();
    for commit in 1..=commits {
        let entries = workload.entries(commit, 1, store.chain_hash()).expect("entries within limits");
        store.apply(&entries).expect("apply");
        if commit % GC_EVERY_COMMITS == 0 {
            store.collect_garbage(RETENTION, 0).expect("collect garbage");
        }
    }
    store.flush().expect("flush");
    let seconds = start.elapsed().as_secs_f64();
    (store.stats().expect("stats"), seconds)
}

fn mib(bytes: u64) -> String {
    format!("{:.2} MiB", bytes as f64 / (1 << 20) as f64)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let scale = match args.as_slice() {
        [] => 1.0,
        [flag, value] if flag == "--scale" => value.parse::<f64>().ok().filter(|s| *s > 0.0).unwrap_or_else(|| {
            eprintln!("--scale wants a positive number, got {value:?}");
            std::process::exit(2)
        }),
        _ => {
            eprintln!("usage: write_amp [--scale FACTOR]");
            std::process::exit(2)
        }
    };
    println!("qsim write-amplification benchmark (scale {scale})");
    println!("seed figures: LMDB write amplification 1.5x-80x; RocksDB at about 40 % of LMDB's space\n");
    println!(
        "{:<50} {:<9} {:>12} {:>14} {:>9} {:>12} {:>9}",
        "workload", "engine", "logical", "written", "amp", "on disk", "commit/s"
    );
    for case in &CASES {
        let mut space = Vec::new();
        for (label, kind, write_map) in ENGINES {
            let (stats, seconds) = run(kind, write_map, case, scale);
            let amp = stats.write_amplification().map_or("n/a".to_string(), |a| format!("{a:.2}x"));
            let commits = ((case.commits as f64 * scale).ceil()).max(1.0);
            println!(
                "{:<50} {:<9} {:>12} {:>14} {:>9} {:>12} {:>9.0}",
                case.name,
                label,
                mib(stats.logical_bytes_written),
                mib(stats.disk_bytes_written),
                amp,
                mib(stats.disk_bytes),
                commits / seconds
            );
            space.push(stats.disk_bytes);
        }
        println!(
            "{:<50} rocksdb/lmdb space: {:.0} % (seed: about 40 %)\n",
            "",
            100.0 * space[2] as f64 / space[0].max(1) as f64
        );
    }
}
