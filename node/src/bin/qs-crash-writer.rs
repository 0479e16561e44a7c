//! Test tool for the crash tests (`tests/integration/crash.rs`): opens a store and applies the
//! deterministic [`Workload`] in batches, printing `acked <index>` after each commit returns,
//! until it is killed or reaches `--until`.
//!
//! Usage: `qs-crash-writer <lmdb|rocksdb> <path> <seed> <until-index>`

use std::io::Write as _;
use std::process::ExitCode;

use qs_node::testkit::Workload;
use qs_node::{EngineKind, OpenOptions, Store, StoreLocation};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [engine, path, seed, until] = args.as_slice() else {
        eprintln!("usage: qs-crash-writer <lmdb|rocksdb> <path> <seed> <until-index>");
        return ExitCode::from(2);
    };
    let parsed = (engine.parse::<EngineKind>(), seed.parse::<u64>(), until.parse::<u64>());
    let (Ok(kind), Ok(seed), Ok(until)) = parsed else {
        eprintln!("qs-crash-writer: bad arguments {args:?}");
        return ExitCode::from(2);
    };
    let workload = Workload::small(seed);
    let location = StoreLocation::new(kind, std::path::Path::new(path));
    let mut store = match Store::open(&location, &OpenOptions::new(workload.db_id)) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("qs-crash-writer: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut stdout = std::io::stdout().lock();
    while store.applied_index() < until {
        let first = store.applied_index() + 1;
        let count = workload.batch_len(first);
        let batch = workload.entries(first, count, store.chain_hash()).expect("workload entries are within limits");
        if let Err(e) = store.apply(&batch) {
            eprintln!("qs-crash-writer: apply failed at {first}: {e}");
            return ExitCode::FAILURE;
        }
        if writeln!(stdout, "acked {}", store.applied_index()).and_then(|()| stdout.flush()).is_err() {
            return ExitCode::FAILURE; // the test stopped listening
        }
    }
    ExitCode::SUCCESS
}
