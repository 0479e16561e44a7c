//! Memory calibration: a real `qs-node` (release) on RocksDB under write and read load, its
//! resident size and the memory its engine accounts for sampled once a second from `/metrics`,
//! on three allocators — glibc malloc, glibc with `MALLOC_ARENA_MAX=2`, and jemalloc (a second
//! binary built with qs-node's `jemalloc` feature) — beside the simulator's allocator factors
//! (`qs_sim::resources::memory`).
//!
//! Load, the same for each allocator: writer threads post batches of 100 sets over HTTP
//! (`POST /v1/batch`, a producer's bearer token) to 100 000 keys, values of 20 B to 4 KiB of
//! configuration-like text drawn so sizes mix (what fragments an allocator); reader threads
//! send 16-key `gets` over memcached with Zipf popularity. The node: a 64 MiB block cache, 8 MiB
//! memtables, a 5 ms batch window, the newest 10 000 log entries retained.
//!
//! What this can show in minutes, and what it cannot: glibc's growth in the field (seed 000:
//! 15 GB → 30 GB over days, heap ≈ RSS / 3, 60–80 arenas from ~25 threads) takes days of churn;
//! the model approaches `GLIBC_FACTOR_MAX` with a time constant of two days, so after a few
//! minutes it predicts ~1.0. A run here shows the process's base, how RSS follows the accounted
//! components as the cache and memtables fill, the arena count with and without
//! `MALLOC_ARENA_MAX`, and the RSS / accounted ratio after N minutes on each allocator.
//!
//! Arena heaps: glibc keeps no counter a process outside can read, so its arenas are estimated
//! from `/proc/PID/maps` — each non-main arena lives in one or more heaps, each a 64 MiB-aligned
//! anonymous reservation of 64 MiB (glibc's `HEAP_MAX_SIZE`, read-write where used, `---p`
//! beyond). An arena that outgrows one heap takes another, so heaps >= arenas. Meaningless on
//! jemalloc.
//!
//! Prints figures; asserts nothing about them. Run: `./ci/bench-memory.sh` (`--quick`: 30 s per
//! allocator; `--seconds N`).

// It runs the real qs-node: nothing to do in the simulator's build (`--cfg madsim`), which only type-checks it.
#[cfg(madsim)]
fn main() {
    eprintln!("memory_calibration runs the real qs-node: build it without --cfg madsim (./ci/bench-memory.sh)");
    std::process::exit(2)
}

#[cfg(not(madsim))]
fn main() {
    real::main()
}

#[cfg(not(madsim))]
mod real {
    use std::collections::BTreeMap;
    use std::net::{SocketAddr, TcpListener};
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use qs_sim::resources::memory::{
        Allocator, GLIBC_FACTOR_MAX, GLIBC_GROWTH_SECONDS, JEMALLOC_FACTOR, TCMALLOC_FACTOR,
    };
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use rand_distr::Distribution;

    const TOKEN: &str = "calibration-producer-token";
    const SECONDS_DEFAULT: u64 = 90;
    const SECONDS_QUICK: u64 = 30;
    const KEYS: u64 = 100_000;
    const SETS_PER_BATCH: usize = 100;
    const WRITERS: usize = 2;
    const READERS: usize = 2;
    const KEYS_PER_GET: usize = 16;
    const CACHE_BYTES: u64 = 64 << 20;
    const MEMTABLE_BYTES: u64 = 8 << 20;
    /// glibc's `HEAP_MAX_SIZE` on 64-bit: every non-main arena heap is a reservation of this size,
    /// aligned to it.
    const GLIBC_HEAP_BYTES: u64 = 64 << 20;
    const WORDS: &[&str] = &[
        "\"zone\":",
        "\"ttl\":300,",
        "\"proxied\":true,",
        "\"type\":\"AAAA\",",
        "\"content\":\"192.0.2.",
        "\"action\":\"challenge\",",
        "\"expression\":\"http.request.uri.path contains \\\"/admin\\\"\",",
        "\"origin\":\"origin-",
        ".example.com\",",
        "\"route\":\"/*\",",
    ];

    struct Settings {
        seconds: u64,
        glibc: PathBuf,
        jemalloc: Option<PathBuf>,
    }

    fn usage(problem: &str) -> ! {
        eprintln!(
            "memory_calibration: {problem}\n\
             usage: memory_calibration --glibc QS_NODE [--jemalloc QS_NODE] [--quick | --seconds N]\n\
             (./ci/bench-memory.sh builds both binaries and passes them)"
        );
        std::process::exit(2)
    }

    fn settings() -> Settings {
        let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
        let (mut seconds, mut glibc, mut jemalloc) = (SECONDS_DEFAULT, None, None);
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let mut value = || rest.next().cloned().unwrap_or_else(|| usage(&format!("{arg} wants a value")));
            match arg.as_str() {
                "--quick" => seconds = SECONDS_QUICK,
                "--seconds" => {
                    let v = value();
                    seconds = v
                        .parse()
                        .ok()
                        .filter(|s| (10..=3600).contains(s))
                        .unwrap_or_else(|| usage(&format!("--seconds wants 10 to 3600, got {v:?}")));
                }
                "--glibc" => glibc = Some(PathBuf::from(value())),
                "--jemalloc" => jemalloc = Some(PathBuf::from(value())),
                other => usage(&format!("unknown argument {other:?}")),
            }
        }
        let glibc = glibc.unwrap_or_else(|| usage("--glibc is required"));
        for path in std::iter::once(&glibc).chain(jemalloc.as_ref()) {
            if !path.is_file() {
                usage(&format!("{} is not a file", path.display()));
            }
        }
        Settings { seconds, glibc, jemalloc }
    }

    fn free_port() -> SocketAddr {
        TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free loopback port")
    }

    struct Node {
        child: Child,
        http: SocketAddr,
        memcached: SocketAddr,
        log: PathBuf,
    }

    impl Drop for Node {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn start_node(binary: &Path, dir: &Path, env: &[(&str, &str)]) -> Node {
        let (replication, memcached, http) = (free_port(), free_port(), free_port());
        let config = format!(
            r#"name = "calibration"
    role = "root"
    database_id = "5157534d-0000-0000-0000-0000000ca11b"

    [storage]
    engine = "rocksdb"
    path = "{path}"
    cache_bytes = {CACHE_BYTES}
    block_bytes = "4 KiB"
    memtable_bytes = {MEMTABLE_BYTES}

    [listen]
    replication = "{replication}"
    memcached = "{memcached}"
    http = "{http}"

    [retention]
    keep_entries_min = 10000

    [root]
    batch_window = "5ms"
    heartbeat_interval = "1s"

    [[root.producers]]
    name = "cfg"
    token = "{TOKEN}"
    prefixes = ["cfg"]
    writes_per_s = 10000000
    burst = 10000000
    "#,
            path = dir.join("store").display()
        );
        let path = dir.join("node.toml");
        std::fs::write(&path, config).expect("write the node's configuration");
        let log = dir.join("node.log");
        let mut command = Command::new(binary);
        command
            .arg("--config")
            .arg(&path)
            .env("QS_LOG", "warn")
            .env_remove("MALLOC_ARENA_MAX")
            .env_remove("MALLOC_CONF")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("create the node's log"));
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command.spawn().unwrap_or_else(|e| {
            eprintln!("memory_calibration: cannot start {}: {e}", binary.display());
            std::process::exit(1)
        });
        let node = Node { child, http, memcached, log };
        let started = Instant::now();
        while scrape(&node).is_none() {
            if started.elapsed() > Duration::from_secs(30) {
                let log = std::fs::read_to_string(&node.log).unwrap_or_default();
                eprintln!("memory_calibration: qs-node did not serve /metrics within 30 s; its log:\n{log}");
                std::process::exit(1)
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        node
    }

    fn scrape(node: &Node) -> Option<String> {
        let url = format!("http://{}/metrics", node.http);
        let mut response = ureq::get(&url).config().timeout_global(Some(Duration::from_secs(5))).build().call().ok()?;
        response.body_mut().read_to_string().ok()
    }

    fn metric(metrics: &str, series: &str) -> Option<u64> {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse::<f64>().ok())
            .map(|v| v as u64)
    }

    /// One second's sample.
    #[derive(Clone, Debug, Default)]
    struct Sample {
        at: f64,
        /// `qs_resident_bytes`: what the node's own sampler reads (statm), what its limit compares.
        resident: u64,
        /// `/proc/PID/status` VmRSS and RssAnon at the moment of the sample (the metric is the
        /// node's own reading, up to a second old); anon is the heap side of RSS, the rest is mapped
        /// files (code, libraries).
        rss_proc: u64,
        rss_anon: u64,
        /// `qs_memory_accounted_bytes` by component.
        accounted: BTreeMap<&'static str, u64>,
        threads: u64,
        arenas: u64,
        writes: u64,
        gets: u64,
    }

    impl Sample {
        fn accounted_total(&self) -> u64 {
            self.accounted.values().sum()
        }
    }

    const COMPONENTS: [&str; 4] = ["block_cache", "memtables", "table_readers", "length_cache"];

    fn status_field(pid: u32, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
        let mut parts = line.split_whitespace();
        let value: u64 = parts.next()?.parse().ok()?;
        Some(if parts.next() == Some("kB") { value * 1024 } else { value })
    }

    /// glibc's non-main arena heaps, from `/proc/PID/maps` (see the module doc).
    fn glibc_arena_heaps(pid: u32) -> u64 {
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else { return 0 };
        // (start, end, perms) of anonymous mappings (inode 0, no path).
        let anon: Vec<(u64, u64, String)> = maps
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                let range = fields.next()?;
                let perms = fields.next()?.to_string();
                let (_offset, _dev, inode) = (fields.next()?, fields.next()?, fields.next()?);
                if inode != "0" || fields.next().is_some() {
                    return None;
                }
                let (start, end) = range.split_once('-')?;
                Some((u64::from_str_radix(start, 16).ok()?, u64::from_str_radix(end, 16).ok()?, perms))
            })
            .collect();
        let mut heaps = 0;
        for (i, (start, end, perms)) in anon.iter().enumerate() {
            if start % GLIBC_HEAP_BYTES != 0 || !perms.starts_with("rw") {
                continue;
            }
            let mut reserved = end - start;
            if let Some((next_start, next_end, next_perms)) = anon.get(i + 1)
                && next_start == end
                && next_perms.starts_with("---")
            {
                reserved += next_end - next_start;
            }
            heaps += u64::from(reserved == GLIBC_HEAP_BYTES);
        }
        heaps
    }

    fn value_text(rng: &mut ChaCha8Rng) -> String {
        // Sizes log-uniform from 20 B to 4 KiB: many small values, some large, as configuration is.
        let len = (20.0 * (4096.0f64 / 20.0).powf(rng.random_range(0.0..1.0))) as usize;
        let mut value = String::with_capacity(len + 64);
        while value.len() < len {
            value.push_str(WORDS[rng.random_range(0..WORDS.len())]);
            value.push_str(&rng.random_range(0..100_000u32).to_string());
        }
        value.truncate(len);
        value
    }

    fn writer(http: SocketAddr, seed: u64, stop: Arc<AtomicBool>, writes: Arc<AtomicU64>, errors: Arc<AtomicU64>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let agent: ureq::Agent =
            ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(30))).build().into();
        let url = format!("http://{http}/v1/batch");
        while !stop.load(Ordering::Relaxed) {
            let ops: Vec<_> = (0..SETS_PER_BATCH)
                .map(|_| serde_json::json!({"op": "set", "key": format!("cfg:{}", rng.random_range(0..KEYS)), "value": value_text(&mut rng)}))
                .collect();
            match agent
                .post(&url)
                .header("authorization", &format!("Bearer {TOKEN}"))
                .send_json(serde_json::json!({ "ops": ops }))
            {
                Ok(_) => writes.fetch_add(SETS_PER_BATCH as u64, Ordering::Relaxed),
                Err(_) => errors.fetch_add(1, Ordering::Relaxed),
            };
        }
    }

    fn reader(memcached: SocketAddr, seed: u64, stop: Arc<AtomicBool>, gets: Arc<AtomicU64>, errors: Arc<AtomicU64>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let zipf = rand_distr::Zipf::new(KEYS as f64, 1.0).expect("keys > 0");
        let mut client = None;
        while !stop.load(Ordering::Relaxed) {
            let Some(c) = client.as_ref() else {
                client = memcache::Client::connect(format!("memcache://{memcached}?protocol=ascii")).ok();
                if client.is_none() {
                    errors.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(100));
                }
                continue;
            };
            // Ranks scattered over the key space by a multiplicative hash, so hot keys do not share blocks.
            let names: Vec<String> = (0..KEYS_PER_GET)
                .map(|_| format!("cfg:{}", ((zipf.sample(&mut rng) as u64 - 1).wrapping_mul(0x9E37_79B9) % KEYS)))
                .collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            match c.gets::<String>(&refs) {
                Ok(_) => gets.fetch_add(KEYS_PER_GET as u64, Ordering::Relaxed),
                Err(_) => {
                    client = None;
                    errors.fetch_add(1, Ordering::Relaxed)
                }
            };
        }
    }

    struct Run {
        name: String,
        model: Allocator,
        samples: Vec<Sample>,
        idle: Sample,
        errors: u64,
        /// The node's threads by name, at the end (`/proc/PID/task/*/comm`).
        threads: BTreeMap<String, usize>,
    }

    fn thread_names(pid: u32) -> BTreeMap<String, usize> {
        let mut names = BTreeMap::new();
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
            if let Ok(name) = std::fs::read_to_string(task.path().join("comm")) {
                *names.entry(name.trim().to_string()).or_insert(0) += 1;
            }
        }
        names
    }

    fn run(name: &str, binary: &Path, env: &[(&str, &str)], model: Allocator, seconds: u64) -> Run {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let node = start_node(binary, dir.path(), env);
        let pid = node.child.id();
        let (writes, gets, errors) =
            (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let sample = |started: Instant| -> Sample {
            let metrics = scrape(&node).unwrap_or_default();
            Sample {
                at: started.elapsed().as_secs_f64(),
                resident: metric(&metrics, "qs_resident_bytes").unwrap_or(0),
                rss_proc: status_field(pid, "VmRSS").unwrap_or(0),
                rss_anon: status_field(pid, "RssAnon").unwrap_or(0),
                accounted: COMPONENTS
                    .iter()
                    .map(|c| {
                        (*c, metric(&metrics, &format!("qs_memory_accounted_bytes{{component=\"{c}\"}}")).unwrap_or(0))
                    })
                    .collect(),
                threads: status_field(pid, "Threads").unwrap_or(0),
                arenas: glibc_arena_heaps(pid),
                writes: writes.load(Ordering::Relaxed),
                gets: gets.load(Ordering::Relaxed),
            }
        };
        // The node's own sampler publishes once a second: wait for a sample with the cache's capacity.
        std::thread::sleep(Duration::from_millis(1500));
        let idle = sample(Instant::now());
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for i in 0..WRITERS {
            let (http, stop, writes, errors) = (node.http, stop.clone(), writes.clone(), errors.clone());
            threads.push(std::thread::spawn(move || writer(http, 0xC0FF_EE00 + i as u64, stop, writes, errors)));
        }
        for i in 0..READERS {
            let (memcached, stop, gets, errors) = (node.memcached, stop.clone(), gets.clone(), errors.clone());
            threads.push(std::thread::spawn(move || reader(memcached, 0xBEEF_0000 + i as u64, stop, gets, errors)));
        }
        let started = Instant::now();
        let mut samples = Vec::new();
        for second in 1..=seconds {
            let next = started + Duration::from_secs(second);
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            samples.push(sample(started));
            if let Some(status) = node_exited(pid) {
                eprintln!(
                    "memory_calibration: qs-node exited ({status}); its log:\n{}",
                    std::fs::read_to_string(&node.log).unwrap_or_default()
                );
                std::process::exit(1)
            }
        }
        stop.store(true, Ordering::Relaxed);
        for thread in threads {
            let _ = thread.join();
        }
        let threads = thread_names(pid);
        drop(node);
        Run { name: name.to_string(), model, samples, idle, errors: errors.load(Ordering::Relaxed), threads }
    }

    /// Whether the process `pid` has exited (a zombie or gone), as `/proc` shows it.
    fn node_exited(pid: u32) -> Option<String> {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => Some("gone".into()),
            Ok(stat) => stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                .filter(|s| *s == "Z")
                .map(|_| "exited".into()),
        }
    }

    fn mib(bytes: u64) -> String {
        format!("{:.1}", bytes as f64 / (1 << 20) as f64)
    }

    fn ratio(a: u64, b: u64) -> String {
        if b == 0 { "n/a".into() } else { format!("{:.2}", a as f64 / b as f64) }
    }

    fn print_run(run: &Run) {
        println!("\n{}", run.name);
        println!(
            "{:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7} {:>7} {:>9} {:>9}",
            "t (s)",
            "RSS MiB",
            "proc RSS",
            "anon MiB",
            "acct MiB",
            "cache",
            "memtbl",
            "tbl rdr",
            "RSS/acct",
            "threads",
            "heaps",
            "writes/s",
            "keys/s"
        );
        let mut rows = vec![("idle".to_string(), &run.idle, 0.0, 0, 0)];
        let n = run.samples.len();
        let mut picks: Vec<usize> =
            [0.1, 0.25, 0.5, 0.75, 1.0].iter().map(|f| ((n as f64 * f).ceil() as usize).clamp(1, n) - 1).collect();
        picks.dedup();
        for i in picks {
            let s = &run.samples[i];
            let (prev_at, prev_w, prev_g) = if i == 0 {
                (0.0, 0, 0)
            } else {
                (run.samples[i - 1].at, run.samples[i - 1].writes, run.samples[i - 1].gets)
            };
            rows.push((format!("{:.0}", s.at), s, prev_at, prev_w, prev_g));
        }
        for (label, s, prev_at, prev_w, prev_g) in rows {
            let dt = (s.at - prev_at).max(1e-9);
            let rate = |now: u64, before: u64| {
                if label == "idle" { "-".to_string() } else { format!("{:.0}", (now - before) as f64 / dt) }
            };
            println!(
                "{:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7} {:>7} {:>9} {:>9}",
                label,
                mib(s.resident),
                mib(s.rss_proc),
                mib(s.rss_anon),
                mib(s.accounted_total()),
                mib(s.accounted["block_cache"]),
                mib(s.accounted["memtables"]),
                mib(s.accounted["table_readers"]),
                if s.accounted_total() < 1 << 20 { "-".to_string() } else { ratio(s.resident, s.accounted_total()) },
                s.threads,
                if run.model == Allocator::Jemalloc { "-".to_string() } else { s.arenas.to_string() },
                rate(s.writes, prev_w),
                rate(s.gets, prev_g),
            );
        }
        if run.errors > 0 {
            println!("({} client requests failed and were retried)", run.errors);
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "128 lines, over the 70 clippy.toml allows: to be split along its steps, not grown"
    )]
    pub fn main() {
        let settings = settings();
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!(
            "qsim memory calibration: qs-node on RocksDB under load, three allocators, {} s each",
            settings.seconds
        );
        println!(
            "load: {WRITERS} writers x batches of {SETS_PER_BATCH} sets over HTTP, {READERS} readers x {KEYS_PER_GET}-key gets over memcached (Zipf 1.0), {KEYS} keys, values 20 B-4 KiB;"
        );
        println!(
            "node: block cache {} MiB, memtables {} MiB per column family, 4 KiB blocks; load average before: {}",
            CACHE_BYTES >> 20,
            MEMTABLE_BYTES >> 20,
            load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
        );
        let mut runs = vec![
            run(
                "glibc malloc (default arenas: up to 8 per core)",
                &settings.glibc,
                &[],
                Allocator::Glibc,
                settings.seconds,
            ),
            run(
                "glibc malloc, MALLOC_ARENA_MAX=2",
                &settings.glibc,
                &[("MALLOC_ARENA_MAX", "2")],
                Allocator::Glibc,
                settings.seconds,
            ),
        ];
        print_run(&runs[0]);
        print_run(&runs[1]);
        match &settings.jemalloc {
            Some(binary) => {
                let jemalloc_linked =
                    std::fs::read(binary).map(|b| b.windows(11).any(|w| w == b"<jemalloc>:")).unwrap_or(false);
                if !jemalloc_linked {
                    println!(
                        "\nwarning: {} does not look like a jemalloc build (no jemalloc strings in it)",
                        binary.display()
                    );
                }
                runs.push(run(
                    "jemalloc (qs-node --features jemalloc: rocksdb/jemalloc, unprefixed, process-wide)",
                    binary,
                    &[],
                    Allocator::Jemalloc,
                    settings.seconds,
                ));
                print_run(&runs[2]);
            }
            None => println!("\njemalloc: no --jemalloc binary given; not run"),
        }

        println!(
            "\ncolumns: RSS = qs_resident_bytes (what the node's limit compares; its sampler's, up to 1 s old); proc RSS and anon ="
        );
        println!(
            "VmRSS and RssAnon from /proc/PID/status at the sample (anon: the heap side of RSS, the rest is code and libraries);"
        );
        println!(
            "acct = qs_memory_accounted_bytes summed (block cache + memtables + table readers + length cache); heaps = glibc arena heaps"
        );
        println!("estimated from /proc/PID/maps (64 MiB-aligned reservations); keys/s = keys read over memcached.");
        println!(
            "\nat the end (medians over the last third of the samples: memtables come and go with flushes), beside the model"
        );
        println!("(qs_sim::resources::memory):");
        println!(
            "{:<34} {:>8} {:>9} {:>9} {:>9} {:>9} {:>15} {:>7}  model factor",
            "allocator", "RSS MiB", "peak MiB", "acct MiB", "unacct", "RSS/acct", "RSS/(idle+acct)", "heaps"
        );
        for run in &runs {
            let tail = &run.samples[run.samples.len() * 2 / 3..];
            let median = |f: &dyn Fn(&Sample) -> u64| {
                let mut v: Vec<u64> = tail.iter().map(f).collect();
                v.sort_unstable();
                v[v.len() / 2]
            };
            let (rss, acct) = (median(&|s| s.resident), median(&|s| s.accounted_total()));
            let unaccounted = median(&|s| s.resident.saturating_sub(s.accounted_total()));
            let peak = run.samples.iter().map(|s| s.resident).max().unwrap_or(0);
            let end = run.samples.last().expect("at least one sample");
            let model = match run.model {
                Allocator::Glibc => format!("{:.3} (max {GLIBC_FACTOR_MAX})", run.model.factor(end.at)),
                other => format!("{:.2}", other.factor(end.at)),
            };
            println!(
                "{:<34} {:>8} {:>9} {:>9} {:>9} {:>9} {:>15} {:>7}  {}",
                run.name.split(" (").next().unwrap_or(&run.name),
                mib(rss),
                mib(peak),
                mib(acct),
                mib(unaccounted),
                ratio(rss, acct),
                ratio(rss, run.idle.resident + acct),
                if run.model == Allocator::Jemalloc { "-".to_string() } else { median(&|s| s.arenas).to_string() },
                model,
            );
        }
        let threads = &runs[0].threads;
        println!(
            "qs-node's threads ({} in all): {}",
            threads.values().sum::<usize>(),
            threads.iter().map(|(name, n)| format!("{name} x{n}")).collect::<Vec<_>>().join(", ")
        );
        println!(
            "model: RSS = heap x factor; glibc's factor 1 + ({GLIBC_FACTOR_MAX} - 1)(1 - e^(-t/{:.0} h)), jemalloc {JEMALLOC_FACTOR}, tcmalloc {TCMALLOC_FACTOR} (not run here).",
            GLIBC_GROWTH_SECONDS / 3600.0
        );
        println!(
            "RSS/(idle+acct) is the closest measured analogue of the model's factor: idle RSS stands for the model's base, the"
        );
        println!(
            "accounted components for its cache and engine terms; what is left is allocator overhead plus unaccounted heap"
        );
        println!("(request buffers, decoded entries, tokio), so it bounds the allocator's share from above.");
        println!(
            "A run of {} s cannot show glibc's growth over days (the model's glibc factor after it is {:.4}); it shows the start",
            settings.seconds,
            Allocator::Glibc.factor(settings.seconds as f64)
        );
        println!(
            "of it: RSS beyond the accounted memory per allocator, and the arena count MALLOC_ARENA_MAX caps. glibc makes"
        );
        println!(
            "arenas as threads contend (up to 8 per core); the seed's 60-80 came from ~25 threads, this node runs the few above."
        );
    }
}
