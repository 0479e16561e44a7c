//! Damaging a stored value on disk makes the next read of it fail, naming the key, counted,
//! and without returning the damaged bytes. LMDB and the memory engine are caught by the
//! store's own CRC32C; RocksDB's block checksum fires first, and surfaces the same way. A
//! multi-key read that reaches a damaged value fails whole. (The memory engine's damage comes
//! from its injector, which a user's build does not have: `store::mem`'s unit tests.)

use std::path::Path;

use qs_node::{EngineKind, LogRead, LogReadLimits, Op, OpenOptions, Store, StoreError, StoreLocation};

const DB: qs_node::DatabaseId = qs_node::DatabaseId(0xc0ffee);

/// A value no engine will compress or find elsewhere on disk: 64 bytes from a fixed pattern.
fn victim_value() -> Vec<u8> {
    (0u32..64).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 ^ 0xa5).collect()
}

fn write_victim(location: &StoreLocation) {
    let mut store = Store::open(location, &OpenOptions::new(DB)).unwrap();
    let ops = vec![
        Op::Set { key: b"zone:victim".to_vec(), value: victim_value() },
        Op::Set { key: b"zone:bystander".to_vec(), value: b"fine".to_vec() },
    ];
    let entry = store.next_entry(1, ops).unwrap();
    store.apply(&[entry]).unwrap();
    store.flush().unwrap();
}

/// Flips one bit in the middle of every copy of `pattern` in the files under `dir` whose
/// names satisfy `pick`. Returns how many copies it damaged.
fn damage_files(dir: &Path, pattern: &[u8], pick: impl Fn(&str) -> bool) -> usize {
    let mut damaged = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_file() || !pick(path.file_name().unwrap().to_str().unwrap()) {
            continue;
        }
        let mut bytes = std::fs::read(&path).unwrap();
        let mut at = 0;
        while let Some(pos) = bytes[at..].windows(pattern.len()).position(|w| w == pattern) {
            bytes[at + pos + pattern.len() / 2] ^= 0x10;
            damaged += 1;
            at += pos + pattern.len();
        }
        std::fs::write(&path, &bytes).unwrap();
    }
    damaged
}

fn assert_read_fails_and_is_counted(location: &StoreLocation) {
    let store = Store::open(location, &OpenOptions::new(DB)).unwrap();
    let err = store.get(b"zone:victim").unwrap_err();
    let named = err.to_string().contains("zone:victim");
    assert!(named, "error does not name the key: {err}");
    match location.kind() {
        EngineKind::Rocksdb => assert!(matches!(err, StoreError::CorruptRead { .. }), "{err:?}"),
        _ => assert!(matches!(err, StoreError::Checksum { .. }), "{err:?}"),
    }
    assert_eq!(store.stats().unwrap().checksum_failures, 1);
    // A multi-key read that reaches the victim fails whole, whatever it read before it.
    let keys: [&[u8]; 3] = [b"zone:bystander", b"zone:victim", b"zone:absent"];
    let err = store.get_each(&keys, &mut |_, _| true).unwrap_err();
    assert!(err.is_damage() && err.to_string().contains("zone:victim"), "{err:?}");
    assert_eq!(store.stats().unwrap().checksum_failures, 2);
    if location.kind() != EngineKind::Rocksdb {
        // The bystander lives in the same page and still reads; RocksDB fails the whole block.
        assert_eq!(store.get(b"zone:bystander").unwrap().as_deref(), Some(&b"fine"[..]));
    }
}

#[test]
fn lmdb_damaged_value_fails_its_checksum_and_so_does_the_log_entry() {
    let dir = tempfile::tempdir().unwrap();
    let location = StoreLocation::Lmdb(dir.path().join("lmdb"));
    write_victim(&location);
    // The value sits in the kv table and, as an incompressible Snappy literal, in the log entry.
    let copies = damage_files(&dir.path().join("lmdb"), &victim_value(), |name| name == "data.mdb");
    assert!(copies >= 2, "expected the value in the kv table and the log, found {copies} copies");
    assert_read_fails_and_is_counted(&location);
    let store = Store::open(&location, &OpenOptions::new(DB)).unwrap();
    let read = store.read_log_after(0, LogReadLimits { entries_max: 10, bytes_max: 1 << 20 });
    assert!(matches!(read, Err(StoreError::CorruptLog { index: 1, .. })), "{read:?}");
    assert!(store.state_digest().is_err(), "the state digest must not cover a damaged value");
}

#[test]
fn rocksdb_damaged_value_fails_the_read() {
    let dir = tempfile::tempdir().unwrap();
    let location = StoreLocation::Rocksdb(dir.path().join("rocks"));
    write_victim(&location);
    let copies = damage_files(&dir.path().join("rocks"), &victim_value(), |name| name.ends_with(".sst"));
    assert!(copies >= 1, "the value was not found in any SST file");
    assert_read_fails_and_is_counted(&location);
}

#[test]
fn undamaged_stores_read_back_and_log_reads_verify() {
    for kind in [EngineKind::Lmdb, EngineKind::Rocksdb, EngineKind::Memory] {
        let dir = tempfile::tempdir().unwrap();
        let location = StoreLocation::new(kind, &dir.path().join("store"));
        write_victim(&location);
        let store = Store::open(&location, &OpenOptions::new(DB)).unwrap();
        assert_eq!(store.get(b"zone:victim").unwrap(), Some(victim_value()), "{kind}");
        // A multi-key read hands back each key's value in the order asked, absent ones as None,
        // and stops when told to.
        let keys: [&[u8]; 4] = [b"zone:bystander", b"zone:absent", b"zone:victim", b"zone:bystander"];
        let mut seen = Vec::new();
        store
            .get_each(&keys, &mut |position, value| {
                seen.push((position, value.map(<[u8]>::to_vec)));
                true
            })
            .unwrap();
        let expected =
            vec![(0, Some(b"fine".to_vec())), (1, None), (2, Some(victim_value())), (3, Some(b"fine".to_vec()))];
        assert_eq!(seen, expected, "{kind}");
        let mut calls = 0;
        store
            .get_each(&keys, &mut |_, _| {
                calls += 1;
                calls < 2
            })
            .unwrap();
        assert_eq!(calls, 2, "{kind}: get_each went on after false");
        let read = store.read_log_after(0, LogReadLimits { entries_max: 10, bytes_max: 1 << 20 }).unwrap();
        assert!(matches!(read, LogRead::Entries(ref e) if e.len() == 1), "{kind}: {read:?}");
        assert_eq!(store.stats().unwrap().checksum_failures, 0);
    }
}
