//! The consensus core driven by hand: elections, commits, snapshots, restarts and the votes
//! of a member that started with nothing, over members that exchange messages in a loop.

use std::sync::{Arc, Mutex};

use super::*;

/// Delivers every message until the group is quiet; a message to a member not in `members`
/// (cut off) is lost.
pub(super) fn settle(members: &mut [Member], mut outbox: Vec<Message>, events: &mut Vec<(u64, MemberEvent)>) {
    while let Some(message) = outbox.pop() {
        let Some(to) = members.iter_mut().find(|m| m.id() == message.to) else { continue };
        let id = to.id();
        let out = to.receive(message).unwrap();
        outbox.extend(out.messages);
        events.extend(out.events.into_iter().map(|e| (id, e)));
    }
}

#[test]
fn three_members_elect_one_leader_and_commit_in_the_same_order() {
    let voters = [1, 2, 3];
    let mut members: Vec<Member> = voters.iter().map(|&id| Member::new(id, &voters).unwrap()).collect();
    let mut events = Vec::new();
    // Tick member 1 alone until it campaigns; deliver everything.
    let mut outbox = Vec::new();
    for _ in 0..2 * ELECTION_TICKS {
        let out = members[0].tick().unwrap();
        outbox.extend(out.messages);
        events.extend(out.events.into_iter().map(|e| (1, e)));
    }
    settle(&mut members, outbox, &mut events);
    assert!(members[0].is_leader(), "member 1 campaigned first and should lead: {events:?}");
    assert!(!members[1].is_leader() && !members[2].is_leader());
    for n in 0..5u8 {
        let (_, out) = members[0].propose(vec![n]).unwrap();
        settle(&mut members, out.messages, &mut events);
    }
    // A follower refuses a proposal, naming the leader.
    assert!(matches!(members[1].propose(vec![9]), Err(ProposeError::NotLeader { leader: Some(1) })));
    // Heartbeats carry the commit index to the followers.
    let out = members[0].tick().unwrap();
    settle(&mut members, out.messages, &mut events);
    for id in voters {
        let applied: Vec<Vec<u8>> = events
            .iter()
            .filter(|(member, _)| *member == id)
            .filter_map(|(_, e)| match e {
                MemberEvent::Committed { data, .. } if !data.is_empty() => Some(data.clone()),
                MemberEvent::Committed { .. }
                | MemberEvent::Role { .. }
                | MemberEvent::Snapshot { .. }
                | MemberEvent::ReadConfirmed { .. }
                | MemberEvent::Configured { .. } => None,
            })
            .collect();
        assert_eq!(applied, (0..5u8).map(|n| vec![n]).collect::<Vec<_>>(), "member {id} applied otherwise");
    }
}

/// A disk that keeps what it is given, for restarts in tests.
#[derive(Clone, Default)]
pub(super) struct Kept(pub(super) Arc<Mutex<Restored>>);

impl RaftDisk for Kept {
    fn persist(&mut self, write: RaftWrite) -> Result<(), crate::store::StoreError> {
        let mut kept = self.0.lock().unwrap();
        if let Some(snapshot) = write.snapshot {
            kept.snapshot = Some(snapshot);
            kept.entries.clear();
        }
        if let Some(&(first, _)) = write.entries.first() {
            kept.entries.retain(|(index, _)| *index < first);
        }
        kept.entries.extend(write.entries);
        if write.hard_state.is_some() {
            kept.hard_state = write.hard_state;
        }
        Ok(())
    }

    fn compact(&mut self, snapshot: Vec<u8>, first_kept: u64) -> Result<(), crate::store::StoreError> {
        let mut kept = self.0.lock().unwrap();
        kept.snapshot = Some(snapshot);
        kept.entries.retain(|(index, _)| *index >= first_kept);
        Ok(())
    }
}

pub(super) fn point(n: u64) -> StorePoint {
    StorePoint { log_index: n * 10, hash: ChainHash([n as u8; 32]) }
}

/// A disk that fails every persist once `failing` is set (bit rot found mid-write).
#[derive(Clone, Default)]
struct Failing(Arc<std::sync::atomic::AtomicBool>);

impl RaftDisk for Failing {
    fn persist(&mut self, _: RaftWrite) -> Result<(), crate::store::StoreError> {
        match self.0.load(std::sync::atomic::Ordering::Relaxed) {
            true => Err(crate::store::StoreError::Checksum { key: "a Raft entry".into() }),
            false => Ok(()),
        }
    }

    fn compact(&mut self, _: Vec<u8>, _: u64) -> Result<(), crate::store::StoreError> {
        Ok(())
    }
}

/// Ticks `members[at]` alone for long enough that it campaigns (a leader among them steps
/// down first, hearing nobody: check-quorum) and delivers everything among `members`.
fn campaign(members: &mut [Member], at: usize, events: &mut Vec<(u64, MemberEvent)>) {
    let mut outbox = Vec::new();
    for _ in 0..4 * ELECTION_TICKS {
        outbox.extend(members[at].tick().unwrap().messages);
    }
    settle(members, outbox, events);
}

/// swarm-raft seed 7095's story, driven: member 1 leads and commits with member 2 while 3
/// is cut off; member 2's disk is replaced; member 1 is lost. Member 3 — lacking the
/// committed entries — must not win with the vote of member 2's new, empty self (it did:
/// after abstaining a few election timeouts, it voted again in the term it had voted in,
/// and the group had two leaders in one term and a forked log). Once member 2 heard a
/// leader and holds what it committed, it votes as Raft says again.
#[test]
fn a_member_whose_disk_was_replaced_votes_only_once_it_holds_what_was_committed() {
    let voters = [1, 2, 3];
    let fresh = |id: u64| Member::restore(id, &voters, Restored::default(), Box::new(Kept::default())).unwrap();
    let mut events = Vec::new();
    let mut members: Vec<Member> = voters.iter().map(|&id| Member::new(id, &voters).unwrap()).collect();
    campaign(&mut members, 0, &mut events);
    assert!(members[0].is_leader());
    let three = members.pop().expect("member 3");
    for n in 0..5u8 {
        let (_, out) = members[0].propose(vec![n]).unwrap();
        settle(&mut members, out.messages, &mut events); // member 3 cut off: 1 and 2 commit
    }
    let committed = members[0].raw.raft.raft_log.committed;
    assert!(three.raw.raft.raft_log.last_index() < committed, "member 3 missed the commits");
    // Member 2's disk is replaced; member 1 is lost.
    let one = members.remove(0);
    members[0] = fresh(2);
    members.push(three);
    for _ in 0..5 {
        for _ in 0..4 * ELECTION_TICKS {
            members[0].tick().unwrap(); // the new member 2 has long waited: no timing helps 3
        }
        campaign(&mut members, 1, &mut events);
        assert!(!members[1].is_leader(), "member 3 won without the committed entries: {events:?}");
    }
    // Member 1 is back: it leads again with member 3's vote, and its appends bring
    // member 2 up to what it committed.
    members.insert(0, one);
    campaign(&mut members, 0, &mut events);
    assert!(members[0].is_leader());
    let (_, out) = members[0].propose(vec![9]).unwrap();
    settle(&mut members, out.messages, &mut events);
    assert_eq!(members[1].standing, Standing::Voting, "member 2 holds what was committed");
    // Member 1 is lost again: member 3, caught up as well, now wins with member 2's vote
    // (member 2's lease on member 1 run out first: what it sends meanwhile is lost).
    members.remove(0);
    for _ in 0..2 * ELECTION_TICKS {
        members[0].tick().unwrap();
    }
    campaign(&mut members, 1, &mut events);
    assert!(members[1].is_leader(), "member 2 votes again: {events:?}");
}

/// Every member starts with nothing (a group's first start): they elect once each has seen
/// the others' (empty) logs.
#[test]
fn a_groups_first_start_elects_with_every_member_fresh() {
    let voters = [1, 2, 3];
    let mut members: Vec<Member> = voters
        .iter()
        .map(|&id| Member::restore(id, &voters, Restored::default(), Box::new(Kept::default())).unwrap())
        .collect();
    let mut events = Vec::new();
    for round in 0.. {
        assert!(round < 10, "no leader after ten rounds: {events:?}");
        let mut outbox = Vec::new();
        for _ in 0..ELECTION_TICKS {
            for member in &mut members {
                outbox.extend(member.tick().unwrap().messages);
            }
        }
        settle(&mut members, outbox, &mut events);
        if members.iter().any(Member::is_leader) {
            break;
        }
    }
    assert_eq!(members.iter().filter(|m| m.is_leader()).count(), 1);
}

/// swarm-raft seed 17's story: members 1 and 3 had their disks replaced one after the other;
/// member 2 holds every committed entry. The two fresh members must not elect each other
/// with empty logs; member 2 is elected with a fresh member's vote.
#[test]
fn two_fresh_members_elect_the_one_that_kept_its_log() {
    let voters = [1, 2, 3];
    let fresh = |id: u64| Member::restore(id, &voters, Restored::default(), Box::new(Kept::default())).unwrap();
    let mut events = Vec::new();
    let mut members: Vec<Member> = voters.iter().map(|&id| Member::new(id, &voters).unwrap()).collect();
    campaign(&mut members, 1, &mut events);
    assert!(members[1].is_leader());
    for n in 0..5u8 {
        let (_, out) = members[1].propose(vec![n]).unwrap();
        settle(&mut members, out.messages, &mut events);
    }
    members[0] = fresh(1);
    members[2] = fresh(3);
    // Leases run out on every side (what is sent meanwhile is lost); then member 3 campaigns
    // with its empty log, and member 2 with the log.
    let lapse = |members: &mut [Member]| {
        for member in members.iter_mut() {
            for _ in 0..2 * ELECTION_TICKS {
                member.tick().unwrap();
            }
        }
    };
    for _ in 0..3 {
        lapse(&mut members);
        campaign(&mut members, 2, &mut events);
        assert!(!members[0].is_leader() && !members[2].is_leader(), "fresh members elected each other: {events:?}");
        lapse(&mut members);
        campaign(&mut members, 1, &mut events);
        if members[1].is_leader() {
            break;
        }
    }
    assert!(members[1].is_leader(), "member 2 holds the log: {events:?}");
    let (_, out) = members[1].propose(vec![9]).unwrap();
    settle(&mut members, out.messages, &mut events);
    assert!(members.iter().all(|m| m.standing == Standing::Voting), "both caught up with member 2");
}

/// A persist that failed leaves the proposal in raft-rs's log, unstable, and not in the
/// member's storage: the member's own state (what a heal writes over a peer's copy) is what
/// its storage holds, and reading it must not ask the storage for the unstable entry — it
/// did, and raft-rs panicked ("index out of bound").
#[test]
fn own_state_after_a_failed_persist_holds_what_the_storage_holds() {
    let disk = Failing::default();
    let mut member = Member::restore(1, &[1], Restored::default(), Box::new(disk.clone())).unwrap();
    for _ in 0..2 * ELECTION_TICKS {
        member.tick().unwrap();
    }
    assert!(member.is_leader(), "a group of one elects itself");
    let (stored, _) = member.propose(vec![1]).unwrap();
    disk.0.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(member.propose(vec![2]).is_err(), "the persist failed");
    let own = member.own_state();
    assert_eq!(own.entries.last().map(|(index, _)| *index), Some(stored), "the unstable entry left out");
}

/// The member behind the leader's compacted log is sent the leader's snapshot: it reports
/// it before any later commit, and after a restart from its disk its log starts after it.
#[test]
fn a_member_behind_a_compacted_log_is_sent_the_snapshot_and_restarts_from_it() {
    let voters = [1, 2, 3];
    let disk = Kept::default();
    let mut members: Vec<Member> = vec![
        Member::new(1, &voters).unwrap(),
        Member::new(2, &voters).unwrap(),
        Member::restore(3, &voters, Restored::default(), Box::new(disk.clone())).unwrap(),
    ];
    let mut events = Vec::new();
    let mut outbox = Vec::new();
    for _ in 0..2 * ELECTION_TICKS {
        outbox.extend(members[0].tick().unwrap().messages);
    }
    settle(&mut members, outbox, &mut events);
    assert!(members[0].is_leader());
    // Member 3 is cut off while twenty entries commit; the leader applies each.
    for n in 0..20u8 {
        let (_, out) = members[0].propose(vec![n]).unwrap();
        settle(&mut members[..2], out.messages, &mut events);
    }
    let out = members[0].tick().unwrap();
    settle(&mut members[..2], out.messages, &mut events);
    let applied = members[0].commit_index();
    members[0].compact(applied, point(applied), b"ledger", 5).unwrap();
    assert_eq!(members[0].first_index(), applied + 1 - 5, "the last five entries are kept");
    assert_eq!(members[0].snapshot(), Some((applied, point(applied))));
    // Member 3 comes back: the leader's log no longer reaches it.
    events.clear();
    for _ in 0..2 {
        let out = members[0].tick().unwrap();
        settle(&mut members, out.messages, &mut events);
    }
    let of_3: Vec<&MemberEvent> = events.iter().filter(|(id, _)| *id == 3).map(|(_, e)| e).collect();
    let snapshot_at = of_3.iter().position(|e| matches!(e, MemberEvent::Snapshot { .. }));
    let snapshot_at = snapshot_at.unwrap_or_else(|| panic!("member 3 got no snapshot: {of_3:?}"));
    let configuration = Configuration { index: applied, voters: vec![1, 2, 3], outgoing: vec![] };
    assert_eq!(*of_3[snapshot_at], MemberEvent::Snapshot { index: applied, point: point(applied), configuration });
    assert!(
        of_3[..snapshot_at].iter().all(|e| !matches!(e, MemberEvent::Committed { .. })),
        "nothing at or before the snapshot is applied by member 3: {of_3:?}"
    );
    assert_eq!(members[2].snapshot_quotas().as_deref(), Some(&b"ledger"[..]), "the quota ledger travels with it");
    // It restarts from its disk: the log starts after the snapshot.
    let mut restored = disk.0.lock().unwrap().clone();
    restored.applied = applied; // its store caught up to the snapshot
    let member = Member::restore(3, &voters, restored, Box::new(disk.clone())).unwrap();
    assert_eq!((member.first_index(), member.snapshot()), (applied + 1, Some((applied, point(applied)))));
    assert_eq!(member.snapshot_quotas().as_deref(), Some(&b"ledger"[..]));
    // A store behind its snapshot restarts too (it catches up before applying more).
    let mut behind = disk.0.lock().unwrap().clone();
    behind.applied = 0;
    let member = Member::restore(3, &voters, behind, Box::new(Volatile)).unwrap();
    assert_eq!(member.commit_index(), applied, "what a snapshot holds was committed");
}

#[test]
fn a_store_point_round_trips_and_a_wrong_length_is_damage() {
    let p = point(7);
    assert_eq!(StorePoint::decode(&p.encode()).unwrap(), p);
    assert!(matches!(StorePoint::decode(&p.encode()[1..]), Err(MemberError::Damaged(_))));
    // A snapshot's data: the point, then the quota ledger (none in older snapshots).
    let mut data = p.encode();
    assert_eq!(StorePoint::split_snapshot_data(&data).unwrap(), (p, &[][..]));
    data.extend_from_slice(b"ledger");
    assert_eq!(StorePoint::split_snapshot_data(&data).unwrap(), (p, &b"ledger"[..]));
    assert!(matches!(StorePoint::split_snapshot_data(&data[..39]), Err(MemberError::Damaged(_))));
}

#[test]
fn bad_bytes_are_refused_not_parsed_into_a_message() {
    assert!(matches!(decode(&vec![0u8; MESSAGE_BYTES_MAX + 1]), Err(DecodeError::TooLarge(_))));
    assert!(matches!(decode(&[0xff, 0xff, 0xff]), Err(DecodeError::Malformed(_))));
    let message = Message { to: 2, term: 7, ..Message::default() };
    assert_eq!(decode(&encode(&message)).unwrap(), message);
}

/// A log whose hard state was lost (never persisted, or persisted at a term below its last
/// entry's) is refused as damaged, naming what was lost and what to do: started at term 0, the
/// member could vote twice in one term, and raft-rs panics when it turns a candidate down. The
/// intact disk restores; the planted `raft_forget_vote` trusts the lost one.
#[test]
fn a_log_whose_hard_state_was_lost_is_refused() {
    let voters = [1, 2, 3];
    let disk = Kept::default();
    let mut members: Vec<Member> = vec![
        Member::restore(1, &voters, Restored::default(), Box::new(disk.clone())).unwrap(),
        Member::new(2, &voters).unwrap(),
        Member::new(3, &voters).unwrap(),
    ];
    members[0].standing = Standing::Voting;
    let mut events = Vec::new();
    campaign(&mut members, 0, &mut events);
    assert!(members[0].is_leader());
    for n in 0..3u8 {
        let (_, out) = members[0].propose(vec![n]).unwrap();
        settle(&mut members, out.messages, &mut events);
    }
    let kept = disk.0.lock().unwrap().clone();
    let term = members[0].term();
    assert!(term > 0 && kept.entries.len() > 3, "member 1 led and persisted entries: {kept:?}");
    let restore =
        |restored: Restored, lost: LostHardState| Member::restore_as(1, &voters, restored, Box::new(Volatile), lost);
    assert!(restore(kept.clone(), LostHardState::Refuse).is_ok(), "the intact disk restores");

    let never = Restored { hard_state: None, ..kept.clone() };
    let Err(MemberError::Damaged(why)) = restore(never.clone(), LostHardState::Refuse) else {
        panic!("a log without its hard state restored")
    };
    let last = kept.entries.last().unwrap().0;
    assert!(why.contains("was never persisted") && why.contains(&format!("entry {last} of term {term}")), "{why}");
    assert!(why.contains("Move the store aside"), "the error says what to do: {why}");

    let mut behind = raft::prelude::HardState::default();
    (behind.term, behind.commit) = (term - 1, 1);
    let rolled_back = Restored { hard_state: Some(prost::Message::encode_to_vec(&behind)), ..kept.clone() };
    let Err(MemberError::Damaged(why)) = restore(rolled_back, LostHardState::Refuse) else {
        panic!("a hard state behind the log's last term restored")
    };
    assert!(why.contains(&format!("records term {}", term - 1)), "{why}");

    let planted = restore(never, LostHardState::Trust).expect("the planted bug trusts it");
    assert_eq!(planted.term(), 0, "and forgets the term it voted in");
}
