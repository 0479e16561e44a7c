//! RocksDB beside the model: the block cache's tickers per cache size, against the simulator's
//! RocksDB-shaped model (`Shape::Lsm`) given the same bytes, and the B+tree model given the same
//! share of its pages.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use qs_node::{EngineResources, OpenOptions, Store, StoreLocation};
use qs_sim::resources::cache::{CacheModel, Page, PageCache, Shape, Touches};

use crate::real::{PAGE_BYTES, TOLERANCE_PP, Workloads, get_all, key, kib, load, pct};

/// Cache sizes, as shares of the `kv` column family's SST bytes (what a get reads; the `log`
/// column family and the WAL are never read by a get).
const SHARES: [f64; 6] = [0.0025, 0.005, 0.01, 0.02, 0.05, 0.10];
const BLOCK_BYTES: usize = PAGE_BYTES as usize;

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

/// One RocksDB run: block reads (tickers), index and data blocks apart (perf context), and the
/// bytes the process read from the device.
struct RocksRun {
    touches: Touches,
    index: Touches,
    data: Touches,
    usage: u64,
    disk_read_bytes: Option<u64>,
}

fn rocks_run(path: &Path, db_id: qs_node::DatabaseId, cache_bytes: usize, workload: &Workloads) -> RocksRun {
    let options = OpenOptions {
        rocksdb_cache_bytes: Some(cache_bytes),
        rocksdb_block_bytes: Some(BLOCK_BYTES),
        rocksdb_direct_reads: true,
        ..OpenOptions::new(db_id)
    };
    let store = Store::open(&StoreLocation::Rocksdb(path.to_path_buf()), &options).expect("open RocksDB store");
    get_all(&store, &workload.warm);
    let read_before = device_read_bytes();
    let before: EngineResources = store.resources();
    let mut perf = rocksdb::perf::PerfContext::default();
    perf.reset();
    get_all(&store, &workload.measured);
    let after = store.resources();
    let read_after = device_read_bytes();
    let counts = perf_counts(&perf.report(true));
    let count = |name: &str| counts.get(name).copied().unwrap_or(0);
    let delta = |f: fn(&EngineResources) -> Option<u64>| f(&after).unwrap_or(0) - f(&before).unwrap_or(0);
    let index = Touches { hits: count("block_cache_index_hit_count"), misses: count("index_block_read_count") };
    let filter_hits = count("block_cache_filter_hit_count");
    let filter_misses = count("filter_block_read_count");
    RocksRun {
        touches: Touches { hits: delta(|r| r.block_cache_hits), misses: delta(|r| r.block_cache_misses) },
        index,
        data: Touches {
            hits: count("block_cache_hit_count").saturating_sub(index.hits + filter_hits),
            misses: count("block_read_count").saturating_sub(index.misses + filter_misses),
        },
        usage: after.block_cache_usage_bytes.unwrap_or(0),
        disk_read_bytes: read_after.zip(read_before).map(|(a, b)| a.saturating_sub(b)),
    }
}

/// Bytes this process caused to be read from the device (`/proc/self/io` `read_bytes`).
fn device_read_bytes() -> Option<u64> {
    procfs::process::Process::myself().ok()?.io().ok().map(|io| io.read_bytes)
}

/// One model run with `capacity_bytes` of cache: all touches, and those of the leaves (data
/// blocks) alone.
fn model_run(model: &mut CacheModel, capacity_bytes: u64, workload: &Workloads) -> (Touches, Touches) {
    model.cache = PageCache::new(capacity_bytes);
    for &n in &workload.warm {
        model.get(&key(n));
    }
    let (mut all, mut leaves) = (Touches::default(), Touches::default());
    for &n in &workload.measured {
        // `CacheModel::get`, page by page, to count the leaves apart.
        for (page, bytes) in model.path(&key(n)) {
            let touch = model.cache.read(page, bytes);
            all += touch;
            if matches!(page, Page::Leaf(_)) {
                leaves += touch;
            }
        }
    }
    (all, leaves)
}

fn ratio(t: Touches) -> f64 {
    pct(t.misses, t.hits + t.misses)
}

/// Loads the data into RocksDB, then one row per cache size and workload.
#[expect(
    clippy::too_many_lines,
    reason = "146 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub fn calibrate(data: &[(Vec<u8>, Vec<u8>)], db_id: qs_node::DatabaseId, scratch: &Path, workloads: &[Workloads]) {
    let rocks_path = scratch.join("rocksdb");
    let load_started = Instant::now();
    {
        let mut store = Store::open(&StoreLocation::Rocksdb(rocks_path.clone()), &OpenOptions::new(db_id))
            .expect("open RocksDB store");
        load(&mut store, data);
        let stats = store.stats().expect("stats");
        println!(
            "rocksdb: loaded in {:.1} s; store on disk {} (every column family, WAL included)",
            load_started.elapsed().as_secs_f64(),
            kib(stats.disk_bytes as f64)
        );
    }
    let shape = kv_shape(&rocks_path);
    let files: u64 = shape.files_by_level.values().sum::<usize>() as u64;
    let index_entry = shape.index_bytes as f64 / shape.data_blocks.max(1) as f64;
    println!(
        "rocksdb kv column family: {} in SST files {:?} (level: files); {} data blocks of 4 KiB uncompressed \
         hold {} raw -> {} stored (Snappy, {:.1}x); index blocks {} ({:.2} % of SST bytes, one per file, {index_entry:.1} B \
         per data block), filter blocks {}",
        kib(shape.sst_bytes as f64),
        shape.files_by_level,
        shape.data_blocks,
        kib(shape.raw_bytes as f64),
        kib(shape.data_block_bytes as f64),
        (shape.data_blocks * PAGE_BYTES) as f64 / shape.data_block_bytes.max(1) as f64,
        kib(shape.index_bytes as f64),
        pct(shape.index_bytes, shape.sst_bytes),
        if shape.filter_bytes == 0 {
            "none (no filter policy is set)".to_string()
        } else {
            kib(shape.filter_bytes as f64)
        },
    );

    // The models: the same keys and value sizes, in the same order. The RocksDB-shaped one has
    // as many files as RocksDB wrote.
    let mut btree = CacheModel::new(Shape::BTree, PAGE_BYTES, 0);
    for (key, value) in data {
        btree.load(key, Some(value.len() as u64));
    }
    let leaves = btree.layout.leaf_count();
    let mut lsm = CacheModel::new(Shape::Lsm { blocks_per_file: leaves.div_ceil(files.max(1)) }, PAGE_BYTES, 0);
    for (key, value) in data {
        lsm.load(key, Some(value.len() as u64));
    }
    let pages = btree.layout.page_count();
    let model_index: u64 = lsm.path(&key(0))[0].1;
    println!(
        "models: {leaves} leaves (data blocks) of up to 4 KiB, {:.0} % full on average against RocksDB's full blocks; B+tree: {pages} \
         pages ({} inner levels, fanout {}); RocksDB-shaped: {files} file(s), an index block of {} per file ({} B per entry)",
        100.0 * (0..leaves).map(|id| btree.layout.leaf_bytes(id)).sum::<u64>() as f64 / (leaves * PAGE_BYTES) as f64,
        btree.layout.inner_levels(),
        btree.layout.fanout(),
        kib(model_index as f64),
        btree.layout.mean_key_bytes() + qs_sim::resources::cache::INDEX_ENTRY_OVERHEAD_BYTES,
    );

    let mut off = Vec::new();
    let mut rows = 0;
    for workload in workloads {
        println!("\n{}", workload.name);
        println!(
            "{:>7} {:>10} | {:>6} {:>6} {:>7} | {:>6} {:>7} | {:>5} {:>5} | {:>6} {:>6} | {:>6} {:>6} | {:>8}",
            "share",
            "cache",
            "rocks",
            "lsm",
            "diff",
            "btree",
            "diff",
            "r/get",
            "l/get",
            "r idx",
            "l idx",
            "r data",
            "l data",
            "disk/mis"
        );
        for share in SHARES {
            let cache_bytes = ((shape.sst_bytes as f64 * share) as usize).max(1);
            let real = rocks_run(&rocks_path, db_id, cache_bytes, workload);
            let (model, model_leaves) = model_run(&mut lsm, cache_bytes as u64, workload);
            let btree_capacity = ((pages as f64 * share).round() as u64).max(1) * PAGE_BYTES;
            let (tree, _) = model_run(&mut btree, btree_capacity, workload);
            let model_index =
                Touches { hits: model.hits - model_leaves.hits, misses: model.misses - model_leaves.misses };
            let (real_ratio, model_ratio, tree_ratio) = (ratio(real.touches), ratio(model), ratio(tree));
            let diff = model_ratio - real_ratio;
            let mark = |d: f64| if d.abs() > TOLERANCE_PP { "!" } else { " " };
            let gets = workload.measured.len() as f64;
            println!(
                "{:>6.2}% {:>10} | {:>5.1}% {:>5.1}% {:>+6.1}{} | {:>5.1}% {:>+6.1}{} | {:>5.2} {:>5.2} | {:>5.1}% {:>5.1}% | {:>5.1}% {:>5.1}% | {:>8}",
                share * 100.0,
                kib(cache_bytes as f64),
                real_ratio,
                model_ratio,
                diff,
                mark(diff),
                tree_ratio,
                tree_ratio - real_ratio,
                mark(tree_ratio - real_ratio),
                real.touches.misses as f64 / gets,
                model.misses as f64 / gets,
                ratio(real.index),
                ratio(model_index),
                ratio(real.data),
                ratio(model_leaves),
                real.disk_read_bytes.map_or("n/a".to_string(), |b| kib(b as f64 / real.touches.misses.max(1) as f64)),
            );
            if real.usage > cache_bytes as u64 {
                println!("{:>9}rocksdb cache usage {} is over its capacity", "", kib(real.usage as f64));
            }
            rows += 1;
            if diff.abs() > TOLERANCE_PP {
                off.push(format!(
                    "{} at {:.2} %: model {model_ratio:.1} % vs rocksdb {real_ratio:.1} % (index blocks {:.1} % vs {:.1} %, data blocks {:.1} % vs {:.1} %)",
                    workload.name,
                    share * 100.0,
                    ratio(model_index),
                    ratio(real.index),
                    ratio(model_leaves),
                    ratio(real.data),
                ));
            }
        }
    }
    println!(
        "\ncolumns: share of the kv SST bytes and the cache it makes; miss ratio = misses / block reads over the measured gets, for"
    );
    println!(
        "rocks(db) (tickers), lsm (the simulator's RocksDB-shaped model, same cache bytes) and btree (the B+tree model, same share"
    );
    println!(
        "of its {pages} pages); misses per get (r/get, l/get); index- and data-block miss ratios, RocksDB (perf context) and the lsm"
    );
    println!(
        "model; disk/mis: bytes RocksDB read from the device per miss (direct reads: every miss is a device read)."
    );
    println!(
        "tolerance: |lsm - rocksdb| <= {TOLERANCE_PP} percentage points of miss ratio; rows past it are marked '!'."
    );
    if off.is_empty() {
        println!("the RocksDB-shaped model is within the tolerance on every row ({rows}).");
    } else {
        println!("the RocksDB-shaped model is off by more than the tolerance on {} of {rows} rows:", off.len());
        for line in &off {
            println!("  {line}");
        }
    }
}
