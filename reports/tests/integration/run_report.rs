//! Run reports of real runs (a pass, a planted-bug failure) and of synthetic ones (a slow-SSD
//! failover with every event kind, a 40-node reference world, hostile names, empty traces),
//! parsed back as HTML to find every element the page promises.

use crate::common::*;
use qs_reports::schema::{Event, RunSummary};
use qs_reports::testkit::{Options, generate};
use scraper::Html;

const TIME_CHARTS: [&str; 4] = ["applied", "lag", "write_rate", "faults"];

fn render_fixture(name: &str) -> (RunSummary, Html) {
    let (_tmp, dir) = copy_fixture(name);
    let path = qs_reports::write_run_report(&dir).unwrap();
    assert_eq!(path, dir.join("report.html"));
    let html = std::fs::read_to_string(&path).unwrap();
    (qs_reports::load::run_summary(&dir).unwrap(), Html::parse_document(&html))
}

fn header_checks(doc: &Html, s: &RunSummary) {
    assert_eq!(text(one(doc, "#scenario")), s.scenario);
    assert_eq!(text(one(doc, "#seed")), s.seed.to_string());
    assert_eq!(text(one(doc, "#description")), s.description);
    assert_eq!(text(one(doc, "#engine")), s.engine);
    assert_eq!(text(one(doc, "#build")), s.build);
    assert_eq!(text(one(doc, "#reproduce code")), s.reproduce, "the reproduce command, verbatim");
    let verdicts = all(doc, "#verdicts tbody tr");
    assert_eq!(verdicts.len(), s.verdicts.len());
    for v in &s.verdicts {
        let row = one(doc, &format!("#verdicts tr[data-checker=\"{}\"]", v.checker));
        let class = v.status.as_str();
        assert!(row.value().classes().any(|c| c == class), "{} is {class}", v.checker);
        assert!(text(row).contains(v.status.as_str()), "{}", text(row));
    }
}

#[test]
fn quickstart_pass_shows_header_verdicts_aligned_charts_and_tables() {
    let (s, doc) = render_fixture("quickstart-seed-1");
    header_checks(&doc, &s);
    assert_eq!(s.verdicts.len(), 4);
    assert_eq!(text(one(&doc, "#outcome")), "PASS");
    assert!(all(&doc, "#first-violation").is_empty(), "no failure, no first violation");

    for id in TIME_CHARTS {
        chart(&doc, id);
    }
    // One x axis for all: every time chart is the same width.
    let widths: Vec<&str> =
        TIME_CHARTS.iter().map(|id| one(&doc, &format!("#chart-{id} svg")).value().attr("width").unwrap()).collect();
    assert!(widths.iter().all(|w| *w == widths[0]), "{widths:?}");
    // The lag chart draws the scenario's bound (35 s) and one line per node.
    let lag = chart(&doc, "lag");
    assert!(text(lag).contains("bound 35"), "{}", text(lag));
    assert_eq!(within(lag, "ul.legend li").len(), 8, "7 nodes and the bound");
    let faults = chart(&doc, "faults");
    assert!(text(faults).contains("mid-1") && text(faults).contains("kill"), "{}", text(faults));

    // Not in this trace: no chart, one line saying so.
    for id in ["read_p99", "read_p50", "disk_p99", "cursor", "sources"] {
        assert!(all(&doc, &format!("figure[data-chart=\"{id}\"]")).is_empty(), "{id} has no data");
    }
    let no_data = text(one(&doc, "p.no-data"));
    assert!(no_data.contains("disk latency") && no_data.contains("source changes"), "{no_data}");

    let nodes = rows(&doc, "table.nodes");
    assert_eq!(nodes.len(), 7);
    assert_eq!(nodes[1][0], "mid-1");
    assert_eq!(nodes[1][1], "mid");
    assert_eq!(rows(&doc, "table.faults"), vec![vec!["mid-1", "kill", "", "30.000 s", "50.000 s", "20.0 s"]]);
    assert!(all(&doc, "table.violations").is_empty());
}

#[test]
fn planted_bug_failure_names_the_first_violation_and_shades_liveness() {
    let (s, doc) = render_fixture("bug-gc-skip-seed-1");
    header_checks(&doc, &s);
    assert_eq!(text(one(&doc, "#outcome")), "VIOLATION");
    let first = text(one(&doc, "#first-violation"));
    for part in
        ["sequence", "edge-1", "60.019 s", "index 168", "applied 168..=188, expected the next batch to start at 60"]
    {
        assert!(first.contains(part), "{part:?} in {first}");
    }
    assert!(first.contains("holds a different state"), "pending convergence listed: {first}");
    assert!(text(one(&doc, "#verdicts tr[data-checker=\"sequence\"]")).contains("index 168"));

    // Liveness began at 90 s of 150 s: shaded on every time chart; the first violation is a
    // vertical line on each.
    let violation = qs_reports::chart::hex(qs_reports::chart::VIOLATION_COLOR);
    for id in TIME_CHARTS {
        let fig = chart(&doc, id);
        assert!(has_liveness_shading(fig), "{id} shades the liveness phase");
        let marked = within(fig, "polyline").iter().any(|p| p.value().attr("stroke") == Some(violation.as_str()));
        assert!(marked, "{id} marks the first violation");
    }
    assert!(text(one(&doc, "#violation-marker")).contains("60.019 s"));
    assert_eq!(text(one(&doc, "#violation-total")), "1 violations in total.");
    let v = rows(&doc, "table.violations");
    assert_eq!(v.len(), 1);
    assert_eq!(v[0][..4], ["60.019 s", "sequence", "edge-1", "168"]);
}

#[test]
fn slow_disk_failover_draws_every_chart_and_table() {
    let (s, events) = generate(&Options::slow_disk_failover());
    let doc = Html::parse_document(&qs_reports::render_run(&s, &events));
    header_checks(&doc, &s);
    let expected = ["faults", "applied", "lag", "sources", "write_rate", "read_p99", "read_p50", "disk_p99", "cursor"];
    assert_eq!(charts(&doc), expected);
    for id in expected {
        assert!(has_liveness_shading(chart(&doc, id)), "{id}");
    }
    assert!(all(&doc, "p.no-data").is_empty(), "every chart has data");
    let disk = text(chart(&doc, "disk_p99"));
    assert!(disk.contains("mid-2"), "only the slow node: {disk}");
    let sources = text(chart(&doc, "sources"));
    assert!(sources.contains("stale") && sources.contains("disconnected"), "{sources}");

    let nodes = rows(&doc, "table.nodes");
    let edge3 = nodes.iter().find(|r| r[0] == "edge-3").unwrap();
    assert!(edge3[2].contains("stale → 10.0.1.1"), "source history: {edge3:?}");
    assert_eq!(edge3[4], "2", "failovers from the node summary");
    let root = nodes.iter().find(|r| r[0] == "root").unwrap();
    assert_eq!(root[6], "3", "bogus requests");

    let faults = rows(&doc, "table.faults");
    assert!(faults.iter().any(|r| r[1] == "slow_disk" && r[2] == "p50 8 ms, p99 40 ms"), "{faults:?}");
    assert!(faults.iter().any(|r| r[1] == "sigbus" && r[4].contains("no end event")), "{faults:?}");

    let amp = rows(&doc, "table.write-amp");
    assert_eq!(amp.len(), 4, "root, mid, edge, all: {amp:?}");
    assert_eq!(amp[0][..3], ["memory", "root", "1"]);
    assert_eq!(amp[0][5], "3.00×");
    let keys = rows(&doc, "table.key-usage");
    assert_eq!(keys.len(), 4);
    assert_eq!(keys[3], ["waf", "350", "102.5 KiB", "0", "350 (100 %)"]);

    let first = text(one(&doc, "#first-violation"));
    assert!(first.contains("edge-3") && first.contains("36.000 s") && first.contains("index 512"), "{first}");
}

#[test]
fn forty_nodes_group_by_tier_and_stay_small() {
    let (s, events) = generate(&Options::reference());
    assert_eq!(s.nodes.len(), 40);
    let html = qs_reports::render_run(&s, &events);
    assert!(html.len() < 2_000_000, "{} bytes", html.len());
    let doc = Html::parse_document(&html);
    let lag = chart(&doc, "lag");
    let legend = text(lag);
    assert!(legend.contains("edge (27 nodes)") && legend.contains("region (8 nodes)"), "{legend}");
    assert!(!within(lag, "polygon").is_empty(), "tier bands");
    for line in all(&doc, "polyline") {
        assert!(point_count(line) <= 2 * qs_reports::series::MAX_BUCKETS as usize + 2, "{}", point_count(line));
    }
    assert_eq!(rows(&doc, "table.nodes").len(), 40, "the table keeps every node");
}

fn rename(events: &mut [Event], summary: &mut RunSummary, from: &str, to: &str) {
    for e in events.iter_mut() {
        let mut v = serde_json::to_value(&*e).unwrap();
        if v["node"] == from {
            v["node"] = to.into();
        }
        *e = serde_json::from_value(v).unwrap();
    }
    for n in &mut summary.nodes {
        if n.name == from {
            n.name = to.into();
        }
    }
}

#[test]
fn hostile_names_are_escaped_in_html_and_svg() {
    let hostile = "<script>alert('x')</script>\"&<b>";
    let (mut s, mut events) = generate(&Options::slow_disk_failover());
    rename(&mut events, &mut s, "mid-1", hostile);
    s.description = format!("desc {hostile}");
    s.reproduce = format!("./qsim run '{hostile}'");
    let html = qs_reports::render_run(&s, &events);
    assert!(!html.contains("<script>"), "no raw script tag");
    assert!(!html.contains("<b>\""), "no raw markup from input");
    let doc = Html::parse_document(&html);
    assert!(all(&doc, "script").is_empty());
    assert!(all(&doc, "b").iter().all(|b| !text(*b).is_empty()), "no injected empty <b>");
    assert_eq!(text(one(&doc, "#reproduce code")), s.reproduce);
    let nodes = rows(&doc, "table.nodes");
    assert!(nodes.iter().any(|r| r[0] == hostile), "the name shows as text");
    // The lane label is shortened to 12 characters; plotters escaped it inside the SVG.
    let faults = text(chart(&doc, "faults"));
    assert!(faults.contains("<script>ale…"), "{faults}");
    assert!(text(chart(&doc, "applied")).contains(hostile), "the legend shows the full name");
}

#[test]
fn no_chart_without_data() {
    let (s, _) = generate(&Options::slow_disk_failover());
    let doc = Html::parse_document(&qs_reports::render_run(&s, &[]));
    assert!(charts(&doc).is_empty(), "{:?}", charts(&doc));
    assert!(all(&doc, "svg").is_empty());
    let note = text(one(&doc, "p.no-data"));
    for chart in ["fault timeline", "replication lag", "write rate", "disk latency"] {
        assert!(note.contains(chart), "{chart} in {note}");
    }
    // Writes only: the write-rate chart and nothing else.
    let writes: Vec<Event> = (0..100)
        .map(|i| Event::WriteAcked { at_ms: i * 500, key: format!("k{i}"), index: i + 1, version: 1, deleted: false })
        .collect();
    let doc = Html::parse_document(&qs_reports::render_run(&s, &writes));
    assert_eq!(charts(&doc), ["write_rate"]);
    chart(&doc, "write_rate");
}

#[test]
fn outlying_lag_is_clipped_and_said() {
    let (s, mut events) = generate(&Options::slow_disk_failover());
    events.push(Event::LagSample { at_ms: 59_000, node: "edge-1".into(), lag_ms: 1_665_467_002_000, applied: 0 });
    let doc = Html::parse_document(&qs_reports::render_run(&s, &events));
    let lag = text(chart(&doc, "lag"));
    assert!(lag.contains("clipped at the top edge"), "{lag}");
}

/// A node summary without `engine_bytes_written` (a node whose store could not be read at the
/// end, or a trace from before LMDB counted its writes through its map): its tier's row and the
/// run's total say so, and never add the unknown bytes up as nothing; the other tiers keep their
/// figures.
#[test]
fn unmeasured_bytes_written_are_shown_as_such_not_as_zero() {
    let (s, mut events) = generate(&Options { end_of_run: true, ..Options::reference() });
    for event in &mut events {
        if let Event::NodeSummary { node, engine_bytes_written, .. } = event
            && node == "edge-7"
        {
            *engine_bytes_written = None;
        }
    }
    let line = serde_json::to_string(events.iter().find(|e| matches!(e, Event::NodeSummary { .. })).unwrap()).unwrap();
    assert!(line.contains(r#""engine_bytes_written":"#), "a measured figure is written as before: {line}");
    let unmeasured = line.replace(r#","engine_bytes_written":"#, r#","was":"#);
    let unmeasured: serde_json::Value = serde_json::from_str(&unmeasured).unwrap();
    let mut unmeasured = unmeasured.as_object().unwrap().clone();
    unmeasured.remove("was");
    let parsed: Event = serde_json::from_value(serde_json::Value::Object(unmeasured)).unwrap();
    assert!(matches!(parsed, Event::NodeSummary { engine_bytes_written: None, .. }), "{parsed:?}");

    let doc = Html::parse_document(&qs_reports::render_run(&s, &events));
    let amp = rows(&doc, "table.write-amp");
    let tier = |name: &str| amp.iter().find(|r| r[1] == name).unwrap_or_else(|| panic!("no {name} row: {amp:?}"));
    for unknown in ["edge", "all"] {
        assert_eq!(tier(unknown)[4..], ["not measured", "—"], "{amp:?}");
    }
    assert!(tier("region")[5].ends_with('×'), "{amp:?}");
    assert!(text(one(&doc, "#write-amp-section")).contains("Not measured: a node's end-of-run summary lacks"));
}
