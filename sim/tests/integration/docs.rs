//! The counts the docs type by hand, held to what the tree holds: a scenario added, a planted
//! bug or a checker added, and the README says so or this fails (counts typed by hand drift:
//! two pages once said 53 and 54 scenarios).

use std::path::{Path, PathBuf};

use qs_reports::schema::Checker;
use strum::EnumCount;

/// The repository's root.
fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("sim/ sits in the repository").to_path_buf()
}

/// `scenarios/*.toml` (not the pinned regressions under `scenarios/regression/`), by name.
fn scenarios() -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = std::fs::read_dir(repository().join("scenarios"))
        .expect("scenarios/")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .map(|path| {
            let name = path.file_stem().expect("a file name").to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).expect("a scenario file"))
        })
        .collect();
    found.sort();
    found
}

/// A page with its line breaks as spaces: a count and its noun may sit on two lines.
fn page(path: &str) -> String {
    std::fs::read_to_string(repository().join(path)).expect(path).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `n` in words, as the README writes counts (1 to 99).
fn words(n: usize) -> String {
    const ONES: [&str; 20] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: [&str; 10] = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"];
    assert!(n < 100, "{n}: the README's counts are under a hundred");
    match (n / 10, n % 10) {
        (0 | 1, _) => ONES[n].to_string(),
        (tens, 0) => TENS[tens].to_string(),
        (tens, ones) => format!("{}-{}", TENS[tens], ONES[ones]),
    }
}

#[test]
fn the_readme_counts_the_scenarios_the_planted_bugs_and_the_checkers() {
    let scenarios = scenarios();
    // A planted bug: a `bug-` scenario that turns a `[legacy]` switch on.
    let planted =
        scenarios.iter().filter(|(name, text)| name.starts_with("bug-") && text.contains("\n[legacy]")).count();
    let readme = page("README.md");
    let said = format!("{} scenarios — {} planted bugs", scenarios.len(), words(planted));
    assert!(readme.contains(&said), "README.md should say {said:?}");
    let said = format!("{} checkers", words(Checker::COUNT));
    assert!(readme.contains(&said), "README.md should say {said:?}");
}

/// The `[legacy]` switches a scenario turns on, sorted (none when it has no `[legacy]` table).
fn switches_on(name: &str, text: &str) -> Vec<String> {
    let parsed: toml::Table = text.parse().unwrap_or_else(|e| panic!("scenarios/{name}.toml: {e}"));
    let Some(legacy) = parsed.get("legacy") else { return Vec::new() };
    let legacy = legacy.as_table().unwrap_or_else(|| panic!("scenarios/{name}.toml: [legacy] is not a table"));
    let mut on: Vec<String> =
        legacy.iter().filter(|(_, value)| value.as_bool() == Some(true)).map(|(key, _)| key.clone()).collect();
    on.sort();
    on
}

#[test]
fn the_planted_bug_table_counts_its_scenarios_and_switches_and_names_each() {
    let planted: Vec<(String, Vec<String>)> = scenarios()
        .into_iter()
        .filter(|(name, _)| name.starts_with("bug-"))
        .map(|(name, text)| {
            let on = switches_on(&name, &text);
            (name, on)
        })
        .filter(|(_, on)| !on.is_empty())
        .collect();
    let mut switches: Vec<&String> = planted.iter().flat_map(|(_, on)| on).collect();
    switches.sort();
    switches.dedup();
    let page = page("docs/scenarios.md");
    let said = format!("{} scenarios plant them, through {} switches", words(planted.len()), words(switches.len()));
    assert!(page.contains(&said), "docs/scenarios.md should say {said:?}");
    // Each planting scenario's row in the table (the section from its heading on) names every
    // switch it turns on.
    let table = page.split("### Planted bugs").nth(1).expect("docs/scenarios.md has a \"### Planted bugs\" section");
    for (name, on) in &planted {
        let row_start = format!("| `{name}` | `");
        let row = table
            .split(&row_start)
            .nth(1)
            .and_then(|rest| rest.split(" | ").next())
            .unwrap_or_else(|| panic!("docs/scenarios.md's planted-bug table has no row for {name}"));
        let row = format!("`{row}");
        for switch in on {
            assert!(row.contains(&format!("`{switch}`")), "docs/scenarios.md's row for {name} does not name {switch}");
        }
    }
}

#[test]
fn every_scenario_has_a_row_in_the_scenarios_page() {
    let page = page("docs/scenarios.md");
    let missing: Vec<String> =
        scenarios().into_iter().map(|(name, _)| name).filter(|name| !page.contains(&format!("| `{name}` |"))).collect();
    assert!(missing.is_empty(), "docs/scenarios.md has no row for {missing:?}");
}

#[test]
fn counts_are_written_in_words() {
    assert_eq!(words(7), "seven");
    assert_eq!(words(17), "seventeen");
    assert_eq!(words(20), "twenty");
    assert_eq!(words(25), "twenty-five");
}

#[test]
fn the_swarm_row_counts_the_fault_kinds_swarm_draws_from() {
    let (_, text) = scenarios().into_iter().find(|(name, _)| name == "swarm").expect("scenarios/swarm.toml");
    let parsed: toml::Table = text.parse().expect("scenarios/swarm.toml parses");
    let kinds = parsed
        .get("swarm")
        .and_then(|swarm| swarm.get("kinds"))
        .and_then(toml::Value::as_array)
        .expect("scenarios/swarm.toml has [swarm] kinds")
        .len();
    let page = page("docs/scenarios.md");
    let row = page.split("| `swarm` |").nth(1).expect("docs/scenarios.md has a row for swarm");
    let said = format!("which of the {} fault kinds", words(kinds));
    assert!(row.split(" | ").next().is_some_and(|row| row.contains(&said)), "the swarm row should say {said:?}");
}

#[test]
fn every_knob_has_a_row_in_the_knob_table_naming_its_keys() {
    let page = std::fs::read_to_string(repository().join("docs/scenarios.md")).expect("docs/scenarios.md");
    for knob in <qs_sim::knobs::Knob as strum::IntoEnumIterator>::iter() {
        let row = page
            .lines()
            .find(|line| line.starts_with(&format!("| `{}` |", knob.as_str())))
            .unwrap_or_else(|| panic!("docs/scenarios.md's knob table has no row for {}", knob.as_str()));
        for key in knob.keys() {
            assert!(row.contains(&format!("`{key}`")), "the row for {} does not name its key {key}", knob.as_str());
        }
    }
}
