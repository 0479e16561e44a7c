//! Snapshot transfer: interrupted imports resume where they stopped, and every way a transfer
//! can go wrong is refused with an error that says what, before anything is installed.

use qs_node::store::snapshot::{SnapshotError, SnapshotImport, SnapshotSource};
use qs_node::testkit::Workload;
use qs_node::{ChainHash, DatabaseId, EngineKind, OpenOptions, RetentionPolicy, Store, StoreError, StoreLocation};

fn filled_store(kind: EngineKind, dir: &std::path::Path) -> (Store, Workload) {
    let workload = Workload { value_bytes_max: 4000, ..Workload::small(42) };
    let mut store =
        Store::open(&StoreLocation::new(kind, &dir.join("source")), &OpenOptions::new(workload.db_id)).unwrap();
    let entries = workload.entries(1, 300, ChainHash::GENESIS).unwrap();
    for batch in entries.chunks(7) {
        store.apply(batch).unwrap();
    }
    store.collect_garbage(RetentionPolicy { keep_entries_min: Some(100), ..RetentionPolicy::default() }, 0).unwrap();
    (store, workload)
}

#[test]
fn interrupted_imports_resume_from_the_last_durable_chunk_on_every_engine() {
    for kind in [EngineKind::Lmdb, EngineKind::Rocksdb, EngineKind::Memory] {
        let dir = tempfile::tempdir().unwrap();
        let (source_store, workload) = filled_store(kind, dir.path());
        let export = dir.path().join("export");
        let manifest = source_store.export_snapshot(&export).unwrap();
        assert_eq!(manifest.applied_index, 300);
        assert_eq!(manifest.chain_hash, source_store.chain_hash());
        let source = SnapshotSource::open(&export).unwrap().with_chunk_bytes(8192).unwrap();
        let total = source.manifest().chunk_count();
        assert!(total >= 4, "{kind}: want several chunks, got {total}");

        let staging = dir.path().join("staging");
        let mut import = SnapshotImport::begin(&staging, source.manifest().clone()).unwrap();
        for _ in 0..total / 2 {
            import.write_chunk(&source.read_chunk(import.next_chunk()).unwrap()).unwrap();
        }
        drop(import);
        // A crash mid-write leaves bytes past the recorded progress: garbage appended to a file.
        let first_file = staging.join("data").join(&source.manifest().files[0].name);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&first_file)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"torn write"))
            .unwrap();

        let mut import = SnapshotImport::begin(&staging, source.manifest().clone()).unwrap();
        assert_eq!(import.next_chunk(), total / 2, "{kind}: did not resume where it stopped");
        while !import.is_complete() {
            import.write_chunk(&source.read_chunk(import.next_chunk()).unwrap()).unwrap();
        }
        let target = StoreLocation::new(kind, &dir.path().join("imported"));
        let imported = import.finish(&target, &OpenOptions::new(workload.db_id)).unwrap();
        assert_eq!(imported.applied_index(), 300);
        assert_eq!(imported.chain_hash(), source_store.chain_hash());
        assert_eq!(imported.first_retained_index(), source_store.first_retained_index());
        assert_eq!(imported.state_digest().unwrap(), source_store.state_digest().unwrap());
        assert!(!staging.exists(), "{kind}: staging directory left behind");
    }
}

fn transfer(source: &SnapshotSource, staging: &std::path::Path) -> SnapshotImport {
    let mut import = SnapshotImport::begin(staging, source.manifest().clone()).unwrap();
    while !import.is_complete() {
        import.write_chunk(&source.read_chunk(import.next_chunk()).unwrap()).unwrap();
    }
    import
}

#[test]
fn bad_transfers_are_refused_with_what_was_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let (store, workload) = filled_store(EngineKind::Lmdb, dir.path());
    let export = dir.path().join("export");
    store.export_snapshot(&export).unwrap();
    let source = SnapshotSource::open(&export).unwrap().with_chunk_bytes(8192).unwrap();
    let options = OpenOptions::new(workload.db_id);

    // Out of order and damaged chunks.
    let mut import = SnapshotImport::begin(&dir.path().join("s1"), source.manifest().clone()).unwrap();
    let err = import.write_chunk(&source.read_chunk(1).unwrap()).unwrap_err();
    assert!(matches!(err, SnapshotError::ChunkOutOfOrder { expected: 0, found: 1 }), "{err}");
    let mut chunk = source.read_chunk(0).unwrap();
    chunk.bytes[100] ^= 1;
    let err = import.write_chunk(&chunk).unwrap_err();
    assert!(matches!(err, SnapshotError::BadChunk { number: 0, .. }), "{err}");
    assert_eq!(import.next_chunk(), 0);

    // Finishing early.
    let err = import.finish(&StoreLocation::Lmdb(dir.path().join("t1")), &options).unwrap_err();
    assert!(matches!(err, StoreError::Snapshot(SnapshotError::Incomplete { next: 0, .. })), "{err}");

    // The wrong engine.
    let import = transfer(&source, &dir.path().join("s2"));
    let err = import.finish(&StoreLocation::Rocksdb(dir.path().join("t2")), &options).unwrap_err();
    assert!(matches!(err, StoreError::Snapshot(SnapshotError::EngineMismatch { .. })), "{err}");

    // A manifest that lies about the database or the head is caught when the store is opened.
    let mut lying = source.manifest().clone();
    lying.db_id = DatabaseId(0xbad);
    let mut import = SnapshotImport::begin(&dir.path().join("s3"), lying).unwrap();
    while !import.is_complete() {
        import.write_chunk(&source.read_chunk(import.next_chunk()).unwrap()).unwrap();
    }
    let err = import.finish(&StoreLocation::Lmdb(dir.path().join("t3")), &options).unwrap_err();
    assert!(matches!(err, StoreError::WrongDatabase { .. }), "{err}");
    assert!(!dir.path().join("t3").exists(), "a refused snapshot must not be installed");

    let mut lying = source.manifest().clone();
    lying.applied_index += 1;
    let mut import = SnapshotImport::begin(&dir.path().join("s4"), lying).unwrap();
    while !import.is_complete() {
        import.write_chunk(&source.read_chunk(import.next_chunk()).unwrap()).unwrap();
    }
    let err = import.finish(&StoreLocation::Lmdb(dir.path().join("t4")), &options).unwrap_err();
    assert!(err.to_string().contains("applied index"), "{err}");

    // A non-empty target is never overwritten.
    let occupied = dir.path().join("t5");
    std::fs::create_dir(&occupied).unwrap();
    std::fs::write(occupied.join("precious"), b"data").unwrap();
    let import = transfer(&source, &dir.path().join("s5"));
    let err = import.finish(&StoreLocation::Lmdb(occupied.clone()), &options).unwrap_err();
    assert!(matches!(err, StoreError::Snapshot(SnapshotError::TargetNotEmpty(_))), "{err}");
    assert_eq!(std::fs::read(occupied.join("precious")).unwrap(), b"data");

    // Hostile manifests are refused before anything is written.
    let mut hostile = source.manifest().clone();
    hostile.files[0].name = "../escape".into();
    let err = SnapshotImport::begin(&dir.path().join("s6"), hostile).unwrap_err();
    assert!(matches!(err, SnapshotError::BadManifest(_)), "{err}");
    assert!(SnapshotSource::open(&export).unwrap().with_chunk_bytes(1 << 30).is_err());
}
