//! Model-based test: random sequences of applies, gets, log reads, garbage collection,
//! snapshot export/import and reopen run against the LMDB, RocksDB and memory engines side by
//! side with a plain `BTreeMap` model. After every step, all four agree on state, applied
//! index, chain hash and retained log range.
//!
//! `PROPTEST_CASES` raises the case count (the nightly job does).

use std::collections::BTreeMap;
use std::path::PathBuf;

use proptest::prelude::*;
use qs_node::store::snapshot::{SnapshotImport, SnapshotSource};
use qs_node::{
    ChainHash, DatabaseId, EngineKind, LogEntry, LogRead, LogReadLimits, Op, OpenOptions, RetentionPolicy, Store,
    StoreLocation,
};

const DB: DatabaseId = DatabaseId(0xdb);
const KEYS: &[&str] = &["dns:a", "dns:b", "waf:a", "waf:b", "workers:x", "zone", "z:1", "z:2"];

#[derive(Clone, Debug)]
enum Step {
    /// Entries of (key index, value or delete) op lists, applied as one batch.
    Apply(Vec<Vec<(usize, Option<Vec<u8>>)>>),
    Get(usize),
    ReadLog {
        after_back: u64,
        entries_max: usize,
    },
    Gc {
        keep_entries_min: Option<u64>,
        keep_age_ms: Option<u64>,
    },
    Snapshot {
        interrupt_after: u64,
    },
    Reopen,
}

fn step() -> impl Strategy<Value = Step> {
    let op = (0..KEYS.len(), prop::option::weighted(0.8, prop::collection::vec(any::<u8>(), 0..40)));
    let entry = prop::collection::vec(op, 1..5);
    prop_oneof![
        6 => prop::collection::vec(entry, 1..4).prop_map(Step::Apply),
        3 => (0..KEYS.len()).prop_map(Step::Get),
        2 => (0u64..40, 1usize..40).prop_map(|(after_back, entries_max)| Step::ReadLog { after_back, entries_max }),
        2 => (prop::option::of(0u64..6), prop::option::of(0u64..80))
            .prop_map(|(keep_entries_min, keep_age_ms)| Step::Gc { keep_entries_min, keep_age_ms }),
        1 => (0u64..4).prop_map(|interrupt_after| Step::Snapshot { interrupt_after }),
        1 => Just(Step::Reopen),
    ]
}

/// The reference: what a correct store must hold, in the plainest possible form.
#[derive(Default)]
struct Model {
    kv: BTreeMap<Vec<u8>, Vec<u8>>,
    log: Vec<LogEntry>, // every entry ever applied; index i is at log[i - 1]
    first_retained: u64,
}

impl Model {
    fn applied(&self) -> u64 {
        self.log.len() as u64
    }
    fn chain_hash(&self) -> ChainHash {
        self.log.last().map_or(ChainHash::GENESIS, |e| e.hash)
    }
    fn now_ms(&self) -> u64 {
        timestamp(self.applied())
    }
}

fn timestamp(index: u64) -> u64 {
    index * 10
}

struct Engine {
    location: StoreLocation,
    store: Option<Store>,
    scratch: PathBuf,
}

impl Engine {
    fn store(&mut self) -> &mut Store {
        self.store.as_mut().expect("store is open")
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "139 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions { lmdb_map_bytes: 64 << 20, ..OpenOptions::new(DB) };
    let mut engines: Vec<Engine> = [EngineKind::Lmdb, EngineKind::Rocksdb, EngineKind::Memory]
        .into_iter()
        .map(|kind| {
            let location = StoreLocation::new(kind, &dir.path().join(format!("{kind}-0")));
            let store = Some(Store::open(&location, &options).unwrap());
            Engine { location, store, scratch: dir.path().join(format!("{kind}-scratch")) }
        })
        .collect();
    let mut model = Model { first_retained: 1, ..Model::default() };
    let limits = |entries_max| LogReadLimits { entries_max, bytes_max: 1 << 20 };

    for (n, step) in steps.into_iter().enumerate() {
        match step {
            Step::Apply(entries) => {
                let mut sealed = Vec::new();
                let mut prev = model.chain_hash();
                for (i, ops) in entries.into_iter().enumerate() {
                    let index = model.applied() + 1 + i as u64;
                    let ops = ops
                        .into_iter()
                        .map(|(k, v)| {
                            let key = KEYS[k].as_bytes().to_vec();
                            match v {
                                Some(value) => Op::Set { key, value },
                                None => Op::Delete { key },
                            }
                        })
                        .collect();
                    let entry = LogEntry::seal(index, DB, timestamp(index), prev, ops).unwrap();
                    prev = entry.hash;
                    sealed.push(entry);
                }
                for e in &mut engines {
                    e.store().apply(&sealed).unwrap();
                }
                for entry in sealed {
                    for op in &entry.ops {
                        match op {
                            Op::Set { key, value } => model.kv.insert(key.clone(), value.clone()),
                            Op::Delete { key } => model.kv.remove(key),
                        };
                    }
                    model.log.push(entry);
                }
            }
            Step::Get(k) => {
                let key = KEYS[k].as_bytes();
                for e in &mut engines {
                    prop_assert_eq!(e.store().get(key).unwrap(), model.kv.get(key).cloned(), "step {} get", n);
                }
            }
            Step::ReadLog { after_back, entries_max } => {
                let after = model.applied().saturating_sub(after_back);
                let expected = if after + 1 < model.first_retained {
                    LogRead::Collected { first_retained: model.first_retained }
                } else {
                    let end = (after as usize + entries_max).min(model.log.len());
                    LogRead::Entries(model.log[after as usize..end].to_vec())
                };
                for e in &mut engines {
                    prop_assert_eq!(&e.store().read_log_after(after, limits(entries_max)).unwrap(), &expected);
                }
                let ahead = model.applied() + 1;
                for e in &mut engines {
                    prop_assert_eq!(
                        e.store().read_log_after(ahead, limits(entries_max)).unwrap(),
                        LogRead::Ahead { applied: model.applied() }
                    );
                }
            }
            Step::Gc { keep_entries_min, keep_age_ms } => {
                let policy = RetentionPolicy { keep_entries_min, keep_age_ms, ..RetentionPolicy::default() };
                let now = model.now_ms();
                // Model: collect the oldest entries while every rule that is set allows it.
                if keep_entries_min.is_some() || keep_age_ms.is_some() {
                    while model.first_retained <= model.applied() {
                        let i = model.first_retained;
                        let by_count = keep_entries_min.is_none_or(|min| model.applied() - i + 1 > min);
                        let by_age = keep_age_ms.is_none_or(|age| timestamp(i) + age <= now);
                        if !(by_count && by_age) {
                            break;
                        }
                        model.first_retained += 1;
                    }
                }
                for e in &mut engines {
                    let outcome = e.store().collect_garbage(policy, now).unwrap();
                    prop_assert_eq!(outcome.first_retained, model.first_retained);
                }
            }
            Step::Snapshot { interrupt_after } => {
                for e in &mut engines {
                    let generation = n;
                    let export = e.scratch.join(format!("export-{generation}"));
                    e.store().export_snapshot(&export).unwrap();
                    let source = SnapshotSource::open(&export).unwrap().with_chunk_bytes(4096).unwrap();
                    let staging = e.scratch.join(format!("staging-{generation}"));
                    // Transfer a few chunks, "crash", then resume to the end.
                    let mut import = SnapshotImport::begin(&staging, source.manifest().clone()).unwrap();
                    while !import.is_complete() && import.next_chunk() < interrupt_after {
                        import.write_chunk(&source.read_chunk(import.next_chunk()).unwrap()).unwrap();
                    }
                    let resumed_at = import.next_chunk();
                    drop(import);
                    let mut import = SnapshotImport::begin(&staging, source.manifest().clone()).unwrap();
                    prop_assert_eq!(import.next_chunk(), resumed_at);
                    while !import.is_complete() {
                        import.write_chunk(&source.read_chunk(import.next_chunk()).unwrap()).unwrap();
                    }
                    let target =
                        StoreLocation::new(e.location.kind(), &e.scratch.join(format!("imported-{generation}")));
                    let imported = import.finish(&target, &options).unwrap();
                    e.store = Some(imported);
                    e.location = target;
                }
            }
            Step::Reopen => {
                for e in &mut engines {
                    e.store = None; // close first: LMDB refuses a second open of one environment
                    e.store = Some(Store::open(&e.location, &options).unwrap());
                }
            }
        }
        // After every step all engines agree with the model.
        let dump: Vec<(Vec<u8>, Vec<u8>)> = model.kv.clone().into_iter().collect();
        for e in &mut engines {
            let kind = e.location.kind();
            let store = e.store();
            prop_assert_eq!(store.applied_index(), model.applied(), "{} after step {}", kind, n);
            prop_assert_eq!(store.chain_hash(), model.chain_hash(), "{} after step {}", kind, n);
            prop_assert_eq!(store.first_retained_index(), model.first_retained, "{} after step {}", kind, n);
            prop_assert_eq!(&store.dump().unwrap(), &dump, "{} after step {}", kind, n);
            let stats = store.stats().unwrap();
            prop_assert_eq!(stats.key_count, model.kv.len() as u64);
            let logical: usize = model.kv.iter().map(|(k, v)| k.len() + v.len()).sum();
            prop_assert_eq!(stats.logical_bytes, logical as u64);
        }
        let digests: Vec<_> = engines.iter_mut().map(|e| e.store().state_digest().unwrap()).collect();
        prop_assert!(digests.windows(2).all(|w| w[0] == w[1]), "state digests differ: {:?}", digests);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn engines_agree_with_the_model(steps in prop::collection::vec(step(), 1..40)) {
        run(steps)?;
    }
}

#[test]
fn usage_by_prefix_groups_keys_before_the_first_colon() {
    let mut store = Store::open(&StoreLocation::Memory(Default::default()), &OpenOptions::new(DB)).unwrap();
    let ops = ["dns:a", "dns:b", "waf:a:b", "plain"]
        .iter()
        .map(|k| Op::Set { key: k.as_bytes().to_vec(), value: vec![0; 10] })
        .collect();
    let entry = store.next_entry(0, ops).unwrap();
    store.apply(&[entry]).unwrap();
    let usage = store.usage_by_prefix().unwrap();
    let summary: Vec<(&str, u64, u64)> = usage.iter().map(|(p, u)| (p.as_str(), u.keys, u.bytes)).collect();
    assert_eq!(summary, vec![("dns", 2, 30), ("plain", 1, 15), ("waf", 1, 17)]);
}

/// A log read stops at its entry limit or just before the entry that would pass its byte limit
/// (one entry always goes), on every engine, however far that is from where it started:
/// 40 entries, read with limits that end the reply at each of them.
#[test]
fn log_reads_stop_exactly_at_their_limits_on_every_engine() {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions { lmdb_map_bytes: 64 << 20, ..OpenOptions::new(DB) };
    let mut log = Vec::new();
    let mut prev = ChainHash::GENESIS;
    for index in 1..=40u64 {
        let ops = vec![Op::Set {
            key: KEYS[index as usize % KEYS.len()].into(),
            value: vec![index as u8; 50 * index as usize],
        }];
        let entry = LogEntry::seal(index, DB, timestamp(index), prev, ops).unwrap();
        prev = entry.hash;
        log.push(entry);
    }
    for kind in [EngineKind::Lmdb, EngineKind::Rocksdb, EngineKind::Memory] {
        let location = StoreLocation::new(kind, &dir.path().join(format!("{kind}-limits")));
        let mut store = Store::open(&location, &options).unwrap();
        store.apply(&log).unwrap();
        let unlimited = LogReadLimits { entries_max: usize::MAX, bytes_max: usize::MAX };
        let LogRead::Entries(stored) = store.read_stored_log_after(0, unlimited).unwrap() else { panic!("{kind}") };
        let sizes: Vec<usize> = stored.into_iter().map(|e| e.into_compressed().len()).collect();
        assert_eq!(sizes.len(), 40, "{kind}: every entry");
        for after in [0u64, 3, 15, 16, 17, 39, 40] {
            for entries_max in [1usize, 2, 15, 16, 17, 33, 100] {
                let expected: Vec<LogEntry> = log.iter().skip(after as usize).take(entries_max).cloned().collect();
                let limits = LogReadLimits { entries_max, bytes_max: usize::MAX };
                assert_eq!(
                    store.read_log_after(after, limits).unwrap(),
                    LogRead::Entries(expected),
                    "{kind} {after} {entries_max}"
                );
            }
            for ends_after in 1..=(40 - after as usize) {
                let first = after as usize;
                let bytes: usize = sizes[first..first + ends_after].iter().sum();
                // The byte limit falls inside the next entry: the reply ends just before it.
                let next = sizes.get(first + ends_after).map_or(0, |s| s - 1);
                let limits = LogReadLimits { entries_max: 100, bytes_max: bytes + next };
                let LogRead::Entries(read) = store.read_log_after(after, limits).unwrap() else { panic!("{kind}") };
                assert_eq!(read.len(), ends_after, "{kind}: after {after}, {} bytes", bytes + next);
            }
        }
        // One entry goes even when it alone passes the byte limit.
        let tiny = LogReadLimits { entries_max: 100, bytes_max: 1 };
        let LogRead::Entries(read) = store.read_log_after(20, tiny).unwrap() else { panic!("{kind}") };
        assert_eq!(read.iter().map(|e| e.index).collect::<Vec<_>>(), vec![21], "{kind}");
    }
}
