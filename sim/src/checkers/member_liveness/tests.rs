use super::*;

const BOUND_MS: u64 = 30_000;

fn group() -> MemberLiveness {
    MemberLiveness::new(&["root".to_string(), "root-2".to_string(), "root-3".to_string()], &[], BOUND_MS)
}

fn sample(at_ms: u64, node: &str, applied: u64) -> Event {
    Event::LagSample { at_ms, node: node.into(), lag_ms: 0, applied }
}

fn fault(at_ms: u64, node: &str, kind: FaultKind, phase: FaultPhase) -> Event {
    Event::Fault { at_ms, node: node.into(), kind, phase, detail: String::new() }
}

/// One simulated second: each member in `applying` applies one more entry (the group's newest
/// plus one), every member samples; returns the violations.
fn second(
    check: &mut MemberLiveness,
    at_ms: u64,
    applied: &mut BTreeMap<&'static str, u64>,
    applying: &[&'static str],
) -> Vec<Event> {
    let next = applied.values().copied().max().unwrap_or(0) + 1;
    for member in applying {
        applied.insert(member, next);
    }
    let mut found = Vec::new();
    for (member, index) in applied.clone() {
        found.extend(check.observe(&sample(at_ms, member, index)));
    }
    found
}

fn applied_map() -> BTreeMap<&'static str, u64> {
    [("root", 0), ("root-2", 0), ("root-3", 0)].into_iter().collect()
}

#[test]
fn a_member_that_stops_applying_while_its_group_goes_on_is_reported_once_after_the_bound() {
    let mut check = group();
    let mut applied = applied_map();
    for s in 1..=40 {
        assert!(second(&mut check, s * 1000, &mut applied, &["root", "root-2", "root-3"]).is_empty());
    }
    // root-3 stops at index 40 with no fault: nothing until the group's index of the bound ago
    // passes it.
    let mut found = Vec::new();
    for s in 41..=100 {
        let more = second(&mut check, s * 1000, &mut applied, &["root", "root-2"]);
        if found.is_empty() && !more.is_empty() {
            assert_eq!(s, 71, "first reported when the group's index of 30 s ago passed 40: {more:?}");
        }
        found.extend(more);
    }
    assert_eq!(found.len(), 1, "reported once: {found:?}");
    let Event::Violation { checker, node, index, message, .. } = &found[0] else { panic!("{found:?}") };
    assert_eq!((*checker, node.as_str(), *index), (Checker::Raft, "root-3", 40));
    assert!(message.contains("had applied to index 41 by 41000 ms"), "{message}");
    assert!(message.contains("a majority (root, root-2, root-3)"), "{message}");
}

#[test]
fn a_member_is_given_the_bound_after_its_fault_ends_and_a_group_without_a_clear_majority_is_not_judged() {
    let mut check = group();
    let mut applied = applied_map();
    for s in 1..=40 {
        assert!(second(&mut check, s * 1000, &mut applied, &["root", "root-2", "root-3"]).is_empty());
    }
    check.observe(&fault(40_500, "root-3", FaultKind::Kill, FaultPhase::Start));
    for s in 41..=60 {
        assert!(second(&mut check, s * 1000, &mut applied, &["root", "root-2"]).is_empty(), "killed: not judged");
    }
    check.observe(&fault(60_500, "root-3", FaultKind::Kill, FaultPhase::End));
    for s in 61..=90 {
        assert!(second(&mut check, s * 1000, &mut applied, &["root", "root-2"]).is_empty(), "within the bound");
    }
    let found = second(&mut check, 91_000, &mut applied, &["root", "root-2"]);
    assert_eq!(found.len(), 1, "the bound after its restart, still behind: {found:?}");

    // Two of three down: the one left cannot commit alone, and is not blamed for it.
    let mut check = group();
    let mut applied = applied_map();
    for s in 1..=40 {
        second(&mut check, s * 1000, &mut applied, &["root", "root-2", "root-3"]);
    }
    check.observe(&fault(40_500, "root", FaultKind::Kill, FaultPhase::Start));
    check.observe(&fault(40_500, "root-2", FaultKind::Kill, FaultPhase::Start));
    for s in 41..=120 {
        assert!(second(&mut check, s * 1000, &mut applied, &[]).is_empty(), "no clear majority");
    }
}

#[test]
fn a_member_with_a_new_disk_counts_toward_a_majority_only_once_it_holds_what_the_group_had() {
    let mut check = group();
    let mut applied = applied_map();
    for s in 1..=40 {
        second(&mut check, s * 1000, &mut applied, &["root", "root-2", "root-3"]);
    }
    check.observe(&fault(40_200, "root-3", FaultKind::Sigbus, FaultPhase::Start));
    check.observe(&fault(40_500, "root-3", FaultKind::Sigbus, FaultPhase::End));
    applied.insert("root-3", 0);
    // root is killed for good: root-2 and the empty root-3 are no majority, whatever the time.
    check.observe(&fault(40_600, "root", FaultKind::Kill, FaultPhase::Start));
    for s in 41..=150 {
        assert!(second(&mut check, s * 1000, &mut applied, &[]).is_empty(), "second {s}");
    }
    // root-3 receives what the group had: now root-2 and root-3 are a majority, which must commit.
    applied.insert("root-3", 40);
    let found = second(&mut check, 151_000, &mut applied, &[]);
    assert_eq!(found.len(), 1, "{found:?}");
    let Event::Violation { message, .. } = &found[0] else { panic!() };
    assert!(message.contains("the group has applied nothing since index 40"), "{message}");
}

#[test]
fn a_clear_majority_that_commits_nothing_names_who_claims_to_lead_and_wide_faults_pause_it() {
    let mut check = group();
    let mut applied = applied_map();
    for s in 1..=40 {
        second(&mut check, s * 1000, &mut applied, &["root", "root-2", "root-3"]);
    }
    check.observe(&Event::RaftRole {
        at_ms: 40_000,
        node: "root-2".into(),
        term: 3,
        role: RaftRole::Leader,
        leader: 2,
    });
    check.observe(&fault(40_500, "network", FaultKind::Latency, FaultPhase::Start));
    for s in 41..=100 {
        assert!(second(&mut check, s * 1000, &mut applied, &[]).is_empty(), "network-wide latency: paused");
    }
    check.observe(&fault(100_500, "network", FaultKind::Latency, FaultPhase::End));
    let mut found = Vec::new();
    for s in 101..=140 {
        found.extend(second(&mut check, s * 1000, &mut applied, &[]));
    }
    assert_eq!(found.len(), 1, "{found:?}");
    let Event::Violation { at_ms, node, message, .. } = &found[0] else { panic!() };
    assert_eq!((*at_ms, node.as_str()), (131_000, "root-2"));
    assert!(message.contains("root-2 claims to lead term 3"), "{message}");
    // It commits again: a later stall is a new report.
    assert!(second(&mut check, 141_000, &mut applied, &["root", "root-2", "root-3"]).is_empty());
}

#[test]
fn a_member_whose_store_rotted_is_never_judged() {
    let mut check = group();
    let mut applied = applied_map();
    for s in 1..=40 {
        second(&mut check, s * 1000, &mut applied, &["root", "root-2", "root-3"]);
    }
    check.observe(&fault(40_100, "root-3", FaultKind::BitRot, FaultPhase::Start));
    check.observe(&fault(40_200, "root-3", FaultKind::BitRot, FaultPhase::End));
    for s in 41..=200 {
        assert!(second(&mut check, s * 1000, &mut applied, &["root", "root-2"]).is_empty(), "second {s}");
    }
}

#[test]
fn a_group_that_never_committed_is_judged_only_with_every_member_clear() {
    // A member down from the start: the two others, empty, cannot know they hold every commit.
    let mut check = group();
    check.observe(&fault(100, "root", FaultKind::Kill, FaultPhase::Start));
    let mut applied = applied_map();
    for s in 1..=100 {
        assert!(second(&mut check, s * 1000, &mut applied, &[]).is_empty(), "second {s}");
    }
    check.observe(&fault(100_500, "root", FaultKind::Kill, FaultPhase::End));
    let mut found = Vec::new();
    for s in 101..=140 {
        found.extend(second(&mut check, s * 1000, &mut applied, &[]));
    }
    assert_eq!(found.len(), 1, "every member clear for the bound and still nothing: {found:?}");
    let Event::Violation { at_ms, message, .. } = &found[0] else { panic!() };
    assert_eq!(*at_ms, 131_000);
    assert!(message.contains("no member claims to lead"), "{message}");
}

fn clog(at_ms: u64, a: &str, b: &str, phase: FaultPhase) -> Event {
    let detail = format!("link to {b}"); // as `Fault::detail` writes it
    Event::Fault { at_ms, node: a.into(), kind: FaultKind::ClogLink, phase, detail }
}

#[test]
fn a_cut_link_is_a_fault_of_its_two_ends_and_the_members_off_it_are_judged() {
    let names = ["root", "root-2", "root-3", "root-4", "root-5"];
    let mut check = MemberLiveness::new(&names.map(String::from), &[], BOUND_MS);
    let mut applied: BTreeMap<&'static str, u64> = names.iter().map(|&n| (n, 0)).collect();
    for s in 1..=10 {
        assert!(second(&mut check, s * 1000, &mut applied, &names).is_empty());
    }
    // root-2 cut from root-3: both fall behind, and so does root, which is on neither end
    // (held by root-2, say). root-4, root-5 and root are a clear majority.
    assert!(check.observe(&clog(10_500, "root-2", "root-3", FaultPhase::Start)).is_empty());
    let mut found = Vec::new();
    for s in 11..=60 {
        found.extend(second(&mut check, s * 1000, &mut applied, &["root-4", "root-5"]));
    }
    let blamed: Vec<&str> = found
        .iter()
        .filter_map(|e| match e {
            Event::Violation { node, .. } => Some(node.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(blamed, ["root"], "only the member on neither end is judged: {found:?}");
    let Event::Violation { message, .. } = &found[0] else { unreachable!() };
    assert!(message.contains("a majority (root, root-4, root-5)"), "{message}");

    // The same cut in a group of three leaves one member off it: no majority, nothing judged.
    let mut check = group();
    let mut applied = applied_map();
    for s in 1..=10 {
        assert!(second(&mut check, s * 1000, &mut applied, &["root", "root-2", "root-3"]).is_empty());
    }
    assert!(check.observe(&clog(10_500, "root-2", "root-3", FaultPhase::Start)).is_empty());
    for s in 11..=60 {
        assert!(second(&mut check, s * 1000, &mut applied, &[]).is_empty(), "judged without a clear majority");
    }
    // Once the link is back, its ends are given the bound like any member after its fault.
    assert!(check.observe(&clog(60_500, "root-2", "root-3", FaultPhase::End)).is_empty());
    for s in 61..=90 {
        assert!(second(&mut check, s * 1000, &mut applied, &["root"]).is_empty(), "judged within the bound");
    }
    let late = second(&mut check, 91_000, &mut applied, &["root"]);
    assert_eq!(late.len(), 2, "root-2 and root-3 behind the bound after the link came back: {late:?}");
}

fn configuration(at_ms: u64, index: u64, voters: &[u64], outgoing: &[u64]) -> Event {
    Event::RaftConfiguration { at_ms, node: "root".into(), index, voters: voters.to_vec(), outgoing: outgoing.to_vec() }
}

#[test]
fn a_member_that_never_catches_up_after_losing_its_disk_is_reported() {
    let mut check = group();
    let mut applied = applied_map();
    for s in 1..=40 {
        second(&mut check, s * 1000, &mut applied, &["root", "root-2", "root-3"]);
    }
    check.observe(&fault(40_200, "root-3", FaultKind::Sigbus, FaultPhase::Start));
    check.observe(&fault(40_500, "root-3", FaultKind::Sigbus, FaultPhase::End));
    applied.insert("root-3", 0);
    // root and root-2 are a clear majority and go on; the empty root-3 never receives anything.
    let mut found = Vec::new();
    for s in 41..=100 {
        found.extend(second(&mut check, s * 1000, &mut applied, &["root", "root-2"]));
    }
    assert_eq!(found.len(), 1, "{found:?}");
    let Event::Violation { node, index, .. } = &found[0] else { panic!() };
    assert_eq!((node.as_str(), *index), ("root-3", 0));
}

#[test]
fn a_member_added_from_standby_is_judged_and_counted_and_one_removed_is_not() {
    let first = ["root", "root-2", "root-3"].map(String::from);
    let mut check = MemberLiveness::new(&first, &["root-4".to_string()], BOUND_MS);
    let mut applied = applied_map();
    applied.insert("root-4", 0);
    // On standby, root-4 applies nothing and is not judged.
    for s in 1..=60 {
        assert!(second(&mut check, s * 1000, &mut applied, &["root", "root-2", "root-3"]).is_empty(), "{s}");
    }
    // root-4 replaces root-3 (joint, then final). root-3 stops applying: it is no voter any more.
    check.observe(&configuration(60_100, 61, &[1, 2, 4], &[1, 2, 3]));
    check.observe(&configuration(60_200, 62, &[1, 2, 4], &[]));
    let mut found = Vec::new();
    for s in 61..=200 {
        found.extend(second(&mut check, s * 1000, &mut applied, &["root", "root-2"]));
    }
    // root-4 never catches up: reported once, the bound after it joined.
    assert_eq!(found.len(), 1, "{found:?}");
    let Event::Violation { at_ms, node, .. } = &found[0] else { panic!() };
    assert_eq!(node, "root-4");
    assert_eq!(*at_ms, 91_000, "the bound after it joined: {found:?}");
    // With root-4 a voter that never counted, root killed leaves root-2 alone: no majority, so
    // a stall is not judged.
    check.observe(&fault(201_000, "root", FaultKind::Kill, FaultPhase::Start));
    for s in 202..=400 {
        assert!(second(&mut check, s * 1000, &mut applied, &[]).is_empty(), "second {s}");
    }
}
