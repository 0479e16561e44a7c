//! The cache and memory settings on real `qs-node` processes: a small RocksDB block cache whose
//! hits and misses move on `/metrics` as memcached reads go through it, without ever holding
//! more than its capacity; LMDB's page-cache figures; a memory limit below the process's
//! resident size, which makes the node exit with the documented code and say why; and the
//! configurations the node refuses. Nothing here depends on the machine's speed: every wait is
//! a generous upper bound on something that happens within a second or two.
// Real processes and /proc: the tokio build on Linux only.
#![cfg(all(not(madsim), target_os = "linux"))]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use qs_node::resources::EXIT_MEMORY_LIMIT;

use crate::common::process::{self, NodeProcess, Ports, Role, TOKEN, sample, write_config};

/// Upper bound for anything the node does within a second or two (a start, one sample).
const PATIENCE: Duration = Duration::from_secs(30);

/// Writes a root's configuration on `engine`, with `storage` and `memory` lines added to those
/// sections.
fn root_config(dir: &Path, engine: &str, storage: &str, memory: &str) -> (PathBuf, Ports) {
    let ports = Ports::new();
    let extra =
        process::storage(engine, storage) + &format!("[memory]\n{memory}\n[root]\nheartbeat_interval = \"1s\"\n");
    (write_config(dir, "root", ports, Role::Root { batch_window: "5ms" }, &extra), ports)
}

fn start(config: &Path, ports: Ports) -> NodeProcess {
    NodeProcess::start(config, ports, &[], &[("QS_LOG", "info")])
}

fn start_root(dir: &Path, engine: &str, storage: &str) -> NodeProcess {
    let (config, ports) = root_config(dir, engine, storage, "");
    let mut node = start(&config, ports);
    node.wait_serving(PATIENCE);
    node
}

fn metric(node: &NodeProcess, series: &str) -> f64 {
    let metrics = node.metrics().expect("the node serves /metrics");
    sample(&metrics, series).unwrap_or_else(|| panic!("{series} missing from /metrics:\n{metrics}"))
}

/// Writes `count` keys of `value_bytes` each through the root's batch API, in batches of 50.
/// The values are pseudo-random hex, so Snappy cannot shrink them below the cache.
fn write_keys(node: &NodeProcess, count: usize, value_bytes: usize) -> Vec<(String, String)> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut written = Vec::new();
    for batch in (0..count).collect::<Vec<_>>().chunks(50) {
        let mut ops = Vec::new();
        for &i in batch {
            let value: String = (0..value_bytes)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    char::from_digit((state % 16) as u32, 16).unwrap()
                })
                .collect();
            let key = format!("dns:zone-{i:05}");
            ops.push(serde_json::json!({"op": "set", "key": key, "value": value}));
            written.push((key, value));
        }
        let url = format!("http://{}/v1/batch", node.ports.http);
        ureq::post(&url)
            .header("authorization", &format!("Bearer {TOKEN}"))
            .send_json(serde_json::json!({ "ops": ops }))
            .unwrap();
    }
    written
}

fn read_back(node: &NodeProcess, written: &[(String, String)], times: usize) {
    let client = memcache::Client::connect(format!("memcache://{}?protocol=ascii", node.ports.memcached)).unwrap();
    for (key, value) in written {
        for _ in 0..times {
            let got: Option<String> = client.get(key).unwrap();
            assert_eq!(got.as_deref(), Some(value.as_str()), "key {key}");
        }
    }
}

#[test]
fn a_small_rocksdb_block_cache_hits_misses_and_stays_within_its_capacity() {
    const CACHE: f64 = (256 << 10) as f64;
    let dir = tempfile::tempdir().unwrap();
    // Small memtables, so the data is in SST files and reads go through the block cache.
    let mut node =
        start_root(dir.path(), "rocksdb", "memtable_bytes = 65536\ncache_bytes = \"256 KiB\"\nblock_bytes = \"4 KiB\"");
    // 1 MB of values, four times the cache: reading them all must miss, whatever was cached.
    let written = write_keys(&node, 1_000, 1_000);
    // The capacity appears with the first memory sample: the counters are published from then
    // on. Whatever they hold, reading 4x the cache must add misses, and reading a key again
    // right away must add hits.
    node.wait_until("a memory sample with the block cache's capacity", PATIENCE, || {
        node.metrics().and_then(|m| sample(&m, "qs_block_cache_capacity_bytes")) == Some(CACHE)
    });
    let (hits_before, misses_before) = (metric(&node, "qs_block_cache_hits"), metric(&node, "qs_block_cache_misses"));

    // Each key twice in a row: the second read finds the block the first one loaded.
    read_back(&node, &written, 2);
    node.wait_until("block cache hits and misses to move on /metrics", PATIENCE, || {
        node.metrics().is_some_and(|m| {
            sample(&m, "qs_block_cache_hits").is_some_and(|h| h > hits_before)
                && sample(&m, "qs_block_cache_misses").is_some_and(|m| m > misses_before)
        })
    });
    let metrics = node.metrics().unwrap();
    let get = |series: &str| sample(&metrics, series).unwrap_or_else(|| panic!("{series} missing:\n{metrics}"));
    let (hits, misses) = (get("qs_block_cache_hits") - hits_before, get("qs_block_cache_misses") - misses_before);
    let usage = get("qs_memory_accounted_bytes{component=\"block_cache\"}");
    eprintln!(
        "2000 gets over 1000 keys: {hits} block cache hits, {misses} misses; cache usage {usage} of {CACHE} bytes; \
         memtables {}, table readers {}, resident {}",
        get("qs_memory_accounted_bytes{component=\"memtables\"}"),
        get("qs_memory_accounted_bytes{component=\"table_readers\"}"),
        get("qs_resident_bytes"),
    );
    assert_eq!(get("qs_block_cache_capacity_bytes"), CACHE);
    assert!(usage > 0.0 && usage <= CACHE, "block cache usage {usage} outside (0, {CACHE}]");
    assert!(get("qs_resident_bytes") > usage, "the process holds at least its cache");
    assert_eq!(get("qs_memory_limit_bytes"), 0.0, "no limit configured");
    // Every key written is in the length cache (1000 keys, well within its capacity): their
    // bytes and the estimated overhead of each entry.
    let key_bytes: usize = written.iter().map(|(key, _)| key.len()).sum();
    assert_eq!(
        get("qs_memory_accounted_bytes{component=\"length_cache\"}"),
        (key_bytes as u64 + 1_000 * qs_node::store::LENGTH_CACHE_ENTRY_OVERHEAD_BYTES) as f64,
        "the length cache holds the 1000 keys written"
    );
    assert!(node.is_running(), "a node without a memory limit keeps running");
}

#[test]
fn lmdb_reports_its_page_cache_figures() {
    let dir = tempfile::tempdir().unwrap();
    // Without read-ahead (MDB_NORDAHEAD), as an operator of a store larger than memory runs it.
    let node = start_root(dir.path(), "lmdb", "read_ahead = false");
    let written = write_keys(&node, 200, 1_000);
    read_back(&node, &written, 1);
    // Reads touch the pages of data.mdb's mapping that hold the values (200 KB of them): they
    // are resident in this process, and counted as LMDB's.
    node.wait_until("the pages read to be resident in data.mdb's mapping on /metrics", PATIENCE, || {
        node.metrics()
            .and_then(|m| sample(&m, "qs_memory_accounted_bytes{component=\"lmdb_mapped\"}"))
            .is_some_and(|bytes| bytes >= 200_000.0)
    });
    let metrics = node.metrics().unwrap();
    for series in ["qs_major_faults", "qs_disk_read_bytes", "qs_resident_bytes"] {
        assert!(sample(&metrics, series).is_some(), "{series} missing:\n{metrics}");
    }
    eprintln!(
        "lmdb: mapped resident {:?}, major faults {:?}, disk read {:?}, resident {:?}",
        sample(&metrics, "qs_memory_accounted_bytes{component=\"lmdb_mapped\"}"),
        sample(&metrics, "qs_major_faults"),
        sample(&metrics, "qs_disk_read_bytes"),
        sample(&metrics, "qs_resident_bytes"),
    );
    assert_eq!(sample(&metrics, "qs_block_cache_capacity_bytes"), Some(0.0), "LMDB has no block cache");
}

#[test]
fn a_node_past_its_memory_limit_exits_with_the_documented_code_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    // 1 MiB is far below any real process's resident size.
    let (config, ports) = root_config(dir.path(), "rocksdb", "cache_bytes = \"256 KiB\"", "limit_bytes = \"1 MiB\"");
    let started = Instant::now();
    let mut node = start(&config, ports);
    let status = node.wait_exit(PATIENCE);
    eprintln!("exited with {status} {:?} after start", started.elapsed());
    let log = node.log_text();
    assert_eq!(status.code(), Some(i32::from(EXIT_MEMORY_LIMIT)), "exit status; log:\n{log}");
    for needle in ["memory limit exceeded", "RSS", "memory.limit_bytes = 1.0 MiB", "block_cache", "memtables"] {
        assert!(log.contains(needle), "{needle:?} missing from the log:\n{log}");
    }
}

#[test]
fn refused_settings_name_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    for (engine, storage, memory, field, why) in [
        ("lmdb", "cache_bytes = \"64 MiB\"", "", "storage.cache_bytes", "OS page cache"),
        ("memory", "block_bytes = \"4 KiB\"", "", "storage.block_bytes", "rocksdb only"),
        ("rocksdb", "cache_bytes = 0", "", "storage.cache_bytes", "out of range"),
        ("rocksdb", "cache_bytes = \"5 TiB\"", "", "storage.cache_bytes", "out of range"),
        ("rocksdb", "", "limit_bytes = 0", "memory.limit_bytes", "out of range"),
        ("rocksdb", "cache_bytes = \"1 GiB\"", "limit_bytes = \"512 MiB\"", "storage.cache_bytes", "limit"),
    ] {
        let (config, _) = root_config(dir.path(), engine, storage, memory);
        let output = Command::new(env!("CARGO_BIN_EXE_qs-node")).arg("--config").arg(&config).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{engine} {storage} {memory}: {stderr}");
        let file = config.display().to_string();
        assert!(
            stderr.contains(&file) && stderr.contains(field) && stderr.contains(why),
            "{engine} {storage} {memory}: expected {file}, {field} and {why:?} in: {stderr}"
        );
    }
}
