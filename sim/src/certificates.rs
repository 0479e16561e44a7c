//! The run's certificates: a CA and one certificate per node, issued from the seed, written
//! into the scratch folder for the nodes' `[tls]` before the simulation starts (or, for a real
//! run, before its processes start, for the nodes' loopback addresses).
//!
//! Guarantees: the files are a function of the seed and the plan alone — Ed25519 keys whose
//! private seeds are derived from the run's seed with BLAKE3, Ed25519 signatures (deterministic),
//! fixed validity (2000 to 2100, so any simulated date is inside it), serial numbers from the
//! keys — so a run's handshakes, and with them its trace, replay from its seed. They are made on
//! the caller's thread, outside the simulation, as the scratch folder is.

use qs_node::tls::issue::{IssueError, Issued, KeySource, Validity, new_ca, node_certificate};

use std::net::IpAddr;

use crate::plan::Plan;

/// The validity of every certificate the simulator issues: wide enough for any simulated
/// clock (madsim's starts in 2022 and a run lasts days at most).
fn validity() -> Validity {
    Validity::years(2000, 2100)
}

/// The Ed25519 seed of `who`'s key in the run of `seed`.
fn key(seed: u64, who: &str) -> KeySource {
    let mut material = seed.to_le_bytes().to_vec();
    material.extend_from_slice(who.as_bytes());
    KeySource::Ed25519Seed(blake3::derive_key("qsim 2026-11 simulated node TLS key", &material))
}

/// The CA and each node's certificate, for the nodes whose configuration has `[tls]`.
pub fn issue(plan: &Plan) -> Result<Vec<(String, Issued)>, IssueError> {
    issue_at(plan, |ip| ip)
}

/// [`issue`], each node certified for `address(its planned address)`.
fn issue_at(plan: &Plan, address: impl Fn(IpAddr) -> IpAddr) -> Result<Vec<(String, Issued)>, IssueError> {
    let nodes: Vec<_> = plan.nodes.iter().filter(|p| p.config.tls.is_some()).collect();
    if nodes.is_empty() {
        return Ok(Vec::new());
    }
    let ca = new_ca("qsim run CA", validity(), key(plan.seed, "ca"))?;
    let mut issued = Vec::with_capacity(nodes.len() + 1);
    for node in nodes {
        let name = &node.config.name;
        let certificate = node_certificate(&ca, name, &[address(node.ip)], &[], validity(), key(plan.seed, name))?;
        issued.push((name.clone(), certificate));
    }
    if plan.draws.faults.iter().any(|f| f.kind == crate::scenario::FaultKind::Impostor) {
        issued.extend(impostor_credentials(plan, &ca, &address)?);
    }
    issued.push(("ca".to_string(), ca));
    Ok(issued)
}

/// File stems of an impostor's certificates that no node holds (`faults::impostor`).
pub const IMPOSTOR_FOREIGN_CA: &str = "impostor-foreign-ca";
pub const IMPOSTOR_EXPIRED: &str = "impostor-expired";

/// What an `impostor` fault presents besides a node's stolen certificate: one from a CA the
/// nodes do not trust, and one the run's CA signed but that expired in 2001 — each naming
/// every root member's address, the strongest claim either could make.
fn impostor_credentials(
    plan: &Plan,
    ca: &Issued,
    address: &impl Fn(IpAddr) -> IpAddr,
) -> Result<Vec<(String, Issued)>, IssueError> {
    let members: Vec<IpAddr> = plan
        .nodes
        .iter()
        .filter(|p| p.config.root.as_ref().is_some_and(|r| r.member_id.is_some()))
        .map(|p| address(p.ip))
        .collect();
    let foreign = new_ca("an impostor's CA", validity(), key(plan.seed, "impostor ca"))?;
    let forged = node_certificate(&foreign, "impostor", &members, &[], validity(), key(plan.seed, "impostor"))?;
    let expired =
        node_certificate(ca, "impostor", &members, &[], Validity::years(2000, 2001), key(plan.seed, "impostor"))?;
    Ok(vec![(IMPOSTOR_FOREIGN_CA.to_string(), forged), (IMPOSTOR_EXPIRED.to_string(), expired)])
}

/// Writes [`issue`]'s certificates into the scratch folder's `tls` folder.
pub fn write(plan: &Plan) -> Result<(), String> {
    write_at(plan, |ip| ip)
}

/// [`write()`], each node certified for `address(its planned address)`: a real run's nodes listen
/// on loopback addresses (`real::network::loopback`).
pub fn write_at(plan: &Plan, address: impl Fn(IpAddr) -> IpAddr) -> Result<(), String> {
    let dir = crate::scenario::nodes::tls_dir(&plan.scratch);
    for (stem, issued) in issue_at(plan, address).map_err(|e| format!("issuing the run's certificates: {e}"))? {
        issued.write(&dir, &stem).map_err(|e| e.to_string())?;
    }
    Ok(())
}
