//! LMDB beside the model: its cache is the OS page cache, which a process cannot size, so the
//! calibration reads it cold — `data.mdb` dropped from the page cache — with the OS's read-ahead
//! and without it (`MDB_NORDAHEAD`), and sets its major faults beside the model's compulsory
//! misses (a cache holding every page, starting empty).

use std::path::Path;
use std::time::Instant;

use qs_node::{EngineResources, OpenOptions, Store, StoreLocation};
use qs_sim::resources::cache::{CacheModel, PageCache, Shape};

use crate::real::{PAGE_BYTES, TOLERANCE_PP, Workloads, get_all, key, kib, load, pct};

/// The first gets after dropping the cache, reported on their own (the coldest part).
const COLD_GETS: usize = 1000;

#[expect(
    clippy::too_many_lines,
    reason = "119 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
)]
pub fn calibrate(data: &[(Vec<u8>, Vec<u8>)], db_id: qs_node::DatabaseId, scratch: &Path, workloads: &[Workloads]) {
    let mut model = CacheModel::new(Shape::BTree, PAGE_BYTES, 0);
    for (key, value) in data {
        model.load(key, Some(value.len() as u64));
    }
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
         read-ahead is {}: with it on, a major fault on the map reads that much around the page.",
        read_ahead.map_or("unknown".to_string(), |kb| format!("{kb} KiB"))
    );
    println!(
        "{:<40} {:>10} {:>6} | {:>7} {:>7} {:>9} | {:>7} {:>7} | {:>10} {:>10} {:>10} | {:>10}",
        "workload",
        "read-ahead",
        "gets",
        "faults",
        "1st",
        "disk read",
        "model",
        "diff",
        "cached bef",
        "cached aft",
        "mapped",
        "model pgs"
    );
    let mut off = Vec::new();
    for workload in workloads {
        for read_ahead in [true, false] {
            drop_from_page_cache(&data_file);
            let cached_before = cached_bytes(&data_file);
            let options = OpenOptions { lmdb_read_ahead: read_ahead, ..OpenOptions::new(db_id) };
            let store = Store::open(&location, &options).expect("open LMDB store");
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
            model.cache = PageCache::new(model.layout.page_count() * PAGE_BYTES);
            let mut misses = 0;
            for &n in &gets {
                misses += model.get(&key(n)).misses;
            }
            let faults = delta(&after, &before, |r| r.major_faults);
            // Off by more than the tolerance, as a share of the model's misses.
            let diff = faults.map(|f| pct(f, misses.max(1)) - 100.0);
            let mark = diff.map_or(" ", |d| if !read_ahead && d.abs() > TOLERANCE_PP { "!" } else { " " });
            if mark == "!" {
                off.push(format!(
                    "{} without read-ahead: {} faults, model {misses} misses",
                    workload.name,
                    show(faults)
                ));
            }
            println!(
                "{:<40} {:>10} {:>6} | {:>7} {:>7} {:>9} | {:>7} {:>6}{mark} | {:>10} {:>10} {:>10} | {:>10}",
                workload.name,
                if read_ahead { "on" } else { "off" },
                gets.len(),
                show(faults),
                show(delta(&first, &before, |r| r.major_faults)),
                bytes(delta(&after, &before, |r| r.disk_read_bytes)),
                misses,
                diff.map_or("n/a".to_string(), |d| format!("{d:+.0}%")),
                bytes(cached_before),
                bytes(cached_after),
                bytes(after.mapped_resident_bytes),
                kib((model.cache.len() as u64 * PAGE_BYTES) as f64),
            );
        }
    }
    println!(
        "faults: major faults over all the gets; 1st: over the first {COLD_GETS}; disk read: bytes the process read from the disk;"
    );
    println!(
        "model: the model's misses (each a 4 KiB read); diff: faults against the model's misses; cached bef/aft: data.mdb's bytes"
    );
    println!(
        "in the page cache after the drop and after the gets (util-linux fincore, n/a without it); mapped: resident bytes of the"
    );
    println!(
        "mapping; model pgs: distinct pages the model read. With read-ahead on, a fault reads the whole window around its page,"
    );
    println!(
        "so LMDB faults far less often than the model misses; without it (MDB_NORDAHEAD) each fault is one page, as in the model."
    );
    println!(
        "tolerance: without read-ahead, faults within {TOLERANCE_PP} % of the model's misses; rows past it are marked '!'."
    );
    if off.is_empty() {
        println!("without read-ahead the model is within the tolerance on every workload.");
    } else {
        for line in &off {
            println!("  off: {line}");
        }
    }
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
