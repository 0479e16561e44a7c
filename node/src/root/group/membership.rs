//! An operator's membership change, from the HTTP API to the group's log and back (see
//! `consensus::membership` for the rules the consensus keeps).
//!
//! Guarantees:
//! - **Every request is answered**: with the configuration the change made, once this member
//!   applied it and the group is no longer joint; refused with why, when nothing was proposed;
//!   or "outcome unknown" when this member stopped leading (or paused, or drains) before the
//!   change was made — it may still be, under the next leader.
//! - **Only members the roster names are added**: `[[root.members]]` gives each one's
//!   addresses; a member this one cannot reach would never catch up.
//! - Every configuration this member applies is reported (`NodeEvent::RaftConfiguration`),
//!   published for `/v1/status` and `GET /v1/root/members`, and recorded in the store as the
//!   Raft index it applied.

use tokio::sync::oneshot;

use super::Group;
use crate::consensus::{Configuration, MemberError, MembershipChange, MembershipError, Output};

/// Why a change was not made, or may not have been.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MembershipRefused {
    /// Nothing was proposed.
    #[error("{0}")]
    Refused(#[from] MembershipError),
    /// Nothing was proposed: the member is not in `[[root.members]]`.
    #[error("member {0} is not in [[root.members]]: no member knows its addresses")]
    NotInRoster(u64),
    /// Proposed, and this member stopped waiting before it was made.
    #[error("outcome unknown: {0}; GET /v1/root/members shows the configuration")]
    Unknown(String),
}

/// Where a change's requester waits for its answer.
pub(crate) type MembershipReply = oneshot::Sender<Result<Configuration, MembershipRefused>>;

/// A change asked of this member, and where to answer.
pub(crate) struct MembershipRequest {
    pub change: MembershipChange,
    pub reply: MembershipReply,
}

impl Group {
    /// An operator asks for `request.change`: proposed if this member leads and may, else
    /// refused at once.
    pub(super) fn membership_requested(&mut self, request: MembershipRequest) -> Result<Output, MemberError> {
        let MembershipRequest { change, reply } = request;
        if let Some(&unknown) = change.add.iter().find(|id| !self.roster.contains(id)) {
            let _ = reply.send(Err(MembershipRefused::NotInRoster(unknown)));
            return Ok(Output::default());
        }
        if !self.may_judge() {
            // A leader that has not applied its term's first entry yet may not know the
            // configuration the group is in.
            let leader = if self.member.is_leader() { None } else { self.member.leader() };
            let _ = reply.send(Err(MembershipError::NotLeader { leader }.into()));
            return Ok(Output::default());
        }
        let (proposed, output) = self.member.propose_membership(&change)?;
        match proposed {
            Ok(index) => {
                tracing::info!(node = %self.state.config.name, index, ?change, "membership change proposed");
                if let Some((_, earlier)) = self.membership.replace((index, reply)) {
                    // Raft refuses a second change while one is pending: never reached.
                    let _ = earlier.send(Err(MembershipRefused::Unknown("a later change was proposed".into())));
                }
            }
            Err(refused) => {
                let _ = reply.send(Err(refused.into()));
            }
        }
        Ok(output)
    }

    /// Records a configuration the group committed at `index` and this member applied to its
    /// consensus, and answers the change that made it.
    pub(super) async fn configured(
        &mut self,
        index: u64,
        term: u64,
        configuration: Configuration,
    ) -> Result<(), MemberError> {
        tracing::info!(node = %self.state.config.name, index, voters = ?configuration.voters, outgoing = ?configuration.outgoing, "root group configuration");
        self.state.report(crate::observe::NodeEvent::RaftConfiguration {
            index,
            voters: configuration.voters.clone(),
            outgoing: configuration.outgoing.clone(),
        });
        self.state.set_raft_configuration(configuration.clone());
        self.state.probe(crate::observe::Probe::RaftConfigurationChanged);
        // Nothing for the store but the index, as for a new leader's empty entry.
        self.apply(index, term, &[]).await?;
        if !configuration.is_joint() && self.membership.as_ref().is_some_and(|(at, _)| *at <= index) {
            let (_, reply) = self.membership.take().expect("checked");
            let _ = reply.send(Ok(configuration));
        }
        Ok(())
    }

    /// Stops waiting for the change this member proposed (it stopped leading, paused, or
    /// drains): it may still be made.
    pub(super) fn forget_membership(&mut self, why: &str) {
        if let Some((index, reply)) = self.membership.take() {
            let _ = reply
                .send(Err(MembershipRefused::Unknown(format!("the change proposed at Raft index {index}: {why}"))));
        }
    }

    /// Reports and publishes a configuration this member took up without applying a change:
    /// a snapshot's (see also `disk::restore`, for the one a restart restores).
    pub(super) fn took_up(&self, configuration: Configuration) {
        held(&self.state, configuration);
    }
}

/// Reports (`NodeEvent::RaftConfigurationHeld`) and publishes `configuration`, which the member
/// took up without applying a change: restored at a start or restart, or a snapshot's.
pub(super) fn held(state: &crate::state::NodeState, configuration: Configuration) {
    state.report(crate::observe::NodeEvent::RaftConfigurationHeld {
        index: configuration.index,
        voters: configuration.voters.clone(),
        outgoing: configuration.outgoing.clone(),
    });
    state.set_raft_configuration(configuration);
}
