//! A member that stops taking part for a while — to catch its store up to a Raft snapshot, to
//! replace a damaged or forked store with a peer's copy, or to restart its consensus from its
//! store after a failure — and comes back.
//!
//! Guarantees:
//! - **A failure never ends the member** before the node drains: it pauses and restarts
//!   ([`Group::carry_on`]), its store first replaced by a peer's copy when the store or its Raft
//!   state cannot be gone on from.
//! - **A paused member says so and takes no writes**: its view carries the [`Pause`] (writes are
//!   answered `MemberPaused`, "not applied"; its replicas hear "recovering"), and every batch
//!   that reaches it meanwhile is refused at once rather than held behind a copy that may take
//!   minutes ([`refusing_writes`]).
//! - **What it proposed is answered "outcome unknown"**, and while it may still lead it judges
//!   no write until that is applied (the fence, see [`Group::forget_proposals`]).

use tokio::sync::{mpsc, watch};

use super::super::{WriteError, WriteRequest};
use super::catch_up::{self, Target};
use super::{Group, RECOVER_AFTER, restore};
use crate::connections::{Lifecycle, reached};
use crate::consensus::{self, Pause};

impl Group {
    /// After a step: goes on from whatever failed. False when the node drains first.
    pub(super) async fn carry_on(
        &mut self,
        handled: Result<(), consensus::MemberError>,
        lifecycle: &mut watch::Receiver<Lifecycle>,
    ) -> bool {
        let name = &self.state.config.name;
        match handled {
            Ok(()) => return true,
            // A message raft-rs refuses (from a stale or foreign term, say) is dropped.
            Err(consensus::MemberError::Raft(e)) => {
                tracing::debug!(error = %e, "a Raft message was refused");
                return true;
            }
            // The disk failed a persist or an apply: what landed is unknown until the store is
            // reopened. Start the member again from what the store holds, as a restart would;
            // nothing it had not persisted was vouched for.
            Err(e @ consensus::MemberError::Disk { .. }) => {
                tracing::error!(node = %name, error = %e, "the root group member's disk failed: it restarts from its store");
            }
            // Its Raft state cannot be read, or its store forked from the group's log: neither
            // is cured by a restart. Its store is replaced by a peer's copy (made this member's
            // own from the state it holds in memory) before it restarts.
            Err(consensus::MemberError::Damaged(e)) => {
                tracing::error!(node = %name, error = %e, "the root group member cannot go on from its store: it copies a peer's, then restarts");
                self.state.forked();
            }
        }
        if self.state.config.planted().raft_stop_consensus_on_failure {
            // PLANTED BUG (legacy `raft_stop_consensus_on_failure`, the simulator's bug zoo
            // only): the consensus ends here, its view left as it was — the role it claims.
            tracing::error!(node = %name, "PLANTED BUG: the root group member's consensus stops for good");
            return false;
        }
        self.recover(lifecycle).await
    }

    /// After a failure: reopens the store (healed first when damaged or forked) and restores the
    /// member from it, again every [`RECOVER_AFTER`] until that works, paused meanwhile (see
    /// [`Group::pause`]: what was in flight is answered "outcome unknown", waiting batches and
    /// those that arrive "paused, not applied"). False when the node drains first.
    pub(super) async fn recover(&mut self, lifecycle: &mut watch::Receiver<Lifecycle>) -> bool {
        self.pause(Pause::Restarting);
        loop {
            let sleep = tokio::time::sleep(RECOVER_AFTER);
            let waited = tokio::select! {
                biased;
                () = reached(lifecycle, Lifecycle::Draining) => false,
                () = refusing_writes(&mut self.batches, Pause::Restarting, sleep, self.state.config.planted()) => true,
            };
            if !waited {
                return false;
            }
            // A damaged store stays damaged however often it is reopened: copy a peer's, made
            // this member's own from the state it holds in memory, then restart from it.
            if self.state.is_damaged() {
                match self.heal(lifecycle).await {
                    Ok(true) => {}
                    Ok(false) => return false,
                    Err(e) => {
                        tracing::warn!(node = %self.state.config.name, error = %e, "the root group member cannot heal yet");
                        continue;
                    }
                }
            }
            let settled = self.state.with_store(|store| {
                let settled = self.state.settle(store);
                if settled.as_ref().is_err_and(crate::store::StoreError::is_damage) {
                    self.state.found_damage();
                }
                settled
            });
            let restored = settled
                .map_err(|e| e.to_string())
                .and_then(|()| restore(&self.state, self.me, &self.voters).map_err(|e| e.to_string()));
            match restored {
                Ok((member, applied)) => {
                    self.member = member;
                    self.applied = applied;
                    // Restarted as a follower: it leads again only in a later term, whose first
                    // entry follows everything proposed before.
                    self.fence = 0;
                    tracing::info!(node = %self.state.config.name, applied, "the root group member restarted from its store");
                    match self.catch_up_to_snapshot(None, lifecycle).await {
                        Ok(caught_up) => return caught_up,
                        Err(e) => {
                            tracing::warn!(node = %self.state.config.name, error = %e, "the root group member cannot restart yet")
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(node = %self.state.config.name, error = %e, "the root group member cannot restart yet")
                }
            }
        }
    }

    /// Brings the store to `target` (a snapshot just installed), or at start to the snapshot
    /// the member's log begins after when the store is behind it. False when the node drains
    /// first.
    pub(super) async fn catch_up_to_snapshot(
        &mut self,
        target: Option<Target>,
        lifecycle: &mut watch::Receiver<Lifecycle>,
    ) -> Result<bool, consensus::MemberError> {
        let target = target.or_else(|| {
            let (raft_index, point) = self.member.snapshot()?;
            (raft_index > self.applied).then_some(Target { raft_index, point })
        });
        let Some(target) = target else { return Ok(true) };
        // A follower's proposals were never its own; nothing it leads waits on a snapshot.
        self.pause(Pause::CatchingUp);
        let own = self.member.own_state();
        let caught_up = catch_up::catch_up(&self.state, &mut self.peers, target, &own, lifecycle);
        match refusing_writes(&mut self.batches, Pause::CatchingUp, caught_up, self.state.config.planted()).await? {
            Some(applied) => {
                self.applied = applied;
                self.state.metrics.raft_applied_index.set(applied as i64);
                // The proposals up to the snapshot, and the quota ledgers they carried, were
                // never applied here: the snapshot's ledger (and a copied store's) stands for
                // them, or a member that comes to lead next could grant a second burst.
                // PLANTED BUG (legacy `raft_catch_up_skips_quota_ledger`): neither is adopted.
                if !self.state.config.planted().raft_catch_up_skips_quota_ledger {
                    super::super::restore_quotas(&self.state);
                    if let Some(ledger) = self.member.snapshot_quotas() {
                        super::super::adopt_quota_ledger(&self.state, &ledger, "the Raft snapshot's");
                    }
                }
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Replaces the damaged store with a peer's copy (see `catch_up::heal`). Its proposals in
    /// flight are answered "outcome unknown" (the member stops answering while it copies: its
    /// peers elect another leader). False when the node drains first.
    pub(super) async fn heal(
        &mut self,
        lifecycle: &mut watch::Receiver<Lifecycle>,
    ) -> Result<bool, consensus::MemberError> {
        self.pause(Pause::Healing);
        let own = self.member.own_state();
        let peers = self.peers.in_order();
        let healed = catch_up::heal(&self.state, &peers, &own, lifecycle);
        match refusing_writes(&mut self.batches, Pause::Healing, healed, self.state.config.planted()).await? {
            Some(applied) => {
                // A copy past this member's applied index holds the entries up to it: they are
                // skipped as they come out committed.
                self.applied = self.applied.max(applied);
                self.state.metrics.raft_applied_index.set(self.applied as i64);
                // The copy's ledger: see catch_up_to_snapshot (and its planted bug).
                if !self.state.config.planted().raft_catch_up_skips_quota_ledger {
                    super::super::restore_quotas(&self.state);
                }
                Ok(true)
            }
            None => Ok(false),
        }
    }

    pub(super) fn publish_view_paused(&mut self, paused: Option<Pause>) {
        let (term, role, leader) = self.member.role();
        let serving = paused.is_none() && self.may_judge();
        let view = crate::state::RaftView { term, role, leader, serving, paused };
        if self.state.raft_view() != Some(view) {
            self.state.set_raft_view(view);
        }
    }

    /// Stops taking part for a while (`why`): says so (the HTTP API refuses writes, "not
    /// applied"; replicas hear "recovering"), answers what it proposed "outcome unknown" and the
    /// batches it holds "not applied". The next step it takes publishes its view again.
    pub(super) fn pause(&mut self, why: Pause) {
        if !self.state.config.planted().raft_serve_while_paused {
            self.publish_view_paused(Some(why));
        } // else PLANTED BUG (legacy `raft_serve_while_paused`): the view it had stands.
        self.forget_proposals();
        self.refuse_reads(&WriteError::MemberPaused(why));
        self.forget_membership(why.describe());
        for batch in self.waiting.drain(..) {
            refuse(batch, why);
        }
    }
}

/// Runs `work` while answering every batch the committer sends meanwhile "paused, not
/// applied" (`why`): writes that reached the member before it published its pause never wait on
/// a heal or a catch-up that may take minutes.
async fn refusing_writes<F: std::future::Future>(
    batches: &mut mpsc::Receiver<Vec<WriteRequest>>,
    why: Pause,
    work: F,
    planted: &crate::config::LegacyConfig,
) -> F::Output {
    if planted.raft_serve_while_paused {
        // PLANTED BUG (legacy `raft_serve_while_paused`): the batches wait until it is back.
        return work.await;
    }
    tokio::pin!(work);
    loop {
        tokio::select! {
            biased;
            out = &mut work => return out,
            Some(batch) = batches.recv() => refuse(batch, why),
        }
    }
}

fn refuse(batch: Vec<WriteRequest>, why: Pause) {
    for request in batch {
        let _ = request.reply.send(Err(WriteError::MemberPaused(why)));
    }
}
