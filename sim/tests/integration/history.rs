//! `qsim history` over nights made by the real binary: each night a real sweep, merged and
//! stamped by `qsim merge --date`. A wrapper kills chosen seeds, so a failure group appears on
//! the first night, is gone on the second, returns on the third (beside a group new that night),
//! and the history must say so; unreadable and unstamped nights are refused, naming the file.
#![cfg(madsim)]

use std::path::Path;

use crate::common::qsim_any as qsim;

/// A wrapper that kills the run of each seed in `kills` (seed, signal) before it starts.
fn killer(dir: &Path, name: &str, kills: &[(u64, &str)]) -> String {
    let cases: String = kills.iter().map(|(seed, signal)| format!("  {seed}) kill -{signal} $$ ;;\n")).collect();
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "#!/usr/bin/env bash\nseed=\"\"; prev=\"\"\nfor a in \"$@\"; do\n  [ \"$prev\" = \"--seed\" ] && seed=$a\n  prev=$a\ndone\n\
             case \"$seed\" in\n{cases}esac\nexec \"$@\"\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// One night: a sweep of quickstart over seeds 1..=3 (through `wrapper`, if any), merged into
/// `nights/<folder>` as the night of `date`.
fn night(dir: &Path, folder: &str, date: &str, wrapper: Option<&str>) {
    let shard = dir.join("shards").join(folder);
    let (shard_s, out) = (shard.display().to_string(), dir.join("nights").join(folder).display().to_string());
    let mut args = vec!["sweep", "scenarios/quickstart.toml", "--seeds", "1..=3", "--jobs", "2", "--out", &shard_s];
    if let Some(wrapper) = wrapper {
        args.extend(["--run-wrapper", wrapper]);
    }
    let (code, output) = qsim(&args);
    assert!(code <= 1, "the sweep ran: {output}");
    let (code, output) = qsim(&["merge", &shard_s, "--out", &out, "--date", date]);
    assert!(code <= 1, "the merge ran: {output}");
    assert!(output.contains(&format!("the night of {date} at ")), "{output}");
}

#[test]
fn a_group_that_appears_disappears_and_returns_is_told_apart_from_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let killed = killer(dir.path(), "kill-2.sh", &[(2, "KILL")]);
    let both = killer(dir.path(), "kill-2-and-3.sh", &[(2, "KILL"), (3, "SEGV")]);
    night(dir.path(), "a", "2026-11-01", Some(&killed));
    night(dir.path(), "b", "2026-11-02", None);
    night(dir.path(), "c", "2026-11-03", Some(&both));

    let (nights, page) = (dir.path().join("nights"), dir.path().join("page"));
    let (code, output) = qsim(&["history", &nights.display().to_string(), "--out", &page.display().to_string()]);
    assert_eq!(code, 0, "{output}");
    assert!(output.starts_with("3 nights, 2026-11-01 to 2026-11-03; the latest (c at "), "{output}");
    let line = |prefix: &str, words: &[&str]| {
        output.lines().any(|l| l.starts_with(prefix) && words.iter().all(|w| l.contains(w)))
    };
    assert!(line("returned   crash (1 runs; first seen 2026-11-01", &["SIGKILL"]), "{output}");
    assert!(line("new        crash (1 runs)", &["SIGSEGV"]), "{output}");
    assert!(line("passes less quickstart on memory: 1/3", &["3/3 the night before"]), "{output}");

    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(page.join("history.json")).unwrap()).unwrap();
    let groups = json["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{groups:#?}");
    let kill = groups.iter().find(|g| g["signature"].as_str().unwrap().contains("SIGKILL")).unwrap();
    assert_eq!((kill["status"].as_str(), kill["runs"].clone()), (Some("returned"), serde_json::json!([1, 0, 1])));
    assert_eq!(json["nights"][1]["failed"], 0);
    assert_eq!(json["pairs"][0]["engine"], "memory", "each run's engine, from its summary");
    let html = std::fs::read_to_string(page.join("index.html")).unwrap();
    assert!(html.contains("data-status=\"returned\"") && html.contains("data-status=\"new\""));

    // A night that is not one: a shard's summary (no stamp) is refused, naming the file.
    let shard = dir.path().join("shards").join("a");
    std::fs::create_dir_all(nights.join("z")).unwrap();
    std::fs::copy(shard.join("summary.json"), nights.join("z").join("summary.json")).unwrap();
    let (code, output) = qsim(&["history", &nights.display().to_string(), "--out", &page.display().to_string()]);
    assert_eq!(code, 2, "{output}");
    assert!(output.contains("z/summary.json") && output.contains("qsim merge --date"), "{output}");
    // A date that is no day is refused by the merge before it writes anything.
    let refused = dir.path().join("refused");
    let (code, output) =
        qsim(&["merge", &shard.display().to_string(), "--out", &refused.display().to_string(), "--date", "2026-02-30"]);
    assert_eq!(code, 2, "{output}");
    assert!(output.contains("2026-02-30") && !refused.exists(), "{output}");
}
