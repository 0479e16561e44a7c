//! The scenario as a TOML table, and the edits a shrink tries on it: the seed's drawn faults
//! written out as an explicit schedule, then smaller candidates — a shorter run, fewer and
//! shorter faults, fewer nodes and tiers, fewer writes and reads.
//!
//! Guarantees: every edit works on the table alone (no clock, no randomness), candidates come in
//! a fixed order, and each is described in words; whether a candidate is a valid scenario is for
//! the loader to say.

use std::time::Duration;

use toml::{Table, Value};

use crate::scenario::{Fault, Scenario};

/// Shortest fault a shrink leaves: shorter than a heartbeat, a fault stops meaning much.
pub const FAULT_DURATION_MIN: Duration = Duration::from_secs(1);
/// Margin a shrunk run keeps after its last fault ends, for the failure to show.
pub const DURATION_AFTER_FAULTS: Duration = Duration::from_secs(10);

/// What a scenario holds, to say how much a shrink took away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    pub faults: usize,
    pub nodes: usize,
    pub tiers: usize,
    pub simulated_s: u64,
    /// Writes per second over every writer.
    pub writes_per_s: u64,
}

impl Size {
    pub fn of(scenario: &Scenario, faults: usize) -> Size {
        let writes_per_s = scenario
            .workload
            .iter()
            .map(|w| match w {
                crate::scenario::Workload::Writer { rate_per_s, .. } => *rate_per_s as u64,
                _ => 0,
            })
            .sum();
        Size {
            faults,
            nodes: scenario.node_names().len(),
            tiers: scenario.topology.tiers.len(),
            simulated_s: scenario.scenario.duration.as_secs(),
            writes_per_s,
        }
    }
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} faults, {} nodes in {} tiers, {} simulated s, {} writes/s",
            self.faults, self.nodes, self.tiers, self.simulated_s, self.writes_per_s
        )
    }
}

fn millis(d: Duration) -> Value {
    Value::String(format!("{}ms", d.as_millis()))
}

/// One fault as the scenario file writes it. Destructured whole: a field added to `Fault` does
/// not compile here until it is written out too.
fn fault_table(fault: &Fault) -> Table {
    let Fault {
        at,
        kind,
        target,
        duration,
        peer,
        credentials,
        group,
        model,
        latency,
        rate,
        during,
        error,
        ops,
        add,
        remove,
    } = fault;
    let mut t = Table::new();
    t.insert("at".into(), millis(*at));
    t.insert("kind".into(), Value::try_from(kind).expect("fault kinds serialize"));
    t.insert("target".into(), Value::String(target.get_ref().clone()));
    t.insert("duration".into(), millis(*duration));
    if let Some(peer) = peer {
        t.insert("peer".into(), Value::String(peer.get_ref().clone()));
    }
    if let Some(credentials) = credentials {
        t.insert("credentials".into(), Value::try_from(credentials).expect("credentials serialize"));
    }
    if !group.is_empty() {
        t.insert("group".into(), Value::Array(group.iter().cloned().map(Value::String).collect()));
    }
    if let Some(model) = model {
        t.insert("model".into(), Value::try_from(model).expect("disk models serialize"));
    }
    if let Some(latency) = latency {
        t.insert("latency".into(), millis(*latency));
    }
    if let Some(rate) = rate {
        t.insert("rate".into(), Value::Float(*rate));
    }
    if let Some(during) = during {
        t.insert("during".into(), Value::try_from(during).expect("`during` serializes"));
    }
    if let Some(error) = error {
        t.insert("error".into(), Value::try_from(error).expect("disk errors serialize"));
    }
    if !ops.is_empty() {
        let ops = ops.iter().map(|op| Value::try_from(op).expect("I/O operations serialize")).collect();
        t.insert("ops".into(), Value::Array(ops));
    }
    for (name, ids) in [("add", add), ("remove", remove)] {
        if !ids.is_empty() {
            t.insert(name.into(), Value::Array(ids.iter().map(|&id| Value::Integer(id as i64)).collect()));
        }
    }
    t
}

/// The run's scenario with everything the seed draws written out — the faults, whether the
/// fault points are on, each writer's modes, the knobs (pinned in `[node]`, `[knobs] drawn =
/// false`) — `[swarm]` gone, and its engine pinned: a scenario that runs the same run under the
/// same seed without drawing anything.
pub fn explicit(original: &Table, scenario: &Scenario, seed: u64) -> Table {
    let mut table = original.clone();
    let knobs = crate::knobs::draw(scenario, seed);
    let node = table.entry("node").or_insert_with(|| Value::Table(Table::new()));
    if let Some(node) = node.as_table_mut() {
        for drawn in &knobs {
            for (key, value) in drawn.knob.as_toml(drawn.value) {
                match value {
                    Some(value) => node.insert(key.to_string(), value),
                    None => node.remove(key),
                };
            }
        }
    }
    let mut off = Table::new();
    off.insert("drawn".into(), Value::Boolean(false));
    table.insert("knobs".into(), Value::Table(off));
    // The hosts' clocks, drawn or the file's, all written out.
    let clocks = crate::clocks::draw(scenario, seed);
    let mut clocks_table = Table::new();
    clocks_table.insert("drawn".into(), Value::Boolean(false));
    if !clocks.is_empty() {
        let pinned = clocks.iter().map(|c| Value::try_from(c.pinned()).expect("clocks serialize")).collect();
        clocks_table.insert("node".into(), Value::Array(pinned));
    }
    table.insert("clocks".into(), Value::Table(clocks_table));
    let draws = crate::plan::Draws::of(scenario, seed);
    let faults: Vec<Value> = draws.faults.iter().map(|f| Value::Table(fault_table(f))).collect();
    table.remove("swarm");
    if faults.is_empty() {
        table.remove("fault");
    } else {
        table.insert("fault".into(), Value::Array(faults));
    }
    if let Some(Value::Table(head)) = table.get_mut("scenario") {
        head.insert("engine".into(), Value::String(scenario.engine().to_string()));
        if draws.fault_points {
            head.insert("buggify".into(), Value::Boolean(true));
        }
    }
    // In swarm mode each writer's modes are written out, drawn or the file's; the loader kept
    // `[[workload]]`'s order, so the n-th writer there is the n-th table here.
    if scenario.swarm.as_ref().is_some_and(|s| s.writer_modes) {
        let modes = &draws.writer_modes;
        let writer_tables: Vec<&mut Table> = match table.get_mut("workload") {
            Some(Value::Array(items)) => items
                .iter_mut()
                .filter_map(Value::as_table_mut)
                .filter(|w| w.get("kind").and_then(Value::as_str) == Some("writer"))
                .collect(),
            _ => Vec::new(),
        };
        assert_eq!(writer_tables.len(), modes.len(), "a loaded scenario's writers are its table's");
        for (written, modes) in writer_tables.into_iter().zip(modes) {
            written.insert("modes".into(), Value::try_from(modes).expect("writer modes serialize"));
        }
    }
    table
}

fn faults(table: &Table) -> Vec<Table> {
    match table.get("fault") {
        Some(Value::Array(items)) => items.iter().filter_map(|v| v.as_table().cloned()).collect(),
        _ => Vec::new(),
    }
}

fn with_faults(table: &Table, faults: Vec<Table>) -> Table {
    let mut t = table.clone();
    if faults.is_empty() {
        t.remove("fault");
    } else {
        t.insert("fault".into(), Value::Array(faults.into_iter().map(Value::Table).collect()));
    }
    t
}

/// Every smaller scenario worth trying next, most reduction first.
pub fn candidates(table: &Table, scenario: &Scenario) -> Vec<(String, Table)> {
    let mut out = Vec::new();
    shorter_run(table, scenario, &mut out);
    fewer_faults(table, &mut out);
    fewer_clocks(table, &mut out);
    shorter_faults(table, &mut out);
    smaller_topology(table, &mut out);
    lighter_workload(table, &mut out);
    fewer_knobs(table, &mut out);
    out
}

/// Most clocks tried back in step one at a time; a tree with more (the `scale` scenario draws
/// thousands) tries them all back at once only.
const CLOCKS_ONE_AT_A_TIME_MAX: usize = 16;

/// Every host's clock (`[[clocks.node]]`) back in step with the simulated time, then each one
/// at a time (up to [`CLOCKS_ONE_AT_A_TIME_MAX`]).
fn fewer_clocks(table: &Table, out: &mut Vec<(String, Table)>) {
    let Some(Value::Array(clocks)) = table.get("clocks").and_then(|c| c.get("node")) else { return };
    if clocks.len() > 1 {
        let mut t = table.clone();
        if let Some(Value::Table(settings)) = t.get_mut("clocks") {
            settings.remove("node");
        }
        out.push((format!("all {} clocks back in step", clocks.len()), t));
    }
    if clocks.len() > CLOCKS_ONE_AT_A_TIME_MAX {
        return;
    }
    for (i, clock) in clocks.iter().enumerate() {
        let name = clock.get("name").and_then(Value::as_str).unwrap_or("?");
        let mut t = table.clone();
        if let Some(Value::Array(clocks)) = t.get_mut("clocks").and_then(|c| c.get_mut("node")) {
            clocks.remove(i);
        }
        out.push((format!("{name}'s clock back in step"), t));
    }
}

/// Each knob setting in `[node]` back to the node's default, one at a time.
fn fewer_knobs(table: &Table, out: &mut Vec<(String, Table)>) {
    let Some(node) = table.get("node").and_then(Value::as_table) else { return };
    for knob in <crate::knobs::Knob as strum::IntoEnumIterator>::iter() {
        let keys = knob.keys();
        if !keys.iter().any(|key| node.contains_key(*key)) {
            continue;
        }
        let mut t = table.clone();
        if let Some(Value::Table(node)) = t.get_mut("node") {
            for key in keys {
                node.remove(*key);
            }
        }
        out.push((format!("knob {} back to its default", knob.as_str()), t));
    }
}

fn shorter_run(table: &Table, scenario: &Scenario, out: &mut Vec<(String, Table)>) {
    let duration = scenario.scenario.duration;
    let last_end = scenario.fault.iter().map(|f| f.get_ref().at + f.get_ref().duration).max().unwrap_or_default();
    let floor = (last_end + DURATION_AFTER_FAULTS).max(Duration::from_secs(10));
    // Whole seconds, the shortest first; the half-way cut only when it differs.
    let seconds = |d: Duration| Duration::from_secs(d.as_secs_f64().ceil() as u64);
    let mut targets = vec![seconds(floor), seconds((duration / 2).max(floor))];
    targets.dedup();
    for target in targets {
        if target < duration {
            let mut t = table.clone();
            if let Some(Value::Table(head)) = t.get_mut("scenario") {
                head.insert("duration".into(), Value::String(format!("{}s", target.as_secs())));
            }
            out.push((format!("run shortened from {}s to {}s", duration.as_secs(), target.as_secs()), t));
        }
    }
}

fn fewer_faults(table: &Table, out: &mut Vec<(String, Table)>) {
    let all = faults(table);
    let n = all.len();
    if n >= 4 {
        let half = n / 2;
        out.push((format!("faults 1–{half} of {n} removed"), with_faults(table, all[half..].to_vec())));
        out.push((format!("faults {}–{n} of {n} removed", half + 1), with_faults(table, all[..half].to_vec())));
    }
    for i in 0..n {
        let mut rest = all.clone();
        let gone = rest.remove(i);
        let what = format!(
            "fault {} of {n} removed ({} on {})",
            i + 1,
            gone.get("kind").and_then(Value::as_str).unwrap_or("?"),
            gone.get("target").and_then(Value::as_str).unwrap_or("?")
        );
        out.push((what, with_faults(table, rest)));
    }
}

fn shorter_faults(table: &Table, out: &mut Vec<(String, Table)>) {
    let all = faults(table);
    for (i, fault) in all.iter().enumerate() {
        let Some(duration) = fault
            .get("duration")
            .and_then(Value::as_str)
            .and_then(|d| humantime_serde::re::humantime::parse_duration(d).ok())
        else {
            continue;
        };
        let halved =
            Duration::from_millis((duration.as_millis() as u64 / 2).max(FAULT_DURATION_MIN.as_millis() as u64));
        if halved < duration {
            let mut shorter = all.clone();
            shorter[i].insert("duration".into(), millis(halved));
            out.push((
                format!("fault {} shortened from {}ms to {}ms", i + 1, duration.as_millis(), halved.as_millis()),
                with_faults(table, shorter),
            ));
        }
    }
}

fn tiers(table: &Table) -> Vec<Table> {
    table
        .get("topology")
        .and_then(|t| t.get("tiers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_table().cloned()).collect())
        .unwrap_or_default()
}

fn with_tiers(table: &Table, tiers: Vec<Table>) -> Table {
    let mut t = table.clone();
    if let Some(Value::Table(topology)) = t.get_mut("topology") {
        topology.insert("tiers".into(), Value::Array(tiers.into_iter().map(Value::Table).collect()));
    }
    t
}

fn smaller_topology(table: &Table, out: &mut Vec<(String, Table)>) {
    let all = tiers(table);
    if all.len() > 1 {
        let last = all.last().and_then(|t| t.get("name")).and_then(Value::as_str).unwrap_or("?").to_string();
        out.push((format!("tier {last} removed"), with_tiers(table, all[..all.len() - 1].to_vec())));
    }
    for (i, tier) in all.iter().enumerate().rev() {
        let count = tier.get("count").and_then(Value::as_integer).unwrap_or(1);
        if count > 1 {
            let mut fewer = all.clone();
            fewer[i].insert("count".into(), Value::Integer(count - 1));
            let name = tier.get("name").and_then(Value::as_str).unwrap_or("?");
            out.push((format!("tier {name}: {count} → {} nodes", count - 1), with_tiers(table, fewer)));
        }
    }
}

fn lighter_workload(table: &Table, out: &mut Vec<(String, Table)>) {
    let Some(Value::Array(workloads)) = table.get("workload") else { return };
    for (i, w) in workloads.iter().enumerate() {
        let Some(w) = w.as_table() else { continue };
        let kind = w.get("kind").and_then(Value::as_str).unwrap_or("?");
        let mut edit = |field: &str, floor: i64, what: &str| {
            if let Some(v) = w.get(field).and_then(Value::as_integer)
                && v / 2 >= floor
            {
                let mut t = table.clone();
                if let Some(Value::Array(ws)) = t.get_mut("workload")
                    && let Some(Value::Table(target)) = ws.get_mut(i)
                {
                    target.insert(field.into(), Value::Integer(v / 2));
                }
                out.push((format!("{kind} {i}: {what} {v} → {}", v / 2), t));
            }
        };
        edit("rate_per_s", 1, "rate");
        if kind == "writer" {
            edit("keys", 10, "keys");
        }
    }
    if workloads.len() > 1 {
        for (i, w) in workloads.iter().enumerate() {
            if w.get("kind").and_then(Value::as_str) == Some("reader") {
                let mut t = table.clone();
                if let Some(Value::Array(ws)) = t.get_mut("workload") {
                    ws.remove(i);
                }
                out.push((format!("reader {i} removed"), t));
            }
        }
    }
}

/// The table as a scenario file: sections in the order people write them, the header comment
/// first.
pub fn render(table: &Table, header: &str) -> String {
    const ORDER: [&str; 9] =
        ["scenario", "topology", "node", "legacy", "workload", "fault", "swarm", "resources", "checks"];
    let mut text = String::new();
    for line in header.lines() {
        text.push_str(if line.is_empty() { "#" } else { "# " });
        text.push_str(line);
        text.push('\n');
    }
    let keys =
        ORDER.iter().map(|k| k.to_string()).chain(table.keys().filter(|k| !ORDER.contains(&k.as_str())).cloned());
    for key in keys {
        if let Some(value) = table.get(&key) {
            let mut one = Table::new();
            one.insert(key.clone(), value.clone());
            text.push('\n');
            text.push_str(&toml::to_string(&one).expect("a table serializes"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::plan::Draws;

    /// The explicit schedule is the same run: every scenario file, across seeds, draws nothing
    /// once written out, and its faults, fault points and writer modes are the drawn ones.
    #[test]
    fn the_explicit_schedule_is_the_run_the_seed_drew() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let mut files: Vec<_> =
            std::fs::read_dir(&dir).expect("the scenarios folder").flatten().map(|e| e.path()).collect();
        files.sort();
        let mut drew = [false; 3];
        for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "toml")) {
            let text = std::fs::read_to_string(path).expect("a scenario file");
            // A planted bug's scenario is refused outside the harness builds (its nodes would
            // refuse it): the simulator's build runs this test on every file.
            if !cfg!(any(madsim, qsim_harness)) && text.contains("\n[legacy]") {
                continue;
            }
            let scenario = Scenario::parse(&text, path).expect("a valid scenario");
            let original: Table = toml::from_str(&text).expect("TOML");
            for seed in 1..=40 {
                let table = explicit(&original, &scenario, seed);
                let written = toml::to_string(&table).expect("a table serializes");
                let reloaded = Scenario::parse(&written, path).unwrap_or_else(|e| panic!("{e}\n{written}"));
                let shown = format!("{} seed {seed}", path.display());
                assert!(reloaded.swarm.is_none(), "{shown}: nothing is drawn any more");
                let (drawn, again) = (Draws::of(&scenario, seed), Draws::of(&reloaded, seed));
                assert_eq!(again.faults, drawn.faults, "{shown}: faults");
                assert_eq!(again.fault_points, drawn.fault_points, "{shown}: fault points");
                assert_eq!(again.writer_modes, drawn.writer_modes, "{shown}: writer modes");
                let clocks = crate::clocks::draw(&scenario, seed);
                let written_clocks = crate::clocks::draw(&reloaded, seed);
                let without_origin = |v: Vec<crate::clocks::NodeClock>| {
                    v.into_iter().map(|c| (c.node, c.offset_ms, c.drift_ppm, c.steps)).collect::<Vec<_>>()
                };
                assert_eq!(without_origin(written_clocks), without_origin(clocks), "{shown}: clocks");
                // And each clock can be put back in step.
                let written: Table = toml::from_str(&written).expect("TOML");
                let mut back = Vec::new();
                fewer_clocks(&written, &mut back);
                let pinned = reloaded.clocks.node.len();
                let one_at_a_time = if pinned <= CLOCKS_ONE_AT_A_TIME_MAX { pinned } else { 0 };
                assert_eq!(back.len(), usize::from(pinned > 1) + one_at_a_time, "{shown}: candidates");
                if let Some((label, fewer)) = back.last() {
                    let fewer = Scenario::parse(&toml::to_string(fewer).expect("TOML"), path).expect("valid");
                    let left = if one_at_a_time > 0 { pinned - 1 } else { 0 };
                    assert_eq!(fewer.clocks.node.len(), left, "{shown}: {label}");
                }
                drew[0] |= scenario.swarm.is_some() && !drawn.faults.is_empty();
                drew[1] |= !scenario.scenario.buggify && drawn.fault_points;
                drew[2] |= drawn.faults.iter().any(|f| f.during.is_some());
            }
        }
        assert_eq!(drew, [true; 3], "drawn faults, drawn fault points and `during` faults were all covered");
    }
}
