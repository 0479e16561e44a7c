//! What `GET /v1/status` answers, as one type: the node writes a [`Status`] and every reader —
//! `qsim real`, the census's contract, the tests, an operator's script in Rust — reads the same
//! one, so a field renamed or retyped on one side fails to compile or to parse on the other
//! instead of reading as zero.
//!
//! Readers tolerate fields they do not know (no `deny_unknown_fields`): a newer node may add
//! fields, and a reader one version behind must still read the ones it knows during a rolling
//! upgrade. A field a reader knows that is missing or of another type is an error naming it.

use serde::{Deserialize, Serialize};

use crate::config::Role;
use crate::consensus::{Configuration, Pause, Role as RaftRole};
use crate::entry::{ChainHash, DatabaseId};
use crate::store::StateDigest;

/// A node's account of where it stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub name: String,
    pub role: Role,
    pub database_id: DatabaseId,
    /// The index of the newest entry it applied (0: none).
    pub applied_index: u64,
    /// The oldest log entry it still keeps (what a replica resuming below it cannot stream).
    pub first_retained_index: u64,
    /// The chain hash of the entry at `applied_index`.
    pub chain_hash: ChainHash,
    /// BLAKE3 of its whole key-value state in key order: equal on two nodes iff their states are.
    pub state_digest: StateDigest,
    pub key_count: u64,
    /// How old the newest entry it applied is, in milliseconds (0 on a root).
    pub lag_ms: u64,
    /// A root group member's view of its group; absent on every other node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raft: Option<RaftStatus>,
}

/// A root group member's part of [`Status`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaftStatus {
    /// Its member id.
    pub member: u64,
    pub term: u64,
    pub role: MemberRole,
    /// Why it is not taking part in its group now, if it is not.
    pub paused: Option<Pause>,
    /// The member it knows leads (0: none known).
    pub leader: u64,
    pub commit_index: u64,
    pub applied_index: u64,
    /// The group's configuration as it applied it (absent before its consensus started).
    pub configuration: Option<Configuration>,
}

/// A member's Raft role, or `starting` before its consensus first reported one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberRole {
    Starting,
    Follower,
    PreCandidate,
    Candidate,
    Leader,
}

impl From<RaftRole> for MemberRole {
    fn from(role: RaftRole) -> MemberRole {
        match role {
            RaftRole::Follower => MemberRole::Follower,
            RaftRole::PreCandidate => MemberRole::PreCandidate,
            RaftRole::Candidate => MemberRole::Candidate,
            RaftRole::Leader => MemberRole::Leader,
        }
    }
}

impl Status {
    /// Reads a `/v1/status` body; the error names the field that is missing or malformed.
    pub fn parse(body: &str) -> Result<Status, serde_json::Error> {
        serde_json::from_str(body)
    }

    /// Whether it is a root group member that leads its group.
    pub fn leads(&self) -> bool {
        self.raft.as_ref().is_some_and(|raft| raft.role == MemberRole::Leader)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica() -> Status {
        Status {
            name: "edge-1".into(),
            role: Role::Replica,
            database_id: DatabaseId(7),
            applied_index: 42,
            first_retained_index: 3,
            chain_hash: ChainHash([9; 32]),
            state_digest: StateDigest([5; 32]),
            key_count: 10,
            lag_ms: 120,
            raft: None,
        }
    }

    #[test]
    fn a_status_reads_back_as_written() {
        let mut status = replica();
        assert_eq!(Status::parse(&serde_json::to_string(&status).expect("json")).expect("parses"), status);
        status.raft = Some(RaftStatus {
            member: 2,
            term: 4,
            role: MemberRole::Leader,
            paused: Some(Pause::Healing),
            leader: 2,
            commit_index: 40,
            applied_index: 40,
            configuration: Some(Configuration { index: 1, voters: vec![1, 2, 3], outgoing: vec![] }),
        });
        let text = serde_json::to_string(&status).expect("json");
        assert!(text.contains(r#""role":"leader""#) && text.contains(r#""paused":"healing""#), "{text}");
        assert_eq!(Status::parse(&text).expect("parses"), status);
        assert!(status.leads());
    }

    #[test]
    fn unknown_fields_are_read_past_and_a_wrong_field_is_named() {
        let mut value = serde_json::to_value(replica()).expect("json");
        value["added_by_a_newer_node"] = 1.into();
        assert_eq!(Status::parse(&value.to_string()).expect("parses"), replica());
        value["applied_index"] = "many".into();
        let error = Status::parse(&value.to_string()).expect_err("a string index");
        assert!(error.to_string().contains("invalid type: string \"many\", expected u64"), "{error}");
        value.as_object_mut().expect("object").remove("applied_index");
        let error = Status::parse(&value.to_string()).expect_err("no index");
        assert!(error.to_string().contains("missing field `applied_index`"), "{error}");
    }
}
