//! Root group benchmark: write latency and throughput through a root of one `qs-node` process
//! and through root groups of three and of five (Raft), on loopback, LMDB, the same batch window, measured
//! in the same run. Prints, for each: the latency of one producer writing one key at a time
//! (p50, p99, mean, over `--writes` writes) and the writes a second of `--clients` producers
//! writing at once for `--seconds`, then each group's figures over the single root's.
//!
//! What the ratio holds: a group's write waits for its batch to reach a majority's disks (one
//! loopback round trip and one more synced commit) before the leader applies and answers, as
//! the single root's waits for its own commit. All processes share the machine's cores. A
//! write answered 503 (its member stopped leading: an election on a machine too busy to keep
//! the group's heartbeats) is sent again to the new leader, as a producer does; the retry's
//! time counts in the write's latency, and the `503s` column counts them.
//!
//! Run: `cargo bench -p qs-node --bench root_group -- [--writes N] [--clients C] [--seconds S]
//! [--batch-window 5ms]`.

#[path = "common/mod.rs"]
mod common;

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Process, free_ports};
use qs_node::status::Status;

const TOKEN: &str = "bench-producer-token";

struct Options {
    writes: usize,
    clients: usize,
    seconds: u64,
    batch_window: String,
}

fn options() -> Options {
    let mut options = Options { writes: 500, clients: 16, seconds: 5, batch_window: "5ms".into() };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| fail(&format!("{arg} needs a value")));
        match arg.as_str() {
            "--writes" => options.writes = value().parse().unwrap_or_else(|_| fail("--writes: a count")),
            "--clients" => options.clients = value().parse().unwrap_or_else(|_| fail("--clients: a count")),
            "--seconds" => options.seconds = value().parse().unwrap_or_else(|_| fail("--seconds: a count")),
            "--batch-window" => options.batch_window = value(),
            "--bench" => {}
            other => fail(&format!("unknown argument {other}; see node/benches/root_group.rs")),
        }
    }
    options
}

fn fail(message: &str) -> ! {
    eprintln!("root_group: {message}");
    std::process::exit(2)
}

/// Starts `members` processes (one: a root of one) and returns them with their HTTP addresses.
fn start(dir: &Path, members: usize, batch_window: &str) -> (Vec<Process>, Vec<SocketAddr>) {
    // Every port of the run at once, so no two of them are one.
    let all = free_ports::<15>();
    assert!(members <= 5, "root_group: at most five members");
    let ports: Vec<(SocketAddr, SocketAddr, SocketAddr)> =
        all.chunks(3).take(members).map(|p| (p[0], p[1], p[2])).collect();
    let group: String = if members > 1 {
        ports
            .iter()
            .enumerate()
            .map(|(n, (r, _, h))| format!("[[root.members]]\nid = {}\nreplication = \"{r}\"\nhttp = \"{h}\"\n", n + 1))
            .collect()
    } else {
        String::new()
    };
    let mut processes = Vec::new();
    for (n, (replication, memcached, http)) in ports.iter().enumerate() {
        let member = if members > 1 { format!("member_id = {}\n", n + 1) } else { String::new() };
        let config = format!(
            "name = \"bench-{n}\"\nrole = \"root\"\ndatabase_id = \"be\"\n[storage]\nengine = \"lmdb\"\npath = \"{}\"\n\
             [listen]\nreplication = \"{replication}\"\nmemcached = \"{memcached}\"\nhttp = \"{http}\"\n\
             [root]\nbatch_window = \"{batch_window}\"\n{member}[[root.producers]]\nname = \"bench\"\n\
             token = \"{TOKEN}\"\nprefixes = [\"k:\"]\nwrites_per_s = 1000000\nburst = 1000000\n{group}",
            dir.join(format!("store-{members}-{n}")).display()
        );
        let path = dir.join(format!("root-{members}-{n}.toml"));
        std::fs::write(&path, config).expect("write a configuration");
        let child = Command::new(env!("CARGO_BIN_EXE_qs-node"))
            .arg("--config")
            .arg(&path)
            .env("QS_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("start qs-node");
        processes.push(Process(child));
    }
    let https: Vec<SocketAddr> = ports.iter().map(|p| p.2).collect();
    for http in &https {
        let started = Instant::now();
        while TcpStream::connect(http).is_err() {
            assert!(started.elapsed() < Duration::from_secs(20), "root_group: qs-node did not listen on {http}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    (processes, https)
}

/// The member that says it leads (the one process of a root of one).
fn leader(https: &[SocketAddr]) -> SocketAddr {
    if https.len() == 1 {
        return https[0];
    }
    let started = Instant::now();
    loop {
        for http in https {
            let body = ureq::get(&format!("http://{http}/v1/status"))
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_to_string().ok());
            if body.is_some_and(|body| Status::parse(&body).is_ok_and(|status| status.leads())) {
                return *http;
            }
        }
        // A panic, not `fail`: unwinding stops the processes (their `Drop`), an exit would not.
        assert!(started.elapsed() < Duration::from_secs(30), "root_group: no member led within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A client whose every request has 10 s: a write that is never answered fails the run.
fn client() -> ureq::Agent {
    ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(10))).build().into()
}

/// Where a producer writes: the member it last found leading, and how often a write was
/// answered 503 (the member had stopped leading, or paused) and sent again to the leader.
struct Target<'a> {
    https: &'a [SocketAddr],
    leader: SocketAddr,
    retried: &'a AtomicU64,
}

/// One write, answered 2xx: a 503 is what a producer is told to retry, so the write goes again
/// to whoever leads now (within 30 s); anything else fails the run. The time the retry took is
/// the write's latency, as the producer saw it.
fn put(agent: &ureq::Agent, target: &mut Target<'_>, key: &str) {
    let started = Instant::now();
    loop {
        let http = target.leader;
        let answer = agent
            .put(&format!("http://{http}/v1/keys/{key}"))
            .header("authorization", &format!("Bearer {TOKEN}"))
            .send(key.as_bytes());
        match answer {
            Ok(_) => return,
            Err(ureq::Error::StatusCode(503)) if started.elapsed() < Duration::from_secs(30) => {
                target.retried.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
                target.leader = leader(target.https);
            }
            Err(e) => panic!("root_group: a write to {http} failed: {e}"),
        }
    }
}

struct Figures {
    p50: Duration,
    p99: Duration,
    mean: Duration,
    per_s: f64,
    /// Writes answered 503 and sent again to the leader.
    retried: u64,
}

fn measure(options: &Options, members: usize, dir: &Path) -> Figures {
    let (_processes, https) = start(dir, members, &options.batch_window);
    let retried = AtomicU64::new(0);
    let mut target = Target { https: &https, leader: leader(&https), retried: &retried };
    let agent = client();
    for n in 0..20 {
        put(&agent, &mut target, &format!("k:warm-{n}")); // connections, the first commits
    }
    let mut latencies: Vec<Duration> = (0..options.writes)
        .map(|n| {
            let started = Instant::now();
            put(&agent, &mut target, &format!("k:one-{n}"));
            started.elapsed()
        })
        .collect();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    let mean = latencies.iter().sum::<Duration>() / latencies.len() as u32;
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let first_leader = target.leader;
    std::thread::scope(|scope| {
        for c in 0..options.clients {
            let (done, stop, https, retried) = (&done, &stop, &https, &retried);
            scope.spawn(move || {
                let agent = client();
                let mut target = Target { https, leader: first_leader, retried };
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    put(&agent, &mut target, &format!("k:many-{c}-{n}"));
                    n += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_secs(options.seconds));
        stop.store(true, Ordering::Relaxed);
    });
    let per_s = done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    Figures { p50: at(0.5), p99: at(0.99), mean, per_s, retried: retried.load(Ordering::Relaxed) }
}

fn main() {
    let options = options();
    let dir = tempfile::tempdir().expect("a scratch folder");
    println!(
        "root_group: LMDB on loopback, batch_window {}; latency: one producer, {} writes one at a time; \
         throughput: {} producers for {} s",
        options.batch_window, options.writes, options.clients, options.seconds
    );
    println!("{:<18} {:>10} {:>10} {:>10} {:>12} {:>8}", "root", "p50", "p99", "mean", "writes/s", "503s");
    let one = measure(&options, 1, dir.path());
    let row = |name: &str, f: &Figures| {
        println!("{name:<18} {:>10.2?} {:>10.2?} {:>10.2?} {:>12.0} {:>8}", f.p50, f.p99, f.mean, f.per_s, f.retried);
    };
    row("one process", &one);
    let three = measure(&options, 3, dir.path());
    row("group of three", &three);
    let five = measure(&options, 5, dir.path());
    row("group of five", &five);
    for (name, group) in [("three", &three), ("five", &five)] {
        println!(
            "ratio ({name} / one): latency p50 {:.2}x, p99 {:.2}x, mean {:.2}x; throughput {:.2}x",
            group.p50.as_secs_f64() / one.p50.as_secs_f64(),
            group.p99.as_secs_f64() / one.p99.as_secs_f64(),
            group.mean.as_secs_f64() / one.mean.as_secs_f64(),
            group.per_s / one.per_s
        );
    }
}
