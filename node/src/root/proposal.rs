//! A root group's proposals: what a leader puts in a Raft entry, and its bytes.
//!
//! Guarantees: [`Proposal::decode`] takes back exactly what [`Proposal::encode`] wrote, and
//! refuses anything else (a truncated entry, trailing bytes, an unknown kind or operation, an
//! operation over the node's limits) as damage rather than guessing.

use super::quota::Ledger;
use crate::consensus;
use crate::entry::Op;
use crate::wire::{LeReader, Truncated};

/// What a leader proposes: a batch of writes, or a heartbeat. Its bytes are the Raft entry's
/// data: a kind byte (1 writes, 2 heartbeat), the timestamp (u64 LE); for writes, the count
/// (u32 LE) and each operation — 1 set or 2 delete, the key, and for a set the value, each a
/// u32 LE length and its bytes — then the leader's quota [`Ledger`] after the writes.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Proposal {
    /// `quotas`: what the producers' buckets held once these writes took their tokens.
    Writes {
        timestamp_ms: u64,
        ops: Vec<Op>,
        quotas: Ledger,
    },
    Heartbeat {
        timestamp_ms: u64,
    },
}

impl Proposal {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Proposal::Writes { timestamp_ms, ops, quotas } => {
                out.push(1);
                out.extend_from_slice(&timestamp_ms.to_le_bytes());
                out.extend_from_slice(&u32::try_from(ops.len()).expect("a batch's ops fit a u32").to_le_bytes());
                for op in ops {
                    let bytes = |out: &mut Vec<u8>, b: &[u8]| {
                        out.extend_from_slice(&u32::try_from(b.len()).expect("limits keep it small").to_le_bytes());
                        out.extend_from_slice(b);
                    };
                    match op {
                        Op::Set { key, value } => {
                            out.push(1);
                            bytes(&mut out, key);
                            bytes(&mut out, value);
                        }
                        Op::Delete { key } => {
                            out.push(2);
                            bytes(&mut out, key);
                        }
                    }
                }
                quotas.encode(&mut out);
            }
            Proposal::Heartbeat { timestamp_ms } => {
                out.push(2);
                out.extend_from_slice(&timestamp_ms.to_le_bytes());
            }
        }
        out
    }

    /// A committed entry's proposal. Its bytes passed through a majority's disks: one that
    /// does not decode is damage, and stops the member rather than being skipped.
    pub(super) fn decode(bytes: &[u8]) -> Result<Proposal, consensus::MemberError> {
        let damaged = |what: &str| consensus::MemberError::Damaged(format!("a committed proposal: {what}"));
        let short = |short: Truncated| damaged(&short.to_string());
        let mut r = LeReader::new(bytes);
        let kind = r.u8("kind").map_err(short)?;
        let timestamp_ms = r.u64("timestamp").map_err(short)?;
        let proposal = match kind {
            1 => {
                let count = r.u32("count").map_err(short)? as usize;
                let mut ops = Vec::with_capacity(count.min(crate::root::WRITE_REQUESTS_PER_BATCH_MAX));
                for _ in 0..count {
                    let tag = r.u8("operation").map_err(short)?;
                    let mut field = |what: &str| r.u32_prefixed(what).map(<[u8]>::to_vec).map_err(short);
                    let op = match tag {
                        1 => Op::Set { key: field("key")?, value: field("value")? },
                        2 => Op::Delete { key: field("key")? },
                        other => return Err(damaged(&format!("operation tag {other}"))),
                    };
                    op.validate().map_err(|e| damaged(&e.to_string()))?;
                    ops.push(op);
                }
                let (quotas, tail) = Ledger::decode(r.rest()).map_err(|e| damaged(&e.to_string()))?;
                r = LeReader::new(tail);
                Proposal::Writes { timestamp_ms, ops, quotas }
            }
            2 => Proposal::Heartbeat { timestamp_ms },
            other => return Err(damaged(&format!("kind {other}"))),
        };
        if !r.is_empty() {
            return Err(damaged(&format!("{} bytes after its end", r.left())));
        }
        Ok(proposal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proposal_round_trips_and_damage_is_refused() {
        let writes = Proposal::Writes {
            timestamp_ms: 42,
            ops: vec![Op::Set { key: b"k".to_vec(), value: b"v".to_vec() }, Op::Delete { key: b"d".to_vec() }],
            quotas: Ledger { as_of_ms: 42, tokens: vec![("producer".into(), 3.5)] },
        };
        for proposal in [writes, Proposal::Heartbeat { timestamp_ms: 7 }] {
            let bytes = proposal.encode();
            assert_eq!(Proposal::decode(&bytes).unwrap(), proposal);
            for cut in 0..bytes.len() {
                assert!(Proposal::decode(&bytes[..cut]).is_err(), "a proposal cut at {cut} decoded");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(Proposal::decode(&longer).is_err(), "trailing bytes are refused");
        }
        assert!(Proposal::decode(&[3, 0, 0, 0, 0, 0, 0, 0, 0]).is_err(), "an unknown kind is refused");
    }
}
