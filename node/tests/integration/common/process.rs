//! A `qs-node` process for the tests that run the real binary (cluster, connections, inspect,
//! logs, resources, shutdown): its configuration, its start, its log, signals and exit, and
//! clients that each hold one connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use qs_node::status::Status;

pub const TOKEN: &str = "operations-producer-token";
pub const DATABASE_ID: &str = "5157534d-0000-0000-0000-0000000005e5";

/// A node's three ports.
#[derive(Clone, Copy, Debug)]
pub struct Ports {
    pub replication: SocketAddr,
    pub memcached: SocketAddr,
    pub http: SocketAddr,
}

impl Ports {
    pub fn new() -> Ports {
        Ports { replication: super::free_port(), memcached: super::free_port(), http: super::free_port() }
    }
}

/// What a node is: the root (with its batch window) or a replica of `primaries`.
#[derive(Clone, Copy, Debug)]
pub enum Role<'a> {
    Root { batch_window: &'a str },
    Replica { primaries: &'a [SocketAddr] },
}

/// Writes a node's configuration to `dir/<name>.toml`: LMDB under `dir/<name>`; a root with one
/// producer (`dns:` keys, no practical quota) or a replica; then `extra` (TOML) merged in: its
/// tables add to these, its other values replace theirs (a `[connections]` section, say, or
/// `[storage]` with another engine and its switches).
pub fn write_config(dir: &Path, name: &str, ports: Ports, role: Role<'_>, extra: &str) -> PathBuf {
    let mut text = format!(
        "name = \"{name}\"\nrole = \"{role}\"\ndatabase_id = \"{DATABASE_ID}\"\n\
         [storage]\nengine = \"lmdb\"\npath = \"{path}\"\n\
         [listen]\nreplication = \"{r}\"\nmemcached = \"{m}\"\nhttp = \"{h}\"\n",
        role = if matches!(role, Role::Root { .. }) { "root" } else { "replica" },
        path = dir.join(name).display(),
        r = ports.replication,
        m = ports.memcached,
        h = ports.http,
    );
    match role {
        Role::Root { batch_window } => {
            text += &format!(
                "[root]\nbatch_window = \"{batch_window}\"\nheartbeat_interval = \"200ms\"\n[[root.producers]]\n\
                 name = \"dns\"\ntoken = \"{TOKEN}\"\nprefixes = [\"dns:\"]\nwrites_per_s = 1000000\nburst = 1000000\n"
            )
        }
        Role::Replica { primaries } => {
            let list: Vec<String> = primaries.iter().map(|a| format!("\"{a}\"")).collect();
            text += &format!(
                "[replication]\nprimaries = [{}]\nreconnect_backoff_min = \"50ms\"\nreconnect_backoff_max = \"500ms\"\n",
                list.join(", ")
            );
        }
    }
    let mut config: toml::Table = text.parse().unwrap();
    merge(&mut config, extra.parse().unwrap_or_else(|e| panic!("the extra configuration does not parse: {e}")));
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, toml::to_string(&config).unwrap()).unwrap();
    path
}

/// A `[storage]` section for [`write_config`]'s `extra`: `engine`, with `lines` (the engine's
/// switches) added.
pub fn storage(engine: &str, lines: &str) -> String {
    format!("[storage]\nengine = \"{engine}\"\n{lines}\n")
}

/// `from` into `into`: a table into the table of the same name, key by key; anything else
/// replaces what `into` held.
fn merge(into: &mut toml::Table, from: toml::Table) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(toml::Value::Table(into)), toml::Value::Table(from)) => merge(into, from),
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

/// A running `qs-node`, killed (SIGKILL) and reaped when dropped: every test that starts the
/// real binary with a configuration starts it through this.
pub struct NodeProcess {
    pub ports: Ports,
    /// Its configuration file.
    pub config: PathBuf,
    /// Its standard error, a file (not a terminal): `<config>.log`.
    pub log: PathBuf,
    child: Child,
}

impl NodeProcess {
    /// Starts `qs-node --config <config> <args>` with `env`, its standard error to
    /// `<config>.log` (appended to, so a restart keeps the earlier lines).
    pub fn start(config: &Path, ports: Ports, args: &[&str], env: &[(&str, &str)]) -> NodeProcess {
        let mut command = Command::new(env!("CARGO_BIN_EXE_qs-node"));
        command.arg("--config").arg(config).args(args);
        NodeProcess::spawn(command, config, ports, env)
    }

    /// Starts `command`, which runs `qs-node` with `config` (the binary itself, or a launcher
    /// that execs it, so the process is the node's), as [`start`](Self::start) does: `QS_LOG`,
    /// `RUST_LOG` and `NO_COLOR` removed, then `env` set; no standard output; standard error
    /// appended to `<config>.log`.
    pub fn spawn(mut command: Command, config: &Path, ports: Ports, env: &[(&str, &str)]) -> NodeProcess {
        let log = config.with_extension("log");
        let file = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
        command.stdout(Stdio::null()).stderr(file);
        command.env_remove("QS_LOG").env_remove("RUST_LOG").env_remove("NO_COLOR");
        for (name, value) in env {
            command.env(name, value);
        }
        NodeProcess { ports, config: config.to_path_buf(), log, child: command.spawn().unwrap() }
    }

    /// The node's name: its configuration file's, without the extension (`<dir>/<name>.toml`,
    /// as [`write_config`] writes it).
    pub fn name(&self) -> &str {
        self.config.file_stem().and_then(|stem| stem.to_str()).unwrap_or("qs-node")
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the node answers `/v1/status` (on a connection of its own, closed after).
    pub fn wait_serving(&mut self, patience: Duration) {
        let started = Instant::now();
        while status(self.ports.http).is_none() {
            if let Ok(Some(exit)) = self.child.try_wait() {
                panic!("qs-node exited with {exit} before serving; its log:\n{}", self.log_text());
            }
            assert!(
                started.elapsed() < patience,
                "qs-node did not serve within {patience:?}; its log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Polls `done` every 50 ms until it holds, panicking with the node's log after `patience`.
    pub fn wait_until(&self, what: &str, patience: Duration, mut done: impl FnMut() -> bool) {
        let started = Instant::now();
        while !done() {
            if started.elapsed() > patience {
                panic!("timed out after {patience:?} waiting for {what}; the node's log:\n{}", self.log_text());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `/v1/status` on a fresh connection, or None if the node does not answer.
    pub fn status(&self) -> Option<Status> {
        status(self.ports.http)
    }

    /// `/metrics` on a fresh connection, or None if the node does not answer.
    pub fn metrics(&self) -> Option<String> {
        let url = format!("http://{}/metrics", self.ports.http);
        let mut response = ureq::get(&url).config().timeout_global(Some(STATUS_TIMEOUT)).build().call().ok()?;
        response.body_mut().read_to_string().ok()
    }

    pub fn log_text(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.log).unwrap_or_default()).into_owned()
    }

    /// Sends `signal` (`TERM`, `INT`, ...) with kill(1).
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args([&format!("-{signal}"), &pid]).status().unwrap().success());
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Whether the process has not exited.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits for the process to exit, panicking (with its log) after `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(started.elapsed() < limit, "qs-node still running after {limit:?}; its log:\n{}", self.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long a `/v1/status` or `/metrics` request on a fresh connection may take.
const STATUS_TIMEOUT: Duration = Duration::from_secs(2);

/// `/v1/status` on a fresh connection, or None if the node does not answer.
pub fn status(http: SocketAddr) -> Option<Status> {
    status_within(http, STATUS_TIMEOUT)
}

/// `/v1/status` on a fresh connection, or None if the node does not answer within `timeout`; a
/// body that is not a [`Status`] fails the test.
pub fn status_within(http: SocketAddr, timeout: Duration) -> Option<Status> {
    let url = format!("http://{http}/v1/status");
    let mut response = ureq::get(&url).config().timeout_global(Some(timeout)).build().call().ok()?;
    let body = response.body_mut().read_to_string().ok()?;
    Some(Status::parse(&body).unwrap_or_else(|e| panic!("{url} answered a body that is not a status ({e}): {body}")))
}

/// The value of the sample named exactly `series` (name and labels, as exposed) in `metrics`;
/// a page that does not parse fails the test.
pub fn sample(metrics: &str, series: &str) -> Option<f64> {
    let page = qs_node::metrics::page::Page::parse(metrics).unwrap_or_else(|e| panic!("{e}:\n{metrics}"));
    page.value(series)
}

/// A connection to `to` from `from` (any loopback address, 127.0.0.0/8, reaches the node on
/// Linux): a client at an address of its own, as the per-address share sees clients.
pub fn connect_from(from: std::net::IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::new(from, 0).into())?;
    socket.connect(&to.into())?;
    Ok(socket.into())
}

/// One HTTP/1.1 keep-alive connection, used for every request: a client that holds its place
/// under the node's connection cap. Any failure panics, naming the request.
pub struct HttpConnection {
    reader: BufReader<TcpStream>,
}

impl HttpConnection {
    pub fn open(http: SocketAddr) -> HttpConnection {
        HttpConnection::over(TcpStream::connect(http).unwrap())
    }

    /// A connection from the loopback address `from` (see [`connect_from`]).
    pub fn open_from(from: std::net::IpAddr, http: SocketAddr) -> std::io::Result<HttpConnection> {
        Ok(HttpConnection::over(connect_from(from, http)?))
    }

    fn over(stream: TcpStream) -> HttpConnection {
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        HttpConnection { reader: BufReader::new(stream) }
    }

    /// Sends one request and returns the status and body, or the I/O error.
    pub fn try_request(&mut self, method: &str, path: &str, body: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
        self.send_head(method, path, body.len(), "")?;
        self.reader.get_mut().write_all(body)?;
        self.read_response()
    }

    /// Sends a request's head (with `extra` header lines, each ending in `\r\n`), no body.
    pub fn send_head(&mut self, method: &str, path: &str, body_bytes: usize, extra: &str) -> std::io::Result<()> {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nhost: qs-node\r\nauthorization: Bearer {TOKEN}\r\ncontent-length: {body_bytes}\r\n{extra}\r\n"
        );
        self.reader.get_mut().write_all(head.as_bytes())
    }

    /// Sends raw bytes (a body, or part of one).
    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.reader.get_mut().write_all(bytes)
    }

    /// Reads one response: its status and body (interim `1xx` responses included as such).
    pub fn read_response(&mut self) -> std::io::Result<(u16, Vec<u8>)> {
        let mut status_line = String::new();
        if self.reader.read_line(&mut status_line)? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the node closed the connection"));
        }
        let status: u16 = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let mut length = 0;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line)?;
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body)?;
        Ok((status, body))
    }

    pub fn request(&mut self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        self.try_request(method, path, body).unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// `/metrics` over this connection.
    pub fn metrics(&mut self) -> String {
        let (status, body) = self.request("GET", "/metrics", b"");
        assert_eq!(status, 200);
        String::from_utf8(body).unwrap()
    }

    pub fn metric(&mut self, series: &str) -> f64 {
        let metrics = self.metrics();
        sample(&metrics, series).unwrap_or_else(|| panic!("{series} missing from /metrics:\n{metrics}"))
    }
}

/// One memcached connection, used for every request.
pub struct MemcachedConnection {
    reader: BufReader<TcpStream>,
}

impl MemcachedConnection {
    pub fn open(memcached: SocketAddr) -> MemcachedConnection {
        MemcachedConnection::over(TcpStream::connect(memcached).unwrap())
    }

    /// A connection from the loopback address `from` (see [`connect_from`]).
    pub fn open_from(from: std::net::IpAddr, memcached: SocketAddr) -> std::io::Result<MemcachedConnection> {
        Ok(MemcachedConnection::over(connect_from(from, memcached)?))
    }

    fn over(stream: TcpStream) -> MemcachedConnection {
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        MemcachedConnection { reader: BufReader::new(stream) }
    }

    /// `get key`: the value, or None for a miss; panics on anything else.
    pub fn get(&mut self, key: &str) -> Option<Vec<u8>> {
        self.reader.get_mut().write_all(format!("get {key}\r\n").as_bytes()).unwrap();
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        if line == "END\r\n" {
            return None;
        }
        let length: usize = match line.split(' ').collect::<Vec<_>>()[..] {
            ["VALUE", _, _, length] => length.trim().parse().unwrap(),
            _ => panic!("get {key}: unexpected reply {line:?}"),
        };
        let mut value = vec![0; length + 2];
        self.reader.read_exact(&mut value).unwrap();
        value.truncate(length);
        line.clear();
        self.reader.read_line(&mut line).unwrap();
        assert_eq!(line, "END\r\n", "get {key}");
        Some(value)
    }

    /// `version`: whether the connection is served.
    pub fn version(&mut self) -> std::io::Result<String> {
        self.reader.get_mut().write_all(b"version\r\n")?;
        let mut line = String::new();
        match self.reader.read_line(&mut line)? {
            0 => Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed")),
            _ => Ok(line),
        }
    }
}
