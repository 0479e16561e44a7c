//! `qsim shrink` end to end (built with `--cfg madsim`): a swarm run of a planted bug, shrunk,
//! keeps everything its seed drew — faults, fault points, writer modes — in the scenario it
//! writes, which fails as the original did.
#![cfg(madsim)]

use std::path::Path;

use qs_sim::plan::Draws;
use qs_sim::scenario::Scenario;

use crate::common::qsim;

/// `bug-replay` (a replica replays entries after a restart; the sequence checker catches it)
/// with swarm mode drawing a fault, the fault points and the writer's modes.
fn swarm_bug_replay() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("scenarios/bug-replay.toml")).expect("bug-replay.toml");
    let swarm = "[swarm]\nkinds = [\"latency\"]\ncount_min = 1\ncount_max = 1\nduration_min = \"2s\"\n\
                 duration_max = \"5s\"\nbuggify = true\nwriter_modes = true\n\n[checks]";
    text.replacen("[checks]", swarm, 1)
}

#[test]
fn a_shrunk_swarm_run_keeps_what_its_seed_drew_and_fails_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bug-replay-swarm.toml");
    std::fs::write(&path, swarm_bug_replay()).unwrap();
    let original = Scenario::load(&path).expect("a valid scenario");
    // A seed that draws the fault points on and modes other than the defaults.
    let seed = (1..100)
        .find(|&s| {
            let draws = Draws::of(&original, s);
            draws.fault_points && draws.writer_modes.iter().any(|m| *m != Default::default())
        })
        .expect("half the seeds draw the fault points, most draw some mode");

    let shrunk = dir.path().join("shrunk.toml");
    let (code, stdout) =
        qsim(&["shrink", path.to_str().unwrap(), "--seed", &seed.to_string(), "--max-steps", "1"], &shrunk);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("failure") && l.contains("sequence")), "{stdout}");

    let written = Scenario::load(&shrunk).expect("the shrunk scenario loads");
    assert!(written.swarm.is_none(), "nothing is drawn any more");
    assert!(written.scenario.buggify, "the drawn fault points are on");
    assert_eq!(
        Draws::of(&written, seed).writer_modes,
        Draws::of(&original, seed).writer_modes,
        "the drawn writer modes"
    );
    let latency = |s: &Scenario| Draws::of(s, seed).faults.into_iter().filter(|f| f.kind.as_str() == "latency").count();
    assert_eq!((latency(&original), latency(&written)), (1, 1), "the drawn fault is written out");

    let (code, stdout) = qsim(&["run", shrunk.to_str().unwrap(), "--seed", &seed.to_string()], &dir.path().join("run"));
    assert_eq!(code, 1, "the shrunk scenario fails as the original did: {stdout}");
}
