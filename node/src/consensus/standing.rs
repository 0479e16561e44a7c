//! Whether a root group member may grant votes: [`Standing`], the rule that keeps a member
//! whose disk was replaced from electing two leaders in one term or a leader that lacks what it
//! acknowledged before.

use std::collections::BTreeMap;

/// Whether a member may grant votes. A member that starts with nothing — its disk replaced, its
/// damaged store set aside, or the group's first start — forgot every vote it cast and every
/// entry it acknowledged: a vote now could be its second in a term (two leaders in one term),
/// or could elect a candidate lacking entries committed with its lost acknowledgement (a lost
/// committed write). So:
///
/// - Once it has heard a leader, it grants no vote until it holds what the group committed:
///   until its log commits as far as the first leader it heard had committed (raised if a
///   leader of a later term speaks first), or it is elected itself.
/// - Before that it grants a candidate only once it has seen every other member's log (their
///   vote requests carry where their logs end) and the candidate's is at least as up to date as
///   each of them. Whatever committed entries survive its lost disk are in the most up-to-date
///   log of the others, so such a candidate holds them; and a second vote in a term where it
///   voted before its disk was replaced could only go to a candidate whose log is behind the
///   log that term's winner wrote. A group's first start elects this way (every log empty),
///   an election timeout or two later than a group of kept disks.
///
/// swarm-raft seed 7095: a member whose disk was replaced abstained for a few election
/// timeouts, then voted a second time in term 2 for a member lacking the entries it had
/// acknowledged — two leaders in term 2 and a forked chain. Seed 17: two members' disks
/// replaced one after the other elected each other with empty logs while the third held every
/// committed entry, when a fresh member still granted any empty-log candidate.
///
/// Not a proof against every history: a leader it hears may itself be stale (deposed where
/// this member cannot hear the new one), and then "what the group committed" is judged by an
/// old commit index. The sound way to replace a member's disk is a membership change (a new
/// member id), which this group does not make yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Standing {
    /// It kept its Raft state (or never had a disk to lose): it votes as Raft says.
    Voting,
    /// It started with nothing and has heard no leader; `seen`: per other member, the furthest
    /// (last term, last index) its log was seen to end at.
    Fresh { seen: BTreeMap<u64, (u64, u64)> },
    /// It started with nothing and heard a leader of `term` that had committed `commit`.
    CatchingUp { term: u64, commit: u64 },
}

impl Standing {
    pub(super) fn fresh() -> Standing {
        Standing::Fresh { seen: BTreeMap::new() }
    }

    /// Member `from`'s log ends at `last_index` in `last_term` (from its vote request).
    pub(super) fn saw(&mut self, from: u64, last_term: u64, last_index: u64) {
        if let Standing::Fresh { seen } = self {
            let furthest = seen.entry(from).or_insert((last_term, last_index));
            *furthest = (*furthest).max((last_term, last_index));
        }
    }

    /// Whether a candidate whose log ends at `last_index` in `last_term` may have its vote;
    /// `others` are the group's members but this one.
    pub(super) fn may_vote_for(&self, last_index: u64, last_term: u64, others: &[u64]) -> bool {
        match self {
            Standing::Voting => true,
            Standing::Fresh { seen } => {
                others.iter().all(|m| seen.contains_key(m))
                    && seen.values().all(|&furthest| (last_term, last_index) >= furthest)
            }
            Standing::CatchingUp { .. } => false,
        }
    }

    /// A leader of `term` sent entries or a snapshot, having committed `commit`.
    pub(super) fn heard_leader(&mut self, term: u64, commit: u64) {
        match *self {
            Standing::Voting => {}
            Standing::Fresh { .. } => *self = Standing::CatchingUp { term, commit },
            Standing::CatchingUp { term: known, .. } if term > known => {
                *self = Standing::CatchingUp { term, commit };
            }
            Standing::CatchingUp { .. } => {}
        }
    }

    /// After a step: it votes again once it leads (a majority chose its log) or its log
    /// committed what the leader it heard had.
    pub(super) fn update(&mut self, leads: bool, committed: u64) {
        let caught_up = match *self {
            Standing::Voting => return,
            Standing::Fresh { .. } => leads,
            Standing::CatchingUp { commit, .. } => leads || committed >= commit,
        };
        if caught_up {
            tracing::info!(committed, was = ?*self, "a member that started with nothing holds what the group committed: it votes again");
            *self = Standing::Voting;
        }
    }
}
