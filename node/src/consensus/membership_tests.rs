//! Membership changes driven by hand: a member replaced through joint consensus, a leader
//! elected mid-change that leaves the joint configuration, a leader asked to remove itself,
//! and restarts that find the configuration the log and the snapshot say.

use super::tests::{Kept, point, settle};
use super::*;

/// Members 1–3 vote; member 4 is on standby (known, not a voter), with a disk kept for restarts.
fn group_with_standby() -> (Vec<Member>, Kept) {
    let first = [1, 2, 3];
    let disk = Kept::default();
    let mut members: Vec<Member> = first.iter().map(|&id| Member::new(id, &first).unwrap()).collect();
    members.push(Member::restore(4, &first, Restored::default(), Box::new(disk.clone())).unwrap());
    (members, disk)
}

/// Lets every other member's leader lease run out (what they send meanwhile is lost), then
/// ticks member `at` until it campaigns and wins, delivering everything among `members`.
fn elect(members: &mut [Member], at: usize, events: &mut Vec<(u64, MemberEvent)>) {
    for (n, member) in members.iter_mut().enumerate() {
        if n != at {
            for _ in 0..ELECTION_TICKS {
                member.tick().unwrap();
            }
        }
    }
    for _ in 0..4 * ELECTION_TICKS {
        let out = members[at].tick().unwrap();
        settle(members, out.messages, events);
        if members[at].is_leader() {
            break;
        }
    }
    assert!(members[at].is_leader(), "member {} did not win: {events:?}", members[at].id());
}

/// Heartbeats from member `at` until the group is quiet: followers learn the commit index.
fn beat(members: &mut [Member], at: usize, events: &mut Vec<(u64, MemberEvent)>) {
    for _ in 0..3 {
        let out = members[at].tick().unwrap();
        events.extend(out.events.into_iter().map(|e| (members[at].id(), e)));
        settle(members, out.messages, events);
    }
}

/// The configurations member `id` applied, in order.
fn configured(events: &[(u64, MemberEvent)], id: u64) -> Vec<Configuration> {
    events
        .iter()
        .filter(|(member, _)| *member == id)
        .filter_map(|(_, e)| match e {
            MemberEvent::Configured { configuration, .. } => Some(configuration.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_member_is_replaced_through_joint_consensus_that_the_group_leaves_by_itself() {
    let (mut members, disk) = group_with_standby();
    let mut events = Vec::new();
    elect(&mut members, 0, &mut events);
    let replace = MembershipChange { add: vec![4], remove: vec![3] };
    let (proposed, out) = members[0].propose_membership(&replace).unwrap();
    let index = proposed.expect("the leader proposes it");
    // A second change while the first is pending is refused.
    let (again, _) = members[0].propose_membership(&MembershipChange { add: vec![5], remove: vec![] }).unwrap();
    assert_eq!(again, Err(MembershipError::Pending(index)));
    settle(&mut members, out.messages, &mut events);
    beat(&mut members, 0, &mut events);
    let joint = Configuration { index, voters: vec![1, 2, 4], outgoing: vec![1, 2, 3] };
    let left = Configuration { index: index + 1, voters: vec![1, 2, 4], outgoing: vec![] };
    for id in [1, 2, 4] {
        assert_eq!(configured(&events, id), [joint.clone(), left.clone()], "member {id}");
        assert_eq!(members[id as usize - 1].configuration(), left);
    }
    // The new group commits without the member it replaced.
    let (at, out) = members[0].propose(b"after".to_vec()).unwrap();
    let mut without_3: Vec<Member> = members.drain(..).filter(|m| m.id() != 3).collect();
    settle(&mut without_3, out.messages, &mut events);
    beat(&mut without_3, 0, &mut events);
    assert!(without_3.iter().all(|m| m.commit_index() >= at), "committed by 1, 2 and 4");
    // Member 4 restarts from its disk: its log's changes up to what it applied make the same
    // configuration; none of it comes out again.
    let mut restored = disk.0.lock().unwrap().clone();
    restored.applied = at;
    let member = Member::restore(4, &[1, 2, 3], restored.clone(), Box::new(Volatile)).unwrap();
    assert_eq!(member.configuration(), left);
    // Restarted before it applied the leave, it holds the joint configuration; the leave
    // comes out again as it is committed.
    restored.applied = index;
    let mut member = Member::restore(4, &[1, 2, 3], restored, Box::new(Volatile)).unwrap();
    assert_eq!(member.configuration(), joint);
    let out = member.tick().unwrap();
    assert!(
        out.events.iter().any(|e| matches!(e, MemberEvent::Configured { configuration, .. } if *configuration == left)),
        "{:?}",
        out.events
    );
}

#[test]
fn a_leader_elected_mid_change_leaves_the_joint_configuration() {
    let (mut members, _) = group_with_standby();
    let mut events = Vec::new();
    elect(&mut members, 0, &mut events);
    let (proposed, out) = members[0].propose_membership(&MembershipChange { add: vec![4], remove: vec![3] }).unwrap();
    let index = proposed.unwrap();
    // Only the followers hear of it; member 1 is cut off before it can commit the leave.
    let mut followers: Vec<Member> = members.drain(1..).collect();
    settle(&mut followers, out.messages, &mut events);
    // Member 2 commits the joint entry only once it leads: elected by 2 and 4 (new majority)
    // and 2 and 3 (old majority) — and then the group must leave joint.
    elect(&mut followers, 0, &mut events);
    beat(&mut followers, 0, &mut events);
    for id in [2, 4] {
        let configurations = configured(&events, id);
        assert_eq!(
            configurations.last().map(|c| (c.voters.clone(), c.outgoing.is_empty())),
            Some((vec![1, 2, 4], true)),
            "member {id} left joint: {configurations:?}"
        );
        assert!(configurations.iter().all(|c| c.index >= index));
    }
}

#[test]
fn a_leader_asked_to_remove_itself_hands_its_leadership_on_first() {
    let (mut members, _) = group_with_standby();
    let mut events = Vec::new();
    elect(&mut members, 0, &mut events);
    beat(&mut members, 0, &mut events);
    let (proposed, out) = members[0].propose_membership(&MembershipChange { add: vec![4], remove: vec![1] }).unwrap();
    let Err(MembershipError::RemovesLeader(heir)) = proposed else { panic!("{proposed:?}") };
    assert!([2, 3].contains(&heir), "a voter that stays: {heir}");
    settle(&mut members, out.messages, &mut events);
    assert!(members[heir as usize - 1].is_leader(), "member {heir} took over");
    assert!(!members[0].is_leader());
    assert!(configured(&events, 1).is_empty(), "nothing was proposed");
}

#[test]
fn a_snapshot_records_the_configuration_at_its_index() {
    let (mut members, _) = group_with_standby();
    let mut events = Vec::new();
    elect(&mut members, 0, &mut events);
    let (proposed, out) = members[0].propose_membership(&MembershipChange { add: vec![4], remove: vec![] }).unwrap();
    let index = proposed.unwrap();
    settle(&mut members, out.messages, &mut events);
    beat(&mut members, 0, &mut events);
    let four = Configuration { index, voters: vec![1, 2, 3, 4], outgoing: vec![] };
    assert_eq!(configured(&events, 1), std::slice::from_ref(&four), "one voter added: no joint step");
    // A snapshot before the change records the first configuration; one after, the new one.
    let disk = Kept::default();
    let own = members[0].own_state();
    let restored =
        Restored { hard_state: own.hard_state, entries: own.entries, applied: index, snapshot: own.snapshot };
    let mut leader = Member::restore(1, &[1, 2, 3], restored, Box::new(disk.clone())).unwrap();
    assert_eq!(leader.configuration(), four, "replayed from the log");
    leader.compact(index - 1, point(1), b"", 1).unwrap();
    let before = disk.0.lock().unwrap().snapshot.clone().unwrap();
    let snapshot: Snapshot = prost::Message::decode(before.as_slice()).unwrap();
    assert_eq!(Configuration::of(0, snapshot.get_metadata().get_conf_state()).voters, [1, 2, 3]);
    leader.compact(index, point(2), b"", 1).unwrap();
    let after = disk.0.lock().unwrap().clone();
    let snapshot: Snapshot = prost::Message::decode(after.snapshot.as_deref().unwrap()).unwrap();
    assert_eq!(Configuration::of(0, snapshot.get_metadata().get_conf_state()).voters, [1, 2, 3, 4]);
    // A restart from that snapshot alone (the log compacted past the change) still knows it.
    let restored = Restored { entries: Vec::new(), applied: index, ..after };
    let member = Member::restore(1, &[1, 2, 3], restored, Box::new(Volatile)).unwrap();
    assert_eq!(member.configuration().voters, [1, 2, 3, 4]);
}

/// Member 1 proposes removing member 3 and is cut off before the entry commits; member 3,
/// holding it, is elected and commits its own removal. raft-rs would let it lead on, a leader
/// outside its group: it hands its leadership to a voter as it applies the change.
#[test]
fn a_leader_that_applies_its_own_removal_hands_over() {
    let (mut members, _) = group_with_standby();
    let mut events = Vec::new();
    elect(&mut members, 0, &mut events);
    let (proposed, out) = members[0].propose_membership(&MembershipChange { add: vec![4], remove: vec![] }).unwrap();
    proposed.unwrap();
    settle(&mut members, out.messages, &mut events);
    beat(&mut members, 0, &mut events);
    assert_eq!(members[0].configuration().voters, [1, 2, 3, 4]);
    // The removal reaches the others' logs, but member 1 is cut off before it commits it.
    let (proposed, out) = members[0].propose_membership(&MembershipChange { add: vec![], remove: vec![3] }).unwrap();
    let removal = proposed.unwrap();
    let mut others: Vec<Member> = members.drain(1..).collect();
    let appends: Vec<Message> =
        out.messages.into_iter().filter(|m| m.get_msg_type() == raft::prelude::MessageType::MsgAppend).collect();
    for append in appends {
        let to = others.iter_mut().find(|m| m.id() == append.to).unwrap();
        to.receive(append).unwrap(); // their answers are lost with member 1
    }
    // Member 3 is elected by 2 and 4 (a majority of {1, 2, 3, 4}); its first commit commits
    // the removal, which it applies at once — and hands its leadership on in the same turn.
    for n in [0, 2] {
        for _ in 0..ELECTION_TICKS {
            others[n].tick().unwrap();
        }
    }
    events.clear();
    for _ in 0..4 * ELECTION_TICKS {
        let out = others[1].tick().unwrap();
        settle(&mut others, out.messages, &mut events);
        if events.iter().any(|(id, e)| *id == 3 && matches!(e, MemberEvent::Role { role: Role::Leader, .. })) {
            break;
        }
    }
    let led = events.iter().position(|(id, e)| *id == 3 && matches!(e, MemberEvent::Role { role: Role::Leader, .. }));
    let removed = events.iter().position(|(id, e)| {
        *id == 3 && matches!(e, MemberEvent::Configured { index, configuration, .. } if *index == removal && !configuration.voters.contains(&3))
    });
    assert!(led.is_some() && removed > led, "member 3 led, then applied its own removal: {events:?}");
    assert!(!others[1].is_leader(), "member 3 leads a group it is not a voter of: {events:?}");
    assert!(others[0].is_leader() || others[2].is_leader(), "member 2 or 4 took over: {events:?}");
}
