use super::*;

const ROOT: &str = r#"
    name = "root"
    role = "root"
    database_id = "2a"
    [storage]
    engine = "memory"
    [listen]
    replication = "127.0.0.1:7000"
    memcached = "127.0.0.1:11000"
    http = "127.0.0.1:8000"
    [root]
    batch_window = "50ms"
    [[root.producers]]
    name = "dns"
    token = "dns-token-1"
    prefixes = ["dns:"]
    writes_per_s = 10
    burst = 20
"#;

#[test]
fn accepts_a_complete_root() {
    let config = NodeConfig::parse(ROOT, "root.toml").unwrap();
    assert_eq!(config.role, Role::Root);
    assert_eq!(config.root.unwrap().batch_window, Duration::from_millis(50));
    assert_eq!(config.replication.staleness_failover, Duration::from_secs(30));
}

fn refused(text: &str) -> String {
    NodeConfig::parse(text, "bad.toml").unwrap_err().to_string()
}

#[test]
fn names_the_field_that_is_wrong() {
    let err = refused(&ROOT.replace("role = \"root\"", "role = \"replica\""));
    assert!(err.contains("replication.primaries") && err.contains("at least one source"), "{err}");
    let err = refused(&ROOT.replace("\"50ms\"", "\"5 fortnights\""));
    assert!(err.contains("bad.toml") && err.contains("batch_window"), "{err}");
    let err = refused(&ROOT.replace("name = \"root\"", "name = \"root\"\ncolour = \"blue\""));
    assert!(err.contains("colour") && err.contains("line"), "{err}");
    let err = refused(&ROOT.replace("\"memory\"", "\"lmdb\""));
    assert!(err.contains("storage.path"), "{err}");
    let err = refused(&ROOT.replace("\"memory\"", "\"leveldb\""));
    assert!(err.contains("unknown engine") && err.contains("lmdb, rocksdb, memory"), "{err}");
    let err = refused(&ROOT.replace("dns-token-1", "short"));
    assert!(err.contains("root.producers.token"), "{err}");
}

/// A root with one planted bug switched on.
fn with_a_planted_bug() -> String {
    format!("{ROOT}[legacy]\nserve_nearest_when_collected = true\n")
}

#[test]
#[cfg(not(any(madsim, qsim_harness)))]
fn a_real_node_refuses_a_planted_bug_and_runs_none() {
    let err = refused(&with_a_planted_bug());
    assert!(err.contains("bad.toml: field `legacy`") && err.contains("only the simulator's harness builds"), "{err}");
    // All off is what every real configuration says anyway, so an empty section is no bug.
    let config = NodeConfig::parse(&format!("{ROOT}[legacy]\n"), "root.toml").unwrap();
    assert_eq!(config.planted(), &LegacyConfig::default());
}

#[test]
#[cfg(any(madsim, qsim_harness))]
fn the_simulators_build_runs_the_planted_bugs_it_is_given() {
    let config = NodeConfig::parse(&with_a_planted_bug(), "root.toml").unwrap();
    assert!(config.planted().serve_nearest_when_collected);
}

#[test]
fn the_shipped_examples_are_valid() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut checked = 0;
    let mut members = Vec::new();
    for dir in [examples.clone(), examples.join("root-group")] {
        let mut paths: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        paths.sort();
        for path in paths.into_iter().filter(|p| p.extension().is_some_and(|e| e == "toml")) {
            let config = NodeConfig::load(&path).unwrap_or_else(|e| panic!("{e}"));
            if let Some(root) = config.root.as_ref().filter(|root| root.is_group()) {
                let me = root.member(root.member_id.unwrap()).unwrap();
                assert_eq!(
                    (me.replication, me.http),
                    (config.listen.replication, config.listen.http),
                    "{}",
                    path.display()
                );
                members.push(root.members.clone());
            }
            checked += 1;
        }
    }
    assert!(checked >= 5, "found only {checked} example configs in {}", examples.display());
    assert_eq!(members.len(), 3, "the root group example has three members");
    assert!(members.windows(2).all(|pair| pair[0] == pair[1]), "every member lists the same group");
}

fn with_storage(engine: &str, storage: &str, memory: &str) -> String {
    let storage_section = format!("[storage]\nengine = \"{engine}\"\npath = \"/tmp/qs\"\n{storage}\n");
    ROOT.replace("[storage]\n    engine = \"memory\"", &storage_section) + "\n[memory]\n" + memory
}

#[test]
fn reads_cache_and_memory_sizes_as_strings_or_integers() {
    let text = with_storage("rocksdb", "cache_bytes = \"256 KiB\"\nblock_bytes = 8192", "limit_bytes = \"4 GiB\"");
    let config = NodeConfig::parse(&text, "ok.toml").unwrap();
    assert_eq!(config.storage.cache_bytes, Some(ByteSize(256 << 10)));
    assert_eq!(config.memory.limit_bytes, Some(ByteSize(4 << 30)));
    let options = config.store_options();
    assert_eq!((options.rocksdb_cache_bytes, options.rocksdb_block_bytes), (Some(256 << 10), Some(8192)));
    // Unset: RocksDB's defaults, and no limit.
    let config = NodeConfig::parse(&with_storage("rocksdb", "", ""), "ok.toml").unwrap();
    assert_eq!(config.storage.rocksdb_cache_bytes(), ROCKSDB_CACHE_BYTES_DEFAULT as u64);
    assert_eq!(config.memory.limit_bytes, None);
}

#[test]
fn refuses_cache_settings_an_engine_does_not_have() {
    let err = refused(&with_storage("lmdb", "cache_bytes = \"64 MiB\"", ""));
    assert!(err.contains("bad.toml") && err.contains("storage.cache_bytes") && err.contains("OS page cache"), "{err}");
    let err = refused(&with_storage("memory", "block_bytes = \"4 KiB\"", ""));
    assert!(err.contains("storage.block_bytes") && err.contains("rocksdb only"), "{err}");
}

#[test]
fn read_path_switches_apply_to_their_own_engine_only() {
    let options =
        NodeConfig::parse(&with_storage("rocksdb", "direct_reads = true", ""), "ok.toml").unwrap().store_options();
    assert!(options.rocksdb_direct_reads && options.lmdb_read_ahead);
    let options =
        NodeConfig::parse(&with_storage("lmdb", "read_ahead = false", ""), "ok.toml").unwrap().store_options();
    assert!(!options.lmdb_read_ahead && !options.rocksdb_direct_reads);
    let err = refused(&with_storage("lmdb", "direct_reads = true", ""));
    assert!(err.contains("bad.toml") && err.contains("storage.direct_reads") && err.contains("rocksdb only"), "{err}");
    for engine in ["rocksdb", "memory"] {
        let err = refused(&with_storage(engine, "read_ahead = false", ""));
        assert!(err.contains("storage.read_ahead") && err.contains("lmdb only"), "{err}");
        let err = refused(&with_storage(engine, "write_map = true", ""));
        assert!(err.contains("storage.write_map") && err.contains("MDB_WRITEMAP"), "{err}");
    }
}

#[test]
fn write_map_is_off_unless_asked_for() {
    let options = NodeConfig::parse(&with_storage("lmdb", "", ""), "ok.toml").unwrap().store_options();
    assert!(!options.lmdb_write_map);
    let options = NodeConfig::parse(&with_storage("lmdb", "write_map = true", ""), "ok.toml").unwrap().store_options();
    assert!(options.lmdb_write_map && options.lmdb_read_ahead);
}

#[test]
fn refuses_zero_and_absurd_sizes() {
    for (storage, memory, field) in [
        ("cache_bytes = 0", "", "storage.cache_bytes"),
        ("cache_bytes = \"2 TiB\"", "", "storage.cache_bytes"),
        ("block_bytes = \"0 B\"", "", "storage.block_bytes"),
        ("block_bytes = \"16 MiB\"", "", "storage.block_bytes"),
        ("", "limit_bytes = 0", "memory.limit_bytes"),
        ("", "limit_bytes = \"100 TiB\"", "memory.limit_bytes"),
    ] {
        let err = refused(&with_storage("rocksdb", storage, memory));
        assert!(err.contains("bad.toml") && err.contains(field) && err.contains("allowed"), "{field}: {err}");
    }
    let err = refused(&with_storage("rocksdb", "cache_bytes = \"64 mebibytes\"", ""));
    assert!(err.contains("cache_bytes") && err.contains("line"), "{err}");
    let err = refused(&with_storage("rocksdb", "cache_bytes = \"64 KiB\"\nblock_bytes = \"128 KiB\"", ""));
    assert!(err.contains("storage.block_bytes") && err.contains("no block would fit"), "{err}");
}

#[test]
fn refuses_a_cache_as_large_as_the_memory_limit() {
    let err = refused(&with_storage("rocksdb", "cache_bytes = \"2 GiB\"", "limit_bytes = \"2 GiB\""));
    assert!(err.contains("storage.cache_bytes") && err.contains("memory.limit_bytes"), "{err}");
    // The default cache counts too.
    let err = refused(&with_storage("rocksdb", "", "limit_bytes = \"16 MiB\""));
    assert!(err.contains("memory.limit_bytes") && err.contains("default storage.cache_bytes"), "{err}");
    // LMDB's page cache is not a setting: any limit above the minimum goes.
    NodeConfig::parse(&with_storage("lmdb", "", "limit_bytes = \"1 MiB\""), "ok.toml").unwrap();
}

#[test]
fn refuses_a_replica_that_lists_itself() {
    let replica = r#"
        name = "edge"
        role = "replica"
        database_id = "2a"
        [storage]
        engine = "memory"
        [listen]
        replication = "127.0.0.1:7001"
        memcached = "127.0.0.1:11001"
        http = "127.0.0.1:8001"
        [replication]
        primaries = ["127.0.0.1:7001"]
    "#;
    let err = refused(replica);
    assert!(err.contains("own replication address"), "{err}");
}

#[test]
fn tls_takes_its_files_and_bounds_its_reload_interval() {
    let tls = "[tls]\ncertificate = \"node.pem\"\nkey = \"node.key\"\nca = \"ca.pem\"\n";
    let config = NodeConfig::parse(&format!("{ROOT}{tls}"), "root.toml").unwrap();
    let parsed = config.tls.expect("[tls] parsed");
    assert_eq!(parsed.reload_interval, crate::tls::RELOAD_INTERVAL_DEFAULT);
    assert!(NodeConfig::parse(ROOT, "root.toml").unwrap().tls.is_none(), "no [tls]: plaintext");
    for interval in ["\"0s\"", "\"2h\""] {
        let err = refused(&format!("{ROOT}{tls}reload_interval = {interval}\n"));
        assert!(err.contains("tls.reload_interval") && err.contains("out of range"), "{err}");
    }
    let err = refused(&format!("{ROOT}[tls]\ncertificate = \"node.pem\"\nkey = \"node.key\"\n"));
    assert!(err.contains("ca"), "{err}");
}

/// `[[root.members]]` for ids `ids`, on made-up loopback ports.
fn group(member_id: Option<u64>, ids: &[u64]) -> String {
    let mut text = ROOT.replace(
        "batch_window = \"50ms\"",
        &match member_id {
            Some(id) => format!("batch_window = \"50ms\"\nmember_id = {id}"),
            None => "batch_window = \"50ms\"".to_string(),
        },
    );
    for id in ids {
        text += &format!(
            "[[root.members]]\nid = {id}\nreplication = \"127.0.0.{id}:7000\"\nhttp = \"127.0.0.{id}:8000\"\n"
        );
    }
    text
}

#[test]
fn a_root_group_has_three_or_five_distinct_members_this_one_among_them() {
    let config = NodeConfig::parse(&group(Some(2), &[1, 2, 3]), "member.toml").unwrap();
    let root = config.root.unwrap();
    assert!(root.is_group());
    assert_eq!(root.member(3).unwrap().http, "127.0.0.3:8000".parse().unwrap());
    assert!(NodeConfig::parse(&group(Some(5), &[1, 2, 3, 4, 5]), "member.toml").is_ok());
    assert!(!NodeConfig::parse(ROOT, "root.toml").unwrap().root.unwrap().is_group(), "no members: a root of one");
    for (text, field, says) in [
        (group(Some(1), &[1, 2]), "root.members", "lists 2 members; a root group has 3 or 5"),
        (group(Some(1), &[1, 2, 3, 4]), "root.members", "3 or 5"),
        (group(None, &[1, 2, 3]), "root.member_id", "must name this node's id"),
        (group(Some(1), &[]), "root.member_id", "lists no group"),
        (group(Some(4), &[1, 2, 3]), "root.member_id", "4 is not among the members' ids [1, 2, 3]"),
        (group(Some(1), &[1, 1, 3]), "root.members.id", "id 1 is listed twice"),
        (group(Some(1), &[0, 1, 3]), "root.members.id", "ids start at 1"),
    ] {
        let err = refused(&text);
        assert!(err.contains(field) && err.contains(says), "expected {field}: {says}, got: {err}");
    }
}

/// Members marked `standby` are in the roster (their addresses known) but not among the first
/// voters: a group starts with 3 or 5 others, and the roster holds at most 7. An operator
/// token too short to resist guessing is refused.
#[test]
fn a_roster_may_hold_standby_members_beside_the_first_voters() {
    let standby = |text: String, ids: &[u64]| {
        ids.iter()
            .fold(text, |text, id| text.replace(&format!("\nid = {id}\n"), &format!("\nid = {id}\nstandby = true\n")))
    };
    let config = NodeConfig::parse(&standby(group(Some(4), &[1, 2, 3, 4]), &[4]), "member.toml").unwrap();
    let root = config.root.unwrap();
    assert_eq!(root.first_voters(), [1, 2, 3], "member 4 stands by");
    assert!(root.member(4).unwrap().standby);
    assert!(NodeConfig::parse(&standby(group(Some(1), &[1, 2, 3, 4, 5, 6]), &[4, 5, 6]), "m.toml").is_ok());
    for (text, field, says) in [
        (standby(group(Some(1), &[1, 2, 3, 4]), &[3, 4]), "root.members", "lists 2 members not marked standby (of 4)"),
        (group(Some(1), &[1, 2, 3, 4, 5, 6, 7, 8]), "root.members", "lists 8 members; a roster holds at most 7"),
        (
            group(Some(1), &[1, 2, 3]).replace("member_id = 1", "member_id = 1\noperator_token = \"short\""),
            "root.operator_token",
            "shorter than 16 bytes",
        ),
    ] {
        let err = refused(&text);
        assert!(err.contains(field) && err.contains(says), "expected {field}: {says}, got: {err}");
    }
    let with_token =
        group(Some(1), &[1, 2, 3]).replace("member_id = 1", "member_id = 1\noperator_token = \"0123456789abcdef\"");
    let root = NodeConfig::parse(&with_token, "member.toml").unwrap().root.unwrap();
    assert_eq!(root.operator_token.as_deref(), Some("0123456789abcdef"));
}

/// `to_toml` writes what `parse` reads back to the same values — every field, sizes to the
/// byte (a size's own text rounds: 1 000 000 bytes is "976.6 KiB") — for the shipped examples
/// and for a configuration with every optional field set.
#[test]
fn to_toml_round_trips_every_field() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut configs: Vec<NodeConfig> =
        ["root.toml", "edge.toml"].iter().filter_map(|name| NodeConfig::load(&examples.join(name)).ok()).collect();
    assert!(!configs.is_empty(), "no example configuration in {}", examples.display());
    let mut full = NodeConfig::parse(
        &with_storage(
            "rocksdb",
            "cache_bytes = 1000000\nblock_bytes = 8192\nmemtable_bytes = 1048576\ndirect_reads = true",
            "limit_bytes = 123456789",
        ),
        "full",
    )
    .unwrap();
    full.replication.snapshot_chunk_bytes = ByteSize(1_000_003);
    full.replication.dial_from = Some("127.0.3.4".parse().unwrap());
    full.legacy.apply_without_gap_check = cfg!(any(madsim, qsim_harness));
    configs.push(full);
    for config in configs {
        let text = config.to_toml();
        let back = NodeConfig::parse(&text, "round trip").unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(format!("{back:?}"), format!("{config:?}"), "{text}");
    }
}

/// A group member with `settings` added to its `[root]`.
fn member_with(settings: &str) -> String {
    group(Some(1), &[1, 2, 3]).replacen("[root]\n", &format!("[root]\n{settings}\n"), 1)
}

/// The root group's Raft log settings: the shipped defaults and runnable combinations at the
/// edges are accepted (a keep at or above the interval among them); a value a member cannot run
/// with is refused at start, naming the field, the value and why — not found out at the first
/// compaction (raft-rs panics on a log compacted to nothing).
#[test]
fn a_root_group_refuses_raft_log_settings_it_cannot_run() {
    let root = NodeConfig::parse(&group(Some(1), &[1, 2, 3]), "member.toml").unwrap().root.unwrap();
    assert_eq!((root.raft_snapshot_entries, root.raft_log_keep_entries), (10_000, 1_000), "the shipped defaults");
    for (snapshot, keep) in [(10_000, 1_000), (1, 1), (100, 100), (100, 1_000), (1_000_000, 1_000_000)] {
        let text = member_with(&format!("raft_snapshot_entries = {snapshot}\nraft_log_keep_entries = {keep}"));
        let root = NodeConfig::parse(&text, "member.toml")
            .unwrap_or_else(|e| panic!("snapshot {snapshot}, keep {keep}: {e}"))
            .root
            .unwrap();
        assert_eq!((root.raft_snapshot_entries, root.raft_log_keep_entries), (snapshot, keep));
    }
    for (setting, field, says) in [
        ("raft_log_keep_entries = 0", "root.raft_log_keep_entries", "0 is out of range; allowed 1 to 1000000"),
        ("raft_log_keep_entries = 0", "root.raft_log_keep_entries", "keep at least the entry its snapshot is at"),
        ("raft_snapshot_entries = 0", "root.raft_snapshot_entries", "0 is out of range; allowed 1 to 1000000"),
        ("raft_snapshot_entries = 1000001", "root.raft_snapshot_entries", "1000001 is out of range"),
        ("raft_log_keep_entries = 1000001", "root.raft_log_keep_entries", "1000001 is out of range"),
        // The largest a TOML integer goes.
        ("raft_snapshot_entries = 9223372036854775807", "root.raft_snapshot_entries", "out of range"),
    ] {
        let Err(err) = NodeConfig::parse(&member_with(setting), "bad.toml") else {
            panic!("{setting} was accepted: a member cannot run with it");
        };
        let err = err.to_string();
        assert!(err.contains("bad.toml") && err.contains(field) && err.contains(says), "{setting}: {err}");
    }
}
