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
//! - RocksDB: one store opened per cache size, `cache_bytes` = a share of the `kv` column
//!   family's SST bytes (what a get reads; the `log` column family and the WAL are never read
//!   by a get), 4 KiB blocks. The miss ratio is from the block cache tickers
//!   (`Store::resources()`), over the measured gets; RocksDB's per-thread perf context splits
//!   it into index and data blocks. The tickers count block-cache misses whether the OS page
//!   cache then serves the read or the disk does, so the ratio needs no direct I/O.
//! - The model: `CacheModel` with 4 KiB pages fed the same keys and value sizes, capacity = the
//!   same share of its page count, the same warm-up and gets; its miss ratio counts inner and
//!   leaf page reads, as the simulator counts them.
//! - LMDB: its cache is the OS page cache, which a process cannot size. Its `data.mdb` is
//!   dropped from the page cache (`fadvise(DONTNEED)`, the environment closed), and the gets
//!   run cold: major faults, bytes read from the disk and resident bytes of the mapping, beside
//!   the model's compulsory misses (a cache holding every page, starting empty).
//!
//! Prints figures; asserts nothing about them. Run: `./ci/bench-cache.sh` (`--quick` for a
//! quarter of the keys and gets, `--scale F` to multiply both).

// It measures the real engines: nothing to do in the simulator's build (`--cfg madsim`), which only type-checks it.
#[cfg(madsim)]
fn main() {
    eprintln!("cache_calibration measures the real engines: build it without --cfg madsim (./ci/bench-cache.sh)");
    std::process::exit(2)
}

#[cfg(not(madsim))]
fn main() {
    real::main()
}

#[cfg(not(madsim))]
mod real {
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::time::Instant;

    use qs_node::testkit::{ValueKind, Workload};
    use qs_node::{EngineResources, Op, OpenOptions, Store, StoreLocation};
    use qs_sim::resources::cache::{CacheModel, Page, PageCache, Touches};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use rand_distr::Distribution;

    /// Cache sizes, as shares of the store's size (RocksDB: `kv` SST bytes; model: its pages).
    const SHARES: [f64; 6] = [0.0025, 0.005, 0.01, 0.02, 0.05, 0.10];
    /// A model miss ratio further than this from RocksDB's, in percentage points, is marked `!`.
    /// Ten points: the simulator's `cache` check judges ratios like "under 1 %" against "40 %", so
    /// a model within ten points tells those apart; closer agreement is not claimed.
    const TOLERANCE_PP: f64 = 10.0;
    const KEYS_DEFAULT: u64 = 200_000;
    const GETS_DEFAULT: usize = 200_000;
    const SETS_PER_ENTRY: usize = 500;
    const BLOCK_BYTES: usize = 4096;
    /// The model's page for both engines: RocksDB's 4 KiB blocks, LMDB's 4096-byte pages.
    const PAGE_BYTES: u64 = 4096;
    const SKEW: f64 = 1.0;
    /// The hot subset's share of the keys (the `cache-*` scenarios: 40 of 20 000).
    const HOT_SHARE: f64 = 0.002;
    /// LMDB: the first gets after dropping the cache, reported on their own (the coldest part).
    const COLD_GETS: usize = 1000;
    const SEED: u64 = 0x5157_ca11;

    struct Settings {
        keys: u64,
        gets: usize,
    }

    fn settings() -> Settings {
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

    fn key(n: u64) -> Vec<u8> {
        format!("cfg0:{n}").into_bytes()
    }

    /// Every key once, with its value, in the (shuffled) order they are written.
    fn data_set(keys: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
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

    fn load(store: &mut Store, data: &[(Vec<u8>, Vec<u8>)]) {
        for (i, chunk) in data.chunks(SETS_PER_ENTRY).enumerate() {
            let ops = chunk.iter().map(|(key, value)| Op::Set { key: key.clone(), value: value.clone() }).collect();
            let entry = store.next_entry(1_700_000_000_000 + i as u64 * 10, ops).expect("entry within limits");
            store.apply(&[entry]).expect("apply");
        }
        store.flush().expect("flush");
    }

    fn get_all(store: &Store, gets: &[u64]) {
        for &n in gets {
            let found = store.get(&key(n)).expect("get");
            assert!(found.is_some(), "cfg0:{n} was written but is missing: the benchmark is broken");
        }
    }

    struct Workloads {
        name: String,
        warm: Vec<u64>,
        measured: Vec<u64>,
    }

    fn workloads(settings: &Settings) -> Vec<Workloads> {
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

    /// One line of RocksDB's perf context report, as `name -> count`.
    fn perf_counts(report: &str) -> BTreeMap<String, u64> {
        report
            .split([',', '\n'])
            .filter_map(|field| {
                let (name, value) = field.split_once('=')?;
                Some((name.trim().to_string(), value.trim().parse().ok()?))
            })
            .collect()
    }

    /// What RocksDB's `kv` column family looks like on disk.
    struct KvShape {
        sst_bytes: u64,
        files_by_level: BTreeMap<i32, usize>,
        data_blocks: u64,
        data_block_bytes: u64,
        index_bytes: u64,
        filter_bytes: u64,
        raw_bytes: u64,
    }

    /// Reads the `kv` column family's files and table properties from a read-only handle (the store
    /// is closed; a read-only open takes no lock and changes nothing).
    fn kv_shape(path: &Path) -> KvShape {
        let db = rocksdb::DB::open_cf_for_read_only(&rocksdb::Options::default(), path, ["meta", "kv", "log"], false)
            .expect("open RocksDB read-only");
        let cf = db.cf_handle("kv").expect("kv column family");
        let files = db.live_files().expect("live files");
        let mut files_by_level = BTreeMap::new();
        let mut sst_bytes = 0;
        for file in files.iter().filter(|f| f.column_family_name == "kv") {
            *files_by_level.entry(file.level).or_insert(0) += 1;
            sst_bytes += file.size as u64;
        }
        let properties =
            db.property_value_cf(&cf, "rocksdb.aggregated-table-properties").ok().flatten().unwrap_or_default();
        // "# data blocks=N; # entries=N; ...; data block size=N; index block size (user-key? 1, delta-value? 1)=N; ..."
        let field = |prefix: &str| -> u64 {
            properties
                .split(';')
                .find(|f| f.trim_start().starts_with(prefix))
                .and_then(|f| f.rsplit('=').next())
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        KvShape {
            sst_bytes,
            files_by_level,
            data_blocks: field("# data blocks"),
            data_block_bytes: field("data block size"),
            index_bytes: field("index block size"),
            filter_bytes: field("filter block size"),
            raw_bytes: field("raw key size") + field("raw value size"),
        }
    }

    fn kib(bytes: f64) -> String {
        if bytes >= (1 << 20) as f64 {
            format!("{:.1} MiB", bytes / (1 << 20) as f64)
        } else {
            format!("{:.1} KiB", bytes / 1024.0)
        }
    }

    fn pct(part: u64, whole: u64) -> f64 {
        if whole == 0 { 0.0 } else { 100.0 * part as f64 / whole as f64 }
    }

    /// One RocksDB run: hits, misses (tickers), and index/data block misses (perf context).
    struct RocksRun {
        hits: u64,
        misses: u64,
        index_hits: u64,
        index_misses: u64,
        data_hits: u64,
        data_misses: u64,
        usage: u64,
    }

    fn rocks_run(path: &Path, db_id: qs_node::DatabaseId, cache_bytes: usize, workload: &Workloads) -> RocksRun {
        let options = OpenOptions {
            rocksdb_cache_bytes: Some(cache_bytes),
            rocksdb_block_bytes: Some(BLOCK_BYTES),
            ..OpenOptions::new(db_id)
        };
        let store = Store::open(&StoreLocation::Rocksdb(path.to_path_buf()), &options).expect("open RocksDB store");
        get_all(&store, &workload.warm);
        let before: EngineResources = store.resources();
        let mut perf = rocksdb::perf::PerfContext::default();
        perf.reset();
        get_all(&store, &workload.measured);
        let after = store.resources();
        let counts = perf_counts(&perf.report(true));
        let count = |name: &str| counts.get(name).copied().unwrap_or(0);
        let delta = |f: fn(&EngineResources) -> Option<u64>| f(&after).unwrap_or(0) - f(&before).unwrap_or(0);
        let index_hits = count("block_cache_index_hit_count");
        let index_misses = count("index_block_read_count");
        let filter_hits = count("block_cache_filter_hit_count");
        let filter_misses = count("filter_block_read_count");
        RocksRun {
            hits: delta(|r| r.block_cache_hits),
            misses: delta(|r| r.block_cache_misses),
            index_hits,
            index_misses,
            data_hits: count("block_cache_hit_count").saturating_sub(index_hits + filter_hits),
            data_misses: count("block_read_count").saturating_sub(index_misses + filter_misses),
            usage: after.block_cache_usage_bytes.unwrap_or(0),
        }
    }

    /// One model run: all touches, and the leaf touches alone.
    fn model_run(model: &mut CacheModel, capacity_pages: usize, workload: &Workloads) -> (Touches, Touches) {
        model.cache = PageCache::new(capacity_pages);
        for &n in &workload.warm {
            model.get(&key(n));
        }
        let (mut all, mut leaves) = (Touches::default(), Touches::default());
        for &n in &workload.measured {
            // `CacheModel::get`, page by page, to count the leaves apart.
            for page in model.layout.path(&key(n)) {
                let touch = model.cache.read(page);
                all += touch;
                if matches!(page, Page::Leaf(_)) {
                    leaves += touch;
                }
            }
        }
        (all, leaves)
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
        let db_id = Workload::small(SEED).db_id;
        let scratch = tempfile::tempdir().expect("a scratch directory");
        rocksdb::perf::set_perf_stats(rocksdb::perf::PerfStatsLevel::EnableCount);

        // The model's layout: the same keys and value sizes, in the same order.
        let mut model = CacheModel::new(PAGE_BYTES, 0);
        for (key, value) in &data {
            model.layout.write(key, Some(value.len() as u64));
        }
        let pages = model.layout.page_count();
        println!(
            "data: {} of keys and values; model: {} pages of {PAGE_BYTES} B ({} leaves, {} inner levels, fanout {}), {}",
            kib(logical as f64),
            pages,
            model.layout.leaf_count(),
            model.layout.inner_levels(),
            model.layout.fanout(),
            kib((pages * PAGE_BYTES) as f64)
        );

        // RocksDB: load once, then one store per cache size.
        let rocks_path = scratch.path().join("rocksdb");
        let load_started = Instant::now();
        {
            let mut store = Store::open(&StoreLocation::Rocksdb(rocks_path.clone()), &OpenOptions::new(db_id))
                .expect("open RocksDB store");
            load(&mut store, &data);
            let stats = store.stats().expect("stats");
            println!(
                "rocksdb: loaded in {:.1} s; store on disk {} (every column family, WAL included)",
                load_started.elapsed().as_secs_f64(),
                kib(stats.disk_bytes as f64)
            );
        }
        let shape = kv_shape(&rocks_path);
        println!(
            "rocksdb kv column family: {} in SST files {:?} (level: files); {} data blocks of 4 KiB uncompressed \
             hold {} raw -> {} stored (Snappy); index blocks {} ({:.2} % of SST bytes, one per file), filter blocks {}",
            kib(shape.sst_bytes as f64),
            shape.files_by_level,
            shape.data_blocks,
            kib(shape.raw_bytes as f64),
            kib(shape.data_block_bytes as f64),
            kib(shape.index_bytes as f64),
            pct(shape.index_bytes, shape.sst_bytes),
            if shape.filter_bytes == 0 {
                "none (no filter policy is set)".to_string()
            } else {
                kib(shape.filter_bytes as f64)
            },
        );
        let workloads = workloads(&settings);
        // The bytes the cache would need to hold every data block uncompressed, as it holds them.
        let uncompressed = (shape.data_blocks * BLOCK_BYTES as u64).max(1);
        let mut off = Vec::new();
        let mut rows = Vec::new();
        for workload in &workloads {
            println!("\n{}", workload.name);
            println!(
                "{:>7} {:>11} | {:>6} {:>6} {:>7} | {:>6} {:>6} {:>7} | {:>6} {:>6} {:>6} | {:>6} {:>6} {:>6} {:>6}",
                "share",
                "rocks cache",
                "rocks",
                "model",
                "diff",
                "pages",
                "model=",
                "diff=",
                "rocks",
                "model",
                "model=",
                "index",
                "data",
                "inner",
                "leaf"
            );
            for share in SHARES {
                let cache_bytes = ((shape.sst_bytes as f64 * share) as usize).max(1);
                let capacity = ((pages as f64 * share).round() as usize).max(1);
                // The same share of the data as RocksDB's cache holds uncompressed (index aside).
                let data_share = (cache_bytes as f64 / uncompressed as f64).min(1.0);
                let capacity_equal = ((pages as f64 * data_share).round() as usize).max(1);
                let real = rocks_run(&rocks_path, db_id, cache_bytes, workload);
                let (all, leaves) = model_run(&mut model, capacity, workload);
                let (equal, _) = model_run(&mut model, capacity_equal, workload);
                let real_ratio = pct(real.misses, real.hits + real.misses);
                let model_ratio = pct(all.misses, all.hits + all.misses);
                let equal_ratio = pct(equal.misses, equal.hits + equal.misses);
                let diff = model_ratio - real_ratio;
                let mark = |d: f64| if d.abs() > TOLERANCE_PP { "!" } else { " " };
                let gets = workload.measured.len() as f64;
                let inner = Touches { hits: all.hits - leaves.hits, misses: all.misses - leaves.misses };
                println!(
                    "{:>6.2}% {:>11} | {:>5.1}% {:>5.1}% {:>+6.1}{} | {:>6} {:>5.1}% {:>+6.1}{} | {:>6.2} {:>6.2} {:>6.2} | {:>5.1}% {:>5.1}% {:>5.1}% {:>5.1}%",
                    share * 100.0,
                    kib(cache_bytes as f64),
                    real_ratio,
                    model_ratio,
                    diff,
                    mark(diff),
                    capacity_equal,
                    equal_ratio,
                    equal_ratio - real_ratio,
                    mark(equal_ratio - real_ratio),
                    real.misses as f64 / gets,
                    all.misses as f64 / gets,
                    equal.misses as f64 / gets,
                    pct(real.index_misses, real.index_hits + real.index_misses),
                    pct(real.data_misses, real.data_hits + real.data_misses),
                    pct(inner.misses, inner.hits + inner.misses),
                    pct(leaves.misses, leaves.hits + leaves.misses),
                );
                if real.usage > cache_bytes as u64 {
                    println!("{:>9}rocksdb cache usage {} is over its capacity", "", kib(real.usage as f64));
                }
                rows.push(Row {
                    cache_bytes: cache_bytes as u64,
                    real_ratio,
                    model_ratio,
                    equal_ratio,
                    index_miss_ratio: pct(real.index_misses, real.index_hits + real.index_misses),
                });
                if diff.abs() > TOLERANCE_PP {
                    off.push(format!(
                        "{} at {:.2} %: model {model_ratio:.1} % vs rocksdb {real_ratio:.1} % (at the same data share: {equal_ratio:.1} %)",
                        workload.name,
                        share * 100.0
                    ));
                }
            }
        }
        println!(
            "\ncolumns: share of the kv SST bytes; miss ratio = misses / block (page) reads over the measured gets, for rocks(db) and the"
        );
        println!(
            "model at the same share of its pages (capacity {}..{} pages); 'pages / model= / diff=': the model given the share of the",
            ((pages as f64 * SHARES[0]).round() as u64).max(1),
            (pages as f64 * SHARES[SHARES.len() - 1]).round()
        );
        println!(
            "data RocksDB's cache can hold uncompressed (cache bytes / {} of 4 KiB blocks); misses per get for the three; RocksDB's",
            kib(uncompressed as f64)
        );
        println!("index- and data-block miss ratios (perf context); the model's inner- and leaf-page miss ratios.");
        println!(
            "tolerance: |model - rocksdb| <= {TOLERANCE_PP} percentage points of miss ratio; rows past it are marked '!'."
        );
        if off.is_empty() {
            println!("the model is within the tolerance on every row.");
        } else {
            println!(
                "the model is off by more than the tolerance on {} of {} rows:",
                off.len(),
                SHARES.len() * workloads.len()
            );
            for line in &off {
                println!("  {line}");
            }
        }
        why(&shape, &rows, model.layout.page_count(), model.layout.leaf_count(), model.layout.inner_levels());

        lmdb(&data, db_id, scratch.path(), &workloads, &mut model);
        println!("\ntotal {:.0} s", started.elapsed().as_secs_f64());
    }

    /// One row of the RocksDB table, for the summary.
    struct Row {
        cache_bytes: u64,
        real_ratio: f64,
        model_ratio: f64,
        equal_ratio: f64,
        index_miss_ratio: f64,
    }

    /// Where the model is off and the structural reasons, from this run's figures.
    fn why(shape: &KvShape, rows: &[Row], model_pages: u64, model_leaves: u64, inner_levels: u8) {
        let files: usize = shape.files_by_level.values().sum();
        let largest_index = shape.index_bytes / files.max(1) as u64;
        let (below, above): (Vec<&Row>, Vec<&Row>) = rows.iter().partition(|r| r.cache_bytes < largest_index);
        let span = |rows: &[&Row], f: fn(&Row) -> f64| {
            let (lo, hi) = rows.iter().map(|r| f(r)).fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
            if rows.is_empty() { "-".to_string() } else { format!("{lo:+.1}..{hi:+.1}") }
        };
        println!("where the model is off, and why (this run's figures):");
        if !below.is_empty() {
            let real = below.iter().map(|r| r.real_ratio).fold(f64::MAX, f64::min);
            let index = below.iter().map(|r| r.index_miss_ratio).fold(f64::MAX, f64::min);
            println!(
                "  1. the index cliff: on the {} rows whose cache is smaller than an SST file's index block ({} here; {files} file(s),",
                below.len(),
                kib(largest_index as f64)
            );
            println!(
                "     index blocks {:.2} % of the SST bytes) RocksDB misses at least {real:.1} % of block reads, its index block at least",
                pct(shape.index_bytes, shape.sst_bytes)
            );
            println!(
                "     {index:.1} %: the cache cannot keep the one block every get needs, and the data blocks go with it. The model's"
            );
            println!(
                "     inner level is {} pages of 4 KiB, each cached on its own, so it degrades smoothly: model - rocksdb {} pp there.",
                model_pages - model_leaves,
                span(&below, |r| r.model_ratio - r.real_ratio)
            );
        }
        if !above.is_empty() {
            println!(
                "  2. compression: the share is of Snappy-compressed SST bytes ({} stored for {} of 4 KiB blocks, {:.1}x), but the",
                kib(shape.data_block_bytes as f64),
                kib((shape.data_blocks * BLOCK_BYTES as u64) as f64),
                (shape.data_blocks * BLOCK_BYTES as u64) as f64 / shape.data_block_bytes.max(1) as f64
            );
            println!(
                "     cache holds blocks uncompressed, so it covers that much less of the data than the model's same share of pages:"
            );
            println!(
                "     above the cliff model - rocksdb is {} pp at the same share, {} pp given the same share of the data (model=).",
                span(&above, |r| r.model_ratio - r.real_ratio),
                span(&above, |r| r.equal_ratio - r.real_ratio)
            );
            println!(
                "  3. what is left (model= below rocksdb): the index block takes cache bytes the model spends on data pages, and"
            );
            println!(
                "     per get the model reads {} pages (root, inner, leaf; the upper ones nearly always hit) where RocksDB reads 2 blocks",
                u64::from(inner_levels) + 1
            );
            println!(
                "     (index, data), which dilutes the model's ratio; its leaves are ~70 % full ({model_leaves} leaves vs {} full data blocks).",
                shape.data_blocks
            );
        }
        println!(
            "  to calibrate: for RocksDB the model's capacity should be cache bytes / uncompressed block bytes, less the index"
        );
        println!(
            "  blocks (cache_index_and_filter_blocks), with nothing cached below the index's share; compare misses per get,"
        );
        println!("  not ratios, where the pages per lookup differ.");
    }

    fn lmdb(
        data: &[(Vec<u8>, Vec<u8>)],
        db_id: qs_node::DatabaseId,
        scratch: &Path,
        workloads: &[Workloads],
        model: &mut CacheModel,
    ) {
        let path = scratch.join("lmdb");
        let location = StoreLocation::Lmdb(path.clone());
        let load_started = Instant::now();
        {
            let mut store = Store::open(&location, &OpenOptions::new(db_id)).expect("open LMDB store");
            load(&mut store, data);
        }
        let data_file = path.join("data.mdb");
        let file_bytes = std::fs::metadata(&data_file).map(|m| m.len()).unwrap_or(0);
        println!(
            "\nLMDB (its cache is the OS page cache, which a process cannot size): loaded in {:.1} s, data.mdb {} ({} pages of 4 KiB; \
             the model lays out {} pages)",
            load_started.elapsed().as_secs_f64(),
            kib(file_bytes as f64),
            file_bytes / 4096,
            model.layout.page_count()
        );
        let read_ahead = read_ahead_kb(&data_file);
        println!(
            "each run: environment closed, data.mdb dropped from the page cache (fadvise DONTNEED), reopened, gets run cold. The disk's \
             read-ahead is {}: a major fault on the map reads that much around the page.",
            read_ahead.map_or("unknown".to_string(), |kb| format!("{kb} KiB"))
        );
        println!("the model beside it: a cache holding every page, starting empty (compulsory misses only).");
        println!(
            "{:<40} {:>6} | {:>7} {:>7} {:>9} | {:>7} {:>8} | {:>10} {:>10} {:>10} | {:>10}",
            "workload",
            "gets",
            "faults",
            "1st",
            "disk read",
            "model",
            "model/get",
            "cached bef",
            "cached aft",
            "mapped",
            "model pgs"
        );
        for workload in workloads {
            drop_from_page_cache(&data_file);
            let cached_before = cached_bytes(&data_file);
            let store = Store::open(&location, &OpenOptions::new(db_id)).expect("open LMDB store");
            let gets: Vec<u64> = workload.warm.iter().chain(&workload.measured).copied().collect();
            let before = store.resources();
            get_all(&store, &gets[..COLD_GETS]);
            let first = store.resources();
            get_all(&store, &gets[COLD_GETS..]);
            let after = store.resources();
            drop(store);
            let cached_after = cached_bytes(&data_file);
            let delta = |a: &EngineResources, b: &EngineResources, f: fn(&EngineResources) -> Option<u64>| {
                f(a).zip(f(b)).map(|(a, b)| a.saturating_sub(b))
            };
            let show = |v: Option<u64>| v.map_or("n/a".to_string(), |v| v.to_string());
            let bytes = |v: Option<u64>| v.map_or("n/a".to_string(), |v| kib(v as f64));
            model.cache = PageCache::new(model.layout.page_count() as usize);
            let mut misses = 0;
            for &n in &gets {
                misses += model.get(&key(n)).misses;
            }
            println!(
                "{:<40} {:>6} | {:>7} {:>7} {:>9} | {:>7} {:>8.3} | {:>10} {:>10} {:>10} | {:>10}",
                workload.name,
                gets.len(),
                show(delta(&after, &before, |r| r.major_faults)),
                show(delta(&first, &before, |r| r.major_faults)),
                bytes(delta(&after, &before, |r| r.disk_read_bytes)),
                misses,
                misses as f64 / gets.len() as f64,
                bytes(cached_before),
                bytes(cached_after),
                bytes(after.mapped_resident_bytes),
                kib((model.cache.len() as u64 * PAGE_BYTES) as f64),
            );
        }
        println!(
            "faults: major faults over all the gets; 1st: over the first {COLD_GETS}; disk read: bytes the process read from the disk;"
        );
        println!(
            "model: the model's misses (each a 4 KiB read); cached bef/aft: data.mdb's bytes in the page cache after the drop and after"
        );
        println!(
            "the gets (util-linux fincore, n/a without it); mapped: resident bytes of the mapping; model pgs: distinct pages the model read."
        );
        println!(
            "A major fault reads the whole read-ahead window around the page, so LMDB faults far less often than the model misses"
        );
        println!(
            "and reads far more per fault: on this disk a cold LMDB reads its file in a handful of large reads. The model's misses"
        );
        println!(
            "are what LMDB would fault with read-ahead off (MDB_NORDAHEAD, MADV_RANDOM), which qs-node does not set."
        );
    }

    /// The read-ahead of the disk holding `file`, from sysfs (a partition's is its disk's).
    fn read_ahead_kb(file: &Path) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(file).ok()?.dev();
        let base = format!("/sys/dev/block/{}:{}", rustix::fs::major(dev), rustix::fs::minor(dev));
        ["queue/read_ahead_kb", "../queue/read_ahead_kb"]
            .iter()
            .find_map(|p| std::fs::read_to_string(Path::new(&base).join(p)).ok())
            .and_then(|s| s.trim().parse().ok())
    }

    /// Bytes of `file` in the OS page cache, from util-linux's `fincore` (it calls `mincore`, which
    /// this crate may not: the workspace denies unsafe code); `None` without it.
    fn cached_bytes(file: &Path) -> Option<u64> {
        let out = std::process::Command::new("fincore")
            .args(["--bytes", "--noheadings", "--output", "RES"])
            .arg(file)
            .output()
            .ok()?;
        String::from_utf8(out.stdout).ok()?.trim().parse().ok()
    }

    /// Drops `file` from the OS page cache. Its pages must be clean and unmapped: the environment
    /// is closed, and the data is synced first.
    fn drop_from_page_cache(file: &Path) {
        let file = std::fs::File::open(file).expect("open data.mdb");
        file.sync_all().expect("sync data.mdb");
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).expect("fadvise(DONTNEED) on data.mdb");
    }
}
