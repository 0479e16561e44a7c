//! The two servers under test, each a child process: memcached and qs-node, started on free
//! loopback ports, loaded with the benchmark's keys, and killed when dropped.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{KEYS, TOKEN, key, value};

pub struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// CPU time the server process has used so far.
    pub fn cpu(&self) -> Duration {
        process_cpu(procfs::process::Process::new(self.child.id() as i32))
    }

    /// Time the server's threads have spent runnable but waiting for a CPU (the run queue wait of
    /// `/proc/<pid>/task/*/schedstat`): on a machine with more runnable threads than cores, how
    /// much of its share of the CPU a server did not get. Zero where the kernel does not say.
    pub fn waited(&self) -> Duration {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.child.id()));
        let nanos: u64 = tasks
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
            .filter_map(|line| line.split_whitespace().nth(1).and_then(|wait| wait.parse::<u64>().ok()))
            .sum();
        Duration::from_nanos(nanos)
    }
}

pub fn process_cpu(process: procfs::ProcResult<procfs::process::Process>) -> Duration {
    let ticks = process.and_then(|p| p.stat()).map(|s| s.utime + s.stime).unwrap_or(0);
    Duration::from_secs_f64(ticks as f64 / procfs::ticks_per_second() as f64)
}

pub fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free loopback port")
}

pub fn wait_for(addr: SocketAddr, what: &str) {
    let start = Instant::now();
    while TcpStream::connect(addr).is_err() {
        if start.elapsed() > Duration::from_secs(20) {
            eprintln!("read_path: {what} did not start listening on {addr}");
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn start_memcached(threads: usize) -> (Server, SocketAddr) {
    let addr = free_port();
    let threads = threads.to_string();
    let child = Command::new("memcached")
        .args(["-l", "127.0.0.1", "-p", &addr.port().to_string(), "-U", "0", "-m", "256", "-t", &threads, "-u", "root"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            eprintln!("read_path: cannot start memcached ({e}); install it (Debian: apt-get install memcached) or run ./ci/bench-reads.sh");
            std::process::exit(1)
        });
    wait_for(addr, "memcached");
    (Server { child }, addr)
}

/// `workers`: the node's runtime workers through tokio's `TOKIO_WORKER_THREADS`; None leaves the
/// node's default (one per core).
pub fn start_qs_node(dir: &std::path::Path, workers: Option<usize>, binary: &std::path::Path) -> (Server, SocketAddr) {
    let (replication, memcached, http) = (free_port(), free_port(), free_port());
    let config = format!(
        "name = \"bench-root\"\nrole = \"root\"\ndatabase_id = \"be\"\n[storage]\nengine = \"lmdb\"\npath = \"{}\"\n\
         [listen]\nreplication = \"{replication}\"\nmemcached = \"{memcached}\"\nhttp = \"{http}\"\n\
         [root]\nbatch_window = \"20ms\"\n[[root.producers]]\nname = \"bench\"\ntoken = \"{TOKEN}\"\n\
         prefixes = [\"dns:\"]\nwrites_per_s = 1000000\nburst = 1000000\n",
        dir.join("store").display()
    );
    let path = dir.join("bench-root.toml");
    std::fs::write(&path, config).expect("write config");
    let mut command = Command::new(binary);
    command.arg("--config").arg(&path).env("QS_LOG", "warn").env_remove("TOKIO_WORKER_THREADS");
    if let Some(workers) = workers {
        command.env("TOKIO_WORKER_THREADS", workers.to_string());
    }
    let child = command.stdout(Stdio::null()).spawn().expect("start qs-node");
    wait_for(http, "qs-node");
    // Load through the write API, in batches, as producers would.
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(1000) {
        let ops: Vec<_> =
            chunk.iter().map(|&i| serde_json::json!({"op": "set", "key": key(i), "value": value(i)})).collect();
        ureq::post(&format!("http://{http}/v1/batch"))
            .header("authorization", &format!("Bearer {TOKEN}"))
            .send_json(serde_json::json!({ "ops": ops }))
            .expect("load qs-node");
    }
    (Server { child }, memcached)
}
