//! Cache calibration: the simulator's page-cache model (`qs_sim::resources::cache`) beside real
//! RocksDB and real LMDB, on the same keys, values and `get` sequence.
//!
//! One data set: `--keys` keys named as the simulator's writers name them (`cfg0:<n>`), each set
//! once, in a shuffled order, through `Store::apply` (500 sets per entry), with
//! configuration-like values of 20–200 B from `qs_node::testkit::Workload`. Then two read
//! workloads, each a warm-up of `--gets / 2` gets and `--gets` measured gets, with Zipf
//! popularity (skew 1.0, ChaCha8-seeded, so every run draws the same sequence), ranks mapped to
//! keys as the simulator's readers map them (rank r → `cfg0:<r − 1>`):
//! (a) over all keys; (b) over a hot subset, the first 0.2 % of key numbers (the share the
//! `cache-*` scenarios read: 40 hot keys of 20 000).
//!
//! - [`rocks`]: one store per cache size, `cache_bytes` = a share of the `kv` column family's SST
//!   bytes, 4 KiB blocks, direct reads (`[storage] direct_reads`: a miss reads the device, which
//!   the process's disk-read bytes confirm). Its block cache tickers beside the simulator's model
//!   for RocksDB (`Shape::Lsm`: the file's index block, then a data block charged by its
//!   contents) given the same cache bytes; and beside the B+tree model given the same share of
//!   its pages, to show what the shape is worth.
//! - [`lmdb`]: its cache is the OS page cache, which a process cannot size. Its `data.mdb` is
//!   dropped from the page cache (`fadvise(DONTNEED)`, the environment closed), and the gets run
//!   cold, with the OS's read-ahead and without it (`[storage] read_ahead = false`,
//!   `MDB_NORDAHEAD`): major faults beside the model's compulsory misses (a cache holding every
//!   page, starting empty).
//!
//! Prints figures and marks the rows where the model is off by more than the stated tolerance;
//! asserts nothing about them. Run: `./ci/bench-cache.sh` (`--quick` for a quarter of the keys
//! and gets, `--scale F` to multiply both).

// It measures the real engines: nothing to do in the simulator's build (`--cfg madsim`), which
// only type-checks it.
#[cfg(madsim)]
fn main() {
    eprintln!("cache_calibration measures the real engines: build it without --cfg madsim (./ci/bench-cache.sh)");
    std::process::exit(2)
}

#[cfg(not(madsim))]
mod lmdb;
#[cfg(not(madsim))]
mod rocks;

#[cfg(not(madsim))]
fn main() {
    real::main()
}

#[cfg(not(madsim))]
mod real {
    use std::time::Instant;

    use qs_node::testkit::{ValueKind, Workload};
    use qs_node::{Op, Store};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use rand_distr::Distribution;

    /// A model miss ratio further than this from the real engine's, in percentage points, is
    /// marked `!`. Ten points: the simulator's `cache` check judges ratios like "under 1 %"
    /// against "40 %", so a model within ten points tells those apart; closer agreement is not
    /// claimed.
    pub const TOLERANCE_PP: f64 = 10.0;
    const KEYS_DEFAULT: u64 = 200_000;
    const GETS_DEFAULT: usize = 200_000;
    const SETS_PER_ENTRY: usize = 500;
    /// RocksDB's data blocks and the model's pages for both engines (LMDB's pages are 4096 B).
    pub const PAGE_BYTES: u64 = 4096;
    const SKEW: f64 = 1.0;
    /// The hot subset's share of the keys (the `cache-*` scenarios: 40 of 20 000).
    const HOT_SHARE: f64 = 0.002;
    pub const SEED: u64 = 0x5157_ca11;

    pub struct Settings {
        pub keys: u64,
        pub gets: usize,
    }

    pub fn settings() -> Settings {
        let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
        let mut scale = 1.0;
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            match arg.as_str() {
                "--quick" => scale *= 0.25,
                "--scale" => {
                    let value = rest.next().map(String::as_str).unwrap_or_default();
                    match value.parse::<f64>() {
                        Ok(s) if s > 0.0 && s <= 10.0 => scale *= s,
                        _ => usage(&format!("--scale wants a number in (0, 10], got {value:?}")),
                    }
                }
                other => usage(&format!("unknown argument {other:?}")),
            }
        }
        Settings {
            keys: ((KEYS_DEFAULT as f64 * scale) as u64).max(2000),
            gets: ((GETS_DEFAULT as f64 * scale) as usize).max(2000),
        }
    }

    fn usage(problem: &str) -> ! {
        eprintln!("cache_calibration: {problem}\nusage: cache_calibration [--quick] [--scale FACTOR]");
        std::process::exit(2)
    }

    pub fn key(n: u64) -> Vec<u8> {
        format!("cfg0:{n}").into_bytes()
    }

    /// Every key once, with its value, in the (shuffled) order they are written.
    pub fn data_set(keys: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
        let values = Workload {
            key_space: keys,
            value_bytes_min: 20,
            value_bytes_max: 200,
            ops_per_entry_min: 1,
            ops_per_entry_max: 1,
            delete_percent: 0,
            values: ValueKind::ConfigText,
            ..Workload::small(SEED)
        };
        let mut order: Vec<u64> = (0..keys).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(SEED);
        for i in (1..order.len()).rev() {
            let j = rng.random_range(0..=i);
            order.swap(i, j);
        }
        order
            .into_iter()
            .map(|n| {
                let value = match values.ops(n).pop() {
                    Some(Op::Set { value, .. }) => value,
                    _ => unreachable!("the workload has no deletes"),
                };
                (key(n), value)
            })
            .collect()
    }

    /// Key numbers of `count` gets with Zipf popularity over the first `over` key numbers.
    fn get_sequence(over: u64, count: usize, seed: u64) -> Vec<u64> {
        let zipf = rand_distr::Zipf::new(over as f64, SKEW).expect("at least one key, skew >= 0");
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..count).map(|_| (zipf.sample(&mut rng) as u64 - 1).min(over - 1)).collect()
    }

    pub fn load(store: &mut Store, data: &[(Vec<u8>, Vec<u8>)]) {
        for (i, chunk) in data.chunks(SETS_PER_ENTRY).enumerate() {
            let ops = chunk.iter().map(|(key, value)| Op::Set { key: key.clone(), value: value.clone() }).collect();
            let entry = store.next_entry(1_700_000_000_000 + i as u64 * 10, ops).expect("entry within limits");
            store.apply(&[entry]).expect("apply");
        }
        store.flush().expect("flush");
    }

    pub fn get_all(store: &Store, gets: &[u64]) {
        for &n in gets {
            let found = store.get(&key(n)).expect("get");
            assert!(found.is_some(), "cfg0:{n} was written but is missing: the benchmark is broken");
        }
    }

    pub struct Workloads {
        pub name: String,
        pub warm: Vec<u64>,
        pub measured: Vec<u64>,
    }

    pub fn workloads(settings: &Settings) -> Vec<Workloads> {
        let hot = ((settings.keys as f64 * HOT_SHARE) as u64).max(10);
        [
            (format!("(a) Zipf {SKEW} over all {} keys", settings.keys), settings.keys, 1),
            (format!("(b) Zipf {SKEW} over a hot {hot} keys ({} %)", HOT_SHARE * 100.0), hot, 2),
        ]
        .into_iter()
        .map(|(name, over, stream)| {
            let all = get_sequence(over, settings.gets / 2 + settings.gets, SEED ^ stream);
            let (warm, measured) = all.split_at(settings.gets / 2);
            Workloads { name, warm: warm.to_vec(), measured: measured.to_vec() }
        })
        .collect()
    }

    pub fn kib(bytes: f64) -> String {
        if bytes >= (1 << 20) as f64 {
            format!("{:.1} MiB", bytes / (1 << 20) as f64)
        } else {
            format!("{:.1} KiB", bytes / 1024.0)
        }
    }

    pub fn pct(part: u64, whole: u64) -> f64 {
        if whole == 0 { 0.0 } else { 100.0 * part as f64 / whole as f64 }
    }

    pub fn main() {
        let settings = settings();
        let started = Instant::now();
        println!("qsim cache calibration: the simulator's cache model beside real RocksDB and LMDB");
        println!(
            "{} keys (cfg0:<n>, values 20-200 B of configuration text), {} warm-up + {} measured gets per run, Zipf skew {SKEW}",
            settings.keys,
            settings.gets / 2,
            settings.gets
        );
        let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!(
            "load average before: {} (a busy machine slows this down; it does not change the counts)",
            loadavg.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
        );
        let data = data_set(settings.keys);
        let logical: u64 = data.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
        println!("data: {} of keys and values", kib(logical as f64));
        let db_id = Workload::small(SEED).db_id;
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let workloads = workloads(&settings);
        crate::rocks::calibrate(&data, db_id, scratch.path(), &workloads);
        crate::lmdb::calibrate(&data, db_id, scratch.path(), &workloads);
        println!("\ntotal {:.0} s", started.elapsed().as_secs_f64());
    }
}
