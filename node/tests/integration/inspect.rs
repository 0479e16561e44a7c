//! `qs-node inspect` beside live `qs-node` processes, on LMDB and on RocksDB: while a writer
//! puts a few hundred keys under two categories through the root's HTTP API, inspect (a child
//! process of the built binary) reads the live store directory; each report's applied index
//! lies between the node's index before and after it ran, and `--verify` passes. Once the
//! writes stop, the report agrees with `/v1/status` (applied index, chain hash, key count), the
//! per-category key counts equal the writes, and `--dump cfg` lists exactly the `cfg:` keys with
//! their (binary) values. Refusals: a missing path, a memory-engine configuration, a directory
//! holding something else, another database, a bad configuration. No timing assertions beyond
//! generous upper bounds.
// Real processes: the tokio build only.
#![cfg(not(madsim))]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::process::{self, NodeProcess, Ports, Role, TOKEN, status_within};
use qs_node::status::Status;

/// Upper bound for anything that takes a second or two.
const PATIENCE: Duration = Duration::from_secs(60);
const KEYS_PER_CATEGORY: usize = 150;

/// How long a `/v1/status` request may take while writes and inspect runs load the machine.
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

/// A root on `engine` with `storage`, more `[storage]` lines (an engine's switches); its store
/// is `dir/<engine>`. Heartbeats an hour apart, so a node whose writes stopped keeps its state.
fn write_config(dir: &Path, engine: &str, storage: &str) -> (PathBuf, Ports) {
    let ports = Ports::new();
    let root = format!(
        r#"
[root]
heartbeat_interval = "1h"
[[root.producers]]
name = "ops"
token = "{TOKEN}"
prefixes = ["cfg:", "dns:"]
writes_per_s = 100000
burst = 100000
"#
    );
    let extra = process::storage(engine, storage) + &root;
    (process::write_config(dir, engine, ports, Role::Root { batch_window: "5ms" }, &extra), ports)
}

fn start(dir: &Path, engine: &str, storage: &str) -> (NodeProcess, PathBuf) {
    let (config, ports) = write_config(dir, engine, storage);
    let mut node = NodeProcess::start(&config, ports, &[], &[("QS_LOG", "info")]);
    node.wait_serving(PATIENCE);
    (node, config)
}

fn status(node: &NodeProcess) -> Option<Status> {
    status_within(node.ports.http, STATUS_TIMEOUT)
}

fn applied(node: &NodeProcess) -> u64 {
    status(node).expect("the node answers /v1/status").applied_index
}

/// The value written under key number `i` of a category: text, then bytes that need encoding.
fn value(category: &str, i: usize) -> Vec<u8> {
    let mut value = format!("{category} value {i} %").into_bytes();
    value.extend_from_slice(&[b'\t', b'\n', 0, 0xff, (i % 256) as u8]);
    value
}

fn put(http: SocketAddr, key: &str, value: &[u8]) {
    let url = format!("http://{http}/v1/keys/{key}");
    let response = ureq::put(&url).header("authorization", &format!("Bearer {TOKEN}")).send(value).unwrap();
    assert_eq!(response.status(), 200);
}

fn inspect(args: &[&str]) -> Output {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_qs-node")).arg("inspect").args(args).output().unwrap();
    assert!(started.elapsed() < PATIENCE, "inspect took {:?}", started.elapsed());
    output
}

/// The report's `field value` lines, in order.
fn fields(report: &str) -> Vec<(String, String)> {
    report
        .lines()
        .map(|line| {
            let (name, value) = line.split_once(' ').unwrap_or((line, ""));
            (name.to_string(), value.trim().to_string())
        })
        .collect()
}

fn field(report: &str, name: &str) -> String {
    fields(report)
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no {name} in the report:\n{report}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn decode(field: &str) -> Vec<u8> {
    percent_encoding::percent_decode_str(field).collect()
}

#[expect(
    clippy::too_many_lines,
    reason = "94 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
fn live_store(engine: &str, storage: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (node, config) = start(dir.path(), engine, storage);
    let config = config.to_str().unwrap().to_string();
    let http = node.ports.http;
    let writer = std::thread::spawn(move || {
        for i in 0..KEYS_PER_CATEGORY {
            for category in ["cfg", "dns"] {
                put(http, &format!("{category}:item-{i:04}"), &value(category, i));
            }
        }
    });

    // While the writes go on: each report describes one commit between the two indexes.
    let mut reports = 0;
    while !writer.is_finished() || reports < 2 {
        let before = applied(&node);
        let output = inspect(&["--config", &config, "--verify"]);
        let after = applied(&node);
        let report = text(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{report}\n{}", text(&output.stderr));
        let index: u64 = field(&report, "applied_index").parse().unwrap();
        assert!(before <= index && index <= after, "inspect saw {index}, the node went {before} -> {after}");
        assert_eq!(field(&report, "checksum_failures"), "0");
        assert_eq!(field(&report, "head_totals"), "ok");
        assert!(field(&report, "log_chain").starts_with("ok"), "{report}");
        assert_eq!(field(&report, "result"), "ok");
        reports += 1;
    }
    writer.join().unwrap();
    assert!(reports >= 2);

    // Writes stopped (heartbeats are an hour apart): the report is the node's state.
    let status = status(&node).unwrap();
    let output = inspect(&["--config", &config, "--verify", "--top", "3"]);
    let report = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{report}\n{}", text(&output.stderr));
    assert_eq!(field(&report, "engine"), engine);
    assert_eq!(field(&report, "database_id"), status.database_id.to_string());
    assert_eq!(field(&report, "applied_index"), status.applied_index.to_string());
    assert_eq!(field(&report, "chain_hash"), status.chain_hash.to_string());
    assert_eq!(field(&report, "log_first_retained"), status.first_retained_index.to_string());
    assert_eq!(field(&report, "log_last_retained"), status.applied_index.to_string());
    assert_eq!(field(&report, "keys"), status.key_count.to_string());
    assert_eq!(field(&report, "keys"), (2 * KEYS_PER_CATEGORY).to_string());
    assert_eq!(field(&report, "values_checked"), (2 * KEYS_PER_CATEGORY).to_string());
    assert_eq!(field(&report, "log_chain"), format!("ok {}..{}", status.first_retained_index, status.applied_index));
    let categories: BTreeMap<String, u64> = fields(&report)
        .into_iter()
        .filter(|(n, _)| n == "category")
        .map(|(_, v)| {
            let words: Vec<&str> = v.split_whitespace().collect();
            assert_eq!(words[1], "keys", "{v}");
            (words[0].to_string(), words[2].parse().unwrap())
        })
        .collect();
    let expected: BTreeMap<String, u64> =
        [("cfg".to_string(), KEYS_PER_CATEGORY as u64), ("dns".to_string(), KEYS_PER_CATEGORY as u64)].into();
    assert_eq!(categories, expected, "{report}");
    let largest: Vec<String> =
        fields(&report).into_iter().filter(|(n, _)| n == "largest_value").map(|(_, v)| v).collect();
    assert_eq!(largest.len(), 3, "{report}");
    // Two reports of the same state are identical, byte for byte.
    assert_eq!(text(&inspect(&["--config", &config, "--verify", "--top", "3"]).stdout), report);

    // The dump: exactly the cfg: keys, in key order, with their values, on stdout.
    let output = inspect(&["--config", &config, "--dump", "cfg"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let dumped: Vec<(Vec<u8>, Vec<u8>)> = text(&output.stdout)
        .lines()
        .map(|line| {
            let (key, value) = line.split_once('\t').expect("key TAB value");
            (decode(key), decode(value))
        })
        .collect();
    let written: Vec<(Vec<u8>, Vec<u8>)> =
        (0..KEYS_PER_CATEGORY).map(|i| (format!("cfg:item-{i:04}").into_bytes(), value("cfg", i))).collect();
    assert_eq!(dumped, written);
    // The report went to stderr, and says how many keys were dumped.
    assert_eq!(field(&text(&output.stderr), "dumped_keys"), KEYS_PER_CATEGORY.to_string());
    // --out: the same lines in a file, the report on stdout.
    let out = dir.path().join("cfg.dump");
    let output = inspect(&["--config", &config, "--dump", "cfg", "--out", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(std::fs::read(&out).unwrap(), inspect(&["--config", &config, "--dump", "cfg"]).stdout);
    assert_eq!(field(&text(&output.stdout), "dumped_keys"), KEYS_PER_CATEGORY.to_string());

    // By path, with the engine detected; and a store of another database is refused.
    let store = dir.path().join(engine);
    let output = inspect(&["--path", store.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(field(&text(&output.stdout), "applied_index"), status.applied_index.to_string());
    let output = inspect(&["--path", store.to_str().unwrap(), "--database-id", "1234"]);
    assert_eq!(output.status.code(), Some(4));
    assert!(text(&output.stderr).contains("not 00000000000000000000000000001234"), "{}", text(&output.stderr));

    // Inspect wrote nothing a reader should not: RocksDB kept its own info LOG (a read-only
    // instance that made a logger would have renamed it to LOG.old.*), LMDB only its two files.
    let names: Vec<String> =
        std::fs::read_dir(&store).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    match engine {
        "lmdb" => assert_eq!(names.len(), 2, "{names:?}"),
        _ => assert!(!names.iter().any(|n| n.starts_with("LOG.old")), "{names:?}"),
    }
    // And the node is undisturbed: it still takes writes.
    put(node.ports.http, "cfg:after", b"x");
    assert_eq!(applied(&node), status.applied_index + 1);
}

#[test]
fn inspects_a_live_lmdb_node() {
    live_store("lmdb", "");
}

/// A node whose LMDB writes through its map (`storage.write_map`, MDB_WRITEMAP), read by
/// inspect from beside it: the same reports, and still only LMDB's two files.
#[test]
fn inspects_a_live_lmdb_node_that_writes_through_its_map() {
    live_store("lmdb", "write_map = true");
}

#[test]
fn inspects_a_live_rocksdb_node() {
    live_store("rocksdb", "");
}

#[test]
fn refuses_what_is_not_a_store() {
    let dir = tempfile::tempdir().unwrap();

    // A missing path: named, and not created.
    let missing = dir.path().join("no-such-store");
    let output = inspect(&["--path", missing.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(4));
    let stderr = text(&output.stderr);
    assert!(stderr.contains(missing.to_str().unwrap()) && stderr.contains("no such file"), "{stderr}");
    let output = inspect(&["--path", missing.to_str().unwrap(), "--engine", "lmdb"]);
    assert_eq!(output.status.code(), Some(4));
    assert!(!missing.exists());

    // A directory holding something else, on either engine: named, what is there said, untouched.
    let other = dir.path().join("photos");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("cat.jpg"), b"not a store").unwrap();
    for engine in [None, Some("lmdb"), Some("rocksdb")] {
        let mut args = vec!["--path", other.to_str().unwrap()];
        args.extend(engine.map(|e| ["--engine", e]).into_iter().flatten());
        let output = inspect(&args);
        assert_eq!(output.status.code(), Some(4), "{engine:?}");
        let stderr = text(&output.stderr);
        assert!(stderr.contains(other.to_str().unwrap()) && stderr.contains("cat.jpg"), "{stderr}");
    }
    let names: Vec<_> = std::fs::read_dir(&other).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["cat.jpg"]);

    // A memory-engine node: nothing on disk.
    let (config, _) = write_config(dir.path(), "memory", "");
    let output = inspect(&["--config", config.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(4));
    assert!(text(&output.stderr).contains("memory engine"), "{}", text(&output.stderr));

    // A bad configuration or bad arguments: usage (2).
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = 3").unwrap();
    let output = inspect(&["--config", bad.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("bad.toml"), "{}", text(&output.stderr));
    assert_eq!(inspect(&[]).status.code(), Some(2));
    assert_eq!(inspect(&["--config", bad.to_str().unwrap(), "--path", "/tmp"]).status.code(), Some(2));
}

#[test]
fn names_damage_with_its_own_exit_code() {
    use qs_node::{DatabaseId, Op, OpenOptions, Store, StoreLocation};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lmdb");
    // A value no engine compresses or holds twice in one place: 64 bytes of a fixed pattern.
    let victim: Vec<u8> = (0u32..64).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 ^ 0xa5).collect();
    {
        let mut store = Store::open(&StoreLocation::Lmdb(path.clone()), &OpenOptions::new(DatabaseId(0xface))).unwrap();
        let ops = vec![
            Op::Set { key: b"zone:victim".to_vec(), value: victim.clone() },
            Op::Set { key: b"zone:bystander".to_vec(), value: b"fine".to_vec() },
        ];
        let entry = store.next_entry(1, ops).unwrap();
        store.apply(&[entry]).unwrap();
    }
    let healthy = inspect(&["--path", path.to_str().unwrap(), "--verify"]);
    assert_eq!(healthy.status.code(), Some(0), "{}", text(&healthy.stderr));
    // Flip a bit in every copy: the kv record and the log entry (an incompressible literal).
    let data = path.join("data.mdb");
    let mut bytes = std::fs::read(&data).unwrap();
    let mut copies = 0;
    while let Some(pos) = bytes.windows(victim.len()).position(|w| w == victim) {
        bytes[pos + victim.len() / 2] ^= 0x10;
        copies += 1;
    }
    assert!(copies >= 2, "{copies}");
    std::fs::write(&data, &bytes).unwrap();
    let output = inspect(&["--path", path.to_str().unwrap(), "--verify"]);
    let report = text(&output.stdout);
    assert_eq!(output.status.code(), Some(3), "{report}\n{}", text(&output.stderr));
    assert_eq!(field(&report, "checksum_failures"), "1");
    assert_eq!(field(&report, "checksum_failure"), "zone:victim");
    assert!(field(&report, "log_chain").starts_with("broken at 1: does not decode"), "{report}");
    assert_eq!(field(&report, "result"), "DAMAGED");
    // Without --verify nothing is checked, so nothing is found; a dump verifies what it writes.
    assert_eq!(inspect(&["--path", path.to_str().unwrap()]).status.code(), Some(0));
    let output = inspect(&["--path", path.to_str().unwrap(), "--dump", "zone"]);
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(text(&output.stdout), "zone:bystander\tfine\n");
    assert_eq!(field(&text(&output.stderr), "dump_damaged"), "zone:victim");
}
