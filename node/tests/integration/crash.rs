//! Crash test: a child process applies batches in a loop and is killed with SIGKILL at a
//! random moment, several times over. Each time the store is reopened and must hold exactly the
//! state after some prefix of whole batches — at least every batch the child saw acknowledged,
//! at most the one in flight — with the chain verifying and no checksum failing.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use qs_node::testkit::Workload;
use qs_node::{ChainHash, EngineKind, LogRead, LogReadLimits, MemDisk, OpenOptions, Store, StoreLocation};
use rand::{RngExt, SeedableRng};

const ROUNDS: usize = 5;
const UNTIL_INDEX: u64 = 1_000_000;

fn crash_loop(kind: EngineKind, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let workload = Workload::small(seed);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut applied_before = 0;
    for round in 0..ROUNDS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_qs-crash-writer"))
            .args([&kind.to_string(), path.to_str().unwrap(), &seed.to_string(), &UNTIL_INDEX.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let acks_wanted = rng.random_range(1..60);
        let mut last_acked = applied_before;
        for _ in 0..acks_wanted {
            let line = lines.next().expect("child exited early").unwrap();
            last_acked = line.strip_prefix("acked ").unwrap().parse().unwrap();
        }
        // Kill at a random moment, usually mid-commit of a later batch.
        std::thread::sleep(Duration::from_micros(rng.random_range(0..3_000)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // Acks the child printed before it died count too.
        for line in lines.map_while(Result::ok) {
            last_acked = line.strip_prefix("acked ").unwrap().parse().unwrap();
        }

        let store = Store::open(&StoreLocation::new(kind, &path), &OpenOptions::new(workload.db_id)).unwrap();
        let applied = store.applied_index();
        let in_flight_end = last_acked + workload.batch_len(last_acked + 1);
        eprintln!(
            "{kind} round {round}: last ack {last_acked}, batch in flight ended at {in_flight_end}, store at {applied}"
        );
        assert!(
            applied == last_acked || applied == in_flight_end,
            "{kind} round {round}: applied {applied}, but the last ack was {last_acked} and the batch in flight ended at {in_flight_end}"
        );

        // The reopened store equals a reference that applied exactly entries 1..=applied.
        let mut reference =
            Store::open(&StoreLocation::Memory(MemDisk::default()), &OpenOptions::new(workload.db_id)).unwrap();
        reference.apply(&workload.entries(1, applied, ChainHash::GENESIS).unwrap()).unwrap();
        assert_eq!(store.chain_hash(), reference.chain_hash(), "{kind} round {round}: chain hash");
        assert_eq!(store.state_digest().unwrap(), reference.state_digest().unwrap(), "{kind} round {round}: state");
        for (key, value) in reference.dump().unwrap() {
            assert_eq!(store.get(&key).unwrap(), Some(value));
        }
        let read = store.read_log_after(0, LogReadLimits { entries_max: usize::MAX, bytes_max: usize::MAX }).unwrap();
        let LogRead::Entries(entries) = read else { panic!("{kind}: unexpected {read:?}") };
        assert_eq!(entries.len() as u64, applied);
        assert!(entries.windows(2).all(|w| w[1].prev_hash == w[0].hash), "{kind}: log does not chain");
        assert_eq!(store.stats().unwrap().checksum_failures, 0);
        applied_before = applied;
    }
    assert!(applied_before > 0, "{kind}: nothing was ever applied");
}

#[test]
fn lmdb_survives_sigkill_with_an_exact_prefix() {
    crash_loop(EngineKind::Lmdb, 11);
}

#[test]
fn rocksdb_survives_sigkill_with_an_exact_prefix() {
    crash_loop(EngineKind::Rocksdb, 12);
}
