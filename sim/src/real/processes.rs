//! The nodes of a real run as `qs-node` processes: started with their configuration file and
//! events file, killed, paused, stopped and started again as the scenario's process faults say.
//!
//! Guarantees:
//! - **Nothing outlives the run.** Every node is started through `setpriv --pdeathsig KILL`,
//!   so the kernel kills it when `qsim` dies, however it dies; [`Cluster`]'s drop kills and
//!   reaps whatever still runs. Processes are started from the thread that runs the schedule
//!   and lives as long as the run (a death signal follows the starting thread, not the process).
//! - A restarted node reuses its store, configuration and events file (appended to), as a
//!   restarted service does.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

use super::error::RealError;

/// How long a node gets to exit after SIGTERM before it is killed (its drain timeout, 10 s by
/// default, and the store's close).
const STOP_GRACE: Duration = Duration::from_secs(15);

/// One node's files and, while it runs, its process.
#[derive(Debug)]
pub struct NodeProcess {
    pub name: String,
    pub config_path: PathBuf,
    pub events_path: PathBuf,
    pub log_path: PathBuf,
    /// Its HTTP address (status, and on a root the write API).
    pub http: SocketAddr,
    child: Option<Child>,
    /// Held down by a fault (killed or stopped until the fault ends).
    pub held_down: bool,
    /// Paused (SIGSTOP) by a fault.
    pub paused: bool,
    /// How often it was started.
    pub starts: u64,
}

/// Every node of the run, by name.
#[derive(Debug)]
pub struct Cluster {
    node_bin: PathBuf,
    pub nodes: BTreeMap<String, NodeProcess>,
}

impl Cluster {
    /// Writes each node's configuration into `dir` (nothing started yet).
    pub fn new(node_bin: &Path, dir: &Path, configs: &[qs_node::config::NodeConfig]) -> std::io::Result<Cluster> {
        let mut nodes = BTreeMap::new();
        for config in configs {
            let name = config.name.clone();
            let config_path = dir.join(format!("{name}.toml"));
            std::fs::write(&config_path, config.to_toml())?;
            let process = NodeProcess {
                events_path: dir.join(format!("{name}.events.jsonl")),
                log_path: dir.join(format!("{name}.log")),
                config_path,
                http: config.listen.http,
                child: None,
                held_down: false,
                paused: false,
                starts: 0,
                name: name.clone(),
            };
            nodes.insert(name, process);
        }
        Ok(Cluster { node_bin: node_bin.to_path_buf(), nodes })
    }

    /// Starts `name`'s process (its log appended to its log file).
    pub fn start(&mut self, name: &str) -> Result<(), RealError> {
        let node = self.nodes.get_mut(name).ok_or_else(|| no_node(name))?;
        let log_failed = |source| RealError::LogFile { node: name.to_string(), path: node.log_path.clone(), source };
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&node.log_path).map_err(log_failed)?;
        let log_too = log.try_clone().map_err(log_failed)?;
        let child = Command::new("setpriv")
            .args(["--pdeathsig", "KILL", "--"])
            .arg(&self.node_bin)
            .arg("--config")
            .arg(&node.config_path)
            .arg("--events")
            .arg(&node.events_path)
            .args(["--log-format", "json"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log_too)
            .stderr(log)
            .spawn()
            .map_err(|source| RealError::Spawn { node: name.to_string(), node_bin: self.node_bin.clone(), source })?;
        node.child = Some(child);
        node.paused = false;
        node.starts += 1;
        Ok(())
    }

    fn signal(&mut self, name: &str, signal: Signal) -> Result<(), RealError> {
        let node = self.nodes.get_mut(name).ok_or_else(|| no_node(name))?;
        let Some(child) = &node.child else { return Ok(()) };
        let pid = i32::try_from(child.id())
            .ok()
            .and_then(Pid::from_raw)
            .ok_or_else(|| RealError::Pid { node: name.to_string(), pid: child.id() })?;
        kill_process(pid, signal).map_err(|errno| RealError::Signal {
            node: name.to_string(),
            signal,
            // As `std::io::Error`, whose message names the errno ("No such process") whatever
            // features rustix is built with: without `std`, `Errno` shows a bare number.
            source: std::io::Error::from_raw_os_error(errno.raw_os_error()),
        })
    }

    /// SIGKILL, and reaps it.
    pub fn kill(&mut self, name: &str) -> Result<(), RealError> {
        let node = self.nodes.get_mut(name).ok_or_else(|| no_node(name))?;
        if let Some(mut child) = node.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        node.paused = false;
        Ok(())
    }

    /// SIGSTOP.
    pub fn pause(&mut self, name: &str) -> Result<(), RealError> {
        self.signal(name, Signal::STOP)?;
        self.nodes.get_mut(name).expect("signalled above").paused = true;
        Ok(())
    }

    /// SIGCONT.
    pub fn resume(&mut self, name: &str) -> Result<(), RealError> {
        self.signal(name, Signal::CONT)?;
        self.nodes.get_mut(name).expect("signalled above").paused = false;
        Ok(())
    }

    /// SIGTERM, then waits for the node's graceful exit (15 s, then SIGKILL). Returns
    /// how it exited.
    pub fn stop(&mut self, name: &str) -> Result<String, RealError> {
        let paused = self.nodes.get(name).is_some_and(|n| n.paused);
        if paused {
            self.resume(name)?;
        }
        self.signal(name, Signal::TERM)?;
        let node = self.nodes.get_mut(name).expect("signalled above");
        let Some(mut child) = node.child.take() else { return Ok("was not running".into()) };
        let deadline = Instant::now() + STOP_GRACE;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return Ok(format!("exited ({status})")),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Ok(format!("killed after {STOP_GRACE:?} without exiting"));
                }
            }
        }
    }

    /// The nodes whose process exited on its own (not by a fault), with how; each is reaped.
    pub fn exited(&mut self) -> Vec<(String, String)> {
        let mut exited = Vec::new();
        for node in self.nodes.values_mut() {
            let Some(child) = &mut node.child else { continue };
            if let Ok(Some(status)) = child.try_wait() {
                node.child = None;
                exited.push((node.name.clone(), format!("{status}; {}", last_error(&node.log_path))));
            }
        }
        exited
    }

    pub fn is_running(&self, name: &str) -> bool {
        self.nodes.get(name).is_some_and(|n| n.child.is_some())
    }

    /// Every node stopped (SIGTERM, then SIGKILL), in reverse name order: the edges before the
    /// root, so the root's last entries are served while the replicas still run.
    pub fn stop_all(&mut self) {
        let names: Vec<String> = self.nodes.keys().rev().cloned().collect();
        for name in names {
            let _ = self.stop(&name);
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in self.nodes.values_mut() {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn no_node(name: &str) -> RealError {
    RealError::NoNode { node: name.to_string() }
}

/// The last error a node logged (its JSON log's last `ERROR` line, or its last line), for a
/// start that failed.
fn last_error(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains("\"ERROR\"") || l.starts_with("qs-node:"))
        .or_else(|| text.lines().last())
        .unwrap_or("no log");
    line.chars().take(300).collect()
}
