//! Explore's selection and features, without running anything.

use std::path::Path;

use super::*;
use crate::scenario::{FaultKind, RelatedGroup};
use rand::SeedableRng;

fn set(features: &[Feature]) -> BTreeSet<Feature> {
    features.iter().copied().collect()
}

fn hits(probes: &[Probe]) -> Vec<ProbeHits> {
    probes.iter().map(|&probe| ProbeHits { probe, hits: 3 }).collect()
}

const PAST: Feature = Feature::Related(RelatedGroup::PastRetention);
const LATENCY: Feature = Feature::Fault(FaultKind::Latency);
const KILL: Feature = Feature::Fault(FaultKind::Kill);

/// Ten runs: every one kills and reaches `fault_kill` and `left_stale_source`; the rare
/// probe `out_of_retention_answered` is reached by the one run that drew `rare_with`.
fn history(rare_with: Feature, other: Feature) -> Coverage {
    let mut coverage = Coverage::default();
    let common = [Probe::FaultKill, Probe::LeftStaleSource];
    coverage.observe(&set(&[KILL, rare_with]), &hits(&[common[0], common[1], Probe::OutOfRetentionAnswered]));
    for run in 0..9 {
        let features = if run % 3 == 0 { set(&[KILL, rare_with]) } else { set(&[KILL, other]) };
        coverage.observe(&features, &hits(&common));
    }
    coverage
}

fn candidates() -> Vec<Candidate> {
    vec![
        Candidate { seed: 10, features: set(&[KILL]) },
        Candidate { seed: 11, features: set(&[KILL, LATENCY]) },
        Candidate { seed: 12, features: set(&[KILL, PAST]) },
    ]
}

#[test]
fn the_candidate_whose_features_predicted_a_rare_probe_is_picked_first() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    // The rare probe came with a related outage past retention: seed 12 draws one.
    let coverage = history(PAST, LATENCY);
    assert_eq!(coverage.best_predictor(Probe::OutOfRetentionAnswered), Some((PAST, 4, 1)));
    assert_eq!(coverage.best_predictor(Probe::QuotaRefused), None, "never reached: nothing predicts it");
    assert!(
        coverage.predicts(PAST, Probe::OutOfRetentionAnswered)
            > coverage.predicts(LATENCY, Probe::OutOfRetentionAnswered)
    );
    let picks = choose(&coverage, &candidates(), &BTreeSet::new(), 1, 0.0, &mut rng);
    assert_eq!(picks[0].seed, 12, "{picks:?}");
    let Choice::Guided { aiming_at, .. } = &picks[0].choice else { panic!("{picks:?}") };
    assert_eq!(aiming_at[0], Probe::OutOfRetentionAnswered);
    // The same runs with the rare probe on latency's side: seed 11 is picked instead.
    let coverage = history(LATENCY, PAST);
    let picks = choose(&coverage, &candidates(), &BTreeSet::new(), 1, 0.0, &mut rng);
    assert_eq!(picks[0].seed, 11, "{picks:?}");
    // Taken seeds are never picked again, and a round never picks one seed twice.
    let picks = choose(&coverage, &candidates(), &BTreeSet::from([11]), 5, 0.0, &mut rng);
    let seeds: Vec<u64> = picks.iter().map(|p| p.seed).collect();
    assert_eq!(seeds.len(), 2);
    assert!(!seeds.contains(&11) && seeds.contains(&10) && seeds.contains(&12), "{seeds:?}");
}

#[test]
fn random_picks_come_from_the_candidates_left_and_the_same_stream_picks_the_same_seeds() {
    let coverage = history(PAST, LATENCY);
    let many: Vec<Candidate> = (100..200).map(|seed| Candidate { seed, features: set(&[KILL, LATENCY]) }).collect();
    let pick = |stream: u64| {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(stream);
        choose(&coverage, &many, &BTreeSet::from([100, 101]), 20, 0.5, &mut rng)
    };
    let (a, b) = (pick(7), pick(7));
    assert_eq!(a, b);
    assert!(a.iter().any(|p| p.choice == Choice::Random) && a.iter().any(|p| p.choice != Choice::Random));
    assert!(a.iter().all(|p| (102..200).contains(&p.seed)));
}

#[test]
fn features_name_what_a_seed_draws_and_read_back() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/swarm.toml");
    let swarm = Scenario::load(&path).expect("the swarm scenario");
    let mut all = BTreeSet::new();
    for seed in 1..=200 {
        let features = features(&swarm, seed);
        assert!(features.iter().any(|f| matches!(f, Feature::Fault(_))), "seed {seed}: {features:?}");
        let related: BTreeSet<Feature> =
            crate::plan::Draws::of(&swarm, seed).related.into_iter().map(|g| Feature::Related(g.group)).collect();
        assert!(related.is_subset(&features));
        all.extend(features);
    }
    assert!(all.contains(&Feature::Buggify) && all.contains(&Feature::Interrupt), "{all:?}");
    assert!(RelatedGroup::ALL.iter().all(|g| all.contains(&Feature::Related(*g))), "{all:?}");
    for feature in &all {
        assert_eq!(feature.to_string().parse::<Feature>().as_ref(), Ok(feature));
    }
    assert!("fault:meteor".parse::<Feature>().is_err() && "writer".parse::<Feature>().is_err());
}
