//! The network of a real run: a private network namespace, the nodes' loopback addresses, and
//! the scenario's network faults as packet filters (nftables) and, where the kernel has it,
//! `tc netem`.
//!
//! Guarantees:
//! - **Nothing outside is addressed.** `qsim real` runs inside a network namespace of its own
//!   (it re-executes itself under `unshare --net`, see [`enter_namespace`]): the nodes, the
//!   clients and every filter live there, on its loopback device, and vanish with it. Without
//!   one (no `unshare`, no privilege) the run uses the machine's loopback and refuses every
//!   network fault.
//! - **Every node has its own address**, `127.(B+1).T.N` for the simulator's `10.B.T.N`
//!   ([`loopback`]), and leaves from it (`replication.dial_from`), so a filter on an address
//!   acts on exactly one node. Clients leave from `127.0.0.1`.
//! - **Faults are one nftables table**, rewritten whole in one transaction from the faults
//!   under way ([`Filters::set`]): a fault's end removes exactly its rules, and ending them all
//!   leaves an empty table.
//!
//! As in the simulator, filtered packets are dropped, never refused: TCP connections stay open
//! and retransmit, so a partition is noticed by staleness, not by a reset.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::scenario::{Fault, FaultKind};

use super::error::{CommandStep, RealError};

/// Set in the environment of the `qsim` that runs inside the namespace.
pub const INSIDE_NAMESPACE: &str = "QSIM_REAL_NAMESPACE";

/// A node's loopback address for the simulator's `10.B.T.N`: `127.(B+1).T.N` (the address
/// plan of [`crate::scenario::nodes::ip`], moved into loopback space clear of `127.0.0.0/16`,
/// where the clients are).
pub fn loopback(simulated: IpAddr) -> IpAddr {
    match simulated {
        IpAddr::V4(ip) => {
            let [_, block, tier, n] = ip.octets();
            let block = block.checked_add(1).expect("the address plan's blocks stay below 255");
            IpAddr::V4(Ipv4Addr::new(127, block, tier, n))
        }
        IpAddr::V6(_) => simulated,
    }
}

/// The simulator's address for a node's loopback one ([`loopback`]'s inverse); other addresses
/// (the clients', in `127.0.0.0/16`) unchanged.
pub fn simulated(real: IpAddr) -> IpAddr {
    match real {
        IpAddr::V4(ip) if ip.octets()[0] == 127 && ip.octets()[1] >= 1 => {
            let [_, block, tier, n] = ip.octets();
            IpAddr::V4(Ipv4Addr::new(10, block - 1, tier, n))
        }
        _ => real,
    }
}

/// Where this process's network is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Namespace {
    /// A namespace of its own: network faults can be injected.
    Private,
    /// The machine's own: network faults are refused.
    Shared,
}

/// How `qsim real` gets its namespace: `Ok(None)` when this process is already inside one;
/// otherwise the exit status of this same command re-run inside a new one under `unshare --net`
/// (with a user namespace mapping this user to root when not root, so the filters can be set
/// without privilege where the kernel allows it), which dies with this process.
pub fn enter_namespace() -> Result<Option<std::process::ExitStatus>, RealError> {
    if std::env::var_os(INSIDE_NAMESPACE).is_some() {
        return Ok(None);
    }
    let exe = std::env::current_exe().map_err(|source| RealError::CurrentExe { source })?;
    // The run inside is this process's to stop: if this one dies (a signal to it alone, as
    // `timeout` sends), the one inside gets SIGTERM, removes its scratch folder and exits, and
    // its nodes die with it (their own death signal).
    let mut command = Command::new("setpriv");
    command.args(["--pdeathsig", "TERM", "--", "unshare"]);
    if !running_as_root() {
        command.args(["--user", "--map-root-user"]);
    }
    command.args(["--net", "--"]).arg(exe).args(std::env::args_os().skip(1)).env(INSIDE_NAMESPACE, "1");
    command.status().map(Some).map_err(|source| RealError::Namespace { source })
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Inside the namespace: brings its loopback up. `Shared` when this process runs outside one.
pub fn prepare() -> Result<Namespace, RealError> {
    if std::env::var(INSIDE_NAMESPACE).as_deref() != Ok("1") {
        return Ok(Namespace::Shared);
    }
    run("ip", &["link", "set", "lo", "up"], None)?;
    Ok(Namespace::Private)
}

/// What the kernel and the machine offer for network faults, found once at the start.
#[derive(Clone, Debug)]
pub struct Capabilities {
    pub namespace: Namespace,
    /// `nft` can load a table here.
    pub nftables: bool,
    /// The kernel has the `netem` queueing discipline (latency).
    pub netem: bool,
}

impl Capabilities {
    pub fn probe(namespace: Namespace) -> Capabilities {
        if namespace == Namespace::Shared {
            return Capabilities { namespace, nftables: false, netem: false };
        }
        let nftables = Filters::load("table inet qsim_probe {}\ndelete table inet qsim_probe\n").is_ok();
        let netem = run("tc", &["qdisc", "add", "dev", "lo", "root", "netem", "delay", "0ms"], None).is_ok()
            && run("tc", &["qdisc", "del", "dev", "lo", "root"], None).is_ok();
        Capabilities { namespace, nftables, netem }
    }

    /// Why `kind` cannot be injected here, if it cannot.
    pub fn refuses(&self, kind: FaultKind) -> Option<String> {
        use FaultKind::*;
        match kind {
            Kill | Pause | Stop => None,
            Partition | PartitionIn | PartitionOut | Split | ClogLink | Loss => match (self.namespace, self.nftables) {
                (Namespace::Shared, _) => {
                    Some("needs a network namespace of the run's own (`unshare --net` failed or was not run)".into())
                }
                (_, false) => Some("needs nftables (`nft`), which `./qsim real` installs (ci/system-deps.sh)".into()),
                _ => None,
            },
            Latency if self.namespace == Namespace::Shared => {
                Some("needs a network namespace of the run's own (`unshare --net` failed or was not run)".into())
            }
            Latency if !self.netem => {
                Some("needs the kernel's netem queueing discipline (sch_netem), which this kernel lacks".into())
            }
            Latency => None,
            SlowDisk | DiskError | Sigbus => Some("a disk fault: real runs use the machine's disk as it is".into()),
            PowerLoss => Some("power loss has no equivalent a process can inject on its own machine".into()),
            BitRot => Some("bit rot is injected into a stopped node's files by the simulator only".into()),
            Impostor => Some("an impostor is a client of the simulator's own; real runs do not start one".into()),
            Membership => {
                Some("the operator of a membership change is a client of the simulator's own; real runs do not start one yet".into())
            }
            Oom | FaultPoint => Some("recorded by the simulator, never injected".into()),
        }
    }
}

/// The network faults under way, as the rules of one nftables table and a netem discipline.
#[derive(Debug, Default)]
pub struct Filters {
    /// Per fault under way (by its position in the plan), its rules.
    rules: BTreeMap<usize, Vec<String>>,
    /// The latency under way, if any.
    latency: Option<Duration>,
}

impl Filters {
    /// Starts (`on`) or ends fault number `id`; `addresses` gives each node's loopback address.
    pub fn set(
        &mut self,
        id: usize,
        fault: &Fault,
        on: bool,
        addresses: &BTreeMap<String, IpAddr>,
    ) -> Result<(), RealError> {
        if fault.kind == FaultKind::Latency {
            return self.set_latency(if on { fault.latency } else { None });
        }
        if on {
            self.rules.insert(id, rules(fault, addresses));
        } else {
            self.rules.remove(&id);
        }
        let body: String = self.rules.values().flatten().map(|rule| format!("    {rule}\n")).collect();
        Filters::load(&format!(
            "table inet qsim {{}}\ndelete table inet qsim\ntable inet qsim {{\n  chain out {{\n    type filter hook output priority 0; policy accept;\n{body}  }}\n}}\n"
        ))
    }

    /// Ends every fault: the table emptied, the latency gone.
    pub fn clear(&mut self) -> Result<(), RealError> {
        self.rules.clear();
        let latency = self.set_latency(None);
        Filters::load("table inet qsim {}\ndelete table inet qsim\n").and(latency)
    }

    fn set_latency(&mut self, latency: Option<Duration>) -> Result<(), RealError> {
        if self.latency.is_some() {
            run("tc", &["qdisc", "del", "dev", "lo", "root"], None)?;
        }
        self.latency = latency;
        if let Some(latency) = latency {
            // Each packet waits latency..2×latency more, as the simulator's latency fault draws.
            let (mean, jitter) = (latency.as_micros() * 3 / 2, latency.as_micros() / 2);
            let (mean, jitter) = (format!("{mean}us"), format!("{jitter}us"));
            run(
                "tc",
                &["qdisc", "add", "dev", "lo", "root", "netem", "delay", &mean, &jitter, "distribution", "uniform"],
                None,
            )?;
        }
        Ok(())
    }

    fn load(ruleset: &str) -> Result<(), RealError> {
        run("nft", &["-f", "-"], Some(ruleset))
    }
}

/// The drop rules of one network fault (the output hook sees every packet on loopback once).
fn rules(fault: &Fault, addresses: &BTreeMap<String, IpAddr>) -> Vec<String> {
    let at = |name: &str| {
        addresses.get(name).map(|ip| ip.to_string()).unwrap_or_else(|| panic!("a validated node name: {name}"))
    };
    let set = |names: &[String]| format!("{{ {} }}", names.iter().map(|n| at(n)).collect::<Vec<_>>().join(", "));
    let target = fault.target.get_ref();
    match fault.kind {
        FaultKind::Partition => vec![format!("ip saddr {} drop", at(target)), format!("ip daddr {} drop", at(target))],
        FaultKind::PartitionIn => vec![format!("ip daddr {} drop", at(target))],
        FaultKind::PartitionOut => vec![format!("ip saddr {} drop", at(target))],
        FaultKind::Split | FaultKind::ClogLink => {
            let side: Vec<String> =
                if fault.kind == FaultKind::Split { fault.group_with_target() } else { vec![target.clone()] };
            let rest: Vec<String> = match (&fault.peer, fault.kind) {
                (Some(peer), FaultKind::ClogLink) => vec![peer.get_ref().clone()],
                _ => addresses.keys().filter(|n| !side.contains(n)).cloned().collect(),
            };
            if rest.is_empty() {
                return Vec::new();
            }
            vec![
                format!("ip saddr {} ip daddr {} drop", set(&side), set(&rest)),
                format!("ip saddr {} ip daddr {} drop", set(&rest), set(&side)),
            ]
        }
        FaultKind::Loss => {
            let per_mille = (fault.rate.unwrap_or(0.0) * 1000.0).round().clamp(0.0, 1000.0) as u32;
            vec![format!("numgen random mod 1000 < {per_mille} drop")]
        }
        other => unreachable!("{other} is not a packet filter (refused before the run)"),
    }
}

/// Runs `program` with `args`, `input` on its standard input; its standard error in the error.
fn run(program: &str, args: &[&str], input: Option<&str>) -> Result<(), RealError> {
    let failed = |step, source| RealError::CommandIo {
        program: program.to_string(),
        args: args.iter().map(ToString::to_string).collect(),
        step,
        source,
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| failed(CommandStep::Start, e))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes()).map_err(|e| failed(CommandStep::WriteInput, e))?;
    }
    let output = child.wait_with_output().map_err(|e| failed(CommandStep::Wait, e))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(RealError::Command {
            program: program.to_string(),
            args: args.iter().map(ToString::to_string).collect(),
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses_map_both_ways() {
        let sim: IpAddr = "10.0.2.7".parse().unwrap();
        assert_eq!(loopback(sim), "127.1.2.7".parse::<IpAddr>().unwrap());
        let large: IpAddr = "10.39.4.56".parse().unwrap();
        assert_eq!(loopback(large), "127.40.4.56".parse::<IpAddr>().unwrap());
        assert_eq!(simulated(loopback(large)), large);
        assert_eq!(simulated(loopback(sim)), sim);
        assert_eq!(simulated("127.0.0.1".parse().unwrap()), "127.0.0.1".parse::<IpAddr>().unwrap(), "a client's");
    }

    /// Each kind's rules drop what the kind cuts, naming the nodes' addresses; a split cuts the
    /// side from every other node both ways.
    #[test]
    fn rules_cut_what_the_fault_cuts() {
        let addresses: BTreeMap<String, IpAddr> =
            [("root", "127.1.0.1"), ("mid-1", "127.1.1.1"), ("edge-1", "127.1.2.1")]
                .into_iter()
                .map(|(n, ip)| (n.to_string(), ip.parse().unwrap()))
                .collect();
        let fault = |kind, target: &str| Fault::new(Duration::ZERO, kind, target, Duration::from_secs(1));
        assert_eq!(rules(&fault(FaultKind::PartitionIn, "mid-1"), &addresses), ["ip daddr 127.1.1.1 drop"]);
        assert_eq!(rules(&fault(FaultKind::PartitionOut, "mid-1"), &addresses), ["ip saddr 127.1.1.1 drop"]);
        assert_eq!(rules(&fault(FaultKind::Partition, "root"), &addresses).len(), 2);
        let mut split = fault(FaultKind::Split, "mid-1");
        split.group = vec!["edge-1".into()];
        assert_eq!(
            rules(&split, &addresses),
            [
                "ip saddr { 127.1.1.1, 127.1.2.1 } ip daddr { 127.1.0.1 } drop",
                "ip saddr { 127.1.0.1 } ip daddr { 127.1.1.1, 127.1.2.1 } drop"
            ]
        );
        let mut loss = fault(FaultKind::Loss, "network");
        loss.rate = Some(0.15);
        assert_eq!(rules(&loss, &addresses), ["numgen random mod 1000 < 150 drop"]);
    }

    /// A tool that fails is named with its arguments, exit status and standard error; one that
    /// cannot be started, with the step and the system's reason.
    #[test]
    fn a_failed_command_says_what_ran_and_why() {
        let error = run("sh", &["-c", "echo no such table >&2; exit 3"], None).unwrap_err();
        assert!(
            matches!(&error, RealError::Command { program, stderr, .. } if program == "sh" && stderr == "no such table")
        );
        let shown = error.to_string();
        assert!(shown.starts_with("`sh -c echo no such table >&2; exit 3` failed (exit status: 3)"), "{shown}");
        assert!(shown.ends_with(": no such table"), "{shown}");
        let error = run("qsim-no-such-tool", &["-f", "-"], Some("")).unwrap_err();
        assert!(matches!(error, RealError::CommandIo { step: CommandStep::Start, .. }), "{error:?}");
        assert!(error.to_string().starts_with("`qsim-no-such-tool -f -`: starting it: "), "{error}");
    }
}
