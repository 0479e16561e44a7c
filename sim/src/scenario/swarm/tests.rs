//! Swarm's draws: each family on its own stream, interrupts and related groups placed as
//! promised.

use std::path::Path;

use super::*;

fn swarm(interrupt: bool) -> Scenario {
    let text = format!(
        r#"
[scenario]
name = "s"
description = "d"
duration = "3m"

[topology]
tiers = [{{ name = "edge", count = 4 }}]

[swarm]
kinds = ["sigbus", "bit_rot", "latency", "kill"]
count_min = 2
count_max = 6
duration_min = "2s"
duration_max = "40s"
interrupt_bootstraps = {interrupt}

[checks]
lag_max = "30s"
converge_within = "90s"
"#
    );
    Scenario::parse(&text, Path::new("s.toml")).expect("a valid swarm scenario")
}

#[test]
fn interrupts_follow_the_faults_that_send_a_node_to_a_snapshot_and_change_no_other_draw() {
    let (plain, interrupting) = (swarm(false), swarm(true));
    let (mut rebootstraps, mut interrupts, mut kinds) = (0, 0, Vec::new());
    for seed in 0..300 {
        let before = plain.draw_faults(seed).0;
        let after = interrupting.draw_faults(seed).0;
        assert_eq!(after[..before.len()], before[..], "seed {seed}: the other draws stay");
        assert!(before.iter().all(|f| f.during.is_none()));
        let causes: Vec<&Fault> = before.iter().filter(|f| rebootstrap_from(f).is_some()).collect();
        rebootstraps += causes.len();
        for interrupt in &after[before.len()..] {
            interrupts += 1;
            if !kinds.contains(&interrupt.kind) {
                kinds.push(interrupt.kind);
            }
            assert_eq!(interrupt.during, Some(During::Bootstrap), "seed {seed}");
            assert!(matches!(interrupt.kind, FaultKind::Kill | FaultKind::Pause | FaultKind::Partition));
            assert!((Duration::from_secs(2)..=Duration::from_secs(40)).contains(&interrupt.duration));
            let cause =
                causes.iter().any(|c| c.target == interrupt.target && rebootstrap_from(c) == Some(interrupt.at));
            assert!(cause, "seed {seed}: {interrupt:?} follows a sigbus or bit_rot of its node");
        }
        assert!(after.len() - before.len() <= causes.len());
    }
    // About half of the causes are followed, and every interrupting kind is drawn.
    assert!(rebootstraps > 100, "{rebootstraps}");
    assert!((rebootstraps / 3..=rebootstraps * 2 / 3).contains(&interrupts), "{interrupts} of {rebootstraps}");
    assert_eq!(kinds.len(), 3, "{kinds:?}");
}

fn related(on: bool) -> Scenario {
    let text = format!(
        r#"
[scenario]
name = "r"
description = "d"
duration = "3m"

[topology]
tiers = [{{ name = "mid", count = 3 }}, {{ name = "edge", count = 6, primaries = 1, secondaries = 2 }}]

[node]
retention_entries = 100

[[workload]]
kind = "writer"
rate_per_s = 5
keys = 100
value_bytes = {{ min = 10, max = 200 }}

[swarm]
kinds = ["kill", "pause", "power_loss", "sigbus", "latency", "split"]
count_min = 1
count_max = 8
duration_min = "2s"
duration_max = "40s"
interrupt_bootstraps = true
related = {on}

[checks]
lag_max = "30s"
converge_within = "90s"
"#
    );
    Scenario::parse(&text, Path::new("r.toml")).expect("a valid swarm scenario")
}

#[test]
fn related_groups_line_up_a_node_with_its_sources_past_retention_and_by_tier_and_change_no_other_draw() {
    let (plain, relating) = (related(false), related(true));
    let sources = super::super::nodes::source_names(&relating);
    assert_eq!(sources["edge-2"], ["mid-2", "mid-3", "mid-1"], "round robin over the mids, primary first");
    // 100 entries at 2 a second, and a collection pass.
    let past = relating.past_retention().expect("room for an outage past retention");
    assert_eq!(past, Duration::from_secs(51));
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..300 {
        let before = plain.draw_faults(seed).0;
        let after = relating.draw_faults(seed).0;
        assert_eq!(after[..before.len()], before[..], "seed {seed}: the other draws stay");
        let groups = relating.draw_faults(seed).1;
        let drawn: Vec<Fault> = groups.iter().flat_map(|g| g.faults.clone()).collect();
        assert_eq!(after[before.len()..], drawn[..], "seed {seed}: the groups close the list");
        assert!(plain.draw_faults(seed).1.is_empty());
        for (i, fault) in drawn.iter().enumerate() {
            assert!(OUTAGE_KINDS.contains(&fault.kind) && fault.during.is_none(), "seed {seed}: {fault:?}");
            assert!(fault.at < Duration::from_secs(180) && !fault.duration.is_zero(), "seed {seed}: {fault:?}");
            let clear = before.iter().chain(drawn.iter().take(i)).all(|o| !overlap(fault, o));
            assert!(clear, "seed {seed}: {fault:?} overlaps on its node");
        }
        let ends = |f: &Fault| f.at + f.duration;
        for RelatedDraw { group, faults } in &groups {
            seen.insert(*group);
            let replica = faults[0].target.get_ref();
            match group {
                RelatedGroup::ReplicaAndSource | RelatedGroup::ReplicaAndAllSources => {
                    let expected = if *group == RelatedGroup::ReplicaAndSource { 2 } else { 4 };
                    assert_eq!(faults.len(), expected, "seed {seed}: {faults:?}");
                    for source in &faults[1..] {
                        assert!(sources[replica].contains(source.target.get_ref()), "seed {seed}: {faults:?}");
                        let overlapping = source.at < ends(&faults[0]) && faults[0].at < ends(source);
                        assert!(overlapping, "seed {seed}: {faults:?}");
                    }
                }
                RelatedGroup::PastRetention => {
                    assert!((past..=past * 2).contains(&faults[0].duration), "seed {seed}: {faults:?}");
                    assert!(ends(&faults[0]) + PAST_RETENTION_ROOM <= Duration::from_secs(180));
                    if replica.starts_with("edge") {
                        let source = &faults[1];
                        assert!(sources[replica].contains(source.target.get_ref()), "seed {seed}: {faults:?}");
                        let out_at_return = source.at < ends(&faults[0]) && ends(&faults[0]) < ends(source);
                        assert!(out_at_return && source.at >= faults[0].at, "seed {seed}: {faults:?}");
                    } else {
                        assert_eq!(faults.len(), 1, "a mid's one source is the root: {faults:?}");
                    }
                }
                RelatedGroup::TierDown => {
                    let mut nodes: Vec<String> = faults.iter().flat_map(Fault::group_with_target).collect();
                    nodes.sort();
                    let tier = if replica.starts_with("mid") { 3 } else { 6 };
                    assert_eq!(nodes.len(), tier, "seed {seed}: {faults:?}");
                    assert!(faults.iter().all(|f| (f.at, f.duration) == (faults[0].at, faults[0].duration)));
                }
            }
        }
    }
    assert_eq!(seen.len(), RelatedGroup::ALL.len(), "every group is drawn: {seen:?}");
}

#[test]
fn related_needs_an_outage_kind_and_a_short_retention_for_its_past_retention_group() {
    let text = "[scenario]\nname = \"r\"\ndescription = \"d\"\nduration = \"3m\"\n[topology]\ntiers = [{ name = \"e\", count = 2 }]\n\
                [swarm]\nkinds = [\"latency\"]\ncount_min = 1\ncount_max = 2\nduration_min = \"2s\"\nduration_max = \"4s\"\n\
                related = true\n[checks]\nlag_max = \"30s\"\nconverge_within = \"90s\"\n";
    let err = Scenario::parse(text, Path::new("r.toml")).unwrap_err().to_string();
    assert!(err.contains("field `swarm`") && err.contains("related draws outages"), "{err}");
    let ok = Scenario::parse(&text.replace("[\"latency\"]", "[\"kill\"]"), Path::new("r.toml")).expect("valid");
    // The default retention (100 000 entries) is never passed in three minutes.
    assert_eq!(ok.past_retention(), None);
    for seed in 0..50 {
        let groups = ok.draw_faults(seed).1;
        assert!(!groups.is_empty(), "seed {seed}: a tier can always go down");
        assert!(groups.iter().all(|g| g.group == RelatedGroup::TierDown), "seed {seed}: {groups:?}");
    }
}
