//! The loader: what it accepts, and what it refuses with the file, the line and the field.

use super::*;

const GOOD: &str = r#"
[scenario]
name = "t"
description = "d"
duration = "1m"

[topology]
tiers = [{ name = "edge", count = 2 }]

[[fault]]
at = "10s"
kind = "kill"
target = "edge-1"
duration = "5s"

[checks]
lag_max = "10s"
converge_within = "30s"
"#;

#[test]
fn a_setting_the_node_would_refuse_is_refused_at_load_with_its_line() {
    for (node, field, line) in [
        ("staleness_failover = \"10ms\"", "node.staleness_failover", 8),
        ("batch_window = \"2m\"", "node.batch_window", 8),
    ] {
        let text = GOOD.replace("[topology]", &format!("[node]\n{node}\n\n[topology]"));
        let err = Scenario::parse(&text, Path::new("bad.toml")).unwrap_err().to_string();
        assert!(err.starts_with(&format!("bad.toml:{line}: field `{field}`")), "{err}");
        assert!(err.contains("refuses its"), "{err}");
    }
}

#[test]
fn rocksdb_sizes_are_checked_on_every_engine_and_reach_rocksdb_nodes_only() {
    let with = |engine: &str, node: &str| {
        GOOD.replace("duration = \"1m\"", &format!("duration = \"1m\"\nengine = \"{engine}\""))
            .replace("[topology]", &format!("[node]\n{node}\n\n[topology]"))
    };
    // Out of the node's range: refused on the memory engine too, which would ignore it.
    let err = refused(&with("memory", "rocksdb_cache_bytes = 1000"));
    assert!(err.contains("node.rocksdb_cache_bytes") && err.contains("out of range"), "{err}");
    let err = refused(&with("lmdb", "rocksdb_memtable_bytes = \"2 GiB\""));
    assert!(err.contains("node.rocksdb_memtable_bytes"), "{err}");
    // In range, but a block larger than its cache: the RocksDB node's own validation refuses it.
    let err = refused(&with("rocksdb", "rocksdb_cache_bytes = \"64 KiB\"\nrocksdb_block_bytes = \"1 MiB\""));
    assert!(err.contains("storage.block_bytes") && err.contains("larger than the block cache"), "{err}");
    let sizes = "rocksdb_memtable_bytes = \"1 MiB\"\nrocksdb_cache_bytes = \"1 MiB\"\nrocksdb_block_bytes = \"16 KiB\"";
    for (engine, expected) in [("rocksdb", Some((1 << 20, 1 << 20, 16 << 10))), ("lmdb", None)] {
        let scenario = Scenario::parse(&with(engine, sizes), Path::new("s.toml")).expect("valid sizes");
        for planned in nodes::generate(&scenario, Path::new("/x")).expect("valid configurations") {
            let storage = &planned.config.storage;
            let got = storage.cache_bytes.zip(storage.block_bytes).map(|(cache, block)| {
                (storage.memtable_bytes.expect("a RocksDB memtable") as u64, cache.as_u64(), block.as_u64())
            });
            assert_eq!(got, expected, "{engine}");
        }
    }
}

fn refused(text: &str) -> String {
    Scenario::parse(text, Path::new("s.toml")).unwrap_err().to_string()
}

#[test]
fn accepts_a_small_scenario_and_names_its_nodes() {
    let s = Scenario::parse(GOOD, Path::new("s.toml")).unwrap();
    assert_eq!(s.node_names(), vec!["root", "edge-1", "edge-2"]);
}

#[test]
fn bursts_and_data_centers_are_checked() {
    let writer = "[[workload]]\nkind = \"writer\"\nrate_per_s = 5\nkeys = 10\nvalue_bytes = { min = 1, max = 9 }\n";
    let with = |burst: &str| format!("{GOOD}{writer}burst = {burst}\n");
    let ok = Scenario::parse(&with(r#"{ every = "30s", length = "5s", rate_per_s = 100 }"#), Path::new("s.toml"))
        .expect("a valid burst");
    let Workload::Writer { burst: Some(burst), .. } = ok.workload[0] else { panic!("no burst") };
    assert!(!burst.on_at(Duration::from_secs(3)), "no burst before the first period");
    assert!(burst.on_at(Duration::from_secs(31)) && burst.on_at(Duration::from_secs(62)));
    assert!(!burst.on_at(Duration::from_secs(36)));
    let sizes = |distribution: &str| {
        let text = format!(
            "{GOOD}{}",
            writer.replace("max = 9 }", &format!("max = 100000, distribution = \"{distribution}\" }}"))
        );
        let s = Scenario::parse(&text, Path::new("s.toml")).expect("a valid writer");
        let Workload::Writer { value_bytes, .. } = s.workload[0] else { panic!("no writer") };
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(7);
        let drawn: Vec<usize> = (0..2000).map(|_| value_bytes.draw(&mut rng)).collect();
        assert!(drawn.iter().all(|n| (1..=100_000).contains(n)));
        drawn.iter().filter(|n| **n < 1000).count()
    };
    // Under 1000 bytes: about 1 % of uniform draws, about 60 % of log-uniform ones.
    assert!(sizes("uniform") < 100 && sizes("log_uniform") > 1000);
    let err = refused(&with(r#"{ every = "5s", length = "5s", rate_per_s = 100 }"#));
    assert!(err.contains("workload.burst") && err.contains("length < every"), "{err}");
    let topology = |extra: &str| GOOD.replace("count = 2 }]", &format!("count = 2 }}]\n{extra}"));
    let ok = Scenario::parse(&topology("datacenters = 2\ncross_dc_latency = \"40ms\""), Path::new("s.toml"))
        .expect("two data centers");
    assert_eq!((ok.topology.datacenters, ok.topology.cross_dc_latency), (2, Duration::from_millis(40)));
    let err = refused(&topology("cross_dc_latency = \"40ms\""));
    assert!(err.contains("topology.cross_dc_latency") && err.contains("datacenters"), "{err}");
    let err = refused(&topology("datacenters = 0"));
    assert!(err.contains("topology.datacenters"), "{err}");
}

#[test]
fn the_tcp_window_defaults_to_linuxs_buffers_and_refuses_what_cannot_carry_a_frame() {
    let topology = |extra: &str| GOOD.replace("count = 2 }]", &format!("count = 2 }}]\n{extra}"));
    let default = Scenario::parse(GOOD, Path::new("s.toml")).expect("a valid scenario");
    assert_eq!(default.topology.tcp_window.as_u64(), 147_456, "16 KiB + 128 KiB");
    let set = Scenario::parse(&topology("tcp_window = \"64 KiB\""), Path::new("s.toml")).expect("64 KiB");
    assert_eq!(set.topology.tcp_window.as_u64(), 65_536);
    for bad in ["\"512 B\"", "\"11 MiB\""] {
        let err = refused(&topology(&format!("tcp_window = {bad}")));
        assert!(err.contains("topology.tcp_window") && err.contains("1.0 KiB"), "{err}");
    }
}

#[test]
fn an_engine_override_replaces_the_files_engine_and_is_repeated_by_the_reproduce_command() {
    let mut scenario = Scenario::parse(GOOD, Path::new("s.toml")).expect("valid");
    assert_eq!(scenario.reproduce(3), "./qsim run s.toml --seed 3");
    let err = parse_engine("leveldb").expect_err("not an engine");
    assert!(err.contains("leveldb") && err.contains("rocksdb"), "{err}");
    scenario.override_engine(parse_engine("rocksdb").expect("an engine"));
    assert_eq!(scenario.engine(), EngineKind::Rocksdb);
    assert_eq!(scenario.reproduce(3), "./qsim run s.toml --seed 3 --engine rocksdb");
    let name = scenario.scenario.name.clone();
    assert_eq!(
        scenario.out_dir(Path::new("runs"), 3),
        Path::new("runs").join(format!("{name}-rocksdb")).join("seed-3")
    );
}

#[test]
fn errors_name_the_file_the_line_and_the_field() {
    let err = refused(&GOOD.replace("\"edge-1\"", "\"edge-9\""));
    assert!(err.starts_with("s.toml:13: field `fault.target`"), "{err}");
    assert!(err.contains("root, edge-1, edge-2"), "{err}");
    let err = refused(&GOOD.replace("kind = \"kill\"", "kind = \"meteor\""));
    assert!(err.contains("s.toml") && err.contains("line 12") && err.contains("meteor"), "{err}");
    let err = refused(&GOOD.replace("duration = \"1m\"", "duration = \"1m\"\nengine = \"leveldb\""));
    assert!(err.contains("line 6") && err.contains("leveldb") && err.contains("`rocksdb`"), "{err}");
    let err = refused(&GOOD.replace("count = 2 }", "count = 2, primaries = 2 }"));
    assert!(err.contains("topology.tiers.primaries") && err.contains(":8:"), "{err}");
    // `oom` is a kind the trace records, never one a scenario injects.
    let err = refused(&GOOD.replace("kind = \"kill\"", "kind = \"oom\""));
    assert!(err.starts_with("s.toml:10: field `fault.kind`") && err.contains("memory model"), "{err}");
}

#[test]
fn a_full_disk_that_fails_reads_is_refused_and_its_default_ops_leave_reads_alone() {
    let disk_error = |settings: &str| GOOD.replace("kind = \"kill\"", &format!("kind = \"disk_error\"\n{settings}"));
    let err = refused(&disk_error("error = \"enospc\"\nops = [\"commit\", \"read\"]"));
    assert!(err.starts_with("s.toml:10: field `fault.ops`") && err.contains("`read` fails only with eio"), "{err}");
    let full = Scenario::parse(&disk_error("error = \"enospc\""), Path::new("s.toml")).unwrap();
    assert!(!full.fault[0].get_ref().failing_ops().contains(&IoOp::Read), "a full disk reads");
    let dead = Scenario::parse(&disk_error("error = \"eio\""), Path::new("s.toml")).unwrap();
    assert_eq!(dead.fault[0].get_ref().failing_ops(), IoOp::ALL.to_vec(), "a dead disk fails every operation");
}

/// A tree of `counts` (tier sizes below the root), each tier with one primary and, below the
/// first, one secondary.
fn tree(counts: &[usize]) -> String {
    let tiers: Vec<String> = counts
        .iter()
        .enumerate()
        .map(|(t, count)| {
            let secondaries = if t == 0 { 0 } else { 1 };
            format!("{{ name = \"t{t}\", count = {count}, primaries = 1, secondaries = {secondaries} }}")
        })
        .collect();
    GOOD.replace("[{ name = \"edge\", count = 2 }]", &format!("[\n  {},\n]", tiers.join(",\n  ")))
        .replace("edge-1", "t0-1")
}

/// Every node of the largest trees the loader accepts, in any tier shape, has an address of its
/// own, and every replica's sources are nodes of the tier above.
#[test]
fn the_address_plan_holds_the_largest_trees_in_any_shape() {
    let one_wide_tier = vec![2, NODES_MAX - 3];
    let deep = vec![9, 90, 900, NODES_MAX - 1000];
    for counts in [vec![480], one_wide_tier, deep] {
        let scenario = Scenario::parse(&tree(&counts), Path::new("s.toml")).expect("a tree within the limits");
        let planned = nodes::generate(&scenario, Path::new("/scratch")).expect("valid configurations");
        assert_eq!(planned.len(), 1 + counts.iter().sum::<usize>());
        let addresses: std::collections::BTreeSet<std::net::IpAddr> = planned.iter().map(|p| p.ip).collect();
        assert_eq!(addresses.len(), planned.len(), "{counts:?}: two nodes share an address");
        let sources = nodes::source_names(&scenario);
        assert_eq!(sources.len(), planned.len() - 1, "every replica has sources");
        assert!(sources.values().all(|s| !s.is_empty()), "{counts:?}: a source outside the plan");
    }
    // Small tiers keep the addresses every earlier trace names.
    assert_eq!(nodes::ip(2, 6).to_string(), "10.0.2.7");
    assert_eq!(nodes::ip(4, 254).to_string(), "10.0.4.255");
    assert_eq!(nodes::ip(4, 255).to_string(), "10.1.4.1");
    assert_eq!(nodes::reader_ip(300).to_string(), "10.1.254.46");
}

/// One node past the limit is refused at the tier that passes it, with its line and the limit.
#[test]
fn a_tree_past_the_node_limit_is_refused_with_its_line() {
    let err = refused(&tree(&[10, NODES_MAX - 10]));
    assert!(err.starts_with("s.toml:10: field `topology.tiers.count`"), "{err}");
    assert!(err.contains(&format!("at most {NODES_MAX}")), "{err}");
}
