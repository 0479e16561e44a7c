//! `qsim diff` on real runs: a run against itself is identical (exit 0); two seeds part and the
//! seed is named; one seed on two engines parts and the engine is named; one seed whose summary
//! names another build and whose trace changes from one event on parts exactly there, with the
//! page showing both runs' charts; a side that cannot be read is exit 2.
#![cfg(madsim)]

use std::path::Path;

use crate::common::{qsim, qsim_any};

fn s(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

#[test]
fn diff_names_where_two_runs_part_and_what_produced_them() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c, d) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("c"), dir.path().join("d"));
    for (out, seed, engine) in [(&a, "1", "memory"), (&b, "2", "memory"), (&c, "1", "lmdb")] {
        let (code, stdout) =
            qsim(&["run", "scenarios/quickstart.toml", "--seed", seed, "--engine", engine, "--no-report"], out);
        assert_eq!(code, 0, "{stdout}");
    }

    let (code, out) = qsim_any(&["diff", s(&a), s(&a)]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("trace      identical: ") && out.contains("the same on both sides"), "{out}");

    let (code, out) = qsim_any(&["diff", s(&a), s(&b)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("differs    seed             A 1  B 2") && out.contains("; part at event "), "{out}");

    let (code, out) = qsim_any(&["diff", s(&a), &format!("{}/trace.jsonl", s(&c))]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("differs    engine           A memory  B lmdb"), "{out}");
    assert!(!out.contains("differs    seed"), "{out}");

    // The same seed under another build: its summary says so, and its trace changes from event
    // 100 on (the event's time moved by a millisecond, and the tail cut short).
    std::fs::create_dir(&d).unwrap();
    let summary = std::fs::read_to_string(a.join("summary.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&summary).unwrap();
    json["build"] = "qsim 0.1.0 (another build)".into();
    std::fs::write(d.join("summary.json"), json.to_string()).unwrap();
    let trace = std::fs::read_to_string(a.join("trace.jsonl")).unwrap();
    let mut lines: Vec<String> = trace.lines().map(str::to_string).collect();
    assert!(lines.len() > 200, "quickstart writes hundreds of events");
    let mut moved: serde_json::Value = serde_json::from_str(&lines[99]).unwrap();
    moved["at_ms"] = (moved["at_ms"].as_u64().unwrap() + 1).into();
    lines[99] = moved.to_string();
    lines.truncate(150);
    std::fs::write(d.join("trace.jsonl"), lines.join("\n") + "\n").unwrap();
    let page = dir.path().join("diff.html");
    let (code, out) = qsim_any(&["diff", s(&a), s(&d), "--context", "2", "--html", s(&page)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("identical for 99 events; part at event 100"), "{out}");
    assert!(out.contains("differs    build") && out.contains("(another build)"), "{out}");
    assert!(out.contains("  both      98  ") && out.contains("  both      99  "), "two events of context: {out}");
    assert!(out.contains(&format!("after      A {} events from there, B 51", trace.lines().count() - 99)), "{out}");
    let html = std::fs::read_to_string(&page).unwrap();
    for id in ["first-divergence", "chart-a-lag", "chart-b-lag"] {
        assert!(html.contains(&format!("id=\"{id}\"")), "the page has #{id}");
    }

    let (code, out) = qsim_any(&["diff", s(&a), s(&dir.path().join("missing"))]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("missing") && out.contains("not found"), "{out}");
}
